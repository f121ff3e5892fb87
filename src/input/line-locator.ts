// The line each CSV record starts on, found by its text in the file's text in order (csv-parse's own count is
// off for CRLF inside quotes). Kept and skipped records each come in file order but interleave: one cursor
// each. Only the text from the earlier cursor on is held, so a file read in chunks is never held whole.

interface Cursor {
  /** Position in the file's text (UTF-16 units) after the last record found. */
  at: number;
  /** The line `at` is on. */
  line: number;
}

const newlinesIn = (text: string, from: number, to: number) => {
  let n = 0;
  for (let i = text.indexOf('\n', from); i !== -1 && i < to; i = text.indexOf('\n', i + 1)) n++;
  return n;
};

export class LineLocator {
  private text = '';
  /** Position of `text`'s first character in the file's text. */
  private base = 0;
  private readonly kept: Cursor = { at: 0, line: 1 };
  private readonly skipped: Cursor = { at: 0, line: 1 };

  /** More of the file's text, in order. */
  append(text: string): void {
    this.text += text;
  }

  /** The line the record whose raw text is `raw` starts on; 0 when its text is not found. */
  locate(raw: string, skipped = false): number {
    const cursor = skipped ? this.skipped : this.kept;
    const body = raw.replace(/^[\r\n]+/, '').replace(/[\r\n]+$/, '');
    const found = body ? this.text.indexOf(body, cursor.at - this.base) : -1;
    if (found === -1) return 0;
    const line = cursor.line + newlinesIn(this.text, cursor.at - this.base, found);
    cursor.at = this.base + found + body.length;
    cursor.line = line + newlinesIn(body, 0, body.length);
    // Records come in file order: the other kind's next one starts after this one.
    const other = skipped ? this.kept : this.skipped;
    if (other.at < cursor.at) Object.assign(other, cursor);
    this.forget();
    return line;
  }

  /** Lets go of the text before both cursors (in large steps: slicing copies what is kept). */
  private forget() {
    const before = Math.min(this.kept.at, this.skipped.at) - this.base;
    if (before < 1 << 20) return;
    this.text = this.text.slice(before);
    this.base += before;
  }
}
