// The head measures' controls and views: the sort and filter above the grid, what they chose said in words, and the scatter plot or the table.
import { $ } from './dom.js';
import { state } from './state.js';
import { MEASURES, isMeasure, isFiltered, isRanked, describe } from './measures.js';
import { drawScatter, markScatter } from './scatter.js';
import { drawTable, markTable } from './table.js';
import { colormapTable } from './colormap.js';

// Wires the controls to change(changes), which keeps a change of the
// view's state and draws it (results.js's setView).
export function setUpMeasures(change) {
  const options = (first) => [...(first ? [new Option(first, '')] : []),
    ...MEASURES.map((m) => new Option(m.name, m.key))];
  $('sort').replaceChildren(...options('layer, then head'));
  $('plot_x').replaceChildren(...options());
  $('plot_y').replaceChildren(...options());
  $('measures-about').replaceChildren(...MEASURES.flatMap((m) => {
    const dt = document.createElement('dt');
    dt.textContent = m.name;
    const dd = document.createElement('dd');
    dd.textContent = m.about;
    return [dt, dd];
  }));
  $('sort').addEventListener('change', (e) => change({ sort: e.target.value }));
  $('order').addEventListener('change', (e) => change({ order: e.target.value }));
  $('top').addEventListener('input', (e) => change({ top: e.target.value.trim() }));
  $('threshold').addEventListener('input', (e) => change({ threshold: e.target.value.trim() }));
  $('unrank').addEventListener('click', () => change({ sort: '', order: 'desc', top: '', threshold: '' }));
  $('plot_x').addEventListener('change', (e) => change({ plot_x: e.target.value }));
  $('plot_y').addEventListener('change', (e) => change({ plot_y: e.target.value }));
  $('show-plot').addEventListener('click', () => change({ measures_view: 'plot' }));
  $('show-table').addEventListener('click', () => change({ measures_view: 'table' }));
}

// A control's value from the state, left alone when it already has it
// (rewriting an input being typed in would move its caret).
function setValue(id, v) {
  if ($(id).value !== v) $(id).value = v;
}

function showError(id, message) {
  $(`${id}-error`).textContent = message || '';
  if (message) $(id).setAttribute('aria-invalid', 'true');
  else $(id).removeAttribute('aria-invalid');
}

// The heads the sort and filter chose when they last changed.
let last = null;

// Shows the measures of hm (headMeasures(), null: the answer has none,
// and none of this shows), the ranking r (ranking()) and the heads it
// chose (null: those it chose last). open(e, how) opens a head,
// sortBy(key, order) sorts from the table's headers, selected is
// "layer/head" of the enlarged head.
export function showMeasures(hm, r, chosen, { open, sortBy, selected }) {
  for (const id of ['ranking', 'measures-view']) $(id).hidden = !hm;
  if (!hm) {
    $('ranking-note').hidden = true;
    return;
  }
  if (chosen) last = chosen;
  else chosen = last;
  setValue('sort', r.sort);
  setValue('order', r.order);
  setValue('top', state.top);
  setValue('threshold', state.threshold);
  for (const id of ['order', 'top', 'threshold']) $(id).disabled = !r.sort;
  $('threshold-label').textContent = r.order === 'asc' ? 'and at most' : 'and at least';
  showError('top', r.errors.top);
  showError('threshold', r.errors.threshold);

  // a sort or a filter changes what the grid shows: said above it, with
  // the way back
  const note = $('ranking-note');
  note.hidden = !isRanked(r);
  note.classList.toggle('filtered', isFiltered(r));
  // a filter that keeps nothing says why: no head has the measure (a
  // cross-attention's positional ones are null), or none is within bounds
  const none = !chosen.length && isRanked(r)
    ? (hm.list.every((e) => e.v[r.sort] === null) ? ' No head has a value of it.' : ' No head is within the bounds.') : '';
  $('ranking-text').textContent = `Showing ${describe(r, chosen.length, hm.list.length)}.${none}`;
  $('unrank').textContent = isFiltered(r) ? 'Show every head' : 'Back to layer order';

  const table = state.measures_view === 'table';
  $('plot-panel').hidden = table;
  $('table-panel').hidden = !table;
  $('show-plot').setAttribute('aria-pressed', String(!table));
  $('show-table').setAttribute('aria-pressed', String(table));
  // only the view on screen is drawn: a table of a thousand rows waits
  // until it is asked for
  if (table) {
    const caption = `Head measures of ${describe(r, chosen.length, hm.list.length)}`;
    $('measures-caption').textContent = `${caption}.`;
    drawTable($('measures-table'), { chosen, kvHeads: hm.kvHeads, r, sortBy, open, selected, caption });
    return;
  }
  const x = isMeasure(state.plot_x) ? state.plot_x : 'entropy';
  const y = isMeasure(state.plot_y) ? state.plot_y : 'sink';
  setValue('plot_x', x);
  setValue('plot_y', y);
  const kept = isFiltered(r) ? new Set(chosen.map((e) => `${e.layer}/${e.head}`)) : null;
  drawScatter($('scatter'), $('scatter-readout'), { list: hm.list, x, y, chosen: kept, layers: hm.layers,
    colormap: state.colormap, selected, open });
  // the colours of the layers, as the points have them
  const colours = colormapTable(state.colormap);
  const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => {
    const i = Math.round(t * 255) * 3;
    return `rgb(${colours[i]} ${colours[i + 1]} ${colours[i + 2]}) ${t * 100}%`;
  });
  $('scatter-ramp').style.background = `linear-gradient(to right, ${stops.join(', ')})`;
  $('scatter-last').textContent = `layer ${hm.layers - 1}`;
  $('scatter-legend').hidden = hm.layers < 2;
  $('scatter-note').textContent = kept
    ? `The ${kept.size} heads the filter keeps are drawn full, the others faint; a point's colour is its layer's.`
    : 'A point\'s colour is its layer\'s, in the colour map.';
}

// The enlarged head ("layer/head") marked in the view on screen.
export function markMeasures(selected) {
  if ($('measures-view').hidden) return;
  if (state.measures_view === 'table') markTable($('measures-table'), selected);
  else markScatter(selected);
}
