// attnd's page: restores the view from its URL and wires the page's events to the modules that do the work.
//
// A form that asks the API, a grid of the server's heatmaps, one head
// enlarged with readable cells, and BertViz-style lines. The whole view
// lives in the page's URL, so a link restores it.
import { $, form } from './dom.js';
import { state, setState, readForm, writeForm, showKind, stateFromUrl, pageUrl } from './state.js';
import { localErrors, showErrors } from './validate.js';
import { generation } from './api.js';
import { compute } from './compute.js';
import { render } from './results.js';
import { copyLink } from './downloads.js';

let debounce = 0; // typing asks once it pauses

form.addEventListener('submit', (e) => { e.preventDefault(); compute(true); });
form.addEventListener('input', (e) => {
  if (e.target.name === 'kind') showKind(e.target.value);
  clearTimeout(debounce);
  const s = readForm();
  showErrors(localErrors(s));
  debounce = setTimeout(() => compute(false), 450);
});
$('batch').addEventListener('change', (e) => {
  state.batch = e.target.value;
  history.replaceState(null, '', pageUrl(state));
  render(generation);
});
$('embeddings-file').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  $('embeddings').value = await file.text();
  compute(false);
});
$('share').addEventListener('click', copyLink);
window.addEventListener('popstate', () => {
  setState(stateFromUrl());
  writeForm(state);
  compute(false);
});

setState(stateFromUrl());
writeForm(state);
compute(false);
