// The report's chart: plain inline SVG (no script, no library), three panels over one time axis, each with its
// own scale: a 10,000-row batch's finished rows would flatten a window of 50 jobs in flight on a shared one.
// Every series is a step line through the timeline's samples (a value holds until the next sample).
import { escapeHtml as escape } from './html';
import type { Timeline } from './report-types';

const WIDTH = 1000;
const LEFT = 52;
const RIGHT = 14;
const PANEL = 84;
const GAP = 34;
const TOP = 22;
const AXIS = 30;

interface Line {
  series: 'succeeded' | 'failed' | 'inFlight' | 'retries';
  label: string;
}

interface Panel {
  title: string;
  lines: Line[];
}

export const PANELS: Panel[] = [
  {
    title: 'Rows finished (cumulative)',
    lines: [
      { series: 'succeeded', label: 'succeeded' },
      { series: 'failed', label: 'failed' },
    ],
  },
  { title: 'Jobs in flight', lines: [{ series: 'inFlight', label: 'jobs in flight' }] },
  {
    title: 'Submits sent again: 429s and retries (cumulative, from attempts)',
    lines: [{ series: 'retries', label: 'submits sent again' }],
  },
];

/** "0 s", "45 s", "12 min", "2 h 5 min": time since the first sample. */
export function elapsed(msSince: number): string {
  const s = Math.round(msSince / 1000);
  if (s < 120) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 120) return `${min} min`;
  const h = Math.floor(min / 60);
  return `${h} h${min % 60 ? ` ${min % 60} min` : ''}`;
}

const fixed = (n: number) => Number(n.toFixed(1)).toString();

/** Points of a step line: from 0 at the first sample, each value held until the next sample. */
function stepPoints(xs: number[], values: number[], y: (v: number) => number): string {
  const points: string[] = [`${fixed(xs[0]!)},${fixed(y(0))}`];
  values.forEach((v, i) => {
    if (i > 0) points.push(`${fixed(xs[i]!)},${fixed(y(values[i - 1]!))}`);
    points.push(`${fixed(xs[i]!)},${fixed(y(v))}`);
  });
  return points.join(' ');
}

/** The chart as an <svg> element, or a sentence when nothing was recorded over time. */
export function timelineSvg(t: Timeline): string {
  if (!t.at.length) return '<p class="note">Nothing with a time is recorded in this batch yet.</p>';
  const first = t.at[0]!;
  const span = Math.max(1000, t.at.at(-1)! - first);
  const plot = WIDTH - LEFT - RIGHT;
  const xs = t.at.map((at) => LEFT + ((at - first) / span) * plot);
  const height = TOP + PANELS.length * (PANEL + GAP) - GAP + AXIS;
  const parts: string[] = [];
  PANELS.forEach((panel, p) => {
    const top = TOP + p * (PANEL + GAP);
    const max = Math.max(1, ...panel.lines.flatMap((l) => t[l.series]));
    const y = (v: number) => top + PANEL - (v / max) * PANEL;
    parts.push(
      `<g class="panel" data-panel="${p}">`,
      `<text class="title" x="${LEFT}" y="${top - 7}">${escape(panel.title)}</text>`,
      `<rect class="frame" x="${LEFT}" y="${top}" width="${plot}" height="${PANEL}"/>`,
      `<line class="grid" x1="${LEFT}" x2="${LEFT + plot}" y1="${fixed(y(max / 2))}" y2="${fixed(y(max / 2))}"/>`,
      `<text class="tick" x="${LEFT - 6}" y="${top + 4}" text-anchor="end">${max}</text>`,
      `<text class="tick" x="${LEFT - 6}" y="${top + PANEL + 4}" text-anchor="end">0</text>`,
    );
    for (const line of panel.lines) {
      const values = t[line.series];
      const final = values.at(-1) ?? 0;
      const peak = Math.max(...values);
      const summary =
        line.series === 'inFlight' ? `${line.label}: at most ${peak}` : `${line.label}: ${final} in all`;
      parts.push(
        `<polyline class="s-${line.series}" data-series="${line.series}" points="${stepPoints(xs, values, y)}"><title>${escape(summary)}</title></polyline>`,
      );
    }
    parts.push('</g>');
  });
  const axisY = TOP + PANELS.length * (PANEL + GAP) - GAP;
  for (let i = 0; i <= 4; i++) {
    const x = LEFT + (plot * i) / 4;
    parts.push(
      `<line class="tick" x1="${fixed(x)}" x2="${fixed(x)}" y1="${axisY}" y2="${axisY + 5}"/>`,
      `<text class="tick" x="${fixed(x)}" y="${axisY + 18}" text-anchor="${i === 0 ? 'start' : i === 4 ? 'end' : 'middle'}">${escape(elapsed((span * i) / 4))}</text>`,
    );
  }
  return (
    `<svg id="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${height}" ` +
    `width="${WIDTH}" height="${height}" role="img" aria-label="Rows finished, jobs in flight and submits sent again over time">` +
    parts.join('') +
    '</svg>'
  );
}
