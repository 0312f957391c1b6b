// The lines view of a head: queries joined to keys, each line as opaque as its weight.
import { $ } from './dom.js';

// BertViz's head view: queries on the left, keys on the right, one line
// per pair, its opacity the weight relative to the head's largest.
export function drawLines(sh, w) {
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
