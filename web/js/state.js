// The view's state: its defaults, the form that edits it and the page URL that holds it.
import { $, form } from './dom.js';
import { fields } from './fields.js';

// The server's defaults inside the page's own: what is asked and what is shown.
export function defaults() {
  return {
    kind: 'sentence',
    sentence: 'The cat chased the mouse because it was hungry',
    embeddings: '',
    context: '',
    ...fields().defaults,
    head: '0', batch: '0',
  };
}

// The view on screen, set once the server's fields are known. Replaced
// whole by setState() when the form or the URL gives a new one; head and
// batch change in place.
export let state = null;

export function setState(s) {
  state = s;
}

// The form's fields read through .value; the rest are checkboxes.
const valueFields = () => ['sentence', 'embeddings', 'context', ...fields().text, ...fields().image];

// Fields under "Advanced": a view that changes one opens it.
const ADVANCED = ['d_k', 'd_v', 'd_out', 'dropout', 'bias', 'out_bias', 'lowercase',
  'special_tokens', 'colormap'];

export function readForm() {
  const s = { ...state };
  s.kind = form.querySelector('input[name=kind]:checked').value;
  for (const k of valueFields()) s[k] = $(k).value.trim();
  for (const k of fields().bool) s[k] = $(k).checked;
  return s;
}

export function writeForm(s) {
  form.querySelector(`input[name=kind][value=${s.kind}]`).checked = true;
  for (const k of valueFields()) $(k).value = s[k];
  for (const k of fields().bool) $(k).checked = s[k];
  showKind(s.kind);
  const d = defaults();
  if (ADVANCED.some((k) => s[k] !== d[k])) $('advanced').open = true;
}

export function showKind(kind) {
  for (const el of form.querySelectorAll('[data-kind]')) el.hidden = el.dataset.kind !== kind;
}

// The page's query: every value that differs from its default.
function pageQuery(s) {
  const d = defaults();
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(s)) {
    if (v === d[k]) continue;
    if (k === 'embeddings' && s.kind !== 'embeddings') continue;
    if (k === 'sentence' && s.kind !== 'sentence') continue;
    q.set(k, typeof v === 'boolean' ? String(v) : v);
  }
  return q;
}

// The page's URL for a state, without a bare "?" when all is default.
export function pageUrl(s) {
  return `${location.pathname}?${pageQuery(s)}`.replace(/\?$/, '');
}

export function stateFromUrl() {
  const d = defaults();
  const s = { ...d };
  const q = new URLSearchParams(location.search);
  for (const [k, v] of q) {
    if (!(k in d)) continue;
    s[k] = typeof d[k] === 'boolean' ? v === 'true' : v;
  }
  if (s.kind !== 'embeddings') s.kind = 'sentence';
  return s;
}
