// The server's request fields as the page uses them, read once from GET /config before the form is shown.

// What the page adds to the server's description. The fields the form
// offers, in the order of the page's URL and of the API's query; one the
// server takes in a body is an option of the computation, one it takes
// only in a query is an option of the image.
const FORM = ['heads', 'kv_heads', 'd_model', 'seed', 'mode', 'mask', 'positional',
  'scale', 'residual', 'out_proj', 'd_k', 'd_v', 'd_out', 'dropout', 'bias', 'out_bias',
  'lowercase', 'special_tokens', 'colormap'];
// Whole numbers of any size: a 64-bit seed does not fit a JSON number, so
// a body carries it as a string of digits.
const DIGITS = ['seed'];
// Left empty in the form, the server's default shown as the placeholder,
// and sent only when typed.
const BLANK = ['dropout'];

let known;

// The fields in use:
//   defaults      the form's, by field in FORM's order: text, or a boolean
//                 for a check box; '' leaves the field to the server
//   form          FORM
//   text, bool    the computation's options sent as text in a query and by
//                 their kind in a JSON body, in the query's order
//   image         the image's options the form offers, sent with each PNG
//   integer       whole numbers, JSON numbers in a body, with their range
//   decimal       numbers, JSON numbers in a body, with their range
//   digits        DIGITS
//   enums         the names each enumerated field takes
//   placeholders  the defaults of BLANK, as text
// A range is the document's { minimum, maximum, exclusiveMaximum }, each
// where given.
export function fields() {
  return known;
}

// Fetches the server's GET /config and takes the fields from it. Rejects
// with an Error whose message ends the sentence "GET /config …" with what
// went wrong.
export async function loadFields() {
  let response;
  try {
    response = await fetch('/config', { headers: { Accept: 'application/json' } });
  } catch (err) {
    throw new Error(`could not be fetched: ${err.message}`);
  }
  const text = await response.text();
  if (!response.ok) {
    let detail = '';
    try { detail = JSON.parse(text).detail || ''; } catch (e) { /* not problem+json */ }
    throw new Error(`answered HTTP ${response.status}${detail ? `: ${detail}` : ''}`);
  }
  let doc;
  try { doc = JSON.parse(text); } catch (err) {
    throw new Error(`is not JSON: ${err.message}`);
  }
  setFields(doc);
}

// Takes the fields from a FieldsDocument (server/openapi.json). Throws if
// it leaves out a field the form offers.
export function setFields(doc) {
  const byName = new Map((doc?.fields || []).map((f) => [f.name, f]));
  const next = { defaults: {}, form: FORM, text: [], bool: [], image: [], integer: {},
    decimal: {}, digits: DIGITS, enums: {}, placeholders: {} };
  for (const name of FORM) {
    const f = byName.get(name);
    if (!f) throw new Error(`does not describe the field ${name}`);
    const range = {};
    for (const k of ['minimum', 'maximum', 'exclusiveMaximum']) if (k in f) range[k] = f[k];
    if (f.type === 'boolean') {
      // a check box has no "left to the server": unchecked, it is not sent
      next.defaults[name] = f.default === true;
    } else if (BLANK.includes(name)) {
      next.defaults[name] = '';
      if ('default' in f) next.placeholders[name] = String(f.default);
    } else {
      next.defaults[name] = 'default' in f ? String(f.default) : '';
    }
    if (f.enum) next.enums[name] = [...f.enum];
    if (f.type === 'integer') next.integer[name] = range;
    if (f.type === 'number') next.decimal[name] = range;
    if (!(f.in || []).includes('body')) next.image.push(name);
    else if (f.type === 'boolean') next.bool.push(name);
    else next.text.push(name);
  }
  known = next;
}
