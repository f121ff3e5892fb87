// The review gallery's cards (inlined into review.html by page.ts, before page-script.js): one row's card,
// built with textContent only (prompts and error messages are user or provider text, never HTML).
// `ctx`: the row's mark, what a click on a mark button or on the card does, and how its video is observed.
(function () {
  'use strict';
  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  const money = (n) => n.toFixed(2);
  const when = (iso) => (iso ? new Date(iso).toLocaleString() : '');

  function field(dl, name, value, className) {
    if (value === undefined || value === null || value === '') return;
    dl.append(el('dt', '', name), el('dd', className || '', value));
  }

  function card(r, ctx) {
    const c = el('article', 'card' + (ctx.mark ? ' mark-' + ctx.mark : ''));
    c.dataset.id = r.id;
    c.dataset.state = r.state;
    c.tabIndex = -1;
    const media = el('div', 'media');
    if (r.video) {
      const v = el('video');
      v.controls = true;
      v.muted = true;
      v.playsInline = true;
      v.preload = 'none';
      v.dataset.src = r.video.src;
      v.addEventListener('loadedmetadata', () => {
        v.dataset.duration = String(v.duration);
        const d = c.querySelector('.played');
        if (d) d.textContent = isFinite(v.duration) ? 'plays ' + v.duration.toFixed(1) + ' s' : '';
      });
      v.addEventListener('error', () => {
        v.dataset.error = 'true';
        const d = c.querySelector('.played');
        if (d) d.textContent = 'this browser cannot play the video';
      });
      media.append(v);
      ctx.observe(v);
    } else
      media.append(
        el('span', '', r.state === 'failed' ? 'no video: ' + (r.errorCode || 'failed') : 'not finished yet'),
      );
    c.append(media);

    const body = el('div', 'body');
    const top = el('div', 'top');
    top.append(
      el('strong', '', '#' + r.line),
      el('span', '', r.id),
      el('span', 'badge s-' + r.state, r.state),
    );
    if (ctx.mark) top.append(el('span', 'badge mark', ctx.mark));
    if ((r.unknownSubmits || 0) > 0) top.append(el('span', 'badge flag', 'unknown outcome'));
    if (r.reusedFrom) top.append(el('span', 'badge', 'reused'));
    if (r.verification)
      top.append(
        el(
          'span',
          'badge ' + (r.verification.ok ? 's-succeeded' : 'flag'),
          r.verification.ok ? 'verified' : 'mismatch',
        ),
      );
    body.append(top);
    if (r.originalPrompt !== undefined) {
      // A rewritten prompt beside the one the user wrote: what the video was made from is never hidden.
      const pair = el('div', 'prompts');
      for (const [label, text, cls] of [
        ['original', r.originalPrompt, 'prompt original'],
        ['sent (rewritten)', r.prompt, 'prompt sent'],
      ]) {
        const side = el('div');
        side.append(el('span', 'prompt-label', label), el('p', cls, text));
        pair.append(side);
      }
      body.append(pair);
    } else body.append(el('p', 'prompt', r.prompt));

    const dl = el('dl');
    field(dl, 'model', r.model);
    field(dl, 'resolution', r.resolution);
    field(dl, 'duration', r.duration !== undefined ? r.duration + ' s' : undefined);
    field(
      dl,
      'error',
      r.errorCode ? r.errorCode + (r.errorMessage ? ': ' + r.errorMessage : '') : undefined,
      'flag',
    );
    field(dl, 'job', r.jobId);
    field(
      dl,
      'reused from',
      r.reusedFrom
        ? r.reusedFrom.batchId + ' row ' + r.reusedFrom.rowId + ' (the same request; no new job)'
        : undefined,
    );
    field(
      dl,
      'attempts',
      r.attempts !== undefined ? r.attempts + ' submit, ' + (r.polls || 0) + ' polls' : undefined,
    );
    if ((r.unknownSubmits || 0) > 0)
      field(
        dl,
        'unknown',
        r.unknownSubmits + ' submit(s) with an unknown outcome: may have been billed more than once',
        'flag',
      );
    if (r.verification) {
      const v = r.verification;
      const got = [
        v.width && v.height ? v.width + 'x' + v.height : '',
        v.durationSeconds !== undefined ? v.durationSeconds.toFixed(1) + ' s' : '',
        v.codec || '',
        v.audio === undefined ? '' : v.audio ? 'audio' : 'no audio',
      ].filter(Boolean);
      field(
        dl,
        'verified',
        (v.ok ? 'ok' : v.problems.join('; ')) + (got.length ? ' (' + got.join(', ') + ')' : ''),
        v.ok ? '' : 'flag',
      );
    }
    field(
      dl,
      'cost',
      typeof r.estimatedCost === 'number' ? money(r.estimatedCost) + ' (estimated)' : undefined,
    );
    field(dl, 'download', r.downloadError, 'flag');
    field(dl, 'finished', when(r.finishedAt));
    body.append(dl);
    if (r.video) {
      body.append(el('p', 'note played', ''));
      if (!r.video.local)
        body.append(el('p', 'note', 'Provider URL: these expire; run `vidbatch download` to keep the file.'));
      else if (r.video.until)
        body.append(
          el(
            'p',
            'note',
            'From the store, by a link valid until ' +
              when(r.video.until) +
              '; `vidbatch download` keeps a copy here.',
          ),
        );
    }
    const actions = el('div', 'actions');
    for (const mark of ['keep', 'redo']) {
      const b = el('button', '', mark === 'keep' ? 'Keep (k)' : 'Redo (r)');
      b.type = 'button';
      b.dataset.mark = mark;
      b.setAttribute('aria-pressed', String(ctx.mark === mark));
      b.addEventListener('click', (e) => {
        e.stopPropagation();
        ctx.onMark(mark);
      });
      actions.append(b);
    }
    body.append(actions);
    c.append(body);
    c.addEventListener('click', ctx.onSelect);
    return c;
  }

  window.reviewCards = { card, el, money, when };
})();
