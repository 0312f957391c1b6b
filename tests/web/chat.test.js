// The generate view's chat mode in Chromium against the real server: the
// Text / Chat switch by each model's chat template, the messages editor,
// the prompt's tokens as they are typed (POST /tokenize), the reply
// streamed from POST /v1/chat/completions, the finished sequence in every
// view, Stop, and the errors of both shapes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { root, startServer, launchBrowser } from './harness.js';

const shots = fileURLToPath(new URL('./screenshots/', import.meta.url));
const DEADLINE = 20000;
// Llama 3.2's template writes today's date unless it is given one
const DATE = { date_string: '26 Jul 2024' };
let server, browser;

// The committed checkpoints with real chat templates (llama3: Llama 3.2's,
// 2 layers of 4 heads on 2 KV heads; qwen3; gemma2, whose template
// refuses a system message), and gpt2, which has none.
before(async () => {
  server = await startServer(['--model', `llama=${root}tests/models/llama3`,
    '--model', `qwen3=${root}tests/models/qwen3`, '--model', `gemma2=${root}tests/models/gemma2`,
    '--model', `gpt2=${root}tests/models/gpt2`]);
  browser = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.child.kill('SIGTERM');
});

async function post(path, body) {
  const r = await fetch(`${server.url}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, doc: await r.json() };
}

// The page on a model, its view of the default sentence drawn.
async function openModel(model, viewport = { width: 1280, height: 800 }) {
  const page = await browser.newPage({ viewport });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.errors = errors;
  await page.goto(`${server.url}/?model=${model}`);
  await page.waitForFunction(() => document.querySelectorAll('#grid button.thumb canvas').length > 0 &&
    document.querySelector('#controls').getAttribute('aria-busy') !== 'true', null, { timeout: DEADLINE });
  return page;
}

// The same, in chat mode, its first count shown.
async function openChat(model, viewport) {
  const page = await openModel(model, viewport);
  await page.click('#gen-chat');
  await page.waitForSelector('#chat-panel:not([hidden])');
  await settled(page);
  return page;
}

// The count in view answers the conversation on screen: nothing waiting
// to be asked or answered.
async function settled(page) {
  await page.waitForTimeout(350); // past the pause that asks
  await page.waitForFunction(() => !document.querySelector('#chat-tokens').hasAttribute('aria-busy') &&
    (document.querySelector('#chat-count').textContent !== '' || document.querySelector('#chat-error').textContent !== ''),
  null, { timeout: DEADLINE });
}

// The conversation the page would send, read from its editor.
const messagesOf = (page) => page.$$eval('#chat-messages li', (lis) => lis.map((li) => ({
  role: li.querySelector('select').value, content: li.querySelector('textarea').value })));

// A token's text as a chip shows it.
const chipText = (t) => (t === null ? '∅' : t.replace(/ /g, '␣').replace(/\r?\n/g, '↵').replace(/\t/g, '⇥'));

// The chips on screen: their texts (without the screen reader's note) and
// which are marked special.
const chipsOf = (page) => page.$$eval('#chat-tokens li.chip', (lis) => lis.map((li) => ({
  text: li.firstChild.textContent, special: li.classList.contains('special') })));

async function checkChips(page, body) {
  const { status, doc } = await post('/tokenize', { ...body, return_token_strs: true });
  assert.equal(status, 200, JSON.stringify(doc));
  const chips = await chipsOf(page);
  assert.equal(chips.length, doc.count);
  assert.deepEqual(chips.map((c) => c.text), doc.token_strs.map(chipText));
  assert.deepEqual(chips.map((c) => c.special), doc.special);
  assert.match(await page.textContent('#chat-count'), new RegExp(`^${doc.count} tokens, ${doc.special.filter(Boolean).length} of them special`));
  assert.equal(await page.textContent('#chat-rendered'), doc.prompt);
  return doc;
}

test('chat is offered for models whose template renders; gpt2 says why not', async () => {
  const doc = await (await fetch(`${server.url}/models`)).json();
  const entry = (name) => doc.models.find((m) => m.name === name);
  assert.equal(entry('gpt2').chat_template, null);
  assert.ok(entry('qwen3').chat_template.templates.some((t) => t.renders));
  for (const model of ['llama', 'qwen3']) {
    const page = await openModel(model);
    assert.equal(await page.getAttribute('#gen-chat', 'aria-disabled'), 'false');
    assert.equal(await page.isHidden('#chat-unavailable'), true);
    assert.equal(await page.isHidden('#chat-panel'), true); // Text first
    await page.click('#gen-chat');
    assert.equal(await page.getAttribute('#gen-chat', 'aria-pressed'), 'true');
    assert.equal(await page.isVisible('#chat-panel'), true);
    assert.equal(await page.textContent('#generate-title'), 'Chat with the model');
    await page.close();
  }
  const page = await openModel('gpt2');
  assert.equal(await page.getAttribute('#gen-chat', 'aria-disabled'), 'true');
  assert.match(await page.textContent('#chat-unavailable'), /^Chat is not available: the model "gpt2" has no chat template/);
  // the reason is the button's description; pressing it changes nothing
  assert.equal(await page.getAttribute('#gen-chat', 'aria-describedby'), 'chat-unavailable');
  await page.focus('#gen-chat');
  await page.keyboard.press('Enter');
  assert.equal(await page.isHidden('#chat-panel'), true);
  assert.equal(await page.getAttribute('#gen-text', 'aria-pressed'), 'true');
  // chat chosen on a model with a template, then gpt2: the text again, and back
  await page.selectOption('#model', 'qwen3');
  await page.click('#gen-chat');
  await page.waitForSelector('#chat-panel:not([hidden])');
  await page.selectOption('#model', 'gpt2');
  await page.waitForSelector('#chat-panel', { state: 'hidden' });
  assert.equal(await page.isVisible('#chat-unavailable'), true);
  await page.selectOption('#model', 'qwen3');
  await page.waitForSelector('#chat-panel:not([hidden])');
  assert.deepEqual(page.errors, []);
  await page.close();

  // a template that does not compile: its error said (the entry as a
  // server would give it for such a template, the rest the real one's)
  const broken = await browser.newPage();
  await broken.route('**/models', async (route) => {
    const real = await (await route.fetch()).json();
    real.models.find((m) => m.name === 'qwen3').chat_template = { source: 'chat_template.jinja',
      templates: [{ name: 'default', renders: false, error: 'unknown tag "macro2" at line 3, column 4' }] };
    await route.fulfill({ json: real });
  });
  await broken.goto(`${server.url}/?model=qwen3`);
  await broken.waitForSelector('#chat-unavailable:not([hidden])', { timeout: DEADLINE });
  assert.equal(await broken.textContent('#chat-unavailable'), 'Chat is not available: the model "qwen3"\'s chat '
    + 'template "default" (from chat_template.jinja) cannot be rendered: unknown tag "macro2" at line 3, column 4');
  assert.equal(await broken.getAttribute('#gen-chat', 'aria-disabled'), 'true');
  await broken.close();
});

test('the prompt\'s tokens as the messages are typed: chips, special tokens marked, the count of /tokenize', async () => {
  const page = await openChat('qwen3');
  const asked = [];
  page.on('request', (r) => { if (r.url().endsWith('/tokenize')) asked.push(r.postDataJSON()); });
  // typed key by key: asked once typing pauses, not once a key
  const text = page.locator('#chat-messages li >> nth=0 >> textarea');
  await text.fill('');
  await text.pressSequentially('Why is the sky blue?', { delay: 20 });
  await settled(page);
  assert.ok(asked.length >= 1 && asked.length <= 4, `${asked.length} requests for 20 keys`);
  const body = { model: 'qwen3', messages: await messagesOf(page), add_generation_prompt: true,
    continue_final_message: false };
  assert.deepEqual(asked.at(-1), { ...body, return_token_strs: true });
  const doc = await checkChips(page, body);
  // <|im_start|> opens the turn, marked as special
  const chips = await chipsOf(page);
  assert.deepEqual(chips[0], { text: '<|im_start|>', special: true });
  assert.ok(chips.some((c) => !c.special));
  assert.match(doc.prompt, /<\|im_start\|>assistant\n$/);

  // a system message first, then the assistant's reply to continue
  await page.click('#chat-add');
  const roles = () => page.$$eval('#chat-messages select', (ss) => ss.map((s) => s.value));
  assert.deepEqual(await roles(), ['user', 'assistant']);
  // the new message has the focus
  assert.equal(await page.evaluate(() => document.activeElement.closest('li')?.dataset.role), 'assistant');
  await page.keyboard.type('Because of');
  assert.equal(await page.isEnabled('#chat-continue'), true);
  await page.check('#chat-continue');
  await settled(page);
  const cont = { model: 'qwen3', messages: await messagesOf(page), add_generation_prompt: false,
    continue_final_message: true };
  const continued = await checkChips(page, cont);
  assert.match(continued.prompt, /Because of$/);
  // the last message the user's again: nothing to continue
  await page.selectOption('#chat-messages li >> nth=1 >> select', 'user');
  assert.equal(await page.isDisabled('#chat-continue'), true);
  assert.equal(await page.isChecked('#chat-continue'), false);
  await page.click('#chat-messages li >> nth=1 >> button.remove');
  assert.equal(await page.locator('#chat-messages li').count(), 1);
  assert.equal(await page.isDisabled('#chat-messages li >> nth=0 >> button.remove'), true);
  await settled(page);
  await checkChips(page, body);

  // template options: not JSON, not an object, then Qwen3's switch of thinking
  await page.fill('#chat-kwargs', '{"enable_thinking": fals');
  await page.waitForFunction(() => /not JSON/.test(document.querySelector('#chat-kwargs-error').textContent));
  assert.equal(await page.getAttribute('#chat-kwargs', 'aria-invalid'), 'true');
  await page.fill('#chat-kwargs', '[1]');
  await page.waitForFunction(() => /must be a JSON object.*not an array/.test(document.querySelector('#chat-kwargs-error').textContent));
  await page.fill('#chat-kwargs', '{"enable_thinking": false}');
  await page.waitForFunction(() => document.querySelector('#chat-kwargs-error').textContent === '');
  assert.equal(await page.getAttribute('#chat-kwargs', 'aria-invalid'), 'false');
  await settled(page);
  const thinking = await checkChips(page, { ...body, chat_template_kwargs: { enable_thinking: false } });
  // the template's empty thought: more tokens than without it
  assert.ok(thinking.count > doc.count, `${thinking.count} against ${doc.count}`);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('a reply streamed at temperature 0 is the API\'s own, then every view shows the whole sequence', async () => {
  const page = await openChat('llama');
  await page.fill('#chat-messages li >> nth=0 >> textarea', 'Tell me about the cat.');
  await page.fill('#chat-kwargs', JSON.stringify(DATE));
  await page.fill('#max_new', '8');
  await settled(page);
  const messages = await messagesOf(page);
  // Ctrl+Enter in a message generates
  await page.focus('#chat-messages li >> nth=0 >> textarea');
  await page.keyboard.press('Control+Enter');
  await page.waitForFunction(() => /tokens \(/.test(document.querySelector('#generate-status').textContent),
    null, { timeout: DEADLINE });
  assert.equal(await page.isHidden('#generate-stop'), true);
  // the same request, whole: its content, and the sequence's tokens
  const { status, doc } = await post('/v1/chat/completions', { model: 'llama', messages, max_tokens: 8,
    temperature: 0, chat_template_kwargs: DATE, attention: { return: ['weights'] } });
  assert.equal(status, 200, JSON.stringify(doc));
  const content = doc.choices[0].message.content;
  assert.equal(await page.textContent('#chat-reply'), content);
  // the reply grew a chunk at a time: a piece of text for each of the
  // stream's chunks with content, as the server streams them
  const streamed = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'llama', messages, max_tokens: 8, temperature: 0, stream: true,
      chat_template_kwargs: DATE }),
  });
  const pieces = (await streamed.text()).split('\n\n').filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content).filter((t) => t);
  assert.ok(pieces.length > 1);
  assert.deepEqual(await page.$eval('#chat-reply', (p) => [...p.childNodes].map((n) => n.textContent)), pieces);
  const { tokens, added } = doc.attention;
  const T = tokens.length;
  assert.equal(T, doc.usage.prompt_tokens + doc.usage.completion_tokens);
  const tok = await post('/tokenize', { model: 'llama', messages, add_generation_prompt: true,
    chat_template_kwargs: DATE });
  assert.equal(doc.usage.prompt_tokens, tok.doc.count);
  // the sequence as buttons: the prompt's, then the reply's; special ones marked
  const shown = await page.$$eval('#generated button.token', (bs) => bs.map((b) => ({
    text: b.textContent, generated: b.classList.contains('generated'), special: b.classList.contains('special') })));
  assert.deepEqual(shown.map((b) => b.text), tokens.map((t) => (t === null ? '∅'
    : t.replace(/^ /, '␣').replace(/\r?\n/g, '↵').replace(/\t/g, '⇥'))));
  assert.deepEqual(shown.map((b) => b.special), added);
  assert.equal(shown.filter((b) => b.generated).length, doc.usage.completion_tokens);
  assert.ok(shown[0].special && added.some((a) => !a));
  assert.match(await page.textContent('#generate-status'),
    new RegExp(`^${doc.usage.completion_tokens} tokens \\(${doc.choices[0].finish_reason}\\)`));
  // every layer and head over the whole sequence, the enlarged head and the rollout too
  const sizes = () => page.$$eval('#grid button.thumb canvas', (cs) => cs.map((c) => `${c.width}x${c.height}`));
  assert.equal((await sizes()).length, 2 * 5);
  assert.ok((await sizes()).every((s) => s === `${T}x${T}`), (await sizes()).join(' '));
  assert.equal(await page.$eval('#matrix canvas', (c) => `${c.width}x${c.height}`), `${T}x${T}`);
  assert.equal(await page.$eval('#rollout-matrix canvas', (c) => `${c.width}x${c.height}`), `${T}x${T}`);
  // layer 1, head 2's weights are the API's
  await page.click('#grid button.thumb[data-layer="1"][data-head="2"]');
  const last = await page.$$eval('#matrix .row-labels span', (ss) => ss.length);
  assert.equal(last, T);
  await page.locator('#matrix .cells').focus();
  await page.keyboard.press('ArrowDown');
  const read = await page.textContent('#readout');
  assert.equal(Number(read.split(': ').at(-1)), doc.attention.weights[1][2][0][0]);
  // a token's row in every layer and head
  await page.click(`#generated button.token >> nth=${T - 1}`);
  await page.waitForFunction((t) => [...document.querySelectorAll('#grid button.thumb canvas')]
    .every((c) => c.width === t && c.height === 1), T);
  await page.click('#unfocus');
  // the template's tokens hidden: the sequence's answer stays, without them
  const kept = added.filter((a) => !a).length;
  await page.check('#hide_special');
  await page.waitForFunction((n) => [...document.querySelectorAll('#grid button.thumb canvas')]
    .every((c) => c.width === n && c.height === n), kept, { timeout: DEADLINE });
  assert.equal(await page.locator('#generated button.token').count(), T);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('Stop aborts the reply; the server\'s refusals are shown in its words', async () => {
  const page = await openChat('llama');
  await page.fill('#chat-kwargs', JSON.stringify(DATE));
  await page.fill('#max_new', '256');
  await settled(page);
  // Stop at once: the fetch is aborted, the button gone, nothing drawn
  await page.evaluate(() => {
    document.querySelector('#generate').click();
    document.querySelector('#generate-stop').click();
  });
  await page.waitForFunction(() => document.querySelector('#generate-status').textContent === 'Stopped.',
    null, { timeout: DEADLINE });
  assert.equal(await page.isHidden('#generate-stop'), true);
  assert.equal(await page.textContent('#generate-error'), '');
  assert.equal(await page.locator('#generated button.token').count(), 0);
  // a temperature the API refuses: its error's message, from before the stream
  await page.fill('#max_new', '4');
  await page.fill('#temperature', '5');
  await page.click('#generate');
  const messages = await messagesOf(page);
  const refused = await post('/v1/chat/completions', { model: 'llama', messages, max_tokens: 4,
    temperature: 5, stream: true, chat_template_kwargs: DATE });
  assert.ok(refused.status >= 400 && refused.doc.error.message, JSON.stringify(refused));
  await page.waitForFunction((m) => document.querySelector('#generate-error').textContent === m,
    refused.doc.error.message, { timeout: DEADLINE });
  // an error in the middle of the stream (the server's shape, given by
  // the page's test): its message, the reply so far kept
  await page.fill('#temperature', '0');
  await page.route('**/v1/chat/completions', (route) => route.fulfill({
    status: 200, contentType: 'text/event-stream',
    body: 'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Half"},"finish_reason":null}]}\n\n'
      + 'data: {"error":{"message":"the server is stopping","type":"server_error","param":null,"code":null}}\n\n'
      + 'data: [DONE]\n\n',
  }));
  await page.click('#generate');
  await page.waitForFunction(() => document.querySelector('#generate-error').textContent === 'Stopped: the server is stopping',
    null, { timeout: DEADLINE });
  assert.equal(await page.textContent('#chat-reply'), 'Half');
  await page.unroute('**/v1/chat/completions');
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('gemma2 with a system message: the template\'s refusal, in the tokens and on Generate', async () => {
  const page = await openChat('gemma2');
  assert.equal(await page.textContent('#chat-error'), '');
  await page.selectOption('#chat-messages li >> nth=0 >> select', 'system');
  await page.fill('#chat-messages li >> nth=0 >> textarea', 'Be brief.');
  await page.click('#chat-add');
  await page.keyboard.type('Hello');
  await settled(page);
  const messages = await messagesOf(page);
  assert.deepEqual(messages.map((m) => m.role), ['system', 'user']);
  const tok = await post('/tokenize', { model: 'gemma2', messages, add_generation_prompt: true,
    continue_final_message: false, return_token_strs: true });
  assert.equal(tok.status, 400);
  assert.match(tok.doc.detail, /System role not supported/);
  assert.equal(await page.textContent('#chat-error'), tok.doc.detail);
  assert.equal(await page.locator('#chat-tokens li').count(), 0);
  await page.click('#generate');
  await page.waitForFunction(() => /System role not supported/.test(document.querySelector('#generate-error').textContent),
    null, { timeout: DEADLINE });
  // without it, the template renders: <bos> and the turns' markers
  await page.click('#chat-messages li >> nth=0 >> button.remove');
  await settled(page);
  assert.equal(await page.textContent('#chat-error'), '');
  await checkChips(page, { model: 'gemma2', messages: await messagesOf(page), add_generation_prompt: true,
    continue_final_message: false });
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the chat at 1280 and 390 px, light and dark: nothing wider than the screen', async () => {
  for (const [w, h] of [[1280, 800], [390, 844]]) {
    for (const scheme of ['light', 'dark']) {
      const page = await openChat('qwen3', { width: w, height: h });
      await page.emulateMedia({ colorScheme: scheme });
      await page.click('#chat-add');
      await page.keyboard.type('Attention is a weighted average of the values.');
      await page.fill('#max_new', '6');
      await settled(page);
      await page.click('#generate');
      await page.waitForFunction(() => /tokens \(/.test(document.querySelector('#generate-status').textContent),
        null, { timeout: DEADLINE });
      const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(over <= 0, `${w}px ${scheme}: ${over}px too wide`);
      await page.locator('#generate-view').screenshot({ path: `${shots}chat-${w}x${h}-${scheme}.png` });
      assert.deepEqual(page.errors, []);
      await page.close();
    }
  }
});
