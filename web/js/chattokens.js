// The chat's prompt as tokens before anything is generated: POST /tokenize with the conversation as it is edited (once typing pauses; the newest answer wins), each token a chip, the tokenizer's special tokens marked, their count, and the template's refusal when it refuses.
import { $ } from './dom.js';
import { conversation } from './chat.js';

let timer = 0;
let inflight = null; // the AbortController of the count in progress

// A token's text as a chip shows it: spaces, line breaks and tabs made
// visible (a chat template is full of them).
export function chipText(t) {
  if (t === null || t === undefined) return '∅';
  return t.replace(/ /g, '␣').replace(/\r?\n/g, '↵').replace(/\t/g, '⇥');
}

// Counts the conversation's tokens after delay ms, in place of a count
// asked before.
export function scheduleTokens(delay = 300) {
  clearTimeout(timer);
  timer = setTimeout(countTokens, delay);
}

// Nothing to count (no chat in view): nothing asked, nothing shown.
export function clearTokens() {
  clearTimeout(timer);
  inflight?.abort();
  inflight = null;
  show({ count: '', chips: [], error: '', rendered: null });
}

function show({ count, chips, error, rendered }) {
  $('chat-count').textContent = count;
  $('chat-tokens').replaceChildren(...chips);
  $('chat-error').textContent = error;
  $('chat-rendered-box').hidden = rendered === null;
  $('chat-rendered').textContent = rendered ?? '';
  $('chat-tokens').removeAttribute('aria-busy');
}

function chip(text, i, id, special) {
  const li = document.createElement('li');
  li.className = special ? 'chip special' : 'chip';
  li.textContent = chipText(text);
  li.title = `token ${i}: id ${id}${special ? ', special' : ''}`;
  if (special) {
    const note = document.createElement('span');
    note.className = 'visually-hidden';
    note.textContent = ' (special)';
    li.append(note);
  }
  return li;
}

async function countTokens() {
  const c = conversation();
  inflight?.abort();
  inflight = null;
  if (c.error) {
    // said under the options' field; the tokens shown are no longer the prompt's
    show({ count: 'The prompt cannot be counted until the template options are a JSON object.',
      chips: [], error: '', rendered: null });
    return;
  }
  const mine = new AbortController();
  inflight = mine;
  $('chat-tokens').setAttribute('aria-busy', 'true');
  try {
    const response = await fetch('/tokenize', {
      method: 'POST', signal: mine.signal,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ ...c, return_token_strs: true }),
    });
    const doc = await response.json().catch(() => null);
    if (inflight !== mine) return;
    if (!response.ok || !doc) {
      show({ count: '', chips: [], error: doc?.detail ?? `The server answered HTTP ${response.status}.`,
        rendered: null });
      return;
    }
    const special = doc.special ?? [];
    const marked = special.filter(Boolean).length;
    show({
      count: `${doc.count} tokens, ${marked} of them special (in bold, dashed)`
        + `${doc.max_model_len ? `; the model takes ${doc.max_model_len.toLocaleString('en')} at most` : ''}.`,
      chips: doc.tokens.map((id, i) => chip(doc.token_strs?.[i], i, id, Boolean(special[i]))),
      error: '',
      rendered: doc.prompt ?? null,
    });
  } catch (err) {
    if (err.name !== 'AbortError' && inflight === mine)
      show({ count: '', chips: [], error: `The server could not be reached: ${err.message}`, rendered: null });
  } finally {
    if (inflight === mine) {
      inflight = null;
      $('chat-tokens').removeAttribute('aria-busy');
    }
  }
}
