// What a decoder's query may attend, layer by layer: its layers' windows as an answer's config gives them, and the cells no query may see.

// Layer l's sliding window (0: none, every earlier key seen), from an
// answer's config: layer_windows when the layers' windows differ (Gemma 2
// and 3 have sliding layers and global ones; null there is a global
// layer), else the one sliding_window every layer shares (null: none).
export function layerWindow(config, l) {
  if (Array.isArray(config.layer_windows)) return config.layer_windows[l] || 0;
  return config.sliding_window || 0;
}

// Whether the layers of an answer's model see differently: some slide and
// others are global, or they slide by different windows.
export function windowsDiffer(config) {
  return Array.isArray(config.layer_windows);
}

// What layer l is, for a person: "sliding (4)", or "global".
export function layerKind(config, l) {
  const w = layerWindow(config, l);
  return w ? `sliding (${w})` : 'global';
}

// The same at length, for a title: what a token of layer l sees.
export function layerKindTitle(config, l) {
  const w = layerWindow(config, l);
  if (!w) return `layer ${l} is global: each token sees itself and every earlier one`;
  if (w === 1) return `layer ${l} slides: each token sees itself alone (window 1)`;
  return `layer ${l} slides: each token sees itself and the ${w - 1} before it (window ${w})`;
}

// The cells of a causal model no query may attend, between the shown
// tokens' positions idx: a key after the query, or (window > 0) one the
// sliding window leaves out ([idx.length²] of 0 or 1). The server's
// images hatch the same cells.
export function notAllowed(idx, window) {
  const n = idx.length, blocked = new Uint8Array(n * n);
  for (let r = 0; r < n; r++)
    for (let k = 0; k < n; k++) {
      const i = idx[r], j = idx[k];
      blocked[r * n + k] = j > i || (window > 0 && j + window <= i) ? 1 : 0;
    }
  return blocked;
}
