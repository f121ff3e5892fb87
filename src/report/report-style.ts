// The report page's style, inlined by report-page.ts (a TypeScript string, so the compiled package needs no
// asset beside it). Print-friendly: no fixed positions, dark text on white.
export const REPORT_CSS = `
:root { --ok: #2e7d32; --bad: #c62828; --flight: #1565c0; --retry: #ef6c00; --muted: #5f6368; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #202124; margin: 0;
  padding: 20px 28px 40px; max-width: 1100px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid #dadce0; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 0 0 6px; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f1f3f4;
  padding: 1px 4px; border-radius: 3px; overflow-wrap: anywhere; }
code.command { user-select: all; display: inline-block; padding: 3px 6px; }
.meta, .note { color: var(--muted); }
.tiles { display: flex; flex-wrap: wrap; gap: 8px; margin: 0; }
.tiles div { border: 1px solid #dadce0; border-radius: 6px; padding: 6px 10px; flex: 1 1 0; min-width: 96px; }
.tiles dt { color: var(--muted); font-size: 12px; }
.tiles dd { margin: 0; font-size: 22px; font-weight: 600; }
.tiles .ok dd { color: var(--ok); }
.tiles .bad dd { color: var(--bad); }
table { border-collapse: collapse; width: 100%; margin: 6px 0; }
th, td { text-align: left; vertical-align: top; padding: 4px 8px; border-bottom: 1px solid #eee; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.prompt { min-width: 200px; max-width: 420px; overflow-wrap: anywhere; }
td.nowrap { white-space: nowrap; }
td.nowrap code { overflow-wrap: normal; }
td.num, th.num { text-align: right; }
.failure { border: 1px solid #f2c4c4; border-left: 4px solid var(--bad); border-radius: 6px; padding: 10px 12px;
  margin: 10px 0; }
.caution { color: #8a4b00; }
svg { max-width: 100%; height: auto; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
svg text.title { font-weight: 600; fill: #202124; }
svg .frame { fill: #fafafa; stroke: #dadce0; }
svg .grid { stroke: #e8eaed; stroke-dasharray: 3 3; }
svg line.tick { stroke: #9aa0a6; }
svg polyline { fill: none; stroke-width: 1.8; stroke-linejoin: round; }
.s-succeeded { stroke: var(--ok); }
.s-failed { stroke: var(--bad); }
.s-inFlight { stroke: var(--flight); }
.s-retries { stroke: var(--retry); }
.legend { display: flex; gap: 16px; list-style: none; padding: 0; margin: 6px 0; color: var(--muted); }
.legend span { display: inline-block; width: 14px; height: 3px; vertical-align: middle; margin-right: 5px; }
.legend .succeeded { background: var(--ok); }
.legend .failed { background: var(--bad); }
.legend .inFlight { background: var(--flight); }
.legend .retries { background: var(--retry); }
`;
