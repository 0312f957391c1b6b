// Failures as OpenAI's client raises them: the typed errors, with the
// status, type, param and code where the client puts them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, stopServer, client, LLAMA_KWARGS } from './harness.js';

let server, openai;
before(async () => {
  server = await startServer();
  openai = client(server.baseURL);
});
after(async () => {
  if (server) await stopServer(server.child);
});

const CHAT = {
  model: 'llama3',
  messages: [{ role: 'user', content: 'Hi' }],
  max_tokens: 2,
  chat_template_kwargs: LLAMA_KWARGS,
};

// Rejects with an error of kind whose param, code and message are as
// given (param null: none named).
async function expectError(promise, kind, { status, param, code, type, message }) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof kind, `${e.constructor.name}: ${e.message}`);
    assert.ok(e instanceof OpenAI.APIError);
    assert.equal(e.status, status);
    assert.equal(e.param, param);
    if (code !== undefined) assert.equal(e.code, code);
    assert.equal(e.type, type ?? 'invalid_request_error');
    // the error object as the server sent it
    assert.equal(e.error.param, param);
    assert.equal(typeof e.error.message, 'string');
    if (message) assert.match(e.message, message);
    return true;
  });
}

test('an unknown model is a NotFoundError', { timeout: 20000 }, async () => {
  await expectError(openai.chat.completions.create({ ...CHAT, model: 'gpt-4o' }), OpenAI.NotFoundError,
    { status: 404, param: 'model', code: 'model_not_found', message: /gpt-4o/ });
  await expectError(openai.completions.create({ model: 'gpt-4o', prompt: 'x' }), OpenAI.NotFoundError,
    { status: 404, param: 'model', code: 'model_not_found' });
});

test('n: 2 is a BadRequestError naming n', { timeout: 20000 }, async () => {
  await expectError(openai.chat.completions.create({ ...CHAT, n: 2 }), OpenAI.BadRequestError,
    { status: 400, param: 'n', message: /\bn\b/ });
  await expectError(openai.completions.create({ model: 'gpt2', prompt: 'x', n: 2 }), OpenAI.BadRequestError,
    { status: 400, param: 'n' });
  // n: 1 and the other no-op values are taken
  const ok = await openai.chat.completions.create({
    ...CHAT, n: 1, frequency_penalty: 0, presence_penalty: 0, logit_bias: {}, response_format: { type: 'text' }, store: false, user: 'u1',
  });
  assert.equal(ok.choices.length, 1);
  await expectError(openai.chat.completions.create({ ...CHAT, presence_penalty: 0.5 }), OpenAI.BadRequestError,
    { status: 400, param: 'presence_penalty' });
});

test('a bad role is a BadRequestError naming the message', { timeout: 20000 }, async () => {
  await expectError(openai.chat.completions.create({ ...CHAT, messages: [{ role: 'wizard', content: 'Hi' }] }),
    OpenAI.BadRequestError, { status: 400, param: 'messages[0].role', message: /wizard/ });
  await expectError(openai.chat.completions.create({
    ...CHAT, messages: [{ role: 'user', content: 'Hi' }, { role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }],
  }), OpenAI.BadRequestError, { status: 400, param: 'messages[1].content[0]' });
});

test('fields out of range or unknown are BadRequestErrors naming them', { timeout: 20000 }, async () => {
  await expectError(openai.chat.completions.create({ ...CHAT, temperature: 3 }), OpenAI.BadRequestError,
    { status: 400, param: 'temperature' });
  await expectError(openai.chat.completions.create({ ...CHAT, top_logprobs: 21, logprobs: true }), OpenAI.BadRequestError,
    { status: 400, param: 'top_logprobs' });
  await expectError(openai.completions.create({ model: 'gpt2', prompt: 'x', max_tokens: 100 }), OpenAI.BadRequestError,
    { status: 400, param: 'max_tokens', message: /64/ });
  await expectError(openai.completions.create({ model: 'gpt2', prompt: [100000] }), OpenAI.BadRequestError,
    { status: 400, param: 'prompt[0]' });
  // a field OpenAI does not define is refused, as OpenAI refuses it
  await expectError(openai.chat.completions.create({ ...CHAT, frobnicate: true }), OpenAI.BadRequestError,
    { status: 400, param: 'frobnicate', message: /frobnicate/ });
  // a field of the other route
  await expectError(openai.chat.completions.create({ ...CHAT, echo: true }), OpenAI.BadRequestError,
    { status: 400, param: 'echo' });
  await expectError(openai.chat.completions.create({ ...CHAT, attention: { layer: 9 } }), OpenAI.BadRequestError,
    { status: 400, param: 'attention.layer' });
});

test('the template\'s own refusals and a model without one', { timeout: 20000 }, async () => {
  // Gemma's template raises on a system message
  await expectError(openai.chat.completions.create({
    model: 'gemma2', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], max_tokens: 2,
  }), OpenAI.BadRequestError, { status: 400, param: 'messages', message: /System role not supported/ });
  await expectError(openai.chat.completions.create({ model: 'gpt2', messages: [{ role: 'user', content: 'Hi' }] }),
    OpenAI.BadRequestError, { status: 400, param: 'messages', message: /chat template/ });
  // but gpt2 completes a prompt, and Gemma a chat it accepts
  const g = await openai.chat.completions.create({ model: 'gemma2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  assert.equal(g.choices[0].message.role, 'assistant');
});

test('a refused streamed request fails before the stream, with the same error', { timeout: 20000 }, async () => {
  await expectError(openai.chat.completions.create({ ...CHAT, stream: true, n: 3 }), OpenAI.BadRequestError,
    { status: 400, param: 'n' });
  await expectError(openai.chat.completions.create({ ...CHAT, attention: { stream_rows: true } }), OpenAI.BadRequestError,
    { status: 400, param: 'attention.stream_rows' });
});

test('with --api-key: an AuthenticationError without it, served with it', { timeout: 30000 }, async () => {
  const keyed = await startServer(['--api-key', 'attnd-secret']);
  try {
    await expectError(client(keyed.baseURL).models.list(), OpenAI.AuthenticationError,
      { status: 401, param: null, type: 'authentication_error' });
    await expectError(client(keyed.baseURL).chat.completions.create(CHAT), OpenAI.AuthenticationError,
      { status: 401, param: null, type: 'authentication_error' });
    const good = client(keyed.baseURL, { apiKey: 'attnd-secret' });
    const models = await good.models.list();
    assert.ok(models.data.length > 0);
    const a = await good.chat.completions.create(CHAT);
    assert.equal(a.object, 'chat.completion');
  } finally {
    await stopServer(keyed.child);
  }
});
