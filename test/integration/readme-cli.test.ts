// The README and the CLI in step: every command of the README's table exists and every command of
// `vidbatch --help` is in that table; every `--flag` the README names for a command is in that command's
// `--help` (all spawned, as a user would see them), or is one of its hidden options (tuning knobs and old
// names, listed in docs/cli.md).
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program';
import { vidbatch } from './cli-helpers';

const README = fileURLToPath(new URL('../../README.md', import.meta.url));

/** Commands of the README's command table, each with the flags its row names. */
export function commandTable(readme: string): Map<string, Set<string>> {
  const section = readme.slice(
    readme.indexOf('\n## Commands'),
    readme.indexOf('\n## ', readme.indexOf('\n## Commands') + 1),
  );
  const table = new Map<string, Set<string>>();
  for (const line of section.split('\n')) {
    const cells = /^\|\s*(`[^|]+`(?:\s*\/\s*`[^|]+`)*)\s*\|(.*)\|\s*$/.exec(line);
    if (!cells) continue;
    const flags = new Set(cells[2]!.match(/--[a-z][a-z0-9-]*/g) ?? []);
    for (const span of cells[1]!.matchAll(/`([a-z][a-z-]*)[^`]*`/g)) table.set(span[1]!, flags);
  }
  return table;
}

/**
 * Flags the README names for a command anywhere else: in code spans and code-block lines that start with
 * `[npx ]vidbatch <command>` or `<command> --` (e.g. `run --download <dir>`).
 */
export function flagsInProse(readme: string, commands: Set<string>): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  const snippets = [
    ...[...readme.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!),
    ...[...readme.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n')),
  ];
  for (const snippet of snippets) {
    const text = snippet.replace(/\s+#.*$/, '').trim();
    const m = /^(?:npx\s+)?(?:vidbatch\s+)?([a-z][a-z-]*)\b(.*)$/.exec(text);
    if (!m || !commands.has(m[1]!)) continue;
    const explicit = /^(?:npx\s+)?vidbatch\s/.test(text);
    if (!explicit && !/^\s+--/.test(m[2]!)) continue; // `run <csv>` alone names no flag; `download <batch>` may be prose
    for (const flag of m[2]!.match(/(?<=\s)--[a-z][a-z0-9-]*/g) ?? []) {
      if (!found.has(m[1]!)) found.set(m[1]!, new Set());
      found.get(m[1]!)!.add(flag);
    }
  }
  return found;
}

/** Command names of `vidbatch --help`, in whichever group (Batches:, Operating:, ...) it lists them. */
function commandsOfHelp(help: string): string[] {
  return [...help.matchAll(/^ {2}([a-z][a-z-]*)\b/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

/** The hidden options of each command (not in its `--help`, still accepted). */
function hiddenFlags(): Map<string, Set<string>> {
  return new Map(
    buildProgram().commands.map((c) => [
      c.name(),
      new Set(c.options.filter((o) => o.hidden && o.long).map((o) => o.long!)),
    ]),
  );
}

const hasFlag = (help: string, flag: string) => new RegExp(`(^|[\\s,])${flag}(?![a-z0-9-])`, 'm').test(help);

describe('README and CLI', () => {
  it('parses what it checks (so the drift test itself cannot pass on nothing)', () => {
    const table = commandTable(
      '\n## Commands\n\n| command | what |\n| --- | --- |\n| `run <csv>` | `--simulate`, `--max-failures` |\n| `pause <batch>` / `resume <batch>` | x |\n\n## Next\n',
    );
    expect([...table.keys()]).toEqual(['run', 'pause', 'resume']);
    expect([...table.get('run')!]).toEqual(['--simulate', '--max-failures']);
    const prose = flagsInProse(
      'Use `run --download <dir>`, `vidbatch worker --metrics 0.0.0.0:9464`, `docker compose run --rm x`.\n```sh\nnpx vidbatch run a.csv --simulate   # try --nothing\n```\n',
      new Set(['run', 'worker']),
    );
    expect(Object.fromEntries([...prose].map(([c, f]) => [c, [...f]]))).toEqual({
      run: ['--download', '--simulate'],
      worker: ['--metrics'],
    });
    expect(
      commandsOfHelp(
        'Usage: vidbatch\n\nOptions:\n  -h, --help  x\n\nBatches:\n  run <csv>  y\n                   wrapped\n\nInfrastructure:\n  server [options]  x\n  help [command]  z\n',
      ),
    ).toEqual(['run', 'server']);
    expect(hasFlag('  --max-failures <n>   x', '--max-failures')).toBe(true);
    expect(hasFlag('  --max-failures-rate <n>   x', '--max-failures')).toBe(false);
  });

  it('every command and flag the README names exists in the CLI, and every CLI command is in the README', async () => {
    const readme = await readFile(README, 'utf8');
    const table = commandTable(readme);
    expect(table.size).toBeGreaterThan(10);
    const cwd = tmpdir();
    const top = await vidbatch(['--help'], { cwd });
    expect(top.code).toBe(0);
    const cliCommands = commandsOfHelp(top.stdout);
    expect(cliCommands.length).toBeGreaterThan(10);
    expect(
      [...table.keys()].filter((c) => !cliCommands.includes(c)),
      'in the README table, not in the CLI',
    ).toEqual([]);
    expect(
      cliCommands.filter((c) => !table.has(c)),
      'in `vidbatch --help`, not in the README table',
    ).toEqual([]);

    const named = new Map<string, Set<string>>();
    for (const [command, flags] of [...table, ...flagsInProse(readme, new Set(table.keys()))]) {
      if (!named.has(command)) named.set(command, new Set());
      for (const flag of flags) named.get(command)!.add(flag);
    }
    const withFlags = [...named].filter(([, flags]) => flags.size > 0);
    expect(withFlags.map(([c]) => c)).toEqual(expect.arrayContaining(['run', 'simulator', 'retry-failed']));
    const hidden = hiddenFlags();
    const missing: string[] = [];
    // Three at a time: each spawn loads the TypeScript sources.
    for (let i = 0; i < withFlags.length; i += 3) {
      await Promise.all(
        withFlags.slice(i, i + 3).map(async ([command, flags]) => {
          const help = await vidbatch([command, '--help'], { cwd });
          expect(help.code, `${command} --help`).toBe(0);
          for (const flag of flags)
            if (!hasFlag(help.stdout, flag) && !hidden.get(command)?.has(flag))
              missing.push(`${command} ${flag}`);
        }),
      );
    }
    expect(missing, 'flags the README names that the command does not have').toEqual([]);
  });
});
