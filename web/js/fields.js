// The server's request fields as the page knows them: defaults, ranges, and how each is sent.

// Written here until the server describes its fields itself. Whatever fills
// them later passes through setFields(), so it must have this shape; every
// other module reads them through fields() when it needs them and keeps no
// copy, so new fields take effect everywhere at once.
const BUILT_IN = {
  // In the form's terms: '' leaves the field to the server (the inputs'
  // placeholders say what it derives). Key order is the page URL's order.
  defaults: {
    heads: '8', kv_heads: '', d_model: '64', seed: '0',
    mode: 'projected', mask: 'none', positional: 'none', scale: '',
    residual: 'none', out_proj: true,
    d_k: '', d_v: '', d_out: '', dropout: '',
    bias: false, out_bias: false, lowercase: true, special_tokens: false,
    colormap: 'viridis',
  },
  // Options sent with every computation, as text in a query and by their
  // kind in a JSON body; the order is the query's order.
  text: ['heads', 'kv_heads', 'd_model', 'seed', 'mode', 'mask', 'positional',
    'scale', 'residual', 'd_k', 'd_v', 'd_out', 'dropout'],
  bool: ['out_proj', 'bias', 'out_bias', 'lowercase', 'special_tokens'],
  // Whole numbers, with their inclusive ranges; JSON numbers in a body.
  integer: { heads: [1, 128], kv_heads: [1, 128], d_model: [1, 4096],
    d_k: [1, 4096], d_v: [1, 4096], d_out: [1, 4096] },
  // Whole numbers of any size: a 64-bit seed does not fit a JSON number, so
  // a body carries it as a string of digits.
  digits: ['seed'],
  // Decimal numbers, JSON numbers in a body; null: any finite number,
  // [lo, hi]: at least lo and below hi.
  decimal: { scale: null, dropout: [0, 1] },
};

let known;

// The fields in use.
export function fields() {
  return known;
}

// Takes the fields from a document shaped like BUILT_IN. A JSON document
// may give numbers as numbers and null for "left to the server"; the form
// holds text, so those defaults become strings here.
export function setFields(doc) {
  const defaults = {};
  for (const [k, v] of Object.entries(doc.defaults))
    defaults[k] = typeof v === 'boolean' ? v : v === null ? '' : String(v);
  known = { ...doc, defaults };
}

setFields(BUILT_IN);
