// The server's limits as OpenAI's client meets them: a 503 with
// Retry-After when every place in the decoding batch is taken and none is
// left to wait for one, and a stream the
// server has to cut (SIGTERM with no time to drain), which the client
// raises as an APIError from the error chunk.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, stopServer, client, LLAMA_KWARGS } from './harness.js';

// one computation and one generation at a time, none waiting for either;
// no time to drain on SIGTERM
let server, openai;
before(async () => {
  server = await startServer(['--threads', '1', '--max-queue', '0', '--max-batch', '1',
    '--batch-queue', '0', '--drain-seconds', '0']);
  openai = client(server.baseURL);
});
after(async () => {
  if (server) await stopServer(server.child);
});

// A stream of some 4,000 tokens, each with its attention row: it holds
// the one place in the batch for as long as its reader lets it.
const LONG = {
  model: 'llama3',
  messages: [{ role: 'user', content: 'Go on for a long time.' }],
  temperature: 1,
  seed: 1,
  stream: true,
  chat_template_kwargs: LLAMA_KWARGS,
  attention: { stream_rows: true, layer: 1 },
};
const SHORT = { model: 'llama3', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, chat_template_kwargs: LLAMA_KWARGS };

test('at capacity: an InternalServerError 503 with Retry-After', { timeout: 30000 }, async () => {
  const stream = await openai.chat.completions.create(LONG);
  const it = stream[Symbol.asyncIterator]();
  assert.equal((await it.next()).done, false); // started, then left unread
  await assert.rejects(openai.chat.completions.create(SHORT), (e) => {
    assert.ok(e instanceof OpenAI.InternalServerError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, 503);
    assert.equal(e.type, 'server_error');
    assert.equal(e.code, 'capacity');
    assert.equal(e.headers.get('retry-after'), '1');
    return true;
  });
  stream.controller.abort();
  // the slot is given back once the server sees the client gone
  const retrying = client(server.baseURL, { maxRetries: 5 });
  const a = await retrying.chat.completions.create(SHORT);
  assert.equal(a.object, 'chat.completion');
});

test('a stream cut by the server is an APIError from its error chunk', { timeout: 30000 }, async () => {
  const stream = await openai.chat.completions.create(LONG);
  let n = 0;
  await assert.rejects(async () => {
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (++n === 1) process.kill(server.child.pid, 'SIGTERM');
    }
  }, (e) => {
    assert.ok(e instanceof OpenAI.APIError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.type, 'server_error');
    assert.match(e.message, /stopping/);
    return true;
  });
  assert.ok(n >= 1);
  // the server exits of itself
  const code = await new Promise((resolve) => {
    if (server.child.exitCode !== null) resolve(server.child.exitCode);
    else server.child.once('exit', (c) => resolve(c));
  });
  assert.equal(code, 0);
});
