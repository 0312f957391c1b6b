// The table of the heads in view and their measures: sorted by a column's header, a row opening its head.
import { MEASURES, formatValue, headShort, headName } from './measures.js';

// Rows a Page Up or Page Down moves.
const PAGE = 20;

// Fills table with a row per head of chosen (in its order: the view's
// sort and filter), columns layer, head, KV head (with grouped KV heads)
// and every measure, each value to three digits with the exact one in its
// title.
//   r         the view's ranking(): its column's header says how it sorts
//   sortBy(key, order)  a header pressed: key a measure, or '' for layer,
//             then head; order 'desc' or 'asc'
//   open(e)   opens head e; selected: "layer/head" of the enlarged head
// One row's button is in the tab order; the arrow keys, Home, End, Page
// Up and Page Down move between rows, Enter opens.
//
// It is an ARIA table of rows laid out by CSS grid, in blocks of BLOCK
// rows that the browser lays out only near the screen (content-visibility,
// style.css): a <table> of a thousand rows took a fifth of a second to lay
// out, these a few milliseconds, and every row stays in the page for a
// screen reader and for finding text.
const BLOCK = 64;

export function drawTable(table, { chosen, kvHeads, r, sortBy, open, selected, caption }) {
  const div = (cls, role, text) => {
    const d = document.createElement('div');
    if (cls) d.className = cls;
    if (role) d.setAttribute('role', role);
    if (text !== undefined) d.textContent = text;
    return d;
  };
  table.setAttribute('role', 'table');
  table.setAttribute('aria-label', caption);
  table.setAttribute('aria-rowcount', String(chosen.length + 1));
  table.classList.toggle('with-kv', Boolean(kvHeads));
  const head = div('row header', 'row');
  head.setAttribute('aria-rowindex', '1');
  const th = (text, key, about) => {
    const cell = div('', 'columnheader');
    if (key === null) {
      cell.textContent = text;
      return cell;
    }
    const sorted = key === r.sort;
    // a head's order: layer, then head, lowest first; a measure's: the
    // view's direction, the highest first when newly chosen
    const order = key === '' ? 'asc' : r.order;
    if (sorted) cell.setAttribute('aria-sort', order === 'asc' ? 'ascending' : 'descending');
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'sort';
    b.dataset.sort = key;
    b.textContent = text;
    if (about) b.title = about;
    const arrow = document.createElement('span');
    arrow.setAttribute('aria-hidden', 'true');
    arrow.textContent = sorted ? (order === 'asc' ? ' ▲' : ' ▼') : '';
    b.append(arrow);
    b.addEventListener('click', () => {
      if (key === '') sortBy('', 'desc');
      else sortBy(key, sorted && r.order === 'desc' ? 'asc' : 'desc');
    });
    cell.append(b);
    return cell;
  };
  head.append(th('', null), th('layer', ''), th('head', null));
  if (kvHeads) head.append(th('KV head', null));
  for (const m of MEASURES) head.append(th(m.name, m.key, m.about));
  const top = div('header-group', 'rowgroup');
  top.append(head);

  // the rows as markup, parsed at once: a thousand rows of a dozen
  // elements each are built several times faster so than one by one
  // (every text here is the page's own: numbers and fixed names)
  const html = [];
  chosen.forEach((e, k) => {
    if (k % BLOCK === 0) {
      if (k) html.push('</div>');
      html.push(`<div class="block" role="rowgroup" style="--rows: ${Math.min(BLOCK, chosen.length - k)}">`);
    }
    html.push(`<div class="row" role="row" aria-rowindex="${k + 2}" data-row="${k}" data-layer="${e.layer}" data-head="${e.head}">`,
      `<div role="cell"><button type="button" class="open" tabindex="-1" aria-label="open ${headName(e)}">${headShort(e)}</button></div>`,
      `<div role="cell">${e.layer}</div><div role="cell">${e.head}</div>`);
    if (kvHeads) html.push(`<div role="cell">${e.kv}</div>`);
    for (const m of MEASURES) {
      const v = e.v[m.key];
      html.push(`<div role="cell" data-measure="${m.key}"${v === null ? '' : ` title="${v}"`}>${formatValue(v)}</div>`);
    }
    html.push('</div>');
  });
  if (chosen.length) html.push('</div>');
  const body = div('body');
  body.innerHTML = html.join('');
  const rows = body.querySelectorAll('.row');
  // one listener for every row: a click anywhere on a row opens its head
  body.addEventListener('click', (ev) => {
    const tr = ev.target.closest('.row');
    if (tr) open(chosen[Number(tr.dataset.row)], ev.detail === 0 ? 'key' : 'pointer');
  });
  body.addEventListener('keydown', (ev) => {
    const b = ev.target.closest('button.open');
    if (!b) return;
    const k = Number(b.closest('.row').dataset.row), last = rows.length - 1;
    const to = { ArrowDown: k + 1, ArrowUp: k - 1, Home: 0, End: last, PageDown: k + PAGE, PageUp: k - PAGE }[ev.key];
    if (to === undefined) return;
    ev.preventDefault();
    const next = rows[Math.min(last, Math.max(0, to))].querySelector('button.open');
    b.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  });
  table.replaceChildren(top, body);
  markTable(table, selected);
}

// Marks the enlarged head's row ("layer/head") and puts it in the tab
// order (the first row's when it is not in the table).
export function markTable(table, selected) {
  const [l, h] = selected.split('/');
  let inOrder = null;
  for (const tr of table.querySelectorAll('.body .row')) {
    const on = tr.dataset.layer === l && tr.dataset.head === h;
    if (on) tr.setAttribute('aria-current', 'true');
    else tr.removeAttribute('aria-current');
    const b = tr.querySelector('button.open');
    b.tabIndex = -1;
    if (on) inOrder = b;
  }
  const first = table.querySelector('.body button.open');
  if (inOrder ?? first) (inOrder ?? first).tabIndex = 0;
}
