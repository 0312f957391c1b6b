// Streamed completions through OpenAI's client: the chunks add up to the
// whole answer, usage when asked, and a client that leaves mid-stream.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, stopServer, client, metric, eventually, LLAMA_KWARGS } from './harness.js';

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
  messages: [{ role: 'user', content: 'Tell me about the cat on the mat.' }],
  max_tokens: 24,
  temperature: 0,
  chat_template_kwargs: LLAMA_KWARGS,
};

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test('a streamed chat adds up to the whole one', { timeout: 20000 }, async () => {
  const whole = await openai.chat.completions.create(CHAT);
  const chunks = await collect(await openai.chat.completions.create({ ...CHAT, stream: true }));
  assert.ok(chunks.length >= 2);
  const id = chunks[0].id;
  assert.match(id, /^chatcmpl-/);
  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.id, id);
    assert.equal(c.model, 'llama3');
    assert.equal(c.choices.length, 1);
    assert.equal(c.choices[0].index, 0);
    assert.equal(c.usage, undefined);
  }
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  for (const c of chunks.slice(1)) assert.equal(c.choices[0].delta.role, undefined);
  const last = chunks.at(-1);
  assert.equal(last.choices[0].finish_reason, whole.choices[0].finish_reason);
  for (const c of chunks.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
  const text = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(text, whole.choices[0].message.content);
});

test('stream_options.include_usage: a last chunk with the usage', { timeout: 20000 }, async () => {
  const whole = await openai.chat.completions.create(CHAT);
  const chunks = await collect(await openai.chat.completions.create({ ...CHAT, stream: true, stream_options: { include_usage: true } }));
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.deepEqual(usage.usage, whole.usage);
  assert.equal(chunks.at(-2).choices[0].finish_reason, whole.choices[0].finish_reason);
  for (const c of chunks.slice(0, -1)) assert.ok(c.usage === undefined || c.usage === null);
});

test('the stream helper of the client gives the same message', { timeout: 20000 }, async () => {
  const whole = await openai.chat.completions.create(CHAT);
  const runner = openai.chat.completions.stream({ ...CHAT, stream: true });
  let deltas = '';
  runner.on('content', (delta) => { deltas += delta; });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, whole.choices[0].message.content);
  assert.equal(deltas, whole.choices[0].message.content);
});

test('a streamed completion adds up to the whole one, with its logprobs', { timeout: 20000 }, async () => {
  const params = { model: 'gpt2', prompt: 'the quick brown fox', max_tokens: 16, temperature: 0, logprobs: 2 };
  const whole = await openai.completions.create(params);
  const chunks = await collect(await openai.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }));
  for (const c of chunks) assert.equal(c.object, 'text_completion');
  const usage = chunks.pop();
  assert.deepEqual(usage.usage, whole.usage);
  assert.equal(chunks.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
  assert.equal(chunks.map((c) => c.choices[0].text).join(''), whole.choices[0].text);
  // each token's chunk carries its own entries of the legacy layout
  const tokens = chunks.flatMap((c) => c.choices[0].logprobs?.tokens ?? []);
  const values = chunks.flatMap((c) => c.choices[0].logprobs?.token_logprobs ?? []);
  const offsets = chunks.flatMap((c) => c.choices[0].logprobs?.text_offset ?? []);
  assert.deepEqual(tokens, whole.choices[0].logprobs.tokens);
  assert.deepEqual(values, whole.choices[0].logprobs.token_logprobs);
  assert.deepEqual(offsets, whole.choices[0].logprobs.text_offset);
});

test('streamed chat logprobs are the whole answer\'s', { timeout: 20000 }, async () => {
  const params = { ...CHAT, logprobs: true, top_logprobs: 2 };
  const whole = await openai.chat.completions.create(params);
  const chunks = await collect(await openai.chat.completions.create({ ...params, stream: true }));
  const content = chunks.flatMap((c) => c.choices[0].logprobs?.content ?? []);
  assert.deepEqual(content, whole.choices[0].logprobs.content);
});

test('a stop string never shows in a chunk', { timeout: 20000 }, async () => {
  // sampled with a seed: a varied text, the same each time
  const params = { model: 'qwen3', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 32, temperature: 1, seed: 3 };
  const whole = (await openai.chat.completions.create(params)).choices[0].message.content;
  const at = whole.slice(whole.length >> 1).search(/[A-Za-z]{2}/);
  assert.ok(at >= 0, `no two letters in ${JSON.stringify(whole)}`);
  const stop = whole.substr((whole.length >> 1) + at, 2);
  const chunks = await collect(await openai.chat.completions.create({ ...params, stream: true, stop }));
  const text = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(text, whole.slice(0, whole.indexOf(stop)));
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
});

// A long generation (a chat's default max_tokens: the rest of the
// sequence, some 4,000 tokens here, each chunk with its attention row),
// left after its first chunks: the client's loop ends at once, the
// server stops the work and goes on serving.
const LONG = {
  model: 'llama3',
  messages: [{ role: 'user', content: 'Go on for a long time.' }],
  temperature: 1,
  seed: 1,
  chat_template_kwargs: LLAMA_KWARGS,
  attention: { stream_rows: true, layer: 1 },
};

async function stillServes() {
  const a = await openai.chat.completions.create({ ...CHAT, max_tokens: 2 });
  assert.equal(a.choices[0].message.role, 'assistant');
  const models = await openai.models.list();
  assert.ok(models.data.length > 0);
}

test('stream.controller.abort() ends the stream; the server goes on', { timeout: 30000 }, async () => {
  const before = await metric(server.url, 'attnd_generations_abandoned_total');
  const stream = await openai.chat.completions.create({ ...LONG, stream: true });
  let n = 0;
  const started = Date.now();
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (++n === 2) stream.controller.abort();
  }
  assert.ok(Date.now() - started < 10000);
  assert.ok(n >= 2 && n < 4096);
  await eventually(async () => (await metric(server.url, 'attnd_generations_abandoned_total')) > before,
    15000, 'the server counts the generation abandoned');
  await stillServes();
});

test('an AbortController\'s signal ends the stream; the server goes on', { timeout: 30000 }, async () => {
  const before = await metric(server.url, 'attnd_generations_abandoned_total');
  const ac = new AbortController();
  const stream = await openai.chat.completions.create({ ...LONG, stream: true }, { signal: ac.signal });
  let n = 0;
  await assert.rejects(async () => {
    for await (const chunk of stream) {
      n++;
      if (chunk.choices[0].delta.content !== undefined) ac.abort();
    }
    // the client may end the loop quietly instead of throwing
    throw new OpenAI.APIUserAbortError();
  }, (e) => e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError');
  assert.ok(n >= 1 && n < 4096);
  await eventually(async () => (await metric(server.url, 'attnd_generations_abandoned_total')) > before,
    15000, 'the server counts the generation abandoned');
  await stillServes();
});

test('a whole request aborted by its signal rejects; the server goes on', { timeout: 30000 }, async () => {
  const ac = new AbortController();
  const pending = openai.chat.completions.create({ ...LONG, attention: undefined }, { signal: ac.signal });
  setTimeout(() => ac.abort(), 20);
  await assert.rejects(pending, (e) => e instanceof OpenAI.APIUserAbortError);
  await stillServes();
});
