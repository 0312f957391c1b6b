// Checking the form's fields, and showing each error, the page's or the server's, next to its field.
import { $, form } from './dom.js';
import { fields } from './fields.js';

// Checks the browser can make before asking; the server has the last word.
export function localErrors(s) {
  const f = fields();
  const errors = {};
  for (const [k, [lo, hi]] of Object.entries(f.integer)) {
    const v = s[k];
    if (v === '') continue;
    if (!/^\d+$/.test(v) || Number(v) < lo || Number(v) > hi)
      errors[k] = `${k} (${v}) must be a whole number from ${lo} to ${hi}`;
  }
  if (s.heads === '' && s.mode === 'projected') errors.heads = 'heads is needed';
  for (const k of f.digits)
    if (!/^\d+$/.test(s[k])) errors[k] = `${k} (${s[k]}) must be a whole number`;
  for (const [k, range] of Object.entries(f.decimal)) {
    const v = s[k];
    if (v === '') continue;
    if (!range) {
      if (!Number.isFinite(Number(v))) errors[k] = `${k} (${v}) must be a number`;
    } else if (!(Number(v) >= range[0] && Number(v) < range[1])) {
      errors[k] = `${k} (${v}) must be at least ${range[0]} and below ${range[1]}`;
    }
  }
  if (s.kind === 'sentence' && !s.sentence) errors.sentence = 'type a sentence';
  if (s.kind === 'embeddings') {
    try {
      const e = JSON.parse(s.embeddings);
      if (!Array.isArray(e)) errors.embeddings = 'embeddings must be a JSON array of rows';
    } catch (err) {
      errors.embeddings = s.embeddings ? `embeddings are not valid JSON: ${err.message}`
        : 'paste or upload an embedding matrix';
    }
  }
  return errors;
}

// errors: { field: message }; a field without its own box ("form") uses
// the form's.
export function showErrors(errors) {
  for (const el of form.querySelectorAll('.error')) el.textContent = '';
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  for (const [field, message] of Object.entries(errors)) {
    const box = $(`${field}-error`) || $('form-error');
    box.textContent = message;
    const input = $(field);
    if (input) {
      input.setAttribute('aria-invalid', 'true');
      input.setAttribute('aria-describedby', box.id);
      const fold = input.closest('details');
      if (fold) fold.open = true;
    }
  }
}

// The field a problem+json pointer names ("/heads", "/context/sentence").
export function fieldOfPointer(pointer) {
  const parts = (pointer || '').split('/').filter(Boolean);
  if (!parts.length) return 'form';
  if (parts[0] === 'context') return 'context';
  return $(parts[0]) ? parts[0] : 'form';
}
