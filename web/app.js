// attnd's page: a form that asks the API, a grid of the server's heatmaps,
// one head enlarged with readable cells, and BertViz-style lines. The whole
// view lives in the page's URL, so a link restores it.
'use strict';

const DEFAULTS = {
  kind: 'sentence',
  sentence: 'The cat chased the mouse because it was hungry',
  embeddings: '',
  context: '',
  heads: '8', kv_heads: '', d_model: '64', seed: '0',
  mode: 'projected', mask: 'none', positional: 'none', scale: '',
  residual: 'none', out_proj: true,
  d_k: '', d_v: '', d_out: '', dropout: '',
  bias: false, out_bias: false, lowercase: true, special_tokens: false,
  colormap: 'viridis',
  head: '0', batch: '0',
};

// Options sent to the API, with how the form holds them.
const API_TEXT = ['heads', 'kv_heads', 'd_model', 'seed', 'mode', 'mask', 'positional',
  'scale', 'residual', 'd_k', 'd_v', 'd_out', 'dropout'];
const API_BOOL = ['out_proj', 'bias', 'out_bias', 'lowercase', 'special_tokens'];
const INTEGER = { heads: [1, 128], kv_heads: [1, 128], d_model: [1, 4096],
  d_k: [1, 4096], d_v: [1, 4096], d_out: [1, 4096] };

const $ = (id) => document.getElementById(id);
const form = $('controls');
let state = { ...DEFAULTS };
let result = null;       // { data, text, blobs } of the last good answer
let generation = 0;      // answers to older requests are dropped
let inflight = null;     // AbortController of the request in progress
let debounce = 0;

// ------------------------------------------------------------ state

function readForm() {
  const s = { ...state };
  s.kind = form.querySelector('input[name=kind]:checked').value;
  for (const k of ['sentence', 'embeddings', 'context', ...API_TEXT, 'colormap'])
    s[k] = $(k).value.trim();
  for (const k of API_BOOL) s[k] = $(k).checked;
  return s;
}

function writeForm(s) {
  form.querySelector(`input[name=kind][value=${s.kind}]`).checked = true;
  for (const k of ['sentence', 'embeddings', 'context', ...API_TEXT, 'colormap'])
    $(k).value = s[k];
  for (const k of API_BOOL) $(k).checked = s[k];
  showKind(s.kind);
  const advanced = ['d_k', 'd_v', 'd_out', 'dropout', 'bias', 'out_bias', 'lowercase',
    'special_tokens', 'colormap'].some((k) => s[k] !== DEFAULTS[k]);
  if (advanced) $('advanced').open = true;
}

function showKind(kind) {
  for (const el of form.querySelectorAll('[data-kind]')) el.hidden = el.dataset.kind !== kind;
}

// The page's URL: every value that differs from its default.
function pageQuery(s) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(s)) {
    if (v === DEFAULTS[k]) continue;
    if (k === 'embeddings' && s.kind !== 'embeddings') continue;
    if (k === 'sentence' && s.kind !== 'sentence') continue;
    q.set(k, typeof v === 'boolean' ? String(v) : v);
  }
  return q;
}

function stateFromUrl() {
  const s = { ...DEFAULTS };
  const q = new URLSearchParams(location.search);
  for (const [k, v] of q) {
    if (!(k in DEFAULTS)) continue;
    s[k] = typeof DEFAULTS[k] === 'boolean' ? v === 'true' : v;
  }
  if (s.kind !== 'embeddings') s.kind = 'sentence';
  return s;
}

// The API's query parameters (GET) for the computation itself.
function apiQuery(s) {
  const q = new URLSearchParams();
  if (s.kind === 'sentence') q.set('sentence', s.sentence);
  if (s.context) q.set('context', s.context);
  for (const k of API_TEXT) if (s[k] !== '' && s[k] !== DEFAULTS[k]) q.set(k, s[k]);
  if (s.mode === 'basic' && s.heads === DEFAULTS.heads) q.delete('heads');
  for (const k of API_BOOL) if (s[k] !== DEFAULTS[k]) q.set(k, String(s[k]));
  return q;
}

// The same as a JSON body (POST), for embeddings.
function apiBody(s, extra) {
  const body = {};
  for (const [k, v] of apiQuery(s)) {
    if (k === 'context') body.context = { sentence: v };
    else if (API_BOOL.includes(k)) body[k] = v === 'true';
    else if (k in INTEGER || k === 'd_model') body[k] = Number(v);
    else if (k === 'scale' || k === 'dropout') body[k] = Number(v);
    else body[k] = v;
  }
  body.embeddings = JSON.parse(s.embeddings);
  return Object.assign(body, extra);
}

// ------------------------------------------------------- validation

// Checks the browser can make before asking; the server has the last word.
function localErrors(s) {
  const errors = {};
  for (const [k, [lo, hi]] of Object.entries(INTEGER)) {
    const v = s[k];
    if (v === '') continue;
    if (!/^\d+$/.test(v) || Number(v) < lo || Number(v) > hi)
      errors[k] = `${k} (${v}) must be a whole number from ${lo} to ${hi}`;
  }
  if (s.heads === '' && s.mode === 'projected') errors.heads = 'heads is needed';
  if (!/^\d+$/.test(s.seed)) errors.seed = `seed (${s.seed}) must be a whole number`;
  if (s.scale !== '' && !Number.isFinite(Number(s.scale)))
    errors.scale = `scale (${s.scale}) must be a number`;
  if (s.dropout !== '' && !(Number(s.dropout) >= 0 && Number(s.dropout) < 1))
    errors.dropout = `dropout (${s.dropout}) must be at least 0 and below 1`;
  if (s.kind === 'sentence' && !s.sentence) errors.sentence = 'type a sentence';
  if (s.kind === 'embeddings') {
    try {
      const e = JSON.parse(s.embeddings);
      if (!Array.isArray(e)) errors.embeddings = 'embeddings must be a JSON array of rows';
    } catch (err) {
      errors.embeddings = s.embeddings ? `embeddings are not valid JSON: ${err.message}`
        : 'paste or upload an embedding matrix';
    }
  }
  return errors;
}

function showErrors(errors) {
  for (const el of form.querySelectorAll('.error')) el.textContent = '';
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  for (const [field, message] of Object.entries(errors)) {
    const box = $(`${field}-error`) || $('form-error');
    box.textContent = message;
    const input = $(field);
    if (input) {
      input.setAttribute('aria-invalid', 'true');
      input.setAttribute('aria-describedby', box.id);
      const fold = input.closest('details');
      if (fold) fold.open = true;
    }
  }
}

// The field a problem+json pointer names ("/heads", "/context/sentence").
function fieldOfPointer(pointer) {
  const parts = (pointer || '').split('/').filter(Boolean);
  if (!parts.length) return 'form';
  if (parts[0] === 'context') return 'context';
  return $(parts[0]) ? parts[0] : 'form';
}

// ------------------------------------------------------------ fetch

function setBusy(busy) {
  form.setAttribute('aria-busy', String(busy));
  $('results').classList.toggle('busy', busy);
  $('status').textContent = busy ? 'Computing…' : '';
  $('run').disabled = false;
}

async function compute(push) {
  const s = readForm();
  const errors = localErrors(s);
  showErrors(errors);
  if (Object.keys(errors).length) return;
  state = s;
  const url = `${location.pathname}?${pageQuery(s)}`.replace(/\?$/, '');
  if (push) history.pushState(null, '', url);
  else history.replaceState(null, '', url);

  const mine = ++generation;
  if (inflight) inflight.abort();
  inflight = new AbortController();
  const slow = setTimeout(() => { if (mine === generation) setBusy(true); }, 150);
  try {
    const answer = await fetchWeights(s, inflight.signal);
    if (mine !== generation) return;
    if (answer.problem) {
      showErrors({ [fieldOfPointer(answer.problem.pointer)]: answer.problem.detail });
      return;
    }
    result = answer;
    await render(mine);
  } catch (err) {
    if (err.name !== 'AbortError' && mine === generation)
      showErrors({ form: `The server could not be reached: ${err.message}` });
  } finally {
    clearTimeout(slow);
    if (mine === generation) setBusy(false);
  }
}

async function fetchWeights(s, signal) {
  const ret = ['weights', 'mean_weights'];
  let response;
  if (s.kind === 'sentence') {
    const q = apiQuery(s);
    q.set('return', ret.join(','));
    response = await fetch(`/attention?${q}`, { signal });
  } else {
    response = await fetch('/attention', {
      method: 'POST', signal,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(apiBody(s, { return: ret })),
    });
  }
  const text = await response.text();
  if (!response.ok) {
    try { return { problem: JSON.parse(text) }; } catch (e) {
      return { problem: { detail: `HTTP ${response.status}` } };
    }
  }
  return { data: JSON.parse(text), text, blobs: new Map() };
}

// A heatmap's URL: a plain GET for sentences, a blob for embeddings.
async function pngUrl(s, params) {
  if (s.kind === 'sentence') {
    const q = apiQuery(s);
    for (const [k, v] of Object.entries(params)) q.set(k, v);
    q.set('format', 'png');
    return `/attention?${q}`;
  }
  const key = JSON.stringify(params);
  if (result.blobs.has(key)) return result.blobs.get(key);
  const q = new URLSearchParams({ ...params, format: 'png' });
  const r = await fetch(`/attention?${q}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'image/png' },
    body: JSON.stringify(apiBody(s, {})),
  });
  const url = URL.createObjectURL(await r.blob());
  result.blobs.set(key, url);
  return url;
}

// ----------------------------------------------------------- render

function shape() {
  const d = result.data;
  const batched = d.config.batch > 1 || Array.isArray(d.weights[0][0][0]);
  const b = Math.min(Number(state.batch) || 0, d.config.batch - 1);
  const heads = batched ? d.weights[b] : d.weights;
  const mean = batched ? d.mean_weights[b] : d.mean_weights;
  const n = d.config.tokens, m = d.config.context_tokens || n;
  const rows = d.tokens || [...Array(n).keys()].map(String);
  const cols = d.context_tokens || (d.config.context_tokens ? [...Array(m).keys()].map(String) : rows);
  return { heads, mean, n, m, rows, cols, b, count: d.config.heads };
}

function selectedMatrix(sh) {
  return state.head === 'mean' ? sh.mean : sh.heads[Number(state.head)];
}

async function render(mine) {
  const sequences = result.data.config.batch;
  const pick = $('batch');
  $('batch-field').hidden = sequences < 2;
  pick.replaceChildren(...[...Array(sequences).keys()].map((b) => new Option(String(b), String(b))));
  if (!(Number(state.batch) < sequences)) state.batch = '0';
  pick.value = state.batch;
  const sh = shape();
  if (state.head !== 'mean' && !(Number(state.head) < sh.count)) state.head = '0';
  $('results').hidden = false;
  const grid = $('grid');
  const cards = [];
  const common = { batch: String(sh.b), colormap: state.colormap };
  for (let k = 0; k < sh.count; k++) cards.push({ head: String(k), title: `head ${k}` });
  cards.push({ head: 'mean', title: `mean of ${sh.count}` });
  const urls = await Promise.all(cards.map((c) => pngUrl(state, { ...common, head: c.head })));
  if (mine !== generation) return;
  grid.replaceChildren(...cards.map((c, i) => {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'head';
    button.dataset.head = c.head;
    button.setAttribute('aria-pressed', String(c.head === state.head));
    const img = document.createElement('img');
    img.src = urls[i];
    img.alt = `attention weights, ${c.title}`;
    img.loading = 'lazy';
    const caption = document.createElement('span');
    caption.textContent = c.title;
    button.append(img, caption);
    button.addEventListener('click', () => selectHead(c.head));
    return button;
  }));
  await renderSelected(mine);
}

async function selectHead(head) {
  state.head = head;
  history.replaceState(null, '', `${location.pathname}?${pageQuery(state)}`.replace(/\?$/, ''));
  for (const b of $('grid').querySelectorAll('button.head'))
    b.setAttribute('aria-pressed', String(b.dataset.head === head));
  await renderSelected(generation);
}

async function renderSelected(mine) {
  const sh = shape();
  const w = selectedMatrix(sh);
  const title = state.head === 'mean' ? `Mean of ${sh.count} heads` : `Head ${state.head} of ${sh.count}`;
  $('enlarged-title').textContent = title;
  const common = { batch: String(sh.b), colormap: state.colormap, head: state.head };
  const wide = Math.max(sh.n, sh.m);
  const room = Math.min(520, $('matrix').parentElement.clientWidth - 90);
  const cell = Math.max(2, Math.min(48, Math.floor(room / wide)));
  const [bare, labelled, all] = await Promise.all([
    pngUrl(state, { ...common, labels: 'false', cell: String(cell) }),
    pngUrl(state, common),
    pngUrl(state, { batch: String(sh.b), colormap: state.colormap, head: 'all' }),
  ]);
  if (mine !== generation) return;
  drawMatrix(sh, w, bare, cell);
  drawLines(sh, w);
  $('dl-head').href = labelled;
  $('dl-head').download = `attention-head-${state.head}.png`;
  $('dl-grid').href = all;
  const old = $('dl-json').href;
  if (old.startsWith('blob:')) URL.revokeObjectURL(old);
  $('dl-json').href = URL.createObjectURL(new Blob([result.text], { type: 'application/json' }));
}

// The enlarged head: the bare matrix (one cell per weight, cell pixels
// wide), with the tokens laid out around it in HTML, so the cell under
// the pointer is exact.
function drawMatrix(sh, w, src, cell) {
  const box = $('matrix');
  box.style.setProperty('--cell', `${cell}px`);
  box.style.setProperty('--rows', sh.n);
  box.style.setProperty('--cols', sh.m);
  const top = document.createElement('div');
  top.className = 'col-labels';
  for (const t of sh.cols) {
    const s = document.createElement('span');
    s.textContent = t;
    top.append(s);
  }
  const left = document.createElement('div');
  left.className = 'row-labels';
  for (const t of sh.rows) {
    const s = document.createElement('span');
    s.textContent = t;
    left.append(s);
  }
  const frame = document.createElement('div');
  frame.className = 'cells';
  frame.tabIndex = 0;
  frame.setAttribute('role', 'grid');
  frame.setAttribute('aria-label', 'weights: use the arrow keys to read each cell');
  const img = document.createElement('img');
  img.src = src;
  img.alt = `${$('enlarged-title').textContent}, one square per weight`;
  img.width = sh.m * cell;
  img.height = sh.n * cell;
  img.draggable = false;
  const mark = document.createElement('div');
  mark.className = 'mark';
  mark.hidden = true;
  frame.append(img, mark);
  const corner = document.createElement('div');
  corner.className = 'corner';
  box.replaceChildren(corner, top, left, frame);

  let at = null;
  const show = (i, j, x, y) => {
    at = [i, j];
    const text = `${sh.rows[i]} → ${sh.cols[j]}: ${w[i][j]}`;
    $('readout').textContent = text;
    mark.hidden = false;
    mark.style.transform = `translate(${j * cell}px, ${i * cell}px)`;
    const tip = $('tooltip');
    tip.textContent = text;
    tip.hidden = false;
    const r = frame.getBoundingClientRect();
    tip.style.left = `${window.scrollX + r.left + (x ?? (j + 1) * cell) + 12}px`;
    tip.style.top = `${window.scrollY + r.top + (y ?? (i + 1) * cell) + 12}px`;
  };
  const hide = () => { $('tooltip').hidden = true; mark.hidden = true; };
  frame.addEventListener('mousemove', (e) => {
    const r = img.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const j = Math.floor(x / (r.width / sh.m)), i = Math.floor(y / (r.height / sh.n));
    if (i < 0 || j < 0 || i >= sh.n || j >= sh.m) return hide();
    show(i, j, x, y);
  });
  frame.addEventListener('mouseleave', hide);
  frame.addEventListener('blur', hide);
  frame.addEventListener('keydown', (e) => {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (!moves[e.key]) return;
    e.preventDefault();
    if (!at) return show(0, 0); // the first key press lands on the corner
    const [di, dj] = moves[e.key];
    show(Math.min(sh.n - 1, Math.max(0, at[0] + di)), Math.min(sh.m - 1, Math.max(0, at[1] + dj)));
  });
}

// BertViz's head view: queries on the left, keys on the right, one line
// per pair, its opacity the weight relative to the head's largest.
function drawLines(sh, w) {
  const svg = $('lines');
  const ns = 'http://www.w3.org/2000/svg';
  const rowH = 22, width = 360, pad = 12;
  const height = Math.max(sh.n, sh.m) * rowH + 2 * pad;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('height', String(height));
  let max = 0;
  for (const row of w) for (const v of row) max = Math.max(max, v);
  const x1 = 120, x2 = width - 120;
  const lines = document.createElementNS(ns, 'g');
  lines.setAttribute('class', 'pairs');
  for (let i = 0; i < sh.n; i++)
    for (let j = 0; j < sh.m; j++) {
      const l = document.createElementNS(ns, 'line');
      l.setAttribute('x1', x1); l.setAttribute('y1', pad + i * rowH + rowH / 2);
      l.setAttribute('x2', x2); l.setAttribute('y2', pad + j * rowH + rowH / 2);
      l.setAttribute('stroke-opacity', max > 0 ? (w[i][j] / max).toFixed(4) : '0');
      l.dataset.q = i; l.dataset.k = j;
      const title = document.createElementNS(ns, 'title');
      title.textContent = `${sh.rows[i]} → ${sh.cols[j]}: ${w[i][j]}`;
      l.append(title);
      lines.append(l);
    }
  const labels = document.createElementNS(ns, 'g');
  const token = (text, x, y, anchor, side, index) => {
    const t = document.createElementNS(ns, 'text');
    t.setAttribute('x', x); t.setAttribute('y', y);
    t.setAttribute('text-anchor', anchor);
    t.setAttribute('dominant-baseline', 'middle');
    t.setAttribute('tabindex', '0');
    t.setAttribute('class', 'token');
    t.textContent = text.length > 14 ? `${text.slice(0, 13)}…` : text;
    const on = () => {
      svg.classList.add('focus');
      for (const l of lines.children) l.classList.toggle('lit', l.dataset[side] === String(index));
    };
    const off = () => {
      svg.classList.remove('focus');
      for (const l of lines.children) l.classList.remove('lit');
    };
    t.addEventListener('mouseenter', on); t.addEventListener('focus', on);
    t.addEventListener('mouseleave', off); t.addEventListener('blur', off);
    return t;
  };
  sh.rows.forEach((t, i) => labels.append(token(t, x1 - 8, pad + i * rowH + rowH / 2, 'end', 'q', i)));
  sh.cols.forEach((t, j) => labels.append(token(t, x2 + 8, pad + j * rowH + rowH / 2, 'start', 'k', j)));
  svg.replaceChildren(lines, labels);
}

// ----------------------------------------------------------- events

form.addEventListener('submit', (e) => { e.preventDefault(); compute(true); });
form.addEventListener('input', (e) => {
  if (e.target.name === 'kind') showKind(e.target.value);
  clearTimeout(debounce);
  const s = readForm();
  showErrors(localErrors(s));
  debounce = setTimeout(() => compute(false), 450);
});
$('batch').addEventListener('change', (e) => {
  state.batch = e.target.value;
  history.replaceState(null, '', `${location.pathname}?${pageQuery(state)}`.replace(/\?$/, ''));
  render(generation);
});
$('embeddings-file').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  $('embeddings').value = await file.text();
  compute(false);
});
$('share').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(location.href);
    $('status').textContent = 'Link copied.';
  } catch (err) {
    $('status').textContent = `Copy this link: ${location.href}`;
  }
});
window.addEventListener('popstate', () => {
  state = stateFromUrl();
  writeForm(state);
  compute(false);
});

state = stateFromUrl();
writeForm(state);
compute(false);
