// Whether a file's bytes are UTF-8 text, checked a chunk at a time as they are read: decoding would turn bad
// bytes into U+FFFD silently, and a binary file into "columns" of garbage. A problem names the line and the
// byte offset of the first bad byte (or NUL).
import type { CsvProblem } from '../errors';

/** The byte offset of the first byte that is not valid UTF-8, or -1. */
export function firstInvalidUtf8(buf: Uint8Array): number {
  let i = 0;
  while (i < buf.length) {
    const b = buf[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    const n = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : 0;
    if (n === 0 || i + n >= buf.length) return i; // not a lead byte, or cut short by the end of the file
    for (let k = 1; k <= n; k++) if (((buf[i + k] ?? 0) & 0xc0) !== 0x80) return i;
    const next = buf[i + 1]!;
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    if ((b === 0xe0 && next < 0xa0) || (b === 0xed && next >= 0xa0)) return i;
    if ((b === 0xf0 && next < 0x90) || (b === 0xf4 && next >= 0x90)) return i;
    i += n + 1;
  }
  return -1;
}

/** The bytes at the end of `chunk` that start a character the next chunk completes (0 to 3 of them). */
function unfinished(chunk: Buffer): Buffer {
  for (let back = 1; back <= Math.min(3, chunk.length); back++) {
    const b = chunk[chunk.length - back]!;
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const n = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return n > back ? chunk.subarray(chunk.length - back) : Buffer.alloc(0);
  }
  return Buffer.alloc(0);
}

const newlines = (buf: Uint8Array, end = buf.length) => {
  let n = 0;
  for (let i = buf.indexOf(10); i !== -1 && i < end; i = buf.indexOf(10, i + 1)) n++;
  return n;
};

/** Decodes a file's bytes chunk by chunk, and stops at the first sign that they are not UTF-8 text. */
export class Utf8Check {
  /** Why the bytes are not UTF-8 text, once known. */
  problem: CsvProblem | undefined;
  private offset = 0;
  private line = 1;
  private tail: Buffer = Buffer.alloc(0);
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly file: string) {}

  /** The chunk's text; undefined once the bytes are known not to be UTF-8 text (`problem` says why). */
  push(chunk: Buffer): string | undefined {
    if (this.problem) return undefined;
    if (
      this.offset === 0 &&
      ((chunk[0] === 0xff && chunk[1] === 0xfe) || (chunk[0] === 0xfe && chunk[1] === 0xff))
    )
      return this.fail(
        1,
        'the file is UTF-16 text, not UTF-8: save it as UTF-8 ("CSV UTF-8" in spreadsheet programs)',
      );
    let text: string | undefined;
    let invalid = -1;
    const seen = Buffer.concat([this.tail, chunk]);
    try {
      text = this.decoder.decode(chunk, { stream: true });
    } catch {
      invalid = firstInvalidUtf8(seen);
    }
    const nul = seen.indexOf(0);
    const start = this.offset - this.tail.length;
    if (nul !== -1 && (invalid === -1 || nul < invalid))
      return this.fail(
        this.line + newlines(seen, nul) - newlines(this.tail),
        `not a text file: a NUL byte at byte offset ${start + nul}; expected a UTF-8 CSV file`,
      );
    if (invalid !== -1) return this.invalid(seen, invalid, start);
    this.line += newlines(chunk);
    this.offset += chunk.length;
    this.tail = unfinished(seen);
    return text;
  }

  /** The end of the file: its last characters' text, or undefined when it ends inside a character. */
  end(): string | undefined {
    if (this.problem) return undefined;
    try {
      return this.decoder.decode();
    } catch {
      return this.invalid(this.tail, 0, this.offset - this.tail.length);
    }
  }

  private invalid(seen: Buffer, at: number, start: number): undefined {
    return this.fail(
      this.line + newlines(seen, at) - newlines(this.tail),
      `not UTF-8 text: byte 0x${seen[at]!.toString(16).toUpperCase().padStart(2, '0')} at byte offset ${start + at} is not valid UTF-8; save the file as UTF-8 ("CSV UTF-8" in spreadsheet programs)`,
    );
  }

  private fail(line: number, reason: string): undefined {
    this.problem = { file: this.file, line, column: '(encoding)', reason };
    return undefined;
  }
}
