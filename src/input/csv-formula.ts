// CSV formula injection (OWASP "CSV Injection"): a spreadsheet runs a cell that starts with `=`, `+`, `-` or `@`
// (or a tab or carriage return before one) as a formula, and prompts and gateway messages are text nobody
// vetted. Every CSV vidbatch writes prefixes such a cell with `'`, which spreadsheets show as text; the CSV
// loader removes that `'` again, so an exported file (failed.csv, a retry or redo CSV) runs with the original
// text. Cells that already start with quotes before such a character get one more, so the round trip is exact.
// The review page's export (page-script.js) applies the same rule in the browser.

/** A cell a spreadsheet would read as a formula, after any number of `'` already escaping it. */
const ESCAPED_OR_FORMULA = /^'*[=+\-@\t\r]/;
/** A cell escaped by neutralizeFormula: at least one `'`, then a formula character. */
const ESCAPED = /^'+[=+\-@\t\r]/;

/** The cell as written to an exported CSV: a leading `'` when a spreadsheet would run it as a formula. */
export function neutralizeFormula(cell: string): string {
  return ESCAPED_OR_FORMULA.test(cell) ? `'${cell}` : cell;
}

/** The cell as loaded from a CSV: undoes neutralizeFormula (one leading `'` before a formula character). */
export function restoreFormula(cell: string): string {
  return ESCAPED.test(cell) ? cell.slice(1) : cell;
}

/** Every cell of a table neutralised, ready for csv-stringify. */
export function neutralizeTable(rows: readonly (readonly string[])[]): string[][] {
  return rows.map((row) => row.map(neutralizeFormula));
}
