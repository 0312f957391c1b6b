// Showing an answer: the grid of every head (a model's every layer and head, or those a sort and filter by a head measure choose), the measures' scatter plot and table, then the selected head enlarged, its lines, the rollout and the downloads.
//
// Everything here is drawn from the one JSON answer in api.js's result:
// choosing a head, a layer, the colours, the hidden tokens, a sort, a
// filter or the plot's measures asks the server nothing.
import { $ } from './dom.js';
import { state, pageUrl } from './state.js';
import { result } from './api.js';
import { drawHeatmap } from './heatmap.js';
import { drawMatrix } from './matrix.js';
import { drawLines } from './lines.js';
import { showDownloads } from './downloads.js';
import { headMeasures, ranking, chooseHeads, isRanked, headName } from './measures.js';
import { drawRankedGrid } from './ranked.js';
import { showMeasures, markMeasures } from './measureview.js';
import { layerWindow, windowsDiffer, layerKind, layerKindTitle, notAllowed } from './windows.js';

// The smallest cell of an enlarged matrix, in pixels: its token labels are
// set as tall as a cell (style.css), and smaller text cannot be read.
const MIN_CELL = 10;

// The answer's view, random weights or model alike:
//   heads(l)  the heads' weights [head][n][m] of layer l (random weights
//             have one layer), mean(l) their mean [n][m]
//   n, m, rows, cols  the shown queries and keys and their token labels
//   count, layers     heads per layer, layers
//   rollout           [n][m] (a model), else null
//   b                 the sequence of the batch in view (random weights)
//   blocked(l)        a causal model's cells no query may attend in layer
//                     l ([n * m] of 0 or 1: a later key, or one outside
//                     that layer's sliding window), else null;
//                     rolloutBlocked the same for the rollout, whose
//                     paths reach past every window
//   kinds             with layers of two kinds (sliding and global), what
//                     each layer is: { window (0: global), text ("sliding
//                     (4)", "global"), title (at length) }, else null
//   kvHeads           a decoder's KV heads (query heads share them in
//                     runs of count / kvHeads), else 0
// With a model and hide_special, the rows and columns of the [CLS] and
// [SEP] the tokenizer added are left out of every matrix (the server's
// special=hide leaves out the same); the weights left are not renormalised.
function shape() {
  const d = result.data;
  if (d.model !== undefined) return focused(modelShape(d), d);
  const batched = d.config.batch > 1 || Array.isArray(d.weights[0][0][0]);
  const b = Math.min(Number(state.batch) || 0, d.config.batch - 1);
  const heads = batched ? d.weights[b] : d.weights;
  const mean = batched ? d.mean_weights[b] : d.mean_weights;
  const n = d.config.tokens, m = d.config.context_tokens || n;
  const rows = d.tokens || [...Array(n).keys()].map(String);
  const cols = d.context_tokens || (d.config.context_tokens ? [...Array(m).keys()].map(String) : rows);
  return { model: false, heads: () => heads, mean: () => mean, n, m, rows, cols, b,
    count: d.config.heads, layers: 1, rollout: null, blocked: () => null, rolloutBlocked: null, kvHeads: 0,
    kinds: null };
}

// Whether the tokenizer put token i in. A decoder's answer says so
// (added: its BOS). An encoder's follows from its form: [CLS] A [SEP] or
// [CLS] A [SEP] B [SEP] has [CLS] first, a [SEP] last and, in a pair, one
// ending A (the last of token type 0); a [SEP] or [MASK] typed in a
// sentence is not one.
function addedByTokenizer(d, i) {
  if (d.added) return d.added[i];
  const n = d.tokens.length, types = d.token_type_ids;
  return i === 0 || i === n - 1 || (types[i] === 0 && types[i + 1] === 1);
}

function modelShape(d) {
  const all = d.tokens.map((t, i) => i);
  const keep = state.hide_special ? all.filter((i) => !addedByTokenizer(d, i)) : all;
  // an input of special tokens alone keeps them: there is nothing else to show
  const idx = keep.length ? keep : all;
  const cut = (w) => (idx.length === all.length ? w : idx.map((i) => idx.map((j) => w[i][j])));
  const rows = idx.map((i) => d.tokens[i]);
  // one mask per window, made when a layer of it is first drawn
  const masks = new Map();
  const blocked = (l) => {
    if (!d.config.causal) return null;
    const w = layerWindow(d.config, l);
    if (!masks.has(w)) masks.set(w, notAllowed(idx, w));
    return masks.get(w);
  };
  const layers = d.config.layers;
  return { model: true, heads: (l) => d.weights[l].map(cut), mean: (l) => cut(d.mean_weights[l]),
    n: idx.length, m: idx.length, rows, cols: rows, b: 0, count: d.config.heads, idx,
    layers, rollout: cut(d.rollout), hidden: idx.length < all.length,
    blocked, rolloutBlocked: d.config.causal ? notAllowed(idx, 0) : null,
    kvHeads: d.config.kv_heads || 0,
    kinds: windowsDiffer(d.config) ? [...Array(layers).keys()].map((l) => ({
      window: layerWindow(d.config, l), text: layerKind(d.config, l), title: layerKindTitle(d.config, l) })) : null };
}

// One token (its index in the answer's tokens) whose row alone every view
// shows, or null for every row.
let focus = null;

export function setFocus(i) {
  clearFocus(i);
  render();
}

// The same without drawing (a new answer is about to be drawn).
export function clearFocus(i = null) {
  focus = i;
  $('focus-note').hidden = focus === null;
}

// The shape sh cut to the focused token's row: one query, every key.
function focused(sh, d) {
  const at = sh.idx.indexOf(focus);
  if (focus === null || at < 0) return sh;
  const row = (w) => [w[at]];
  const cut = (b) => (b ? b.slice(at * sh.m, (at + 1) * sh.m) : null);
  return { ...sh, heads: (l) => sh.heads(l).map(row), mean: (l) => row(sh.mean(l)),
    rollout: sh.rollout ? row(sh.rollout) : null, n: 1, rows: [d.tokens[focus]],
    blocked: (l) => cut(sh.blocked(l)), rolloutBlocked: cut(sh.rolloutBlocked) };
}

// A thumbnail: one pixel per weight, as wide as its place (CSS).
function thumbnail(w, label, blocked = null) {
  const c = document.createElement('canvas');
  drawHeatmap(c, w, state.colormap, blocked);
  c.setAttribute('role', 'img');
  c.setAttribute('aria-label', `attention weights, ${label}`);
  return c;
}

// The thumbnails drawn for what is on screen, by "layer/head", kept while
// they would be drawn the same (the same answer, colours, hidden tokens,
// focused token and sequence of the batch): a sort or a filter moves
// them into place rather than drawing a thousand of them again.
let thumbs = { of: [], tiles: new Map(), layer: new Map() };

function cachedThumbnail(sh, l, h, label) {
  const of = [result, state.colormap, state.hide_special, focus, sh.b];
  if (of.some((x, i) => x !== thumbs.of[i])) thumbs = { of, tiles: new Map(), layer: new Map() };
  const key = `${l}/${h}`;
  let c = thumbs.tiles.get(key);
  if (!c) {
    if (h === 'mean') c = thumbnail(sh.mean(l), label, sh.blocked(l));
    else {
      // a layer's heads are cut (hidden tokens) once for all its tiles
      if (!thumbs.layer.has(l)) thumbs.layer.set(l, sh.heads(l));
      c = thumbnail(thumbs.layer.get(l)[h], label, sh.blocked(l));
    }
    thumbs.tiles.set(key, c);
  }
  c.setAttribute('aria-label', `attention weights, ${label}`);
  return c;
}

// The answer's head measures, for the batch's sequence in view (random
// weights), found once per answer.
let measured = { of: null, b: -1, hm: null };

function measuresOf(sh) {
  if (measured.of !== result || measured.b !== sh.b)
    measured = { of: result, b: sh.b, hm: headMeasures(result.data, sh.b) };
  return measured.hm;
}

// A choice of the view kept in the page's URL.
function keep() {
  history.replaceState(null, '', pageUrl(state));
}

// The hide toggle names what it hides for the model on screen: the
// tokens its tokenizer added to this text ([CLS] and [SEP], a decoder's
// BOS), or says there are none.
function nameHidden() {
  const d = result.data;
  if (d.model === undefined) return;
  const added = [...new Set(d.tokens.filter((t, i) => addedByTokenizer(d, i)))];
  const list = added.length > 1
    ? `${added.slice(0, -1).join(', ')} and ${added[added.length - 1]}` : added[0];
  $('hide_special_text').textContent = added.length
    ? `hide ${list}` : 'hide the tokens the tokenizer adds (none here)';
}

export function render() {
  const sh = shape();
  nameHidden();
  $('results').hidden = false;
  const room = measureRoom(); // before the grid changes, so the page is laid out once
  if (state.head !== 'mean' && !(Number(state.head) < sh.count)) state.head = '0';
  if (!(Number(state.layer) < sh.layers)) state.layer = '0';
  $('values-note').hidden = state.values !== 'value_weighted';
  renderHeads(sh);
  renderSelected(sh, room);
}

// The grid, and with head measures their controls, scatter plot and
// table: the heads the view's sort and filter choose, in their order, or
// every head in the model view when none is chosen.
function renderHeads(sh) {
  const hm = measuresOf(sh);
  const r = ranking(state);
  const chosen = hm ? chooseHeads(hm.list, r) : null;
  if (hm && isRanked(r)) renderRankedGrid(sh, hm, r, chosen);
  else if (sh.model) renderModelGrid(sh);
  else renderHeadGrid(sh);
  showMeasures(hm, r, chosen, measureActions());
  markSelected();
}

const measureActions = () => ({ open: openHead, sortBy, selected: selectedKey() });

// The heads chosen by a measure, a tile each in their order. Past 8 in a
// model they stand in one order, not in rows of layers: the grouping by
// KV head gives way to the sort (a tile's title names its KV head).
function renderRankedGrid(sh, hm, r, chosen) {
  if (sh.model) $('batch-field').hidden = true;
  else showBatch();
  $('results-title').textContent = hm.layers > 1
    ? `Every layer and head (${sh.layers} × ${sh.count}), by a measure` : 'Every head, by a measure';
  drawRankedGrid($('grid'), {
    chosen, measure: r.sort,
    thumbnail: (e) => cachedThumbnail(sh, e.layer, e.head, headName(e)),
    open: (e) => select(String(e.layer), String(e.head)),
  });
  if (sh.model) {
    const range = $('layer');
    range.max = String(sh.layers - 1);
  }
}

// "layer/head" of the enlarged head.
const selectedKey = () => `${state.layer}/${state.head}`;

// A change of the sort or filter (sort, order, top, threshold), the
// plot's measures (plot_x, plot_y) or of what shows them (measures_view):
// kept in the URL and drawn from the answer on screen.
export function setView(changes) {
  const grid = ['sort', 'order', 'top', 'threshold'].some((k) => k in changes && changes[k] !== state[k]);
  Object.assign(state, changes);
  keep();
  if (!result) return;
  if (grid) renderHeads(shape());
  else showMeasures(measuresOf(shape()), ranking(state), null, measureActions());
}

function sortBy(sort, order) {
  setView({ sort, order });
}

// A head opened from the scatter plot or the table. By pointer, the
// enlarged head is brought into view; by key, the focus and the view stay
// where they are and the readout says where it went.
function openHead(e, how) {
  select(String(e.layer), String(e.head));
  if (how === 'pointer') {
    const box = $('enlarged-title').getBoundingClientRect();
    if (box.top > innerHeight || box.bottom < 0) $('enlarged-title').scrollIntoView({ block: 'start' });
  }
}

// The room for the enlarged head and the rollout, in pixels.
function measureRoom() {
  return { head: $('matrix').parentElement.clientWidth - 90, rollout: $('rollout-view').clientWidth - 110 };
}

// Random weights: the batch's sequence in view, chosen when there are
// several.
function showBatch() {
  const sequences = result.data.config.batch;
  const pick = $('batch');
  $('batch-field').hidden = sequences < 2;
  pick.replaceChildren(...[...Array(sequences).keys()].map((b) => new Option(String(b), String(b))));
  if (!(Number(state.batch) < sequences)) state.batch = '0';
  pick.value = state.batch;
}

// Random weights: a card per head, then their mean.
function renderHeadGrid(sh) {
  showBatch();
  $('results-title').textContent = 'Every head';
  const grid = $('grid');
  grid.className = 'heads';
  grid.onkeydown = null;
  grid.style.gridTemplateColumns = '';
  grid.removeAttribute('role');
  grid.removeAttribute('aria-label');
  const cards = [...Array(sh.count).keys()].map((k) => ({ head: String(k), title: `head ${k}`, w: sh.heads(0)[k] }));
  cards.push({ head: 'mean', title: `mean of ${sh.count}`, w: sh.mean(0) });
  grid.replaceChildren(...cards.map((c) => {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'head';
    button.dataset.head = c.head;
    button.setAttribute('aria-pressed', String(c.head === state.head));
    const caption = document.createElement('span');
    caption.textContent = c.title;
    button.append(thumbnail(c.w, c.title), caption);
    button.addEventListener('click', () => select('0', c.head));
    return button;
  }));
}

// A model: BertViz's model view, a row of heads (and their mean) per
// layer. One thumbnail is in the tab order, the selected one; the arrow
// keys move between them, Enter or Space selects. A decoder's query heads
// that share a KV head stand together under its label, a gap between
// groups.
function renderModelGrid(sh) {
  $('batch-field').hidden = true;
  $('results-title').textContent = `Every layer and head (${sh.layers} × ${sh.count})`;
  const grid = $('grid');
  grid.className = 'model-view';
  grid.onkeydown = null;
  grid.setAttribute('role', 'group');
  grid.setAttribute('aria-label', 'layers × heads: arrow keys move, Enter selects');
  const groups = sh.kvHeads > 0 && sh.kvHeads < sh.count ? sh.kvHeads : 0;
  const per = groups ? sh.count / groups : sh.count;
  const kvOf = (h) => Math.floor(h / per);
  // the columns: layer labels, the heads (a gap column before each group
  // but the first), then a gap and the mean when grouped
  const startsGroup = (h) => groups > 0 && h % per === 0 && h > 0;
  const columns = ['max-content'];
  for (let h = 0; h < sh.count; h++) columns.push(...(startsGroup(h) ? ['var(--kv-gap)'] : []), 'minmax(20px, 1fr)');
  if (groups) columns.push('var(--kv-gap)');
  columns.push('minmax(20px, 1fr)');
  grid.style.gridTemplateColumns = columns.join(' ');
  const span = (cls, text = '') => {
    const s = document.createElement('span');
    s.className = cls;
    s.textContent = text;
    return s;
  };
  const gap = () => {
    const s = span('kv-gap');
    s.setAttribute('aria-hidden', 'true');
    return s;
  };
  const cells = [];
  if (groups) {
    cells.push(span('corner'));
    for (let g = 0; g < groups; g++) {
      if (g > 0) cells.push(gap());
      const label = span('kv-label', per > 1 ? `KV head ${g}` : '');
      label.title = `heads ${g * per}–${(g + 1) * per - 1} share KV head ${g}`;
      label.style.gridColumn = `span ${per}`;
      cells.push(label);
    }
    cells.push(gap(), span('corner'));
  }
  cells.push(span('corner'));
  // past 8 heads a column is too narrow for "head 13": the number alone
  const headLabel = (h) => (sh.count > 8 ? String(h) : `head ${h}`);
  for (let h = 0; h <= sh.count; h++) {
    if (h < sh.count && startsGroup(h)) cells.push(gap());
    if (h === sh.count && groups) cells.push(gap());
    const top = span('axis', h < sh.count ? headLabel(h) : 'mean');
    if (h < sh.count && sh.count > 8) top.title = `head ${h}`;
    cells.push(top);
  }
  for (let l = 0; l < sh.layers; l++) {
    const axis = span('axis', `layer ${l}`);
    // layers of two kinds: which slide (and by how much) and which are global
    if (sh.kinds) {
      const kind = span(`layer-kind ${sh.kinds[l].window ? 'sliding' : 'global'}`, sh.kinds[l].text);
      axis.append(kind);
      axis.title = sh.kinds[l].title;
    }
    cells.push(axis);
    for (let h = 0; h <= sh.count; h++) {
      if (h < sh.count && startsGroup(h)) cells.push(gap());
      if (h === sh.count && groups) cells.push(gap());
      const head = h < sh.count ? String(h) : 'mean';
      const label = h === sh.count ? `layer ${l}, mean of ${sh.count} heads`
        : groups ? `layer ${l}, head ${h} (KV head ${kvOf(h)})` : `layer ${l}, head ${h}`;
      const button = document.createElement('button');
      button.type = 'button';
      button.className = h < sh.count && groups && kvOf(h) % 2 === 1 ? 'thumb kv-odd' : 'thumb';
      button.dataset.layer = String(l);
      button.dataset.head = head;
      button.title = label;
      button.append(cachedThumbnail(sh, l, head, label));
      button.addEventListener('click', () => select(String(l), head));
      button.addEventListener('keydown', (e) => moveFocus(e, l, h, sh));
      cells.push(button);
    }
  }
  grid.replaceChildren(...cells);
  const range = $('layer');
  range.max = String(sh.layers - 1);
  range.value = state.layer;
}

function moveFocus(e, l, h, sh) {
  const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
    Home: [0, -h], End: [0, sh.count - h] };
  if (!moves[e.key]) return;
  e.preventDefault();
  const [dl, dh] = moves[e.key];
  const nl = Math.min(sh.layers - 1, Math.max(0, l + dl)), nh = Math.min(sh.count, Math.max(0, h + dh));
  const head = nh < sh.count ? String(nh) : 'mean';
  const next = $('grid').querySelector(`button[data-layer="${nl}"][data-head="${head}"]`);
  for (const b of $('grid').querySelectorAll('button.thumb')) b.tabIndex = b === next ? 0 : -1;
  next.focus();
}

// aria-pressed on the selected thumbnail (in the tab order: among tiles
// chosen by a measure, the first when the selected one is not there), the
// layer control on its layer, and the selected head's point and row.
function markSelected() {
  let inOrder = null;
  const roving = $('grid').querySelectorAll('button.thumb, button.tile');
  for (const b of $('grid').querySelectorAll('button')) {
    const on = b.dataset.head === state.head && (b.dataset.layer ?? '0') === state.layer;
    b.setAttribute('aria-pressed', String(on));
    if (b.classList.contains('thumb') || b.classList.contains('tile')) {
      b.tabIndex = -1;
      if (on) inOrder = b;
    }
  }
  if (inOrder ?? roving[0]) (inOrder ?? roving[0]).tabIndex = 0;
  $('layer').value = state.layer;
  $('layer-out').textContent = `${state.layer} of ${Number($('layer').max) + 1}`;
  markMeasures(selectedKey());
}

function select(layer, head) {
  state.layer = layer;
  state.head = head;
  keep();
  markSelected();
  renderSelected(shape(), measureRoom());
}

// The layer control: the same head in another layer.
export function selectLayer(layer) {
  select(layer, state.head);
}

// The batch's sequence in view (random weights).
export function selectBatch(b) {
  state.batch = b;
  keep();
  render();
}

function renderSelected(sh, room) {
  const l = Number(state.layer);
  const w = state.head === 'mean' ? sh.mean(l) : sh.heads(l)[Number(state.head)];
  const which = state.head === 'mean' ? `Mean of ${sh.count} heads` : `Head ${state.head} of ${sh.count}`;
  const kind = !sh.kinds ? '' : sh.kinds[l].window ? ` (sliding, window ${sh.kinds[l].window})` : ' (global)';
  const title = sh.model ? `Layer ${l}${kind}, ${which.charAt(0).toLowerCase()}${which.slice(1)}` : which;
  $('enlarged-title').textContent = title;
  // cells fill the room, but no smaller than a readable token label: a
  // long input scrolls inside its panel rather than shrinking its labels
  const wide = Math.max(sh.n, sh.m);
  const fit = (px) => Math.max(MIN_CELL, Math.min(48, Math.floor(Math.min(520, px) / wide)));
  const cell = fit(room.head);
  drawMatrix({ box: $('matrix'), readout: $('readout'), label: title, blocked: sh.blocked(l) }, sh, w, cell,
    state.colormap);
  drawLines(sh, w);
  if (sh.rollout) {
    drawMatrix({ box: $('rollout-matrix'), readout: $('rollout-readout'), label: 'rollout',
      blocked: sh.rolloutBlocked }, sh,
      sh.rollout, fit(room.rollout), state.colormap);
  }
  // the server's PNGs draw what the page draws: without the special
  // tokens when they are hidden here
  const image = !sh.model ? { batch: String(sh.b), colormap: state.colormap }
    : sh.hidden ? { colormap: state.colormap, special: 'hide' } : { colormap: state.colormap };
  showDownloads({
    head: [sh.model ? { ...image, layer: state.layer, head: state.head } : { ...image, head: state.head },
      sh.model ? `attention-layer-${state.layer}-head-${state.head}.png` : `attention-head-${state.head}.png`],
    grid: [sh.model ? { ...image, view: 'model' } : { ...image, head: 'all' },
      sh.model ? 'attention-model.png' : 'attention-grid.png'],
    rollout: sh.model ? [{ ...image, view: 'rollout' }, 'attention-rollout.png'] : null,
  }, result.text);
}
