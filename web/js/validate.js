// Checking the form's fields, and showing each error, the page's or the server's, next to its field.
import { $, form } from './dom.js';
import { fields } from './fields.js';

// Ranges are the server's: { minimum, maximum, exclusiveMaximum }, each
// where it applies.
function within(n, r) {
  return (!('minimum' in r) || n >= r.minimum) && (!('maximum' in r) || n <= r.maximum) &&
    (!('exclusiveMaximum' in r) || n < r.exclusiveMaximum);
}

// A range in words: "from 1 to 16", "at least 0 and below 1".
function inWords(r) {
  if ('minimum' in r && 'maximum' in r) return `from ${r.minimum} to ${r.maximum}`;
  const words = [];
  if ('minimum' in r) words.push(`at least ${r.minimum}`);
  if ('maximum' in r) words.push(`at most ${r.maximum}`);
  if ('exclusiveMaximum' in r) words.push(`below ${r.exclusiveMaximum}`);
  return words.join(' and ');
}

// Checks the browser can make before asking; the server has the last word.
export function localErrors(s) {
  const f = fields();
  const errors = {};
  if (s.model) {
    // a model fixes every other option, and none of them is sent
    if (!s.sentence) errors.sentence = 'type a sentence';
    return errors;
  }
  for (const [k, r] of Object.entries(f.integer)) {
    const v = s[k];
    if (v === '') continue;
    if (!/^\d+$/.test(v) || !within(Number(v), r))
      errors[k] = `${k} (${v}) must be a whole number ${inWords(r)}`.trimEnd();
  }
  if (s.heads === '' && s.mode === 'projected') errors.heads = 'heads is needed';
  for (const k of f.digits)
    if (!/^\d+$/.test(s[k])) errors[k] = `${k} (${s[k]}) must be a whole number`;
  for (const [k, r] of Object.entries(f.decimal)) {
    const v = s[k];
    if (v === '') continue;
    if (!Number.isFinite(Number(v)) || !within(Number(v), r))
      errors[k] = `${k} (${v}) must be ${inWords(r) || 'a number'}`;
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
