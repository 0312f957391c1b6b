// Asking the server: the request a state makes, its JSON answer and its PNG URLs; the newest request wins.
//
// A view costs one request: the JSON answer holds every weight the page
// draws (heads, their mean, a model's every layer and its rollout), and the
// page draws them itself. PNGs are asked only for a download, when it is
// clicked.
import { fields } from './fields.js';
import { isDecoder } from './models.js';

// The last good answer, { data, text, key }: key is requestKey() of the
// state it answers.
export let result = null;

export function setResult(answer) {
  result = answer;
}

// Each request gets a generation; answers to older ones are dropped.
export let generation = 0;
let inflight = null; // AbortController of the request in progress

// Starts a request: the one in progress is aborted.
export function nextRequest() {
  const mine = ++generation;
  if (inflight) inflight.abort();
  inflight = new AbortController();
  return { mine, signal: inflight.signal };
}

// The API's query parameters (GET) for the computation itself. A model
// fixes every option of the random weights, so it takes only its own.
function apiQuery(s) {
  const f = fields();
  const q = new URLSearchParams();
  if (s.model) {
    q.set('model', s.model);
    q.set('sentence', s.sentence);
    // a decoder reads one text
    if (s.sentence_b && !isDecoder(s.model)) q.set('sentence_b', s.sentence_b);
    return q;
  }
  if (s.kind === 'sentence') q.set('sentence', s.sentence);
  if (s.context) q.set('context', s.context);
  for (const k of f.text) if (s[k] !== '' && s[k] !== f.defaults[k]) q.set(k, s[k]);
  if (s.mode === 'basic' && s.heads === f.defaults.heads) q.delete('heads');
  for (const k of f.bool) if (s[k] !== f.defaults[k]) q.set(k, String(s[k]));
  return q;
}

// The same as a JSON body (POST), for embeddings.
function apiBody(s, extra) {
  const f = fields();
  const body = {};
  for (const [k, v] of apiQuery(s)) {
    if (k === 'context') body.context = { sentence: v };
    else if (f.bool.includes(k)) body[k] = v === 'true';
    else if (k in f.integer || k in f.decimal) body[k] = Number(v);
    else body[k] = v;
  }
  body.embeddings = JSON.parse(s.embeddings);
  return Object.assign(body, extra);
}

// What the server is asked for a state: two states with the same key have
// the same answer, so a change of the view alone (colours, head, layer,
// hidden tokens) is drawn from the answer the page has.
export function requestKey(s) {
  const what = s.kind === 'sentence' || s.model ? `GET ${apiQuery(s)}`
    : `POST ${JSON.stringify(apiBody(s, {}))}`;
  return `${what} ${s.values}`;
}

// What the page draws: every head and their mean, every head's measures,
// and with a model every layer's and the rollout. The measures come as
// [layers][heads] with a model, [heads] or [batch][heads] without one
// (measures.js).
// Value-weighted, the norms take the weights' places: each head's
// value_weighted, and their sum over the heads where the mean was.
function returned(s) {
  const shown = s.values === 'value_weighted' ? ['value_weighted'] : ['weights', 'mean_weights'];
  return s.model ? [...shown, 'rollout', 'head_stats'] : [...shown, 'head_stats'];
}

// The weights as { data, text, key }, or { problem } with the server's
// problem+json (or the HTTP status) when it refuses.
export async function fetchWeights(s, signal) {
  const ret = returned(s);
  let response;
  if (s.kind === 'sentence' || s.model) {
    const q = apiQuery(s);
    q.set('return', ret.join(','));
    response = await fetch(`/attention?${q}`, { signal });
  } else {
    response = await fetch('/attention', {
      method: 'POST', signal,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(apiBody(s, { return: ret })),
    });
  }
  const text = await response.text();
  if (!response.ok) {
    try { return { problem: JSON.parse(text) }; } catch (e) {
      return { problem: { detail: `HTTP ${response.status}` } };
    }
  }
  const data = JSON.parse(text);
  if (s.values === 'value_weighted') {
    data.weights = data.value_weighted;
    data.mean_weights = data.value_weighted_sum;
  }
  return { data, text, key: requestKey(s) };
}

// A PNG of the view as a GET URL (params: the image's query, head, layer,
// view, colormap, ...), or null for embeddings, which only a POST carries:
// fetch those with fetchPng().
export function pngUrl(s, params) {
  if (s.kind !== 'sentence' && !s.model) return null;
  const q = apiQuery(s);
  for (const [k, v] of Object.entries(params)) q.set(k, v);
  q.set('format', 'png');
  return `/attention?${q}`;
}

// A PNG of the view of embeddings, POSTed; resolves to a Blob, or rejects
// with an Error naming the HTTP status.
export async function fetchPng(s, params) {
  const q = new URLSearchParams({ ...params, format: 'png' });
  const r = await fetch(`/attention?${q}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'image/png' },
    body: JSON.stringify(apiBody(s, {})),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  return r.blob();
}
