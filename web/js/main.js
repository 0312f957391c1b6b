// attnd's page: takes the server's fields, restores the view from its URL and wires the page's events to the modules that do the work.
//
// A form that asks the API, a grid of every head drawn from its answer
// (with a model, every layer and head), one head enlarged with readable
// cells, BertViz-style lines and a model's rollout. The whole view lives
// in the page's URL, so a link restores it.
import { $, form } from './dom.js';
import { loadFields } from './fields.js';
import { loadModels, models } from './models.js';
import { setUpControls, setUpModels, showControls } from './controls.js';
import { state, setState, readForm, writeForm, showKind, showMode, stateFromUrl } from './state.js';
import { localErrors, showErrors } from './validate.js';
import { compute } from './compute.js';
import { selectBatch, selectLayer, setView } from './results.js';
import { setUpMeasures } from './measureview.js';
import { copyLink, listenDownloads } from './downloads.js';
import { setUpGenerate } from './generate.js';
import { setUpChat } from './chat.js';
import { setUpPatching } from './patching.js';

let debounce = 0; // typing asks once it pauses

function listen() {
  form.addEventListener('submit', (e) => { e.preventDefault(); compute(true); });
  form.addEventListener('input', (e) => {
    if (e.target.name === 'kind') showKind(e.target.value);
    if (e.target.name === 'model') showMode(e.target.value);
    clearTimeout(debounce);
    const s = readForm();
    showErrors(localErrors(s));
    // a choice from a list or a check box is made at once; typing pauses
    const chosen = e.target.tagName === 'SELECT' || e.target.type === 'checkbox';
    debounce = setTimeout(() => compute(false), chosen ? 0 : 450);
  });
  $('batch').addEventListener('change', (e) => selectBatch(e.target.value));
  $('layer').addEventListener('input', (e) => selectLayer(e.target.value));
  $('embeddings-file').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    $('embeddings').value = await file.text();
    compute(false);
  });
  $('share').addEventListener('click', copyLink);
  listenDownloads();
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
    await Promise.all([loadFields(), loadModels()]);
  } catch (err) {
    showErrors({ form: `The form needs the server's fields, and GET /config ${err.message}. Reload the page to try again.` });
    return;
  }
  setUpControls();
  setUpModels();
  setUpGenerate();
  setUpChat();
  setUpPatching();
  setUpMeasures(setView);
  showControls();
  listen();
  // a link may name a model this server has not loaded: it is said so,
  // beside the random weights shown instead
  const asked = stateFromUrl();
  const missing = asked.model && !models().some((m) => m.name === asked.model)
    ? asked.model : '';
  if (missing) asked.model = '';
  setState(asked);
  writeForm(state);
  await compute(false);
  if (missing) {
    $('status').textContent = `The link names the model "${missing}", which this server has not `
      + 'loaded (GET /models lists those it has); showing random weights instead.';
  }
}

start();
