// GET /v1/models and /v1/models/{id} through OpenAI's client.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, stopServer, client, MODELS } from './harness.js';

let server, openai;
before(async () => {
  server = await startServer();
  openai = client(server.baseURL);
});
after(async () => {
  if (server) await stopServer(server.child);
});

test('models.list gives every loaded decoder', { timeout: 20000 }, async () => {
  const page = await openai.models.list();
  const ids = page.data.map((m) => m.id).sort();
  assert.deepEqual(ids, Object.keys(MODELS).sort());
  for (const m of page.data) {
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'attnd');
    assert.ok(Number.isInteger(m.created) && m.created > 0);
    assert.ok(Number.isInteger(m.max_model_len) && m.max_model_len > 0);
  }
  assert.equal(page.data.find((m) => m.id === 'gpt2').max_model_len, 64);
  // the list also iterates as the SDK pages it
  const seen = [];
  for await (const m of openai.models.list()) seen.push(m.id);
  assert.deepEqual(seen.sort(), ids);
});

test('models.retrieve gives one model', { timeout: 20000 }, async () => {
  const m = await openai.models.retrieve('qwen3');
  assert.equal(m.id, 'qwen3');
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'attnd');
  // what a request may have: Qwen3's 40960 positions within the server's
  // --max-tokens (4096 by default)
  assert.equal(m.max_model_len, 4096);
});

test('models.retrieve of an unknown model is a NotFoundError', { timeout: 20000 }, async () => {
  await assert.rejects(openai.models.retrieve('no-such-model'), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.message, /no-such-model/);
    return true;
  });
});
