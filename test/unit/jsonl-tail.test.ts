// Incremental readers shared by concurrent callers (activities reading one folder through a cache): however
// their reads overlap, every record appended is given once, to one of them.
import { appendFile, mkdir, mkdtemp, rmdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { journalPath, type JournalEntry } from '../../src/results/jobs-journal';
import { JsonlTail } from '../../src/results/jsonl';
import { manifestPath } from '../../src/results/manifest';
import { FolderPrior } from '../../src/results/prior';
import { LocalStore } from '../../src/store/local-store';
import { ObjectLog, ObjectLogTail } from '../../src/store/object-log';

interface Line {
  id: number;
  text: string;
}

const READERS = 4;
const line = (id: number): Line => ({ id, text: `line ${id} `.repeat(1 + (id % 7)) });
const json = (id: number) => `${JSON.stringify(line(id))}\n`;

/**
 * READERS callers reading one shared reader over and over (each `read` gives a caller's records to `take`)
 * while `write` appends, waiting between its writes for `reads` more reads; once it is done, each reads once
 * more. Returns what each caller was given.
 */
async function readConcurrently(
  read: (take: (r: Line) => void) => Promise<unknown>,
  write: (reads: (more: number) => Promise<void>) => Promise<void>,
): Promise<Line[][]> {
  let done = false;
  let reads = 0;
  let live = READERS;
  const got: Line[][] = Array.from({ length: READERS }, () => []);
  const callers = got.map(async (mine) => {
    try {
      while (!done) {
        await read((r) => mine.push(r));
        reads += 1;
        await tick();
      }
      await read((r) => mine.push(r));
    } finally {
      live -= 1;
    }
  });
  const waitReads = async (more: number) => {
    const target = reads + more;
    while (reads < target && live > 0) await tick();
  };
  await write(waitReads);
  done = true;
  await Promise.all(callers);
  return got;
}

/** Every id in 0..count-1 given exactly once across the callers, each with its own content. */
function expectEachOnce(got: Line[][], count: number): void {
  const all = got.flat();
  const times = new Map<number, number>();
  for (const r of all) times.set(r.id, (times.get(r.id) ?? 0) + 1);
  const ids = Array.from({ length: count }, (_, i) => i);
  expect({
    given: all.length,
    twice: ids.filter((id) => (times.get(id) ?? 0) > 1),
    missing: ids.filter((id) => !times.has(id)),
    foreign: [...times.keys()].filter((id) => !(id >= 0 && id < count)),
  }).toEqual({ given: count, twice: [], missing: [], foreign: [] });
  for (const r of all) expect(r).toEqual(line(r.id));
  // The reads really were shared: more than one caller was given records.
  expect(got.filter((mine) => mine.length > 0).length).toBeGreaterThan(1);
}

describe('JsonlTail shared by concurrent callers', () => {
  it('gives each line appended once, across callers reading while it grows (a line written in two parts too)', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'vidbatch-tail-')), 'manifest.jsonl');
    const tail = new JsonlTail<Line>(file);
    let next = 0;
    let resets = 0;
    const got = await readConcurrently(
      async (take) => {
        if ((await tail.read(take)).reset) resets += 1;
      },
      async (reads) => {
        for (let batch = 0; batch < 40; batch++) {
          let text = '';
          for (let i = 0; i < 1 + (batch % 5); i++) text += json(next++);
          await appendFile(file, text);
          // Readers read while the file is between batches.
          await reads(2);
          if (batch === 20) {
            // A line still being written: no reader gives it until it ends, then one gives it whole.
            const whole = json(next++);
            const half = Math.floor(whole.length / 2);
            await appendFile(file, whole.slice(0, half));
            await reads(READERS);
            await appendFile(file, whole.slice(half));
          }
        }
      },
    );
    expectEachOnce(got, next);
    // The file only grew: no read found it shorter than what was read before.
    expect(resets).toBe(0);
  });
});

describe('JsonlTail after a failed read', () => {
  it('still reads: a read that failed does not hold up the ones after it', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'vidbatch-tail-')), 'manifest.jsonl');
    const tail = new JsonlTail<Line>(file);
    await mkdir(file); // not a file: reading it fails
    const failed = tail.read();
    const next = tail.read();
    await expect(failed).rejects.toThrow();
    await expect(next).rejects.toThrow();
    await rmdir(file);
    await writeFile(file, json(0));
    expect((await tail.read()).records).toEqual([line(0)]);
  });
});

describe('ObjectLogTail shared by concurrent callers', () => {
  it('gives each object written once, across callers reading while the log grows', async () => {
    const store = new LocalStore(await mkdtemp(join(tmpdir(), 'vidbatch-log-')));
    const log = new ObjectLog<Line>(store, 'batch/manifest.jsonl/');
    const tail = new ObjectLogTail(log);
    const start = Date.now();
    let next = 0;
    const got = await readConcurrently(
      (take) => tail.read(take),
      async (reads) => {
        for (let batch = 0; batch < 30; batch++) {
          const records = Array.from({ length: 1 + (batch % 4) }, () => line(next++));
          await log.append(records, start + batch);
          await reads(2);
        }
      },
    );
    expectEachOnce(got, next);
  });
});

describe('FolderPrior shared by concurrent callers', () => {
  afterEach(() => vi.restoreAllMocks());

  it('folds each journal line once when a refresh from an earlier line starts over while another reads', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-prior-'));
    const unknown = (n: number): JournalEntry => ({
      rowId: 'r',
      generation: n,
      unknown: true,
      line: 10,
      at: 'x',
    });
    await writeFile(manifestPath(dir), '');
    await writeFile(journalPath(dir), [0, 1, 2].map((n) => JSON.stringify(unknown(n)) + '\n').join(''));
    const prior = new FolderPrior(dir);
    expect((await prior.refresh(5)).get('r')).toMatchObject({ unknownSubmits: 3 });

    await appendFile(journalPath(dir), JSON.stringify(unknown(3)) + '\n');
    // Starts the second refresh once the first is reading the journal.
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its own tail as `this` below
    const read = JsonlTail.prototype.read;
    let journalRead!: () => void;
    const reading = new Promise<void>((resolve) => (journalRead = resolve));
    vi.spyOn(JsonlTail.prototype, 'read').mockImplementation(function (this: JsonlTail<unknown>, each) {
      if (this.path === journalPath(dir)) journalRead();
      return read.call(this, each);
    });
    const first = prior.refresh(5);
    await reading;
    // A new run of the batch: from an earlier line, the folder is read again from the start.
    const again = prior.refresh(1);
    await first;
    expect((await again).get('r')).toMatchObject({ unknownSubmits: 4 });
  });
});
