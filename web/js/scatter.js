// The scatter plot of every head on two measures: an SVG of one point per head, read by pointer or keyboard, a point opening its head.
import { $ } from './dom.js';
import { colormapTable } from './colormap.js';
import { measureName, formatValue, headName } from './measures.js';

const SVG = 'http://www.w3.org/2000/svg';
// The plot's own units (the viewBox): CSS scales it to its box.
const W = 600, H = 420;
const M = { left: 64, right: 16, top: 14, bottom: 58 };
const PW = W - M.left - M.right, PH = H - M.top - M.bottom;
// How near (in CSS pixels) the pointer must be to a point to name it.
const REACH = 12;

// "Nice" tick values over [lo, hi]: steps of 1, 2 or 5 times a power of
// ten, about count of them, each rounded to what it is (0.3, not
// 0.30000000000000004), so that its label is exact.
function ticks(lo, hi, count) {
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => raw <= s);
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    out.push(Math.abs(t) < step * 1e-9 ? 0 : Number(t.toPrecision(12)));
  return out;
}

// The axis of one measure over values: its data range, and the domain
// drawn (the range with a margin, or ±0.5 around a single value).
function axis(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  const pad = hi > lo ? (hi - lo) * 0.04 : Math.max(0.5, Math.abs(lo) * 0.1);
  return { lo, hi, d0: lo - pad, d1: hi + pad };
}

function el(name, attrs = {}, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// The plot in box: state for the pointer and the keys, kept across
// draws of the same heads so that the point in hand stays in hand.
let plot = null;

// Draws every head of list (headMeasures().list) at (its x measure, its y
// measure) into box, with readout for what is read.
//   chosen    the heads the filter keeps (a Set of "layer/head"), or null
//             when none is active: the others are drawn faint
//   layers    the layers (a point's colour is its layer's, in colormap)
//   selected  "layer/head" of the enlarged head, ringed
//   open(e)   opens head e (a list entry); how: 'pointer' or 'key'
// A head without a value on either measure is left out, and the readout
// says how many.
export function drawScatter(box, readout, { list, x, y, chosen, layers, colormap, selected, open }) {
  const shown = list.filter((e) => e.v[x] !== null && e.v[y] !== null);
  const ax = axis(shown.map((e) => e.v[x])), ay = axis(shown.map((e) => e.v[y]));
  const px = (v) => M.left + ((v - ax.d0) / (ax.d1 - ax.d0)) * PW;
  const py = (v) => M.top + PH - ((v - ay.d0) / (ay.d1 - ay.d0)) * PH;
  const wasFocused = plot && document.activeElement === plot.svg;
  const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, class: 'scatter-plot', tabindex: 0, role: 'group',
    'aria-roledescription': 'scatter plot',
    'aria-label': `${shown.length} heads, ${measureName(x)} across, ${measureName(y)} up: the arrow `
      + `keys move between them (left and right in order of ${measureName(x)}, up and down in order `
      + `of ${measureName(y)}), Enter opens one` });
  const frame = el('g', { class: 'axes' });
  frame.append(el('rect', { x: M.left, y: M.top, width: PW, height: PH, class: 'frame' }));
  if (shown.length) {
    for (const t of ticks(ax.d0, ax.d1, 5)) {
      const at = px(t);
      frame.append(el('line', { x1: at, x2: at, y1: M.top + PH, y2: M.top + PH + 5, class: 'tick x-tick' }),
        el('text', { x: at, y: M.top + PH + 18, 'text-anchor': 'middle', class: 'tick-label x-tick' },
          String(t)));
    }
    for (const t of ticks(ay.d0, ay.d1, 5)) {
      const at = py(t);
      frame.append(el('line', { x1: M.left - 5, x2: M.left, y1: at, y2: at, class: 'tick y-tick' }),
        el('text', { x: M.left - 8, y: at + 4, 'text-anchor': 'end', class: 'tick-label y-tick' },
          String(t)));
    }
  }
  const range = (a) => (shown.length ? `${formatValue(a.lo)} to ${formatValue(a.hi)}` : 'no values');
  frame.append(
    el('text', { x: M.left + PW / 2, y: H - 12, 'text-anchor': 'middle', class: 'axis-name', id: 'scatter-x-name' },
      `${measureName(x)}: ${range(ax)}`),
    el('text', { x: 0, y: 0, 'text-anchor': 'middle', class: 'axis-name', id: 'scatter-y-name',
      transform: `translate(16 ${M.top + PH / 2}) rotate(-90)` },
      `${measureName(y)}: ${range(ay)}`));
  svg.append(frame);

  // the points: those a filter leaves out first, so the kept ones lie on top
  const table = colormapTable(colormap);
  const colour = (l) => {
    const i = (layers > 1 ? Math.round((l / (layers - 1)) * 255) : 128) * 3;
    return `rgb(${table[i]} ${table[i + 1]} ${table[i + 2]})`;
  };
  const key = (e) => `${e.layer}/${e.head}`;
  const points = el('g', { class: 'points' });
  const kept = (e) => !chosen || chosen.has(key(e));
  const at = shown.map((e) => [px(e.v[x]), py(e.v[y])]);
  for (const pass of [false, true]) {
    shown.forEach((e, i) => {
      if (kept(e) !== pass) return;
      points.append(el('circle', { cx: at[i][0].toFixed(2), cy: at[i][1].toFixed(2), r: pass ? 4 : 3,
        fill: colour(e.layer), class: pass ? 'point' : 'point out',
        'data-layer': e.layer, 'data-head': e.head, 'data-i': i }));
    });
  }
  svg.append(points);
  const ring = el('circle', { r: 7, class: 'selected-ring' });
  const mark = el('circle', { r: 9, class: 'current-ring' });
  ring.style.display = mark.style.display = 'none';
  svg.append(ring, mark);
  box.replaceChildren(svg);

  // the keys' orders: along x (ties by y, then layer and head), along y
  const byLayer = (i, j) => shown[i].layer - shown[j].layer || shown[i].head - shown[j].head;
  const xOrder = shown.map((e, i) => i).sort((i, j) => shown[i].v[x] - shown[j].v[x] || shown[i].v[y] - shown[j].v[y] || byLayer(i, j));
  const yOrder = shown.map((e, i) => i).sort((i, j) => shown[i].v[y] - shown[j].v[y] || shown[i].v[x] - shown[j].v[x] || byLayer(i, j));
  const xPos = new Int32Array(shown.length), yPos = new Int32Array(shown.length);
  xOrder.forEach((i, k) => { xPos[i] = k; });
  yOrder.forEach((i, k) => { yPos[i] = k; });
  const index = new Map(shown.map((e, i) => [key(e), i]));

  const missing = list.length - shown.length;
  const idle = missing ? `${missing} of ${list.length} heads have no value on these measures and are not drawn.` : '\u00a0';
  const previous = plot && plot.x === x && plot.y === y ? plot.current : null;
  plot = { svg, x, y, current: previous !== null && index.has(previous) ? previous : null };
  readout.textContent = idle;

  const describe = (e) => `${headName(e)}: ${measureName(x)} ${formatValue(e.v[x])}, ${measureName(y)} ${formatValue(e.v[y])}`;
  const show = (i, client) => {
    const e = shown[i];
    plot.current = key(e);
    mark.setAttribute('cx', at[i][0]);
    mark.setAttribute('cy', at[i][1]);
    mark.style.display = '';
    const text = describe(e);
    readout.textContent = text;
    const tip = $('tooltip');
    tip.textContent = text;
    tip.hidden = false;
    const r = svg.getBoundingClientRect(), s = r.width / W;
    const [cx, cy] = client ?? [r.left + at[i][0] * s, r.top + at[i][1] * s];
    tip.style.left = `${window.scrollX + cx + 12}px`;
    tip.style.top = `${window.scrollY + cy + 12}px`;
  };
  const hide = () => {
    $('tooltip').hidden = true;
    mark.style.display = 'none';
  };
  // the point nearest the pointer, within REACH pixels, or -1
  const nearest = (ev) => {
    const r = svg.getBoundingClientRect(), s = r.width / W;
    const ux = (ev.clientX - r.left) / s, uy = (ev.clientY - r.top) / s;
    let best = -1, bestD = (REACH / s) ** 2;
    for (let i = 0; i < at.length; i++) {
      const dx = at[i][0] - ux, dy = at[i][1] - uy, d = dx * dx + dy * dy;
      if (d <= bestD) { best = i; bestD = d; }
    }
    return best;
  };
  svg.addEventListener('mousemove', (ev) => {
    const i = nearest(ev);
    if (i < 0) {
      hide();
      readout.textContent = idle;
      svg.style.cursor = '';
      return;
    }
    svg.style.cursor = 'pointer';
    show(i, [ev.clientX, ev.clientY]);
  });
  svg.addEventListener('mouseleave', hide);
  svg.addEventListener('click', (ev) => {
    const i = nearest(ev);
    if (i >= 0) open(shown[i], 'pointer');
  });
  // the first point a key press lands on: the one in hand, else the
  // enlarged head, else the first along x
  const start = () => {
    if (plot.current !== null && index.has(plot.current)) return index.get(plot.current);
    if (index.has(selected)) return index.get(selected);
    return xOrder[0];
  };
  svg.addEventListener('focus', () => { if (shown.length) show(start()); });
  svg.addEventListener('blur', hide);
  svg.addEventListener('keydown', (ev) => {
    if (!shown.length) return;
    const i = start();
    const step = {
      ArrowRight: () => xOrder[Math.min(shown.length - 1, xPos[i] + 1)],
      ArrowLeft: () => xOrder[Math.max(0, xPos[i] - 1)],
      ArrowUp: () => yOrder[Math.min(shown.length - 1, yPos[i] + 1)],
      ArrowDown: () => yOrder[Math.max(0, yPos[i] - 1)],
      Home: () => xOrder[0],
      End: () => xOrder[shown.length - 1],
    }[ev.key];
    if (step) {
      ev.preventDefault();
      show(step());
    } else if (ev.key === 'Enter' || ev.key === ' ') {
      ev.preventDefault();
      show(i);
      open(shown[i], 'key');
    }
  });
  markScatter(selected);
  if (wasFocused) svg.focus();
}

// Rings the enlarged head's point ("layer/head"), without drawing again.
export function markScatter(selected) {
  if (!plot) return;
  const ring = plot.svg.querySelector('.selected-ring');
  const [l, h] = selected.split('/');
  const p = plot.svg.querySelector(`circle.point[data-layer="${l}"][data-head="${h}"]`);
  ring.style.display = p ? '' : 'none';
  if (p) {
    ring.setAttribute('cx', p.getAttribute('cx'));
    ring.setAttribute('cy', p.getAttribute('cy'));
  }
}
