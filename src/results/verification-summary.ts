// The verification of a batch's videos in figures (README "Verification of downloaded videos"): how many
// downloaded videos match their request, which do not and why, and how many finished rows have no file.
// `status` and `results` print it; the gallery can use it.
import type { PromptResult } from '../contract/prompt';

export interface VerificationSummary {
  /** Rows whose downloaded video matches its request. */
  ok: number;
  /** Rows whose downloaded video differs from its request (flagged, or failed with `video_mismatch`). */
  mismatched: number;
  /** Rows whose job completed (they have a URL) but with no downloaded, verified file. */
  notDownloaded: number;
  /** The mismatched rows, in file order, with what differs. */
  mismatches: { rowId: string; line: number; problems: string[] }[];
}

export function summarizeVerification(rows: PromptResult[]): VerificationSummary {
  const summary: VerificationSummary = { ok: 0, mismatched: 0, notDownloaded: 0, mismatches: [] };
  for (const r of [...rows].sort((a, b) => a.line - b.line)) {
    if (r.verification?.ok) summary.ok += 1;
    else if (r.verification) {
      summary.mismatched += 1;
      summary.mismatches.push({ rowId: r.rowId, line: r.line, problems: r.verification.problems });
    } else if (r.url) summary.notDownloaded += 1;
  }
  return summary;
}

/**
 * "verified: 8 ok, 2 mismatched, 1 not downloaded" and one line per mismatched row (at most `max`), when any
 * video was downloaded; and, when some finished rows have no file, that provider URLs expire and how to fetch
 * them.
 */
export function verificationLines(s: VerificationSummary | undefined, max = 20): string[] {
  if (!s) return [];
  const lines: string[] = [];
  if (s.ok + s.mismatched > 0) {
    lines.push(
      `verified: ${s.ok} ok, ${s.mismatched} mismatched${s.notDownloaded ? `, ${s.notDownloaded} not downloaded` : ''}`,
      ...s.mismatches.slice(0, max).map((m) => `  ${m.rowId} (line ${m.line}): ${m.problems.join('; ')}`),
    );
    if (s.mismatches.length > max)
      lines.push(`  ... and ${s.mismatches.length - max} more (see the manifest)`);
  }
  if (s.notDownloaded)
    lines.push(
      `${s.notDownloaded} video${s.notDownloaded === 1 ? '' : 's'} not on disk, only the provider's URL recorded: provider URLs expire; \`vidbatch download <batch>\` fetches them (asking the job again for an expired one)`,
    );
  return lines;
}

/** The manifest/CSV cell of a row's verification: `ok`, what differs, or empty when not downloaded. */
export function verificationCell(r: PromptResult): string {
  return r.verification ? (r.verification.ok ? 'ok' : r.verification.problems.join('; ')) : '';
}
