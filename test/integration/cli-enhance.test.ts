// Prompt enhancement through the gateway's chat completions, as a user runs it: the real `vidbatch` (spawned)
// against this test's Temporal server, worker and simulator. The simulator's counters are the bill: chat calls
// (by model) beside video jobs, and the prompt each job was asked with.
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { stringify } from 'csv-stringify/sync';
import { afterEach, describe, expect, it } from 'vitest';
import type { PromptResult } from '../../src/contract/prompt';
import { readManifest } from '../../src/results/manifest';
import { simulatedRewrite } from '../../src/simulator/chat-route';
import { manifestPathOf, exitAndOutput, runIn, vidbatchIn, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function writeCsv(e: TestEnv, name: string, rows: string[][]): Promise<string> {
  await writeFile(join(e.dir, name), stringify([['id', 'prompt'], ...rows]));
  return name;
}

const chatCalls = (e: TestEnv) => e.sim.stats().chatCallsTotal;
const jobs = (e: TestEnv) => e.sim.stats().jobsCreated;
/** The prompts the simulator's video jobs were asked with, sorted. */
const jobPrompts = (e: TestEnv) => [...e.sim.state.jobs.values()].map((j) => j.prompt).sort();
const byRow = async (r: CliRun) =>
  Object.fromEntries((await readManifest(manifestPathOf(r))).map((l) => [l.rowId, l])) as Record<
    string,
    PromptResult
  >;
const figures = (what: string, e: TestEnv) =>
  console.log(`${what}: ${chatCalls(e)} chat calls, ${jobs(e)} jobs (simulator's counts)`);

describe('--enhance: prompts rewritten through the chat completions, visible, paid once', () => {
  it('run --enhance of N rows makes N chat calls and N jobs asked with the rewrites; a re-run and another file with the same prompts make none', async () => {
    env = await testEnv({ idempotency: false });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const prompts = [
      `a fox in the snow ${tag}`,
      `a lighthouse at night ${tag}`,
      `two kites over a beach ${tag}`,
    ];
    await writeCsv(
      env,
      'a.csv',
      prompts.map((p, i) => [`r${i + 1}`, p]),
    );
    const first = await runIn(env, 'a.csv', '--enhance');
    figures('run --enhance of 3 rows', env);
    expect(first.code, exitAndOutput(first)).toBe(0);
    expect(chatCalls(env)).toBe(3);
    expect(env.sim.stats().chatCalls).toEqual({ 'modelfamily-chat-1.0': 3 });
    expect(jobs(env)).toBe(3);
    expect(jobPrompts(env)).toEqual(prompts.map(simulatedRewrite).sort());
    const rows = await byRow(first);
    expect(rows.r1).toMatchObject({
      status: 'succeeded',
      originalPrompt: prompts[0],
      prompt: simulatedRewrite(prompts[0]!),
      chatCalls: 1,
    });
    expect(rows.r1!.input.prompt).toBe(simulatedRewrite(prompts[0]!));
    expect(first.stdout).toMatch(
      /jobs made: 3 for 3 rows \(3 kept\); prompt rewrites: 3 chat calls \(\d+ tokens\)/,
    );
    const results = await vidbatchIn(env, ['results', 'a.csv']);
    expect(results.code, exitAndOutput(results)).toBe(0);
    const table = parse(await readFile(join(manifestPathOf(first), '..', 'succeeded.csv'), 'utf8'), {
      columns: true,
    }) as unknown as Record<string, string>[];
    expect(table.find((t) => t.rowId === 'r1')).toMatchObject({
      prompt: simulatedRewrite(prompts[0]!),
      originalPrompt: prompts[0],
    });

    // The same file again: the batch is done, nothing is asked again.
    const again = await runIn(env, 'a.csv', '--enhance');
    expect(again.code, exitAndOutput(again)).toBe(0);
    // Another file with the same prompts (other ids, other order): the kept rewrites and videos are reused.
    await writeCsv(
      env,
      'b.csv',
      [...prompts].reverse().map((p, i) => [`b${i + 1}`, p]),
    );
    const other = await runIn(env, 'b.csv', '--enhance');
    figures('re-run and another file with the same prompts', env);
    expect(other.code, exitAndOutput(other)).toBe(0);
    expect(other.stdout).toContain('3 succeeded, 0 failed of 3');
    expect(chatCalls(env)).toBe(3);
    expect(jobs(env)).toBe(3);
  });

  it('plan --enhance writes a CSV with both prompts; running it (edited) sends exactly what it says, with no chat call', async () => {
    env = await testEnv({ idempotency: false });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const prompts = [`a red bicycle ${tag}`, `rain on a window ${tag}`];
    await writeCsv(
      env,
      'p.csv',
      prompts.map((p, i) => [`p${i + 1}`, p]),
    );
    const planned = await vidbatchIn(env, ['plan', 'p.csv', '--enhance', '--out-root', 'out']);
    figures('plan --enhance of 2 rows', env);
    expect(planned.code, exitAndOutput(planned)).toBe(0);
    expect(chatCalls(env)).toBe(2);
    expect(jobs(env)).toBe(0);
    const reviewPath = join(env.dir, 'p.enhanced.csv');
    expect(planned.stderr).toContain('review (and edit) p.enhanced.csv, then `vidbatch run p.enhanced.csv`');
    const review = parse(await readFile(reviewPath, 'utf8'), { columns: true }) as unknown as Record<
      string,
      string
    >[];
    expect(review.map((r) => [r.id, r.prompt, r.original_prompt])).toEqual([
      ['p1', simulatedRewrite(prompts[0]!), prompts[0]],
      ['p2', simulatedRewrite(prompts[1]!), prompts[1]],
    ]);
    // The user edits one rewrite before paying.
    const edited = `${simulatedRewrite(prompts[1]!)}, in black and white`;
    review[1]!.prompt = edited;
    await writeFile(reviewPath, stringify(review, { header: true }));
    const ran = await runIn(env, 'p.enhanced.csv', '--enhance');
    figures('run of the reviewed CSV', env);
    expect(ran.code, exitAndOutput(ran)).toBe(0);
    expect(ran.stderr).toContain('2 of 2 rows have an original_prompt');
    expect(chatCalls(env)).toBe(2);
    expect(jobs(env)).toBe(2);
    expect(jobPrompts(env)).toEqual([simulatedRewrite(prompts[0]!), edited].sort());
    const rows = await byRow(ran);
    expect(rows.p2).toMatchObject({ prompt: edited, originalPrompt: prompts[1] });
    expect(rows.p2!.chatCalls).toBeUndefined();

    // run --enhance of the original file finds the rewrites plan kept: no chat call.
    const original = await runIn(env, 'p.csv', '--enhance');
    figures('run --enhance of the planned file', env);
    expect(original.code, exitAndOutput(original)).toBe(0);
    expect(chatCalls(env)).toBe(2);
  });

  it('a chat 429 with Retry-After slows the batch and fails nothing', async () => {
    env = await testEnv({ idempotency: false, faults: { chat429Words: ['gusty'] }, recordRequests: true });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const prompts = [`a gusty hillside ${tag}`, `gusty waves ${tag}`, `a quiet library ${tag}`];
    await writeCsv(
      env,
      'r.csv',
      prompts.map((p, i) => [`g${i + 1}`, p]),
    );
    const r = await runIn(env, 'r.csv', '--enhance');
    figures('chat 429 on 2 of 3 rows', env);
    expect(r.code, exitAndOutput(r)).toBe(0);
    expect(r.stdout).toContain('3 succeeded, 0 failed of 3');
    const stats = env.sim.stats();
    expect(stats.requests['POST /v1/chat/completions']).toEqual({ 200: 3, 429: 2 });
    expect(stats.rateLimitedByReason.chat).toBe(2);
    expect(jobs(env)).toBe(3);
    expect(jobPrompts(env)).toEqual(prompts.map(simulatedRewrite).sort());
    // Each refused rewrite went again only after its Retry-After (1 s).
    const chat = env.sim.state.requestLog.filter((l) => l.route === 'POST /v1/chat/completions');
    const refusedAt = chat.filter((l) => l.status === 429).map((l) => l.at);
    const lastOk = Math.max(...chat.filter((l) => l.status === 200).map((l) => l.at));
    expect(lastOk - Math.min(...refusedAt)).toBeGreaterThanOrEqual(950);
  });

  it('a broken chat answer ends that row enhance_failed and no video job is made for it', async () => {
    env = await testEnv({
      idempotency: false,
      faults: { chatEmptyWords: ['blankword'], chatMissingWords: ['hollowword'] },
    });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const prompts = [`a blankword sky ${tag}`, `a hollowword tree ${tag}`, `a sailing boat ${tag}`];
    await writeCsv(
      env,
      'x.csv',
      prompts.map((p, i) => [`x${i + 1}`, p]),
    );
    const r = await runIn(env, 'x.csv', '--enhance');
    figures('broken answers on 2 of 3 rows', env);
    expect(r.code, exitAndOutput(r)).toBe(3);
    expect(chatCalls(env)).toBe(3);
    expect(jobs(env)).toBe(1);
    expect(jobPrompts(env)).toEqual([simulatedRewrite(prompts[2]!)]);
    const rows = await byRow(r);
    expect(rows.x1).toMatchObject({ status: 'failed', errorCode: 'enhance_failed', prompt: prompts[0] });
    expect(rows.x1!.errorMessage).toContain('choices[0].message.content is empty');
    expect(rows.x1!.requestId).toMatch(/\S/);
    expect(rows.x1!.jobId).toBeUndefined();
    expect(rows.x2).toMatchObject({ status: 'failed', errorCode: 'enhance_failed' });
    expect(rows.x2!.errorMessage).toContain('no choices[0].message.content');
    expect(rows.x3).toMatchObject({ status: 'succeeded', prompt: simulatedRewrite(prompts[2]!) });
  });

  it('a bad --enhance-instructions file is refused with exit 2 naming the flag, before anything starts', async () => {
    env = await testEnv();
    await writeCsv(env, 'i.csv', [['i1', 'a cat']]);
    await writeFile(join(env.dir, 'empty.txt'), '  \n');
    const missing = await runIn(env, 'i.csv', '--enhance', '--enhance-instructions', 'nope.txt');
    expect(missing.code, exitAndOutput(missing)).toBe(2);
    expect(missing.stderr).toContain('--enhance-instructions');
    expect(missing.stderr).toContain('nope.txt');
    const empty = await runIn(env, 'i.csv', '--enhance', '--enhance-instructions', 'empty.txt');
    expect(empty.code, exitAndOutput(empty)).toBe(2);
    expect(empty.stderr).toMatch(/--enhance-instructions.*empty\.txt is empty/);
    const planned = await vidbatchIn(env, [
      'plan',
      'i.csv',
      '--enhance',
      '--enhance-instructions',
      'empty.txt',
    ]);
    expect(planned.code, exitAndOutput(planned)).toBe(2);
    expect(chatCalls(env)).toBe(0);
    expect(jobs(env)).toBe(0);
  });
});
