// The grid of the heads a sort or filter chooses: a tile per head in that order, labelled L·H with its value, opening the head as the model view's thumbnails do.
import { formatValue, headName, headShort, measureName } from './measures.js';

// Fills grid with a tile per head of chosen (headMeasures() entries, in
// order), each thumbnail(e) beside "L3·H7" and its value of measure. One
// tile is in the tab order (markSelected() in results.js chooses which);
// the arrow keys move along the order (up and down by a row of tiles),
// Home and End to the first and last; Enter or Space opens.
export function drawRankedGrid(grid, { chosen, measure, thumbnail, open }) {
  grid.className = 'ranked';
  grid.style.gridTemplateColumns = '';
  grid.setAttribute('role', 'group');
  grid.setAttribute('aria-label', `heads by ${measureName(measure)}: arrow keys move, Enter selects`);
  const tiles = chosen.map((e, k) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'tile';
    b.dataset.layer = String(e.layer);
    b.dataset.head = String(e.head);
    b.dataset.rank = String(k);
    const value = formatValue(e.v[measure]);
    b.title = `${headName(e)}: ${measureName(measure)} ${e.v[measure] === null ? 'none' : e.v[measure]}`;
    const label = document.createElement('span');
    label.className = 'tile-label';
    label.textContent = headShort(e);
    const v = document.createElement('span');
    v.className = 'tile-value';
    v.textContent = value;
    b.append(thumbnail(e), label, v);
    b.addEventListener('click', () => open(e));
    return b;
  });
  grid.onkeydown = (ev) => {
    const b = ev.target.closest('button.tile');
    if (!b) return;
    const k = Number(b.dataset.rank), last = tiles.length - 1;
    // the tiles in a row, as the CSS grid lays them out
    const across = getComputedStyle(grid).gridTemplateColumns.split(' ').length;
    const to = { ArrowRight: k + 1, ArrowLeft: k - 1, ArrowDown: k + across, ArrowUp: k - across,
      Home: 0, End: last }[ev.key];
    if (to === undefined) return;
    ev.preventDefault();
    const next = tiles[Math.min(last, Math.max(0, to))];
    for (const t of tiles) t.tabIndex = t === next ? 0 : -1;
    next.focus();
  };
  grid.replaceChildren(...tiles);
}
