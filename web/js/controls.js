// The form's controls made from the server's fields: each one's kind, range, options and default.
import { $, form } from './dom.js';
import { fields } from './fields.js';
import { models } from './models.js';

// index.html gives each field of fields().form an element with its name
// as id: a <select> for a field the server enumerates, an <input> for the
// rest. The kind, range, options and default set here are the server's
// (an input the page treats alike, such as the seed's digits, has its
// kind in the markup); the markup holds the page's own words: labels,
// placeholders of what the server derives, where each field sits.
export function setUpControls() {
  const f = fields();
  for (const name of f.form) {
    const el = $(name);
    const d = f.defaults[name];
    if (name in f.enums) {
      el.replaceChildren(...f.enums[name].map((v) => new Option(v)));
    } else if (typeof d === 'boolean') {
      el.type = 'checkbox';
      el.defaultChecked = d;
    } else if (name in f.integer) {
      const r = f.integer[name];
      el.type = 'number';
      if ('minimum' in r) el.min = String(r.minimum);
      if ('maximum' in r) el.max = String(r.maximum);
      el.step = '1';
      if (d !== '') el.defaultValue = d;
      el.inputMode = 'numeric';
    } else if (name in f.decimal) {
      el.type = 'text';
      if (d !== '') el.defaultValue = d;
      el.inputMode = 'decimal';
    } else if (d !== '') {
      el.defaultValue = d;
    }
    if (name in f.placeholders) el.placeholder = f.placeholders[name];
  }
}

// The model picker: "no model" (random weights) first, then each model the
// server loaded. Without any it stays hidden, and the page is as it is
// on a server without --model.
export function setUpModels() {
  const list = models();
  const none = new Option('none: random weights', '');
  // a GGUF file's type says what its weights are (Q4_K_M, Q8_0, ...)
  const gguf = (m) => (m.source?.container === 'gguf'
    ? `, ${m.source.file_type ?? 'GGUF'} GGUF` : '');
  $('model').replaceChildren(none, ...list.map((m) =>
    new Option(`${m.name} (${m.layers} layers × ${m.heads} heads, hidden ${m.hidden}${gguf(m)})`, m.name)));
  $('model-field').hidden = list.length === 0;
}

// Shows the form once its controls are made; until then only its error
// box and status are there.
export function showControls() {
  for (const el of form.querySelectorAll(':scope > fieldset')) el.hidden = false;
  $('run').hidden = false;
}
