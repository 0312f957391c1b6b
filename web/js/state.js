// The view's state: its defaults, the form that edits it and the page URL that holds it.
import { $, form } from './dom.js';
import { fields } from './fields.js';
import { isDecoder } from './models.js';
import { showPatching } from './patching.js';
import { showChat } from './chat.js';

// The server's defaults inside the page's own: what is asked and what is
// shown. model '' is no model: random weights, the page's first mode.
export function defaults() {
  return {
    model: '',
    kind: 'sentence',
    sentence: 'The cat chased the mouse because it was hungry',
    sentence_b: '',
    embeddings: '',
    context: '',
    ...fields().defaults,
    hide_special: false,
    // what the heatmaps show: the weights, or Kobayashi et al.'s norms
    values: 'weights',
    head: '0', batch: '0', layer: '0',
    // the head measures' view (measures.js): the grid's sort and filter,
    // the scatter plot's measures, and whether the plot or the table shows
    sort: '', order: 'desc', top: '', threshold: '',
    plot_x: 'entropy', plot_y: 'sink', measures_view: 'plot',
  };
}

// The view on screen, set once the server's fields are known. Replaced
// whole by setState() when the form or the URL gives a new one; head,
// batch and layer change in place.
export let state = null;

export function setState(s) {
  state = s;
}

// The form's fields read through .value; the rest are checkboxes.
const valueFields = () => ['model', 'sentence', 'sentence_b', 'embeddings', 'context',
  ...fields().text, ...fields().image, 'values'];
// The page's own check boxes, beside the server's.
const PAGE_CHECKS = ['hide_special'];

// Fields under "Advanced": a view that changes one opens it.
const ADVANCED = ['d_k', 'd_v', 'd_out', 'dropout', 'bias', 'out_bias', 'lowercase',
  'special_tokens'];

export function readForm() {
  const s = { ...state };
  s.kind = form.querySelector('input[name=kind]:checked').value;
  for (const k of valueFields()) s[k] = $(k).value.trim();
  for (const k of [...fields().bool, ...PAGE_CHECKS]) s[k] = $(k).checked;
  if (s.model) s.kind = 'sentence'; // a model reads sentences only
  return s;
}

export function writeForm(s) {
  form.querySelector(`input[name=kind][value=${s.kind}]`).checked = true;
  for (const k of valueFields()) $(k).value = s[k];
  for (const k of [...fields().bool, ...PAGE_CHECKS]) $(k).checked = s[k];
  showKind(s.kind);
  showMode(s.model);
  const d = defaults();
  if (ADVANCED.some((k) => s[k] !== d[k])) $('advanced').open = true;
}

export function showKind(kind) {
  for (const el of form.querySelectorAll('[data-kind]')) el.hidden = el.dataset.kind !== kind;
}

// Shows what a mode uses: with a model, sentences A and B and the views
// of a trained network; without, the random-weights options.
export function showMode(model) {
  const mode = model ? 'model' : 'random';
  for (const el of document.querySelectorAll('[data-mode]')) el.hidden = el.dataset.mode !== mode;
  // a decoder reads one text: no sentence B
  if (model && isDecoder(model)) $('sentence_b').closest('.field').hidden = true;
  if (model) showKind('sentence');
  else showKind(form.querySelector('input[name=kind]:checked').value);
  // a decoder continues the text, or replies to a chat through its template
  $('generate-view').hidden = !(model && isDecoder(model));
  showChat(model && isDecoder(model) ? model : '');
  // a decoder's patching and attribution; an encoder's panel says why not
  showPatching(model);
}

// The page's query: every value that differs from its default.
function pageQuery(s) {
  const d = defaults();
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(s)) {
    if (v === d[k]) continue;
    if (k === 'embeddings' && s.kind !== 'embeddings') continue;
    if (k === 'sentence' && s.kind !== 'sentence') continue;
    if (k === 'batch' && s.model) continue;
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
