// One computation: check the form, put it in the URL, ask the server, show the answer.
import { $, form } from './dom.js';
import { readForm, setState, pageUrl } from './state.js';
import { localErrors, showErrors, fieldOfPointer } from './validate.js';
import { nextRequest, generation, fetchWeights, setResult, result, requestKey } from './api.js';
import { render, clearFocus } from './results.js';

function setBusy(busy) {
  form.setAttribute('aria-busy', String(busy));
  $('results').classList.toggle('busy', busy);
  $('status').textContent = busy ? 'Computing…' : '';
  $('run').disabled = false;
}

// push: a new history entry (the form was submitted) rather than
// replacing the current one (typing, going back). Quick answers never show
// the busy state, so the page does not flicker while typing. A state the
// answer on screen already answers (only the view changed: colours,
// hidden tokens) is drawn from it, without asking again.
export async function compute(push) {
  const s = readForm();
  const errors = localErrors(s);
  showErrors(errors);
  if (Object.keys(errors).length) return;
  const { mine, signal } = nextRequest();
  const drawn = result && result.key === requestKey(s);
  // asked first: the page's own work below overlaps the server's
  const asked = drawn ? null : fetchWeights(s, signal);
  asked?.catch(() => {}); // awaited below; a rejection is handled there
  setState(s);
  const url = pageUrl(s);
  if (push) history.pushState(null, '', url);
  else history.replaceState(null, '', url);
  if (drawn) {
    setBusy(false); // a request this one replaced may have shown it
    render();
    return;
  }
  const slow = setTimeout(() => { if (mine === generation) setBusy(true); }, 150);
  try {
    const answer = await asked;
    if (mine !== generation) return;
    if (answer.problem) {
      showErrors({ [fieldOfPointer(answer.problem.pointer)]: answer.problem.detail });
      return;
    }
    setResult(answer);
    clearFocus();
    render();
  } catch (err) {
    if (err.name !== 'AbortError' && mine === generation)
      showErrors({ form: `The server could not be reached: ${err.message}` });
  } finally {
    clearTimeout(slow);
    if (mine === generation) setBusy(false);
  }
}
