// The head measures of an answer (head_stats, docs/math.md "Head measures"): which they are, every head's values, and the heads a sort and a filter choose.
//
// Pure functions of the answer and the view's state: the grid, the
// scatter plot and the table all draw the same list, so they show the
// same heads in the same order.

// The seven measures of one head, in the answer's order, each with the
// words the page shows for it.
export const MEASURES = [
  { key: 'entropy', name: 'entropy', about: 'normalised entropy of a row over the keys it may see: 1 uniform, 0 one key' },
  { key: 'sink', name: 'sink share', about: 'mean weight the rows after the first give to position 0' },
  { key: 'previous_token', name: 'previous-token', about: 'mean weight on the key just before the query' },
  { key: 'duplicate_token', name: 'duplicate-token', about: 'mean weight on earlier copies of the query\'s token' },
  { key: 'induction', name: 'induction', about: 'mean weight on the token after an earlier copy of the query\'s token' },
  { key: 'self', name: 'self share', about: 'mean weight of the diagonal: a query on itself' },
  { key: 'distance', name: 'mean distance', about: 'mean over rows of Σ weight · |i − j|, in tokens' },
];

export const measureName = (key) => MEASURES.find((m) => m.key === key)?.name ?? key;
export const isMeasure = (key) => MEASURES.some((m) => m.key === key);

// A value as the page shows it: three significant digits (the exact
// number is in the JSON download, and in a table cell's title).
export function formatValue(v) {
  if (v === null || !Number.isFinite(v)) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a >= 1e-3 && a < 1e4 ? String(Number(v.toPrecision(3))) : v.toExponential(2);
}

// Every head of the answer d with its measures, or null when it has none:
//   { list, layers, count, kvHeads }
// list: one entry per head in layer, then head, order:
//   { layer, head, kv, v }  v: the measures by key (a number, or null
//   where the answer has none), kv: the KV head it reads (-1 without
//   grouped KV heads)
// With a model each measure is [layers][heads]. Without one (random
// weights) it is [heads], or [batch][heads] with a batch, of which
// sequence b is taken: one layer.
export function headMeasures(d, b = 0) {
  const hs = d?.head_stats;
  if (!hs || !Array.isArray(hs.entropy)) return null;
  const model = d.model !== undefined;
  const rows = {};
  for (const { key } of MEASURES) {
    const m = hs[key];
    if (!Array.isArray(m)) return null;
    if (model) rows[key] = m;
    else rows[key] = [Array.isArray(m[0]) ? m[Math.min(b, m.length - 1)] : m];
  }
  const layers = rows.entropy.length, count = rows.entropy[0]?.length ?? 0;
  const kvHeads = d.config?.kv_heads || 0;
  const per = kvHeads > 0 && kvHeads < count ? count / kvHeads : 0;
  const list = [];
  for (let l = 0; l < layers; l++) {
    for (let h = 0; h < count; h++) {
      const v = {};
      for (const { key } of MEASURES) {
        const x = rows[key][l]?.[h];
        v[key] = typeof x === 'number' && Number.isFinite(x) ? x : null;
      }
      list.push({ layer: l, head: h, kv: per ? Math.floor(h / per) : -1, v });
    }
  }
  return { list, layers, count, kvHeads: per ? kvHeads : 0 };
}

// The view's sort and filter from its state s, checked: { sort, order,
// top, threshold, errors }. sort: a measure's key, or '' for layer, then
// head; order 'desc' (highest first) or 'asc'; top: how many to keep
// (0: all); threshold: a number or null. A field that does not parse is
// left out and named in errors.
export function ranking(s) {
  const sort = isMeasure(s.sort) ? s.sort : '';
  const order = s.order === 'asc' ? 'asc' : 'desc';
  const errors = {};
  let top = 0, threshold = null;
  if (sort && String(s.top ?? '').trim() !== '') {
    const t = Number(s.top);
    if (Number.isInteger(t) && t >= 1) top = t;
    else errors.top = 'a whole number from 1, or empty for every head';
  }
  if (sort && String(s.threshold ?? '').trim() !== '') {
    const t = Number(s.threshold);
    if (Number.isFinite(t)) threshold = t;
    else errors.threshold = 'a number, or empty for no bound';
  }
  return { sort, order, top, threshold, errors };
}

// Whether r (ranking()) leaves some heads out or reorders them.
export const isFiltered = (r) => r.top > 0 || r.threshold !== null;
export const isRanked = (r) => r.sort !== '';

// The heads r chooses from list, in its order. Sorted by the measure
// (ties in layer, then head, order), a head without a value last; a
// filter keeps those at least (highest first) or at most (lowest first)
// the threshold, then the first top of them, and never one without a
// value.
export function chooseHeads(list, r) {
  if (!r.sort) return list;
  const k = r.sort, sign = r.order === 'asc' ? 1 : -1;
  let out = list.slice().sort((a, b) => {
    const x = a.v[k], y = b.v[k];
    if (x === null || y === null) return (x === null) - (y === null);
    return sign * (x - y) || a.layer - b.layer || a.head - b.head;
  });
  if (isFiltered(r)) out = out.filter((e) => e.v[k] !== null);
  if (r.threshold !== null) {
    const t = r.threshold;
    out = out.filter((e) => (r.order === 'asc' ? e.v[k] <= t : e.v[k] >= t));
  }
  if (r.top > 0) out = out.slice(0, r.top);
  return out;
}

// "layer 3, head 7 (KV head 1)": a head as the page names it.
export function headName(e) {
  return `layer ${e.layer}, head ${e.head}${e.kv >= 0 ? ` (KV head ${e.kv})` : ''}`;
}

// "L3·H7": a head in a tile's or row's few characters.
export const headShort = (e) => `L${e.layer}·H${e.head}`;

// What the heads in view are, in a sentence: "the 16 of 1,024 heads with
// the highest induction, highest first" and the like.
export function describe(r, shown, total) {
  const n = (x) => x.toLocaleString('en');
  if (!r.sort) return `all ${n(total)} heads, by layer, then head`;
  const name = measureName(r.sort);
  const most = r.order === 'asc' ? 'lowest' : 'highest';
  const parts = [];
  if (r.top > 0) parts.push(`the top ${n(r.top)} by ${name}, ${most} first`);
  if (r.threshold !== null) parts.push(`${name} ${r.order === 'asc' ? '≤' : '≥'} ${r.threshold}`);
  if (!parts.length) return `all ${n(total)} heads, by ${name}, ${most} first`;
  if (r.top === 0) parts.push(`${most} first`);
  return `${n(shown)} of ${n(total)} heads: ${parts.join(', ')}`;
}
