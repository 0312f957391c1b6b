// Asking the server: the request a state makes, its JSON answer and its PNG URLs; the newest request wins.
import { fields } from './fields.js';

// The last good answer, { data, text, blobs }: blobs holds the PNG object
// URLs fetched for it (embeddings), by their parameters.
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

// The API's query parameters (GET) for the computation itself.
function apiQuery(s) {
  const f = fields();
  const q = new URLSearchParams();
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

// The weights and their mean as { data, text, blobs }, or { problem } with
// the server's problem+json (or the HTTP status) when it refuses.
export async function fetchWeights(s, signal) {
  const ret = ['weights', 'mean_weights'];
  let response;
  if (s.kind === 'sentence') {
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
  return { data: JSON.parse(text), text, blobs: new Map() };
}

// A heatmap's URL: a plain GET for sentences, a blob for embeddings.
export async function pngUrl(s, params) {
  if (s.kind === 'sentence') {
    const q = apiQuery(s);
    for (const [k, v] of Object.entries(params)) q.set(k, v);
    q.set('format', 'png');
    return `/attention?${q}`;
  }
  const key = JSON.stringify(params);
  if (result.blobs.has(key)) return result.blobs.get(key);
  const q = new URLSearchParams({ ...params, format: 'png' });
  const r = await fetch(`/attention?${q}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'image/png' },
    body: JSON.stringify(apiBody(s, {})),
  });
  const url = URL.createObjectURL(await r.blob());
  result.blobs.set(key, url);
  return url;
}
