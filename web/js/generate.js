// Generation: a decoder continues the sentence (greedy, or sampled from a seed), each token shown as it arrives (POST /generate, NDJSON), or replies to a chat (chatstream.js); then every view over the whole sequence, a token's row on demand, and the logit lens.
import { $ } from './dom.js';
import { state } from './state.js';
import { setResult, requestKey } from './api.js';
import { render, setFocus } from './results.js';
import { chatMode } from './chat.js';
import { streamChat } from './chatstream.js';

let running = null; // the AbortController of the generation in progress

// A token's text as the sequence shows it: a leading space, line breaks
// and tabs made visible (a chat template's turns are full of them).
export function shownToken(text) {
  return text === null ? '∅' : text.replace(/^ /, '␣').replace(/\r?\n/g, '↵').replace(/\t/g, '⇥');
}

// A token as a button: its text (a leading space shown), what it is;
// special: the tokenizer or a chat template put it in (a BOS, a turn's
// markers), marked apart from the text's own.
export function tokenButton(text, i, generated, special = false) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = `token${generated ? ' generated' : ''}${special ? ' special' : ''}`;
  b.textContent = shownToken(text);
  b.dataset.index = String(i);
  b.title = `${generated ? 'generated' : 'prompt'} token ${i}${special ? ' (special)' : ''}`;
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
    th.textContent = shownToken(t);
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
      td.textContent = shownToken(top[0].text);
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

// The finished sequence (answer: /attention's JSON for it, the layout of
// /generate's done event and of a chat's "attention"; its first prompt
// tokens the prompt's) in every view, each token a way into them. The
// answer stands for the form as it is, so a change of the view alone
// (colours, hidden tokens) redraws it rather than asking for the
// sentence's again.
export function showSequence(answer, prompt, why) {
  $('generated').replaceChildren(...answer.tokens.map((t, i) =>
    Object.assign(tokenButton(t, i, i >= prompt, Boolean(answer.added?.[i])), { disabled: false })));
  setResult({ data: answer, text: JSON.stringify(answer), key: requestKey(state) });
  render();
  drawLens(answer);
  $('generate-status').textContent =
    `${answer.tokens.length - prompt} tokens (${why}); select a token to see its row.`;
}

// What the page asks of the finished sequence, in either mode.
export const RETURNED = ['weights', 'mean_weights', 'rollout', 'head_stats', 'logit_lens'];

// The sampling controls, shared by both modes.
export function sampling() {
  return {
    max_new: Number($('max_new').value) || 12,
    temperature: Number($('temperature').value) || 0,
    top_k: Number($('top_k').value) || 0,
    top_p: Number($('top_p').value) || 1,
    seed: Number($('seed_gen').value) || 0,
  };
}

// The text continued: /generate's tokens as they come, then the sequence.
async function continueText(signal) {
  const out = $('generated');
  const status = $('generate-status');
  const s = sampling();
  const body = {
    model: state.model, prompt: state.sentence, max_new_tokens: s.max_new,
    temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, seed: s.seed,
    return: RETURNED, logit_lens_k: 1,
  };
  const response = await fetch('/generate', {
    method: 'POST', signal,
    headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' },
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    const problem = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
    status.textContent = '';
    $('generate-error').textContent = problem.detail;
    return;
  }
  let index = 0;
  await readEvents(response, (e) => {
    if (e.event === 'token') {
      out.append(tokenButton(e.text, index++, true));
    } else if (e.event === 'error') {
      status.textContent = '';
      $('generate-error').textContent = `Stopped: ${e.detail}`;
    } else if (e.event === 'done') {
      const { event, prompt_tokens: p, finish_reason: why, text, ...answer } = e;
      showSequence(answer, p, why);
    }
  });
}

// Generate in the mode chosen; a generation in progress is stopped first.
// Stop aborts the fetch, and the server, seeing its client go, stops.
async function generate() {
  if (running) running.abort();
  const mine = new AbortController();
  running = mine;
  $('generated').replaceChildren();
  $('generate-error').textContent = '';
  setFocus(null);
  $('generate-status').textContent = 'Generating…';
  $('generate-stop').hidden = false;
  try {
    await (chatMode() ? streamChat(mine.signal) : continueText(mine.signal));
  } catch (err) {
    if (err.name === 'AbortError') {
      if (running === mine) $('generate-status').textContent = 'Stopped.';
    } else {
      $('generate-status').textContent = '';
      $('generate-error').textContent = `The server could not be reached: ${err.message}`;
    }
  } finally {
    if (running === mine) {
      running = null;
      // the focus, if it was on Stop, goes back to Generate
      if (document.activeElement === $('generate-stop')) $('generate').focus();
      $('generate-stop').hidden = true;
    }
  }
}

export function setUpGenerate() {
  $('generate').addEventListener('click', generate);
  $('generate-stop').addEventListener('click', () => running?.abort());
  $('unfocus').addEventListener('click', () => {
    for (const o of $('generated').querySelectorAll('button.token')) o.setAttribute('aria-pressed', 'false');
    setFocus(null);
  });
}
