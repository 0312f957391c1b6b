// A mixed load through nginx: POST and GET, JSON and PNG, small and large,
// random weights and loaded checkpoints. Every request is sent once (no
// retry by the client) and its status and body kept, to be held to what a
// replica answers when asked directly.
import http from 'node:http';
import { request, sha } from './cluster.js';

const words = (n, from = 0) => Array.from({ length: n }, (_, i) => `w${from + i}`).join(' ');
const json = (o) => ({ body: JSON.stringify(o), headers: { 'Content-Type': 'application/json' } });

// The kinds of request, each with how often it is drawn. POSTs come from a
// small set of bodies (POST is never cached, so each goes to a replica);
// GETs of one use carry a counter, so that they too reach a replica,
// and popular GETs repeat a few URLs, as a class opening one heatmap does.
export const KINDS = [
  // 3.7 KB of JSON, answered on the spot
  { name: 'small json', weight: 30, method: 'POST', variants: 16,
    make: (i) => json({ sentence: `The cat chased the mouse number ${i}`, seed: i }) },
  // 256 tokens of width 256: 0.8 MB of JSON, streamed as it is formatted
  // (streamed: an answer whose first bytes leave before its last are
  // made, which nginx cannot retry once they have: docs/deploy.md, "What
  // nginx cannot hide")
  { name: 'large json', weight: 8, method: 'POST', variants: 3, streamed: true,
    make: (i) => json({ sentence: words(256), d_model: 256, heads: 8, seed: i, return: ['output'] }) },
  // the BERT checkpoint's layers and heads
  { name: 'model json', weight: 14, method: 'POST', variants: 6,
    make: (i) => json({ model: 'bert', sentence: `the cat sat on the mat ${'the dog '.repeat(i)}` }) },
  // the decoder's last layer over 128 tokens and more as a PNG: 60 KB,
  // 0.2 s of computing, so that computations are in flight
  { name: 'large png', weight: 14, method: 'POST', variants: 4,
    make: (i) => ({ path: '/attention?format=png&head=mean',
      ...json({ model: 'llama', sentence: words(128 + 8 * i), layer: 15 }) }) },
  // a heatmap by URL, 24 KB of PNG
  { name: 'small png', weight: 12, method: 'GET', unique: true,
    make: (i) => ({ path: `/attention?sentence=The%20cat%20sat%20on%20the%20mat&seed=${i}&format=png&head=all` }) },
  { name: 'get json', weight: 12, method: 'GET', unique: true,
    make: (i) => ({ path: `/attention?sentence=${encodeURIComponent(words(24))}&seed=${i}&return=weights` }) },
  { name: 'popular', weight: 10, method: 'GET', variants: 3,
    make: (i) => ({ path: `/attention?sentence=The%20cat%20chased%20the%20mouse&format=png&head=${i}` }) },
];

function spec(kind, i) {
  const m = kind.make(i);
  return {
    kind: kind.name, method: kind.method, path: m.path || '/attention', body: m.body,
    headers: m.headers || {}, key: `${kind.name}#${i}`, streamed: Boolean(kind.streamed),
  };
}

// Every fixed variant, and any one-use GET made by the load so far.
export function fixedSpecs() {
  const out = [];
  for (const k of KINDS) if (!k.unique) for (let i = 0; i < k.variants; i++) out.push(spec(k, i));
  return out;
}

// What a replica answers to s, asked directly: the reference.
export async function reference(base, s) {
  const r = await request(`${base}${s.path}`, { method: s.method, body: s.body, headers: s.headers });
  if (r.error || r.status !== 200) throw new Error(`reference ${s.key}: ${r.error || r.status}`);
  return sha(r.body);
}

// Runs `clients` loops of requests through base until stop() is called;
// every result goes into this.results: { seq, key, kind, method, status,
// hash, error, t0, t1 }, seq counting from 0 in the order sent. sent counts
// the requests sent, inFlight those not yet answered, streaming those of
// them of a streamed kind.
export class Load {
  constructor(base, clients, seed = 1) {
    Object.assign(this, { base, clients, results: [], sent: 0, inFlight: 0, streaming: 0, stopping: false, counter: 1000 * seed });
    this.agent = new http.Agent({ keepAlive: true, maxSockets: clients });
    this.rng = seed;
    this.total = KINDS.reduce((a, k) => a + k.weight, 0);
    this.unique = new Map();
  }

  random() { // xorshift: the same sequence of kinds on every run
    let x = this.rng;
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    this.rng = x >>> 0;
    return this.rng / 4294967296;
  }

  next() {
    let r = this.random() * this.total;
    const kind = KINDS.find((k) => (r -= k.weight) < 0) || KINDS[0];
    if (kind.unique) {
      const s = spec(kind, this.counter++);
      this.unique.set(s.key, s);
      return s;
    }
    return spec(kind, Math.floor(this.random() * kind.variants));
  }

  async client() {
    while (!this.stopping) {
      const s = this.next();
      const t0 = Date.now();
      const seq = this.sent++;
      this.inFlight++;
      if (s.streamed) this.streaming++;
      const r = await request(`${this.base}${s.path}`, { method: s.method, body: s.body, headers: s.headers, agent: this.agent });
      this.inFlight--;
      if (s.streamed) this.streaming--;
      this.results.push({
        seq, key: s.key, kind: s.kind, method: s.method, status: r.status, error: r.error,
        hash: r.body ? sha(r.body) : null, t0, t1: Date.now(),
      });
    }
  }

  // Whether every request sent before the `n`th has been answered.
  answeredBefore(n) {
    return this.results.filter((x) => x.seq < n).length >= n;
  }

  start() {
    this.done = Promise.all(Array.from({ length: this.clients }, () => this.client()));
    return this;
  }

  async stop() {
    this.stopping = true;
    await this.done;
    this.agent.destroy();
    return this.results;
  }
}

// Holds every result to its reference: a 200 with the bytes a replica
// gives when asked directly. Returns the failures, each described.
export async function failures(results, refs, directBase, unique) {
  const out = [];
  for (const r of results) {
    if (r.error || r.status !== 200) {
      out.push(`${r.key}: ${r.error || `status ${r.status}`}`);
      continue;
    }
    if (!refs.has(r.key)) refs.set(r.key, await reference(directBase, unique.get(r.key)));
    if (refs.get(r.key) !== r.hash) out.push(`${r.key}: body differs from a replica's own answer`);
  }
  return out;
}
