// The server's loaded models, read once from GET /models beside GET /config.

let known = [];

// The loaded models as GET /models lists them: { name, layers, heads,
// hidden, max_positions, ... }; empty when none is loaded.
export function models() {
  return known;
}

// Whether the loaded model name is a decoder, which reads one text (its
// /models entry names a family).
export function isDecoder(name) {
  return Boolean(known.find((m) => m.name === name)?.family);
}

// Fetches GET /models. A server that gives no list (or cannot be asked)
// has no model the page can offer, and the page runs on random weights
// alone, as it does on a server without --model: the random-weights mode
// needs nothing from /models.
export async function loadModels() {
  try {
    const response = await fetch('/models', { headers: { Accept: 'application/json' } });
    const doc = response.ok ? await response.json() : null;
    known = Array.isArray(doc?.models)
      ? doc.models.filter((m) => typeof m?.name === 'string' && m.layers > 0 && m.heads > 0) : [];
  } catch (err) {
    known = [];
  }
}
