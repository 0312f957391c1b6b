// attnd's "attention" extension read through OpenAI's client: the field
// passes through in the request body, the answer's extra "attention"
// (and each streamed token's "attention_row") is on the returned objects.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
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
  messages: [{ role: 'user', content: 'Which word does "it" refer to?' }],
  max_tokens: 6,
  temperature: 0,
  chat_template_kwargs: LLAMA_KWARGS,
};
const LAYERS = 2, HEADS = 4; // tests/models/llama3

// A causal attention matrix: rows of probabilities over the keys up to
// their own position.
function assertCausal(rows, what) {
  rows.forEach((row, q) => {
    let sum = 0;
    row.forEach((w, k) => {
      if (k > q) assert.equal(w, 0, `${what}[${q}][${k}] past the query`);
      assert.ok(w >= 0 && w <= 1 + 1e-6);
      sum += w;
    });
    assert.ok(Math.abs(sum - 1) < 1e-4, `${what}[${q}] sums to ${sum}`);
  });
}

test('a chat\'s answer carries the whole sequence\'s attention', { timeout: 20000 }, async () => {
  const a = await openai.chat.completions.create({ ...CHAT, attention: { return: ['weights'], layer: 1 } });
  const plain = await openai.chat.completions.create(CHAT);
  assert.equal(plain.attention, undefined);
  // the extension changes nothing of the completion
  assert.equal(a.choices[0].message.content, plain.choices[0].message.content);
  const att = a.attention;
  assert.equal(att.model, 'llama3');
  const T = a.usage.total_tokens;
  assert.equal(att.tokens.length, T);
  assert.equal(att.token_ids.length, T);
  assert.equal(att.added.length, T);
  assert.equal(att.config.layer, 1);
  assert.deepEqual(att.config.return, ['weights']);
  // one layer: [heads][T][T]
  assert.equal(att.weights.length, HEADS);
  att.weights.forEach((head, h) => {
    assert.equal(head.length, T);
    assertCausal(head, `weights[${h}]`);
  });
  // the prompt's tokens lead, as /tokenize gives them
  const t = await (await fetch(`${server.url}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'llama3', messages: CHAT.messages, chat_template_kwargs: LLAMA_KWARGS }),
  })).json();
  assert.deepEqual(att.token_ids.slice(0, t.count), t.tokens);
  assert.equal(att.tokens[0], '<|begin_of_text|>');
});

test('what "attention" returns is /attention\'s choice', { timeout: 20000 }, async () => {
  const a = await openai.chat.completions.create({ ...CHAT, attention: {} });
  const T = a.usage.total_tokens;
  // by default every layer's weights: [layers][heads][T][T]
  assert.equal(a.attention.weights.length, LAYERS);
  assert.equal(a.attention.weights[0].length, HEADS);
  assert.equal(a.attention.weights[0][0].length, T);
  const b = await openai.chat.completions.create({ ...CHAT, attention: { return: ['mean_weights', 'head_stats'], layer: 0 } });
  assert.equal(b.attention.weights, undefined);
  assert.equal(b.attention.mean_weights.length, T);
  assertCausal(b.attention.mean_weights, 'mean_weights');
  assert.ok(b.attention.head_stats && typeof b.attention.head_stats === 'object');
});

test('a completion carries it too', { timeout: 20000 }, async () => {
  const a = await openai.completions.create({
    model: 'gpt2', prompt: 'the quick brown fox', max_tokens: 5, temperature: 0, attention: { return: ['mean_weights'], layer: 1 },
  });
  assert.equal(a.attention.model, 'gpt2');
  assert.equal(a.attention.token_ids.length, a.usage.total_tokens);
  assertCausal(a.attention.mean_weights, 'mean_weights');
});

test('streamed: each token\'s chunk has its attention row, the finish chunk the whole', { timeout: 20000 }, async () => {
  const stream = await openai.chat.completions.create({
    ...CHAT, stream: true, stream_options: { include_usage: true }, attention: { stream_rows: true, return: ['weights'], layer: 1 },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const usage = chunks.pop().usage;
  const prompt = usage.prompt_tokens;
  const rows = chunks.filter((c) => c.attention_row).map((c) => c.attention_row);
  assert.equal(rows.length, usage.completion_tokens);
  rows.forEach((r, i) => {
    // the row of the position that made the token: the one before it
    assert.equal(r.position, prompt + i - 1);
    assert.equal(r.weights.length, HEADS);
    for (const head of r.weights) {
      assert.equal(head.length, r.position + 1);
      assert.ok(Math.abs(head.reduce((s, w) => s + w, 0) - 1) < 1e-4);
    }
  });
  const finish = chunks.at(-1);
  assert.ok(finish.choices[0].finish_reason);
  const att = finish.attention;
  assert.ok(att, 'the finish chunk carries "attention"');
  assert.equal(att.token_ids.length, usage.total_tokens);
  // each row is the finished sequence's row at its position
  rows.forEach((r) => {
    assert.equal(att.token_ids[r.position + 1], r.token_id);
    r.weights.forEach((head, h) => head.forEach((w, k) => {
      assert.ok(Math.abs(w - att.weights[h][r.position][k]) < 1e-4, `row ${r.position} head ${h} key ${k}`);
    }));
  });
  for (const c of chunks.slice(0, -1)) assert.equal(c.attention, undefined);
});

test('streamed rows of every layer, and of mean weights', { timeout: 20000 }, async () => {
  const all = [];
  for await (const c of await openai.chat.completions.create({ ...CHAT, stream: true, attention: { stream_rows: true } }))
    if (c.attention_row) all.push(c.attention_row);
  assert.ok(all.length >= 1);
  assert.equal(all[0].weights.length, LAYERS);
  assert.equal(all[0].weights[0].length, HEADS);
  assert.equal(all[0].weights[0][0].length, all[0].position + 1);
  const mean = [];
  for await (const c of await openai.chat.completions.create({
    ...CHAT, stream: true, attention: { stream_rows: true, return: ['mean_weights'], layer: 0 },
  }))
    if (c.attention_row) mean.push(c.attention_row);
  assert.ok(mean.length >= 1);
  assert.equal(mean[0].weights, undefined);
  const m = mean[0].mean_weights;
  assert.ok(Array.isArray(m));
  const row = m.flat(Infinity);
  assert.equal(row.length, mean[0].position + 1);
  assert.ok(Math.abs(row.reduce((s, w) => s + w, 0) - 1) < 1e-4);
});
