// A matrix enlarged (a head, or the rollout): its weights one cell each, tokens around them, read by pointer or arrow keys.
import { $ } from './dom.js';
import { drawHeatmap } from './heatmap.js';

// Draws w ([n][m], rows sh.rows and columns sh.cols) into the element
// box, one square of cell pixels per weight on a canvas, in colormap; the
// tokens are laid out around it in HTML, so the cell under the pointer is
// exact. readout: the element that shows the cell read; label: what the
// matrix is, for its description; blocked: the cells no query may attend
// ([n * m] of 0 or 1, or null), hatched and read as "not allowed".
// Optional: paint(canvas, w) draws the cells in place of the colour map
// (signed values, patching.js), describe(i, j) gives the readout of a cell
// in place of "query → key: weight", and pick(i, j) is called when a cell
// is clicked, or Enter or Space pressed on the cell in hand.
export function drawMatrix({ box, readout, label, blocked = null, paint = null, describe = null, pick = null },
  sh, w, cell, colormap) {
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
  frame.setAttribute('aria-label', describe
    ? `${label}: use the arrow keys to read each cell${pick ? ', Enter to open it' : ''}`
    : 'weights: use the arrow keys to read each cell');
  const canvas = document.createElement('canvas');
  if (paint) paint(canvas, w);
  else drawHeatmap(canvas, w, colormap, blocked);
  canvas.style.width = `${sh.m * cell}px`;
  canvas.style.height = `${sh.n * cell}px`;
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', `${label}, one square per ${describe ? 'value' : 'weight'}`);
  const mark = document.createElement('div');
  mark.className = 'mark';
  mark.hidden = true;
  frame.append(canvas, mark);
  const corner = document.createElement('div');
  corner.className = 'corner';
  box.replaceChildren(corner, top, left, frame);

  let at = null;
  const show = (i, j, x, y) => {
    at = [i, j];
    const value = blocked && blocked[i * sh.m + j] ? 'not allowed (the query cannot see this key)' : w[i][j];
    const text = describe ? describe(i, j) : `${sh.rows[i]} → ${sh.cols[j]}: ${value}`;
    readout.textContent = text;
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
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const j = Math.floor(x / (r.width / sh.m)), i = Math.floor(y / (r.height / sh.n));
    if (i < 0 || j < 0 || i >= sh.n || j >= sh.m) return hide();
    show(i, j, x, y);
  });
  frame.addEventListener('mouseleave', hide);
  frame.addEventListener('blur', hide);
  if (pick) {
    frame.addEventListener('click', (e) => {
      const r = canvas.getBoundingClientRect();
      const j = Math.floor((e.clientX - r.left) / (r.width / sh.m));
      const i = Math.floor((e.clientY - r.top) / (r.height / sh.n));
      if (i >= 0 && j >= 0 && i < sh.n && j < sh.m) pick(i, j);
    });
  }
  frame.addEventListener('keydown', (e) => {
    if (pick && (e.key === 'Enter' || e.key === ' ')) {
      e.preventDefault();
      if (at) pick(at[0], at[1]);
      return;
    }
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (!moves[e.key]) return;
    e.preventDefault();
    if (!at) return show(0, 0); // the first key press lands on the corner
    const [di, dj] = moves[e.key];
    show(Math.min(sh.n - 1, Math.max(0, at[0] + di)), Math.min(sh.m - 1, Math.max(0, at[1] + dj)));
  });
}
