// The generate view's chat mode: the switch between continuing the text and a chat, whether the model's chat template allows one, and the messages editor whose conversation chattokens.js counts and chatstream.js sends.
import { $ } from './dom.js';
import { models } from './models.js';
import { scheduleTokens, clearTokens } from './chattokens.js';

const ROLES = ['system', 'user', 'assistant'];

let chosen = false; // Chat pressed (kept while a model without a template is in view)
let offered = false; // the model in view has a chat template that renders
let model = '';
let made = 0; // messages made so far: each one's ids stay unique

// Whether the view generates a chat reply rather than continuing the text.
export const chatMode = () => chosen && offered;

// Why a model (its GET /models entry) offers no chat, or '' when it does.
// A chat without tools renders the template named "default", else the
// first, as the server picks it.
export function chatRefusal(entry) {
  const c = entry?.chat_template;
  if (!c || !Array.isArray(c.templates) || c.templates.length === 0)
    return `the model "${entry?.name}" has no chat template (neither tokenizer_config.json's chat_template `
      + 'nor chat_template.jinja), so it can only continue a text.';
  const t = c.templates.find((x) => x.name === 'default') ?? c.templates[0];
  if (!t.renders)
    return `the model "${entry.name}"'s chat template "${t.name}" (from ${c.source}) cannot be rendered: ${t.error}`;
  return '';
}

// The model in view (a decoder's name, or '' for none or an encoder):
// the switch offers Chat when its template renders, and says why not.
export function showChat(name) {
  model = name;
  const why = name ? chatRefusal(models().find((m) => m.name === name)) : 'it needs a decoder.';
  offered = why === '';
  $('gen-chat').setAttribute('aria-disabled', String(!offered));
  $('chat-unavailable').hidden = offered;
  $('chat-unavailable').textContent = offered ? '' : `Chat is not available: ${why}`;
  showGenMode();
  if (chatMode()) scheduleTokens(0);
  else clearTokens();
}

function showGenMode() {
  const on = chatMode();
  $('gen-text').setAttribute('aria-pressed', String(!on));
  $('gen-chat').setAttribute('aria-pressed', String(on));
  for (const el of $('generate-view').querySelectorAll('[data-gen]'))
    el.hidden = el.dataset.gen !== (on ? 'chat' : 'text');
  $('generate-title').textContent = on ? 'Chat with the model' : 'Continue the text';
}

function choose(chat) {
  if (chat && !offered) {
    // the reason is beside the button, and read with it (aria-describedby)
    $('chat-unavailable').classList.add('flash');
    setTimeout(() => $('chat-unavailable').classList.remove('flash'), 600);
    return;
  }
  chosen = chat;
  showGenMode();
  if (chatMode()) scheduleTokens(0);
}

// The template options as an object, or { error } saying why they are
// not one; empty: none.
function templateOptions() {
  const text = $('chat-kwargs').value.trim();
  if (text === '') return { kwargs: null };
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    return { error: `The template options are not JSON (${err.message}); write an object, `
      + 'such as {"enable_thinking": false}, or leave them empty.' };
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    return { error: `The template options must be a JSON object, such as {"enable_thinking": false}, `
      + `not ${Array.isArray(v) ? 'an array' : v === null ? 'null' : `a ${typeof v}`}.` };
  return { kwargs: v };
}

function showOptionsError() {
  const { error } = templateOptions();
  $('chat-kwargs-error').textContent = error ?? '';
  $('chat-kwargs').setAttribute('aria-invalid', String(Boolean(error)));
}

const items = () => [...$('chat-messages').children];

// The conversation as the API takes it: { model, messages,
// add_generation_prompt, continue_final_message, chat_template_kwargs
// (when given) }, or { error } when the template options are not an
// object.
export function conversation() {
  const opts = templateOptions();
  if (opts.error) return { error: opts.error };
  const messages = items().map((li) => ({
    role: li.querySelector('select').value, content: li.querySelector('textarea').value }));
  const cont = !$('chat-continue').disabled && $('chat-continue').checked;
  const c = { model, messages, add_generation_prompt: !cont, continue_final_message: cont };
  if (opts.kwargs) c.chat_template_kwargs = opts.kwargs;
  return c;
}

// Each message's labels name its place; the last one's role says whether
// it may be continued; one message always stays.
function relabel() {
  const all = items();
  all.forEach((li, i) => {
    const role = li.querySelector('select').value;
    li.dataset.role = role;
    li.querySelector('label').textContent = `Message ${i + 1}, from`;
    li.querySelector('textarea').setAttribute('aria-label', `message ${i + 1} (${role})`);
    const remove = li.querySelector('button.remove');
    remove.setAttribute('aria-label', `Remove message ${i + 1}`);
    remove.disabled = all.length === 1;
  });
  const last = all.at(-1)?.querySelector('select').value;
  $('chat-continue').disabled = last !== 'assistant';
  if (last !== 'assistant') $('chat-continue').checked = false;
}

function messageItem(role, content) {
  const n = ++made;
  const li = document.createElement('li');
  li.className = 'chat-message';
  const head = document.createElement('div');
  head.className = 'chat-message-head';
  const label = document.createElement('label');
  label.htmlFor = `chat-role-${n}`;
  const select = document.createElement('select');
  select.id = `chat-role-${n}`;
  select.replaceChildren(...ROLES.map((r) => new Option(r, r, false, r === role)));
  const remove = document.createElement('button');
  remove.type = 'button';
  remove.className = 'remove secondary';
  remove.textContent = 'Remove';
  remove.addEventListener('click', () => removeMessage(li));
  head.append(label, select, remove);
  const text = document.createElement('textarea');
  text.id = `chat-text-${n}`;
  text.rows = 2;
  text.value = content;
  li.append(head, text);
  return li;
}

function removeMessage(li) {
  const next = li.nextElementSibling ?? li.previousElementSibling;
  li.remove();
  relabel();
  (next?.querySelector('textarea') ?? $('chat-add')).focus();
  scheduleTokens();
}

// A new message takes the turn after the last one's: the assistant's
// after the user's, the user's otherwise.
function addMessage() {
  const last = items().at(-1)?.querySelector('select').value;
  const li = messageItem(last === 'user' ? 'assistant' : 'user', '');
  $('chat-messages').append(li);
  relabel();
  li.querySelector('textarea').focus();
  scheduleTokens();
}

export function setUpChat() {
  $('chat-messages').replaceChildren(messageItem('user', 'What does attention do?'));
  relabel();
  $('gen-text').addEventListener('click', () => choose(false));
  $('gen-chat').addEventListener('click', () => choose(true));
  $('chat-add').addEventListener('click', addMessage);
  const panel = $('chat-panel');
  panel.addEventListener('input', (e) => {
    if (e.target.tagName === 'SELECT') relabel();
    if (e.target === $('chat-kwargs')) showOptionsError();
    // a choice is made at once; typing pauses
    scheduleTokens(e.target.tagName === 'SELECT' || e.target.type === 'checkbox' ? 0 : 300);
  });
  // Ctrl+Enter (or ⌘+Enter) in a message generates, as in chat programs
  panel.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && e.target.tagName === 'TEXTAREA') {
      e.preventDefault();
      $('generate').click();
    }
  });
}
