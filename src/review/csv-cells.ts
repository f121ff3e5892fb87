// The input CSV's own header and cells, per row id: what "export redo" writes back, so an exported row is the
// row the user wrote (same columns, same values), not a re-rendering of it. Parsed with the same settings as
// src/input/csv.ts, so the n-th record here is the n-th row there (and gets the same default id). Cells are the
// values the loader reads (a neutralised `'=…` is `=…` here): the page's export neutralises them again.
import { parse } from 'csv-parse/sync';
import { restoreFormula } from '../input/csv-formula';

export interface CsvCells {
  /** The header to export: the file's own, with `id` put first when the file had none (ids must not change). */
  header: string[];
  /** Row id -> its cells in `header` order. */
  cells: Map<string, string[]>;
}

export function csvCells(text: string): CsvCells {
  const parsed: string[][] = parse(text.replace(/^\uFEFF/, ''), { skip_empty_lines: true });
  const header = (parsed.shift() ?? []).map((h) => h.trim());
  const records = parsed.map((record) => record.map(restoreFormula));
  const idAt = header.indexOf('id');
  const cells = new Map<string, string[]>();
  records.forEach((record, index) => {
    // An empty id cell means the row's number (src/input/csv.ts): written out, so a subset keeps it.
    const id = (idAt >= 0 ? record[idAt] : '') || String(index + 1);
    if (idAt >= 0)
      cells.set(
        id,
        record.map((v, i) => (i === idAt ? id : v)),
      );
    else cells.set(id, [id, ...record]);
  });
  return { header: idAt >= 0 ? header : ['id', ...header], cells };
}
