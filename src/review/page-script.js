// The review gallery's script (inlined into review.html by page.ts, after page-cards.js, which builds the cards).
// Plain browser JS, no dependencies.
// Prompts are user text: every card is built with textContent, never HTML. Only one page of cards exists in
// the DOM at a time (a 10,000-row batch opens as fast as a 50-row one), and a video gets its src only when
// its card scrolls into view.
(function () {
  'use strict';
  const PAGE_SIZE = 48;
  const STATES = ['succeeded', 'failed', 'submitted', 'waiting'];
  const STATE_ORDER = { failed: 0, succeeded: 1, submitted: 2, waiting: 3 };
  const FLAGS = {
    unknown: ['unknown submit outcome', (r) => (r.unknownSubmits || 0) > 0],
    mismatch: ['verification problem', (r) => r.verification && !r.verification.ok],
    download: ['download error', (r) => !!r.downloadError],
    url: ['provider URL only', (r) => r.video && !r.video.local],
    keep: ['marked keep', (r) => marks[r.id] === 'keep'],
    redo: ['marked redo', (r) => marks[r.id] === 'redo'],
    unmarked: ['not marked', (r) => !marks[r.id]],
  };

  const $ = (id) => document.getElementById(id);
  let data = JSON.parse($('review-data').textContent);
  const live = document.body.dataset.live === 'true';
  const storeKey = 'vidbatch-review:' + data.batchId;
  let marks = loadMarks();
  const view = { state: '', model: '', flag: '', q: '', sort: 'line', page: 0, selected: 0 };
  let visible = [];

  function loadMarks() {
    try {
      return JSON.parse(localStorage.getItem(storeKey) || '{}') || {};
    } catch {
      return {};
    }
  }
  function saveMarks() {
    try {
      localStorage.setItem(storeKey, JSON.stringify(marks));
    } catch {
      say('marks could not be saved in this browser');
    }
  }
  function say(text) {
    $('message').textContent = text;
  }
  const { el, money, when } = window.reviewCards;
  function option(select, value, label) {
    const o = el('option', '', label);
    o.value = value;
    select.append(o);
  }

  // Header: counts per state, spend, when the batch ran; filter choices.
  function renderHeader() {
    $('batch-id').textContent = data.batchId + (data.csvName ? ' (' + data.csvName + ')' : '');
    const counts = {};
    for (const r of data.rows) counts[r.state] = (counts[r.state] || 0) + 1;
    const parts = STATES.filter((s) => counts[s]).map((s) => counts[s] + ' ' + s);
    let summary = data.rows.length + ' rows: ' + (parts.join(', ') || 'none');
    const reused = data.rows.filter((r) => r.reusedFrom);
    if (reused.length) {
      const from = [...new Set(reused.map((r) => r.reusedFrom.batchId))];
      summary += ' · ' + reused.length + ' reused from ' + from.join(', ');
    }
    if (typeof data.spend === 'number') summary += ' · estimated spend ' + money(data.spend);
    $('summary').textContent = summary;
    const meta = [];
    if (data.ledger) meta.push(data.ledger);
    if (data.workflowStatus) meta.push('batch ' + data.workflowStatus.toLowerCase());
    if (data.startedAt) meta.push('started ' + when(data.startedAt));
    if (data.closedAt) meta.push('closed ' + when(data.closedAt));
    meta.push((live ? 'refreshed ' : 'page made ') + when(data.generatedAt));
    $('meta').textContent = meta.join(' · ');
    const state = $('f-state');
    const chosen = state.value;
    state.textContent = '';
    option(state, '', 'all (' + data.rows.length + ')');
    for (const s of STATES) if (counts[s]) option(state, s, s + ' (' + counts[s] + ')');
    state.value = chosen && counts[chosen] ? chosen : '';
    view.state = state.value;
    const model = $('f-model');
    const chosenModel = model.value;
    model.textContent = '';
    option(model, '', 'all');
    for (const m of [...new Set(data.rows.map((r) => r.model))].sort()) option(model, m, m);
    model.value = chosenModel;
    if (model.value !== chosenModel) model.value = '';
    view.model = model.value;
  }

  function applyView() {
    const q = view.q.toLowerCase();
    const flag = FLAGS[view.flag];
    visible = data.rows.filter(
      (r) =>
        (!view.state || r.state === view.state) &&
        (!view.model || r.model === view.model) &&
        (!flag || flag[1](r)) &&
        (!q ||
          r.prompt.toLowerCase().includes(q) ||
          (r.originalPrompt || '').toLowerCase().includes(q) ||
          r.id.toLowerCase().includes(q)),
    );
    const byLine = (a, b) => a.line - b.line;
    if (view.sort === 'state')
      visible.sort((a, b) => STATE_ORDER[a.state] - STATE_ORDER[b.state] || byLine(a, b));
    else if (view.sort === 'cost')
      visible.sort((a, b) => (b.estimatedCost ?? -1) - (a.estimatedCost ?? -1) || byLine(a, b));
    else visible.sort(byLine);
    const pages = Math.max(1, Math.ceil(visible.length / PAGE_SIZE));
    view.page = Math.min(view.page, pages - 1);
    view.selected = Math.min(view.selected, Math.max(0, visible.length - 1));
  }

  // Videos get a src only when their card is on screen (and lose nothing when it leaves).
  const observer =
    'IntersectionObserver' in window
      ? new IntersectionObserver(
          (entries) => {
            for (const entry of entries) {
              if (!entry.isIntersecting) continue;
              loadVideo(entry.target);
              observer.unobserve(entry.target);
            }
          },
          { rootMargin: '200px' },
        )
      : null;
  function loadVideo(video) {
    if (video.getAttribute('src')) return;
    video.preload = 'metadata';
    // #t=0.1: the browser shows the first frame as the poster, no ffmpeg at review time.
    video.src = video.dataset.src + '#t=0.1';
  }

  function pageRows() {
    return visible.slice(view.page * PAGE_SIZE, (view.page + 1) * PAGE_SIZE);
  }

  function render() {
    const main = $('cards');
    if (observer) observer.disconnect();
    for (const v of main.querySelectorAll('video')) v.removeAttribute('src');
    main.textContent = '';
    const rows = pageRows();
    for (const r of rows) main.append(card(r));
    const pages = Math.max(1, Math.ceil(visible.length / PAGE_SIZE));
    $('page-info').textContent =
      'page ' +
      (view.page + 1) +
      ' of ' +
      pages +
      ' · ' +
      visible.length +
      ' of ' +
      data.rows.length +
      ' rows shown';
    $('prev').disabled = view.page === 0;
    $('next').disabled = view.page >= pages - 1;
    highlight(false);
  }

  function card(r) {
    return window.reviewCards.card(r, {
      mark: marks[r.id],
      onMark: (mark) => toggleMark(r.id, mark),
      onSelect: () => {
        const at = visible.indexOf(r);
        if (at >= 0) {
          view.selected = at;
          highlight(false);
        }
      },
      observe: (v) => (observer ? observer.observe(v) : loadVideo(v)),
    });
  }

  function cardOf(id) {
    for (const c of $('cards').children) if (c.dataset.id === id) return c;
    return null;
  }

  function replaceCard(r) {
    const old = cardOf(r.id);
    if (!old) return;
    const fresh = card(r);
    old.replaceWith(fresh);
    if (visible[view.selected] && visible[view.selected].id === r.id) highlight(false);
  }

  function toggleMark(id, mark) {
    if (marks[id] === mark) delete marks[id];
    else marks[id] = mark;
    saveMarks();
    const r = data.rows.find((x) => x.id === id);
    if (r) replaceCard(r);
    const n = countMarks();
    say(n.keep + ' kept, ' + n.redo + ' to redo');
  }

  function countMarks() {
    const n = { keep: 0, redo: 0 };
    for (const r of data.rows) if (marks[r.id]) n[marks[r.id]]++;
    return n;
  }

  function highlight(scroll) {
    for (const c of $('cards').querySelectorAll('.selected')) c.classList.remove('selected');
    const r = visible[view.selected];
    const c = r && cardOf(r.id);
    if (!c) return;
    c.classList.add('selected');
    if (scroll) {
      c.scrollIntoView({ block: 'nearest' });
      c.focus({ preventScroll: true });
    }
  }

  function move(delta) {
    if (!visible.length) return;
    view.selected = Math.max(0, Math.min(visible.length - 1, view.selected + delta));
    const page = Math.floor(view.selected / PAGE_SIZE);
    if (page !== view.page) {
      view.page = page;
      render();
    }
    highlight(true);
  }

  // Exports: the input CSV's own header and cells, in file order, so `vidbatch run` makes a new batch of them.
  // A cell a spreadsheet would run as a formula gets a leading ' (as src/input/csv-formula.ts does); the CSV
  // loader removes it, so the exported rows run with their original text.
  function csvCell(v) {
    if (/^'*[=+\-@\t\r]/.test(v)) v = "'" + v;
    return /[",\r\n]/.test(v) || /^\s|\s$/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v;
  }
  function exportMarked(mark) {
    const marked = data.rows.filter((r) => marks[r.id] === mark).sort((a, b) => a.line - b.line);
    // A redo is a new batch that pays again: never for a row whose job may still finish (submitted or waiting)
    // or whose submit had an unknown outcome (a job may exist); those stay marked and are named instead.
    const held =
      mark === 'redo'
        ? marked.filter(
            (r) => r.state === 'submitted' || r.state === 'waiting' || (r.unknownSubmits || 0) > 0,
          )
        : [];
    const rows = marked.filter((r) => !held.includes(r));
    const note = held.length
      ? '; not exported (may still finish or may have a job already): ' + held.map((r) => r.id).join(', ')
      : '';
    if (!rows.length) {
      say('no row is marked ' + mark + note);
      return;
    }
    // Redoing a video is a new take of the same request (src/input/request-key.ts): without it, the output
    // root's request index would record the very video the row is redone for. A row without a video keeps its
    // request, so a job of it that may still finish (cancelled, abandoned) is checked before paying again.
    let header = data.header;
    let cells = rows.map((r) => r.cells);
    if (mark === 'redo' && rows.some((r) => r.state === 'succeeded')) {
      const take =
        'redo-' +
        new Date()
          .toISOString()
          .replace(/[-:TZ]/g, '')
          .slice(0, 14);
      let at = header.indexOf('take');
      if (at < 0) {
        header = [...header, 'take'];
        cells = cells.map((c) => [...c, '']);
        at = header.length - 1;
      }
      cells = cells.map((c, n) =>
        rows[n].state === 'succeeded' ? c.map((v, i) => (i === at ? take : v)) : c,
      );
    }
    const lines = [header, ...cells].map((row) => row.map(csvCell).join(','));
    const blob = new Blob([lines.join('\n') + '\n'], { type: 'text/csv' });
    const a = el('a');
    a.href = URL.createObjectURL(blob);
    a.download = data.batchId + '-' + (mark === 'keep' ? 'kept' : 'redo') + '.csv';
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    say(rows.length + ' row(s) exported to ' + a.download + note);
  }

  // review --serve: rows that finish appear without a reload; unchanged cards (and playing videos) stay.
  function rowKey(r) {
    return [
      r.state,
      r.finishedAt,
      r.jobId,
      r.video && r.video.src,
      r.verification && r.verification.ok,
      r.estimatedCost,
    ].join('|');
  }
  async function refresh() {
    try {
      // Only the rows changed since the version this page holds (a 304 when none did).
      const res = await fetch('data.json?since=' + encodeURIComponent(data.tag || ''), { cache: 'no-store' });
      if (res.status !== 200) return;
      const next = await res.json();
      if (next.changedOnly) {
        const changed = new Map(next.rows.map((r) => [r.id, r]));
        const rows = data.rows.map((r) => {
          const row = changed.get(r.id) || r;
          changed.delete(r.id);
          return row;
        });
        next.rows = rows.concat([...changed.values()]);
      }
      const before = new Map(data.rows.map((r) => [r.id, rowKey(r)]));
      const shownBefore = pageRows()
        .map((r) => r.id)
        .join('\n');
      const selectedId = visible[view.selected] && visible[view.selected].id;
      data = next;
      renderHeader();
      applyView();
      const at = visible.findIndex((r) => r.id === selectedId);
      if (at >= 0) view.selected = at;
      if (
        pageRows()
          .map((r) => r.id)
          .join('\n') !== shownBefore
      )
        render();
      else {
        for (const r of pageRows()) if (before.get(r.id) !== rowKey(r)) replaceCard(r);
        $('page-info').textContent = $('page-info').textContent.replace(
          /of \d+ rows/,
          'of ' + data.rows.length + ' rows',
        );
      }
    } catch {
      // The server stopped: the page keeps what it has.
    }
  }

  function rerender() {
    applyView();
    render();
  }

  $('controls').addEventListener('submit', (e) => e.preventDefault());
  const flagSelect = $('f-flag');
  option(flagSelect, '', 'any');
  for (const [key, [label]] of Object.entries(FLAGS)) option(flagSelect, key, label);
  $('f-state').addEventListener(
    'change',
    (e) => ((view.state = e.target.value), (view.page = 0), (view.selected = 0), rerender()),
  );
  $('f-model').addEventListener(
    'change',
    (e) => ((view.model = e.target.value), (view.page = 0), (view.selected = 0), rerender()),
  );
  $('f-flag').addEventListener(
    'change',
    (e) => ((view.flag = e.target.value), (view.page = 0), (view.selected = 0), rerender()),
  );
  $('f-sort').addEventListener(
    'change',
    (e) => ((view.sort = e.target.value), (view.page = 0), (view.selected = 0), rerender()),
  );
  $('f-search').addEventListener(
    'input',
    (e) => ((view.q = e.target.value), (view.page = 0), (view.selected = 0), rerender()),
  );
  $('prev').addEventListener(
    'click',
    () => ((view.page -= 1), (view.selected = view.page * PAGE_SIZE), render()),
  );
  $('next').addEventListener(
    'click',
    () => ((view.page += 1), (view.selected = view.page * PAGE_SIZE), render()),
  );
  $('export-redo').addEventListener('click', () => exportMarked('redo'));
  $('export-kept').addEventListener('click', () => exportMarked('keep'));
  document.addEventListener('keydown', (e) => {
    if (e.target instanceof HTMLElement && e.target.closest('input, select, textarea')) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const r = visible[view.selected];
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown') move(1);
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') move(-1);
    else if ((e.key === 'k' || e.key === 'r') && r) toggleMark(r.id, e.key === 'k' ? 'keep' : 'redo');
    else return;
    e.preventDefault();
  });

  // `#row=<id>` (links from report.html): that row's card, on its page, selected; filters that hide it are cleared.
  function showRowOfHash() {
    const m = /^#row=(.+)$/.exec(window.location.hash);
    let id;
    try {
      id = m && decodeURIComponent(m[1]);
    } catch {
      return;
    }
    if (!id) return;
    if (!visible.some((r) => r.id === id)) {
      view.state = view.model = view.flag = view.q = '';
      for (const f of ['f-state', 'f-model', 'f-flag', 'f-search']) $(f).value = '';
      applyView();
    }
    const at = visible.findIndex((r) => r.id === id);
    if (at < 0) return;
    view.selected = at;
    view.page = Math.floor(at / PAGE_SIZE);
    render();
    highlight(true);
  }

  renderHeader();
  rerender();
  showRowOfHash();
  window.addEventListener('hashchange', showRowOfHash);
  document.body.dataset.ready = 'true';
  if (live) setInterval(refresh, 2000);
})();
