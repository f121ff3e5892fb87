// The program as a person reads it: grouped commands, short grouped help with the knobs hidden but accepted,
// old names still working, no batch option from the environment, one mapping from errors to exit codes, and
// a `--help` that loads no heavy module.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { REMOVED_BATCH_VARIABLES, removedVariableWarnings } from '../../src/cli/batch-flags';
import { registerRunCommand, SIM_JOB_SECONDS_HELP } from '../../src/cli/commands/run';
import { MAX_REDIRECT_HOPS_HELP } from '../../src/cli/commands/simulator';
import { MAX_REDIRECT_HOPS } from '../../src/simulator/settings';
import { DEFAULT_DB_FILE_HELP } from '../../src/cli/commands/server';
import { registerWorkerCommand } from '../../src/cli/commands/worker';
import { buildProgram } from '../../src/cli/program';
import { SIMULATED_JOB_SECONDS } from '../../src/client/session';
import { DEFAULT_DB_FILE } from '../../src/dev-server/dev-server';
import {
  ConfigError,
  CsvValidationError,
  DevServerError,
  DownloadError,
  EXIT,
  exitCodeFor,
  PathNotAllowedError,
  TemporalCliNotFoundError,
  VidbatchError,
} from '../../src/errors';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The options `--help` shows (the help option too), by group heading. */
function visibleOptions(command: Command): Map<string, string[]> {
  const help = command.createHelp();
  const groups = new Map<string, string[]>();
  for (const o of help.visibleOptions(command)) {
    const group = o.helpGroupHeading ?? 'Options:';
    groups.set(group, [...(groups.get(group) ?? []), o.long ?? o.flags]);
  }
  return groups;
}

function sub(program: Command, name: string): Command {
  const found = program.commands.find((c) => c.name() === name);
  if (!found) throw new Error(`no command ${name}`);
  return found;
}

/** Parses `args` with `register`'s command alone, its action replaced: the options it would get. */
async function parsedOptions(
  register: (program: Command) => void,
  args: string[],
): Promise<Record<string, unknown>> {
  const program = new Command('vidbatch').exitOverride();
  register(program);
  let options: Record<string, unknown> = {};
  const command = program.commands[0]!.exitOverride();
  command.action((...a: unknown[]) => {
    options = (a.at(-1) as Command).opts();
  });
  await program.parseAsync(args, { from: 'user' });
  return options;
}

describe('vidbatch --help', () => {
  it('lists the commands in groups', () => {
    const program = buildProgram();
    const groups: Record<string, string[]> = {};
    for (const c of program.createHelp().visibleCommands(program))
      (groups[c.helpGroup()] ??= []).push(c.name());
    expect(groups).toEqual({
      'Batches:': [
        'validate',
        'plan',
        'run',
        'status',
        'watch',
        'results',
        'download',
        'review',
        'report',
        'retry-failed',
        'list',
      ],
      'Operating:': ['pause', 'resume', 'set-concurrency', 'cancel', 'worker'],
      'Infrastructure:': ['server', 'doctor', 'help'],
      'Development:': ['simulator'],
    });
  });

  it('shows at most 15 options of any command, in groups; the knobs are hidden', () => {
    const program = buildProgram();
    for (const command of program.commands) {
      const shown = [...visibleOptions(command).values()].flat();
      expect(shown.length, `${command.name()}: ${shown.join(' ')}`).toBeLessThanOrEqual(15);
    }
    expect([...visibleOptions(sub(program, 'run')).keys()]).toEqual([
      'Options:',
      'Output:',
      'Guard rails:',
      'Spend safety:',
      'Notices:',
      'Rate budget:',
      'Prompt enhancement:',
      'Cost:',
    ]);
    const hidden = sub(program, 'run')
      .options.filter((o) => o.hidden)
      .map((o) => o.long);
    expect(hidden).toEqual(
      expect.arrayContaining([
        '--first-poll',
        '--poll-interval',
        '--poll-backoff',
        '--poll-cap',
        '--poll-jitter',
        '--no-adaptive-poll',
        '--page-size',
        '--prompts-per-run',
        '--activity-timeout',
        '--submit-timeout',
      ]),
    );
    expect(sub(program, 'retry-failed').options.find((o) => o.long === '--poll-cap')?.hidden).toBe(true);
  });

  it('loads only commander and the flag definitions', async () => {
    for (const args of [['--help'], ['run', '--help'], ['simulator', '--help']]) {
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          '--import',
          fileURLToPath(new URL('../fixtures/log-imports.ts', import.meta.url)),
          'src/cli/main.ts',
          ...args,
        ],
        { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const code = await new Promise((resolve) => child.on('close', resolve));
      expect(code, stderr).toBe(0);
      const packages = new Set(
        [...stderr.matchAll(/^import .*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//gm)].map((m) => m[1]!),
      );
      packages.delete('tsx');
      packages.delete('esbuild');
      expect([...packages], args.join(' ')).toEqual(['commander']);
    }
  });
});

describe('hidden options and old names', () => {
  it('accepts the hidden knobs', async () => {
    const o = await parsedOptions(registerRunCommand, [
      'run',
      'p.csv',
      '--poll-cap',
      '30',
      '--page-size',
      '7',
    ]);
    expect(o).toMatchObject({ pollCap: 30_000, pageSize: 7 });
  });

  it('`run --out` and `worker --out` are the old names of --out-root', async () => {
    expect(await parsedOptions(registerRunCommand, ['run', 'p.csv', '--out', 'o1'])).toMatchObject({
      outRoot: 'o1',
    });
    expect(await parsedOptions(registerRunCommand, ['run', 'p.csv', '--out-root', 'o2'])).toMatchObject({
      outRoot: 'o2',
    });
    expect(await parsedOptions(registerWorkerCommand, ['worker', '--out', 'o3'])).toMatchObject({
      outRoot: 'o3',
    });
    expect(await parsedOptions(registerWorkerCommand, ['worker'])).toMatchObject({ outRoot: 'out' });
  });

  it('--shared-budget is gone', async () => {
    await expect(parsedOptions(registerRunCommand, ['run', 'p.csv', '--shared-budget'])).rejects.toThrow(
      /unknown option '--shared-budget'/,
    );
  });
});

describe('environment variables', () => {
  it('no batch option of run or retry-failed is read from the environment', () => {
    const program = buildProgram();
    const read = (name: string) => sub(program, name).options.flatMap((o) => (o.envVar ? [o.envVar] : []));
    // Roots and deployment settings only (where a deployment's notices go).
    expect(read('run')).toEqual(['VIDBATCH_NOTIFY', 'VIDBATCH_PRICES']);
    expect(read('retry-failed')).toEqual(['VIDBATCH_OUT_ROOT']);
    const everywhere = program.commands.flatMap((c) => read(c.name()));
    for (const name of [...Object.keys(REMOVED_BATCH_VARIABLES), 'VIDBATCH_SHARED_BUDGET'])
      expect(everywhere).not.toContain(name);
  });

  it('warns once per removed variable, naming the flag to use', () => {
    expect(removedVariableWarnings({})).toEqual([]);
    expect(
      removedVariableWarnings({ VIDBATCH_MAX_FAILURES: '3', VIDBATCH_VERIFY: 'strict', PATH: '/bin' }),
    ).toEqual([
      'warning: VIDBATCH_VERIFY is no longer read; use --verify instead',
      'warning: VIDBATCH_MAX_FAILURES is no longer read; use --max-failures instead',
    ]);
  });
});

describe('exitCodeFor', () => {
  it('maps every error to the exit code the README documents', () => {
    expect(EXIT).toEqual({ ok: 0, error: 1, invalidInput: 2, rowsFailed: 3, interrupted: 130 });
    const cases: [unknown, number][] = [
      [new ConfigError('x'), 2],
      [new CsvValidationError([]), 2],
      [new PathNotAllowedError('/x', [], 'VIDBATCH_INPUT_ROOT'), 2],
      [new DevServerError('x'), 1],
      [new TemporalCliNotFoundError([]), 1],
      [new DownloadError('x', false), 1],
      [new VidbatchError('x'), 1],
      [new Error('x'), 1],
      ['a string', 1],
      [undefined, 1],
      [Object.assign(new Error('from elsewhere'), { exitCode: 3 }), 3],
      [new CommanderError(1, 'commander.unknownOption', 'x'), 2],
      [new CommanderError(1, 'commander.invalidArgument', 'x'), 2],
      [new CommanderError(0, 'commander.helpDisplayed', 'x'), 0],
      [new CommanderError(0, 'commander.version', 'x'), 0],
    ];
    for (const [err, code] of cases) expect(exitCodeFor(err), String(err)).toBe(code);
    expect(new ConfigError('x')).toBeInstanceOf(VidbatchError);
  });
});

describe('help defaults kept beside the modules --help must not load', () => {
  it('match those modules', () => {
    expect(SIM_JOB_SECONDS_HELP).toBe(SIMULATED_JOB_SECONDS);
    expect(DEFAULT_DB_FILE_HELP).toBe(DEFAULT_DB_FILE);
    expect(MAX_REDIRECT_HOPS_HELP).toBe(MAX_REDIRECT_HOPS);
  });
});
