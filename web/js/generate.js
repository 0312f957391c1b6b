// Generation: a decoder continues the sentence (greedy, or sampled from a seed), each token shown as it arrives (POST /generate, NDJSON), then every view over the whole sequence, a token's row on demand, and the logit lens.
import { $ } from './dom.js';
import { state } from './state.js';
import { setResult } from './api.js';
import { render, setFocus } from './results.js';

let running = null; // the AbortController of the generation in progress

// A token as a button: its text (a leading space shown), what it is.
function tokenButton(text, i, generated) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = generated ? 'token generated' : 'token';
  b.textContent = text === null ? '∅' : text.replace(/^ /, '␣');
  b.dataset.index = String(i);
  b.title = generated ? `generated token ${i}` : `prompt token ${i}`;
  b.disabled = true; // until the whole sequence is there to look at
  b.addEventListener('click', () => {
    for (const o of $('generated').querySelectorAll('button.token'))
      o.setAttribute('aria-pressed', String(o === b));
    setFocus(i);
  });
  return b;
}

// The logit lens: a row per layer, a column per position, the token it
// would say next (its probability on hover).
function drawLens(done) {
  const table = $('lens');
  const lens = done.logit_lens;
  table.hidden = !lens;
  if (!lens) return;
  const head = document.createElement('tr');
  head.append(document.createElement('th'));
  for (const t of done.tokens) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = t === null ? '∅' : t;
    head.append(th);
  }
  const rows = lens.map((layer, l) => {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = `layer ${l}`;
    tr.append(th);
    for (const top of layer) {
      const td = document.createElement('td');
      td.textContent = top[0].text === null ? '∅' : top[0].text;
      td.title = `p = ${top[0].p}`;
      tr.append(td);
    }
    return tr;
  });
  table.replaceChildren(table.querySelector('caption'), head, ...rows);
}

// Reads the NDJSON stream, a line at a time, into onEvent.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  for (;;) {
    const { value, done } = await reader.read();
    pending += decoder.decode(value || new Uint8Array(), { stream: !done });
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (line) onEvent(JSON.parse(line));
    }
    if (done) return;
  }
}

async function generate() {
  if (running) running.abort();
  running = new AbortController();
  const out = $('generated');
  const status = $('generate-status');
  out.replaceChildren();
  setFocus(null);
  status.textContent = 'Generating…';
  const body = {
    model: state.model, prompt: state.sentence,
    max_new_tokens: Number($('max_new').value) || 12,
    temperature: Number($('temperature').value) || 0,
    top_k: Number($('top_k').value) || 0,
    top_p: Number($('top_p').value) || 1,
    seed: Number($('seed_gen').value) || 0,
    return: ['weights', 'mean_weights', 'rollout', 'head_stats', 'logit_lens'], logit_lens_k: 1,
  };
  try {
    const response = await fetch('/generate', {
      method: 'POST', signal: running.signal,
      headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
      status.textContent = problem.detail;
      return;
    }
    let index = 0;
    await readEvents(response, (e) => {
      if (e.event === 'token') {
        out.append(tokenButton(e.text, index++, true));
      } else if (e.event === 'error') {
        status.textContent = `Stopped: ${e.detail}`;
      } else if (e.event === 'done') {
        // the prompt's tokens before the generated ones, every one now a
        // way into the views
        out.replaceChildren(...e.tokens.map((t, i) =>
          Object.assign(tokenButton(t, i, i >= e.prompt_tokens), { disabled: false })));
        const { event, prompt_tokens: p, finish_reason: why, text, ...answer } = e;
        setResult({ data: answer, text: JSON.stringify(answer), key: `generate ${JSON.stringify(body)}` });
        render();
        drawLens(answer);
        status.textContent = `${answer.tokens.length - p} tokens (${why}); select a token to see its row.`;
      }
    });
  } catch (err) {
    if (err.name !== 'AbortError') status.textContent = `The server could not be reached: ${err.message}`;
  }
}

export function setUpGenerate() {
  $('generate').addEventListener('click', generate);
  $('unfocus').addEventListener('click', () => {
    for (const o of $('generated').querySelectorAll('button.token')) o.setAttribute('aria-pressed', 'false');
    setFocus(null);
  });
}
