// "Does it matter?": a decoder's clean and corrupted prompts, their token counts as they are typed, activation patching (POST /patch, its progress streamed as Server-Sent Events) drawn as a diverging heatmap, and a head's attention on both prompts.
import { $ } from './dom.js';
import { isDecoder } from './models.js';
import { drawMatrix } from './matrix.js';
import { readSse } from './sse.js';
import { drawSigned, divergingCss, divergingGradient, darkUnder, extentAbout } from './diverging.js';
import { runDla, clearDla } from './dla.js';
import { FIELDS, tokenText, short, showPanelErrors, problemOf } from './panel.js';
import { layerWindow, notAllowed } from './windows.js';

let model = ''; // the model in view ('' for none)
let running = null; // the AbortController of the patch in progress
let shown = null; // { body, answer } of the effects on screen
const counting = { clean: null, corrupted: null }; // each prompt's count request in flight
const counts = { clean: null, corrupted: null }; // { text, n } of each prompt, once known
const countTimers = { clean: 0, corrupted: 0 }; // typing counts once it pauses

// The metric as the panel's fields give it (texts as typed: a leading
// space is part of a token).
function metric() {
  const kind = $('patch-kind').value;
  if (kind === 'logprob') return { kind, target: $('patch-target').value };
  return { kind, correct: $('patch-correct').value, incorrect: $('patch-incorrect').value };
}

function showMetricFields() {
  const kind = $('patch-kind').value;
  for (const el of $('patch-form').querySelectorAll('[data-metric]')) el.hidden = el.dataset.metric !== kind;
}

// --------------------------------------------------------- token counts

// Asks how many tokens the prompt `which` makes (POST /attention with
// return [], which answers the tokens alone), and shows it.
async function count(which) {
  const text = $(`patch-${which}`).value;
  const out = $(`patch-${which}-count`);
  counting[which]?.abort();
  counts[which] = null;
  if (!model || !isDecoder(model)) return;
  if (text === '') {
    delete out.dataset.count;
    out.textContent = 'type a prompt';
    showMismatch();
    return;
  }
  const ask = new AbortController();
  counting[which] = ask;
  try {
    const r = await fetch('/attention', {
      method: 'POST', signal: ask.signal,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model, sentence: text, return: [] }),
    });
    if (!r.ok) {
      const p = await r.json().catch(() => ({ detail: `HTTP ${r.status}` }));
      delete out.dataset.count;
      out.textContent = p.detail;
      out.classList.add('bad');
      return;
    }
    const d = await r.json();
    counts[which] = { text, n: d.tokens.length, tokens: d.tokens };
    out.classList.remove('bad');
    const chips = d.tokens.map((t) => Object.assign(document.createElement('span'),
      { className: 'tok', textContent: tokenText(t).replace(/ /g, '␣') }));
    out.replaceChildren(`${d.tokens.length} tokens: `, ...chips);
    out.dataset.count = String(d.tokens.length);
  } catch (err) {
    if (err.name !== 'AbortError') out.textContent = `The server could not be reached: ${err.message}`;
  } finally {
    if (counting[which] === ask) counting[which] = null;
    showMismatch();
  }
}

// The warning when both counts are known and differ.
function showMismatch() {
  const a = counts.clean, b = counts.corrupted;
  const warn = $('patch-mismatch');
  const differ = a && b && a.n !== b.n;
  warn.hidden = !differ;
  warn.textContent = differ
    ? `The clean prompt is ${a.n} tokens and the corrupted ${b.n}: patching swaps activations position by `
      + 'position, so both must be the same length.'
    : '';
  $('patch-corrupted').classList.toggle('mismatch', Boolean(differ));
}

function countSoon(which) {
  clearTimeout(countTimers[which]);
  counting[which]?.abort();
  counts[which] = null;
  const mine = $(`patch-${which}-count`);
  mine.textContent = 'counting…';
  delete mine.dataset.count;
  countTimers[which] = setTimeout(() => count(which), 300);
}

// ---------------------------------------------------------------- running

function setRunning(on) {
  $('patch-cancel').hidden = !on;
  $('patch-progress').hidden = !on;
  $('patch-form').setAttribute('aria-busy', String(on));
  if (on) {
    $('patch-progress').removeAttribute('value'); // indeterminate until the first batch
    $('patch-progress').removeAttribute('max');
  }
}

async function run(e) {
  e?.preventDefault();
  if (!model || !isDecoder(model)) return;
  const body = {
    model, clean: $('patch-clean').value, corrupted: $('patch-corrupted').value, metric: metric(),
    over: $('patch-over').value, direction: $('patch-direction').value,
  };
  const local = {};
  if (!body.clean) local.clean = 'type the clean prompt';
  if (!body.corrupted) local.corrupted = 'type the corrupted prompt';
  for (const k of ['correct', 'incorrect', 'target'])
    if (k in body.metric && body.metric[k] === '') local[k] = 'name one token of the model';
  showPanelErrors(local);
  if (Object.keys(local).length) return;
  running?.abort();
  const mine = new AbortController();
  running = mine;
  // the heads' direct attribution, for the same prompt and answer, meanwhile
  runDla(model, body.clean, body.metric);
  setRunning(true);
  $('patch-status').textContent = 'Patching…';
  try {
    const response = await fetch('/patch', {
      method: 'POST', signal: mine.signal,
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      showPanelErrors(await problemOf(response, 'patch-form'));
      $('patch-status').textContent = '';
      return;
    }
    let answered = false;
    await readSse(response, (event, data) => {
      if (running !== mine) return;
      if (event === 'progress') {
        const bar = $('patch-progress');
        bar.max = data.of;
        bar.value = data.done;
        $('patch-status').textContent = `${data.done} of ${data.of} patched runs`;
      } else if (event === 'result') {
        answered = true;
        shown = { body, answer: data };
        drawEffects();
        $('patch-status').textContent = `Done: ${data.runs} patched runs.`;
      } else if (event === 'error') {
        answered = true;
        showPanelErrors({ form: data.detail }, 'patch-form');
        $('patch-status').textContent = '';
      }
    });
    if (!answered && running === mine) $('patch-status').textContent = 'The server ended the stream without an answer.';
  } catch (err) {
    if (err.name === 'AbortError') return;
    if (running === mine) {
      showPanelErrors({ form: `The server could not be reached: ${err.message}` }, 'patch-form');
      $('patch-status').textContent = '';
    }
  } finally {
    if (running === mine) {
      running = null;
      setRunning(false);
    }
  }
}

// Stops the patch in progress: the fetch is aborted, the server sees its
// client go and stops.
function cancel() {
  if (!running) return;
  running.abort();
  running = null;
  setRunning(false);
  $('patch-status').textContent = 'Cancelled; the server stopped its work.';
}

// ---------------------------------------------------------------- effects

// What a patched run's effect is, and the value where nothing changed:
// (patched − corrupted) / (clean − corrupted) is 0 for a denoising patch
// that moves nothing, 1 for a noising one.
function baseline(direction) {
  return direction === 'noise' ? 1 : 0;
}

function describeMetric(m) {
  const q = (t) => `“${tokenText(t)}”`;
  if (m.kind === 'logprob') return `log p(${q(m.target_text)})`;
  return `logit(${q(m.correct_text)}) − logit(${q(m.incorrect_text)})`;
}

function drawEffects() {
  const a = shown.answer;
  const box = $('patch-effects');
  $('patch-result').hidden = false;
  const centre = baseline(a.direction);
  const what = a.direction === 'noise'
    ? 'the corrupted run\'s activation patched into the clean run: 1 is no change, 0 takes the whole difference away'
    : 'the clean run\'s activation patched into the corrupted run: 0 is no change, 1 brings the whole difference back';
  $('patch-summary').textContent = `${describeMetric(a.metric)} at the last position: clean ${short(a.metric.clean)}, `
    + `corrupted ${short(a.metric.corrupted)}. Each cell is (patched − corrupted) / (clean − corrupted), with `
    + `${what}. White is ${centre}, red above it, blue below.`;
  const warnings = (a.warnings || []).map((w) => w.detail).join(' ');
  if (a.effects === null) {
    box.replaceChildren(Object.assign(document.createElement('p'), { className: 'warning', textContent: warnings || 'No effects.' }));
    $('patch-ramp').parentElement.hidden = true;
    return;
  }
  const flat = flatten(a.effects);
  const extent = extentAbout(flat, centre);
  $('patch-ramp').parentElement.hidden = false;
  $('patch-ramp').style.background = divergingGradient();
  $('patch-low').textContent = short(centre - extent);
  $('patch-high').textContent = short(centre + extent);
  $('patch-readout').textContent = warnings || '\u00a0';
  const tokens = a.clean.tokens.map((t, i) => {
    const c = a.corrupted.tokens[i];
    return c === t ? tokenText(t) : `${tokenText(t)} / ${tokenText(c)}`;
  });
  if (a.over === 'heads') return drawHeadGrid(box, a.effects, centre, extent);
  let rows, w, head = null;
  if (a.over === 'heads_positions') {
    rows = []; w = []; head = [];
    a.effects.forEach((layer, l) => layer.forEach((row, h) => {
      rows.push(`L${l}·H${h}`); w.push(row); head.push([l, h]);
    }));
  } else if (a.over === 'residual') {
    rows = a.effects.map((_, l) => `layer ${l} in`);
    w = a.effects;
  } else {
    rows = []; w = [];
    a.effects.attn.forEach((row, l) => {
      rows.push(`L${l} attention`, `L${l} MLP`);
      w.push(row, a.effects.mlp[l]);
    });
  }
  const sh = { n: rows.length, m: tokens.length, rows, cols: tokens };
  const cell = Math.max(10, Math.min(28, Math.floor(560 / Math.max(sh.m, 1))));
  const what2 = { heads_positions: 'a head at a position', residual: 'the residual stream entering a layer at a position',
    layers: 'a layer\'s output at a position' }[a.over];
  drawMatrix({
    box, readout: $('patch-readout'), label: `effects of patching ${what2}`,
    paint: (canvas, values) => drawSigned(canvas, values, centre, extent),
    describe: (i, j) => `${rows[i]} at ${j} (${tokens[j]}): ${w[i][j]}`,
    pick: head ? (i) => openHead(head[i][0], head[i][1]) : null,
  }, sh, w, cell, null);
  box.classList.add('matrix');
  box.dataset.over = a.over;
}

function flatten(e) {
  if (Array.isArray(e)) return e.flat(Infinity);
  return [...flatten(e.attn), ...flatten(e.mlp)];
}

// The layer × head effects as a grid of buttons, one a head, coloured on
// the scale; one of them is in the tab order, the arrow keys, Home and
// End move between them, and Enter, Space or a click opens the head.
function drawHeadGrid(box, effects, centre, extent) {
  box.classList.remove('matrix');
  box.dataset.over = 'heads';
  const layers = effects.length, heads = effects[0]?.length ?? 0;
  const grid = document.createElement('div');
  grid.className = 'effect-grid';
  grid.setAttribute('role', 'group');
  grid.setAttribute('aria-label', `effects of patching each head: ${layers} layers × ${heads} heads; `
    + 'arrow keys move, Enter opens the head on both prompts');
  grid.style.setProperty('--heads', heads);
  const withText = heads <= 16;
  grid.append(Object.assign(document.createElement('span'), { className: 'axis' }));
  for (let h = 0; h < heads; h++)
    grid.append(Object.assign(document.createElement('span'), { className: 'axis', textContent: heads > 8 ? String(h) : `head ${h}` }));
  const cells = [];
  effects.forEach((row, l) => {
    grid.append(Object.assign(document.createElement('span'), { className: 'axis row', textContent: `layer ${l}` }));
    row.forEach((v, h) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'effect';
      const t = (v - centre) / extent;
      b.style.background = divergingCss(t);
      b.classList.toggle('dark', darkUnder(t));
      b.dataset.layer = String(l);
      b.dataset.head = String(h);
      b.dataset.value = String(v);
      b.textContent = withText ? short(v) : '';
      b.title = `layer ${l}, head ${h}: ${v}`;
      b.setAttribute('aria-label', `layer ${l}, head ${h}: effect ${short(v)}`);
      b.tabIndex = l === 0 && h === 0 ? 0 : -1;
      b.addEventListener('click', () => { rove(b); openHead(l, h); });
      b.addEventListener('focus', () => { $('patch-readout').textContent = b.title; });
      cells.push(b);
      grid.append(b);
    });
  });
  const rove = (to) => {
    for (const c of cells) c.tabIndex = c === to ? 0 : -1;
  };
  grid.addEventListener('keydown', (e) => {
    const i = cells.indexOf(document.activeElement);
    if (i < 0) return;
    const l = Math.floor(i / heads), h = i % heads;
    const to = {
      ArrowRight: [l, Math.min(heads - 1, h + 1)], ArrowLeft: [l, Math.max(0, h - 1)],
      ArrowDown: [Math.min(layers - 1, l + 1), h], ArrowUp: [Math.max(0, l - 1), h],
      Home: [e.ctrlKey ? 0 : l, 0], End: [e.ctrlKey ? layers - 1 : l, heads - 1],
    }[e.key];
    if (!to) return;
    e.preventDefault();
    const c = cells[to[0] * heads + to[1]];
    rove(c);
    c.focus();
  });
  box.replaceChildren(grid);
}

// ------------------------------------------------------- a head's patterns

let opening = null; // the AbortController of the patterns being asked

// Layer l, head h's weights on the clean and the corrupted prompt of the
// effects on screen, side by side: POST /attention with layer l on each.
async function openHead(l, h) {
  if (!shown) return;
  const { body } = shown;
  opening?.abort();
  const mine = new AbortController();
  opening = mine;
  const view = $('patch-heads');
  view.hidden = false;
  $('patch-heads-title').textContent = `Layer ${l}, head ${h} on both prompts`;
  $('patch-heads-error').textContent = '';
  for (const p of ['clean', 'corrupted']) $(`patch-pattern-${p}`).replaceChildren();
  const ask = (sentence) => fetch('/attention', {
    method: 'POST', signal: mine.signal,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: body.model, sentence, layer: l, return: ['weights'] }),
  }).then(async (r) => (r.ok ? r.json() : Promise.reject(new Error(
    (await r.json().catch(() => ({}))).detail || `HTTP ${r.status}`))));
  try {
    const [clean, corrupted] = await Promise.all([ask(body.clean), ask(body.corrupted)]);
    if (opening !== mine) return;
    for (const [p, d] of [['clean', clean], ['corrupted', corrupted]]) {
      const w = d.weights[h];
      const labels = d.tokens.map(tokenText);
      const sh = { n: labels.length, m: labels.length, rows: labels, cols: labels };
      const cell = Math.max(10, Math.min(24, Math.floor(360 / Math.max(sh.n, 1))));
      $(`patch-pattern-${p}-title`).textContent = `${p}: layer ${l}, head ${h}`;
      const box = $(`patch-pattern-${p}`);
      box.dataset.layer = String(l);
      box.dataset.head = String(h);
      drawMatrix({ box, readout: $(`patch-pattern-${p}-readout`), label: `${p} prompt, layer ${l}, head ${h}`,
        blocked: notAllowed([...Array(sh.n).keys()], layerWindow(d.config, l)) },
      sh, w, cell, $('colormap').value || 'viridis');
    }
    view.scrollIntoView?.({ block: 'nearest' });
  } catch (err) {
    if (err.name !== 'AbortError' && opening === mine) $('patch-heads-error').textContent = err.message;
  }
}

// ------------------------------------------------------------ the panel

function reset() {
  running?.abort();
  running = null;
  opening?.abort();
  setRunning(false);
  shown = null;
  $('patch-status').textContent = '';
  $('patch-result').hidden = true;
  $('patch-heads').hidden = true;
  showPanelErrors({});
  clearDla();
}

// Shows the panel for the model chosen: its controls with a decoder, a
// word on why not with an encoder, nothing without a model.
export function showPatching(name) {
  const decoder = Boolean(name) && isDecoder(name);
  $('patch-view').hidden = !name;
  $('patch-encoder').hidden = !name || decoder;
  $('patch-encoder-name').textContent = name ? `“${name}”` : '';
  $('patch-form').hidden = !decoder;
  if (name === model) return;
  model = name;
  reset();
  for (const p of ['clean', 'corrupted']) {
    $(`patch-${p}-count`).textContent = '';
    counts[p] = null;
  }
  showMismatch();
  if (decoder) {
    count('clean');
    count('corrupted');
  }
}

export function setUpPatching() {
  for (const id of FIELDS) {
    const el = $(`patch-${id}`);
    el.dataset.describedby = el.getAttribute('aria-describedby') || '';
  }
  $('patch-form').addEventListener('submit', run);
  $('patch-cancel').addEventListener('click', cancel);
  $('patch-kind').addEventListener('change', showMetricFields);
  for (const p of ['clean', 'corrupted']) $(`patch-${p}`).addEventListener('input', () => countSoon(p));
  showMetricFields();
}
