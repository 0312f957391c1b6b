// attnd's page: takes the server's fields, restores the view from its URL and wires the page's events to the modules that do the work.
//
// A form that asks the API, a grid of the server's heatmaps, one head
// enlarged with readable cells, and BertViz-style lines. The whole view
// lives in the page's URL, so a link restores it.
import { $, form } from './dom.js';
import { loadFields } from './fields.js';
import { setUpControls, showControls } from './controls.js';
import { state, setState, readForm, writeForm, showKind, stateFromUrl, pageUrl } from './state.js';
import { localErrors, showErrors } from './validate.js';
import { generation } from './api.js';
import { compute } from './compute.js';
import { render } from './results.js';
import { copyLink } from './downloads.js';

let debounce = 0; // typing asks once it pauses

function listen() {
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
}

// The form's defaults, ranges and options are the server's, so without
// them there is no form: only the error that says why.
async function start() {
  try {
    await loadFields();
  } catch (err) {
    showErrors({ form: `The form needs the server's fields, and GET /config ${err.message}. Reload the page to try again.` });
    return;
  }
  setUpControls();
  showControls();
  listen();
  setState(stateFromUrl());
  writeForm(state);
  compute(false);
}

start();
