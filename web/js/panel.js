// What the "Does it matter?" panel's parts share: its fields, how a token and a number are written, and its errors shown next to the field a problem's pointer names.
import { $ } from './dom.js';

// The fields of the panel: the name a problem's pointer gives, and the
// element that holds it (its error box is `${id}-error`).
export const FIELDS = ['clean', 'corrupted', 'correct', 'incorrect', 'target', 'over', 'direction'];

// A token as the page shows it: a byte that is not text on its own is ∅,
// a control character its escape.
export function tokenText(t) {
  if (t === null || t === undefined) return '∅';
  return t.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

// A number as the panel writes it: three significant digits (the exact
// one is the JSON's, in each cell's title and readout).
export function short(v) {
  if (v === null || !Number.isFinite(v)) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a >= 1e-3 && a < 1e4 ? String(Number(v.toPrecision(3))) : v.toExponential(2);
}

// The panel's errors: { field: message }, a field the panel has no box
// for in boxFallback's box; those shown before are cleared first unless
// clear is false.
export function showPanelErrors(errors, boxFallback = 'patch-form', clear = true) {
  if (clear) {
    for (const el of $('patch-view').querySelectorAll('.error')) el.textContent = '';
    for (const el of $('patch-view').querySelectorAll('[aria-invalid]')) {
      el.removeAttribute('aria-invalid');
      el.setAttribute('aria-describedby', el.dataset.describedby || '');
    }
  }
  for (const [field, message] of Object.entries(errors)) {
    const input = FIELDS.includes(field) ? $(`patch-${field}`) : null;
    const box = input ? $(`patch-${field}-error`) : $(`${field}-error`) || $(`${boxFallback}-error`);
    box.textContent = message;
    if (input) {
      input.setAttribute('aria-invalid', 'true');
      input.setAttribute('aria-describedby', [input.dataset.describedby, box.id].filter(Boolean).join(' '));
    }
  }
}

// The panel's field a problem's pointer names: "/metric/correct" is
// correct, "/corrupted" corrupted; /attention's "/sentence" is the clean
// prompt (what DLA and the ablations read) and "/dla_target/0" the
// answer it names. Anything else is the form's.
export function fieldOfPointer(pointer) {
  const parts = (pointer || '').split('/').filter(Boolean);
  if (parts[0] === 'metric' && FIELDS.includes(parts[1])) return parts[1];
  if (parts[0] === 'sentence') return 'clean';
  if (parts[0] === 'dla_target') {
    if ($('patch-kind').value === 'logprob') return 'target';
    return parts[1] === '1' ? 'incorrect' : 'correct';
  }
  return FIELDS.includes(parts[0]) ? parts[0] : '';
}

// A problem+json answer as { field: detail }, or the HTTP status.
export async function problemOf(response, fallback) {
  const p = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
  const field = fieldOfPointer(p.pointer) || fallback;
  return { [field]: p.detail || `HTTP ${response.status}` };
}
