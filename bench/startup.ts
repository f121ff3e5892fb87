// How long `vidbatch --help` takes to start: the development bin (bin/vidbatch.mjs in this checkout: the
// sources through tsx), the built package (dist/cli.js) and the bin as installed (bin/vidbatch.mjs in a folder
// with dist/ and no src/: it imports dist/cli.js), against `node -e 0`. Each is run `runs` times after one warm-up; the table has the medians of wall time, CPU time
// (user + system) and maximum RSS, the last two measured inside the process by a preloaded probe that writes
// process.resourceUsage() as it exits. Builds dist/ first when there is none (npm run build).
//   npm run bench:startup [-- runs=15]
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const runs = Number(process.argv[2] ?? 15);
if (!Number.isInteger(runs) || runs < 1)
  throw new Error(`runs: a whole number above 0, not ${process.argv[2]}`);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.error('no dist/cli.js: npm run build');
  execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
}

const dir = await mkdtemp(join(tmpdir(), 'vidbatch-startup-'));
const probe = join(dir, 'probe.mjs');
await writeFile(
  probe,
  `import { writeFileSync } from 'node:fs';
process.on('exit', () => {
  const u = process.resourceUsage();
  writeFileSync(process.env.STARTUP_PROBE_FILE, JSON.stringify({ cpuUs: u.userCPUTime + u.systemCPUTime, maxRssKb: u.maxRSS }));
});
`,
);

// The installed layout: a copy of the bin, beside links to dist/ and node_modules/, and no src/.
const installed = join(dir, 'installed');
await mkdir(join(installed, 'bin'), { recursive: true });
await copyFile(join(ROOT, 'bin', 'vidbatch.mjs'), join(installed, 'bin', 'vidbatch.mjs'));
await symlink(join(ROOT, 'dist'), join(installed, 'dist'));
await symlink(join(ROOT, 'node_modules'), join(installed, 'node_modules'));

interface Sample {
  wallMs: number;
  cpuMs: number;
  rssMb: number;
}

function once(args: string[]): Sample {
  const out = join(dir, 'usage.json');
  const started = process.hrtime.bigint();
  const child = spawnSync(process.execPath, ['--import', pathToFileURL(probe).href, ...args], {
    cwd: ROOT,
    env: { ...process.env, STARTUP_PROBE_FILE: out },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  if (child.status !== 0)
    throw new Error(`node ${args.join(' ')}: exit ${child.status}\n${String(child.stderr)}`);
  const usage = JSON.parse(readFileSync(out, 'utf8')) as { cpuUs: number; maxRssKb: number };
  return { wallMs, cpuMs: usage.cpuUs / 1000, rssMb: usage.maxRssKb / 1024 };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const cases: { name: string; args: string[] }[] = [
  { name: 'node -e 0', args: ['-e', '0'] },
  { name: 'dev bin (tsx, src/)', args: [join(ROOT, 'bin', 'vidbatch.mjs'), '--help'] },
  { name: 'built (node dist/cli.js)', args: [join(ROOT, 'dist', 'cli.js'), '--help'] },
  { name: 'installed bin (dist/)', args: [join(installed, 'bin', 'vidbatch.mjs'), '--help'] },
];

const rows: { name: string; wall: number; cpu: number; rss: number }[] = [];
try {
  for (const c of cases) {
    once(c.args); // warm-up: file system cache, the compile cache
    const samples = Array.from({ length: runs }, () => once(c.args));
    rows.push({
      name: c.name,
      wall: median(samples.map((s) => s.wallMs)),
      cpu: median(samples.map((s) => s.cpuMs)),
      rss: median(samples.map((s) => s.rssMb)),
    });
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}

const base = rows[0]!;
const table = [
  ['vidbatch --help', 'wall', 'CPU', 'max RSS', 'wall - node -e 0'],
  ...rows.map((r) => [
    r.name,
    `${r.wall.toFixed(0)} ms`,
    `${r.cpu.toFixed(0)} ms`,
    `${r.rss.toFixed(0)} MB`,
    r === base ? '' : `+${(r.wall - base.wall).toFixed(0)} ms`,
  ]),
];
const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
console.log(`medians of ${runs} runs (node ${process.version}, ${process.platform})`);
for (const row of table)
  console.log(row.map((cell, i) => (i ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  '));
