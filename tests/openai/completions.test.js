// POST /v1/completions through OpenAI's client: a text prompt, token ids,
// seeds, stop strings, the legacy log-probabilities and echo.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stopServer, client } from './harness.js';

let server, openai;
before(async () => {
  server = await startServer();
  openai = client(server.baseURL);
});
after(async () => {
  if (server) await stopServer(server.child);
});

const PROMPT = 'The cat sat on the mat because';

async function tokenize(body) {
  const r = await fetch(`${server.url}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(r.status, 200);
  return r.json();
}

test('a text prompt completes, greedy and the same each time', { timeout: 20000 }, async () => {
  const params = { model: 'llama3', prompt: PROMPT, max_tokens: 8, temperature: 0 };
  const a = await openai.completions.create(params);
  assert.match(a.id, /^cmpl-/);
  assert.equal(a.object, 'text_completion');
  assert.equal(a.model, 'llama3');
  assert.ok(Number.isInteger(a.created) && Math.abs(a.created - Date.now() / 1000) < 600);
  assert.equal(a.choices.length, 1);
  const [c] = a.choices;
  assert.equal(c.index, 0);
  assert.equal(typeof c.text, 'string');
  assert.equal(c.logprobs, null);
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  // the prompt's tokens are those /tokenize gives, BOS included
  const { count } = await tokenize({ model: 'llama3', prompt: PROMPT });
  assert.equal(a.usage.prompt_tokens, count);
  assert.ok(a.usage.completion_tokens >= 1 && a.usage.completion_tokens <= 8);
  if (c.finish_reason === 'length') assert.equal(a.usage.completion_tokens, 8);
  assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
  const b = await openai.completions.create(params);
  assert.equal(b.choices[0].text, c.text);
  assert.notEqual(b.id, a.id);
});

test('token ids, and a prompt in a one-element array, complete as the text does', { timeout: 20000 }, async () => {
  const text = await openai.completions.create({ model: 'llama3', prompt: PROMPT, max_tokens: 6, temperature: 0 });
  const { tokens } = await tokenize({ model: 'llama3', prompt: PROMPT });
  const ids = await openai.completions.create({ model: 'llama3', prompt: tokens, max_tokens: 6, temperature: 0 });
  assert.equal(ids.choices[0].text, text.choices[0].text);
  assert.deepEqual(ids.usage, text.usage);
  const nested = await openai.completions.create({ model: 'llama3', prompt: [tokens], max_tokens: 6, temperature: 0 });
  assert.equal(nested.choices[0].text, text.choices[0].text);
  const one = await openai.completions.create({ model: 'llama3', prompt: [PROMPT], max_tokens: 6, temperature: 0 });
  assert.equal(one.choices[0].text, text.choices[0].text);
  // without the tokenizer's BOS the prompt is a token shorter
  const bare = await openai.completions.create({
    model: 'llama3', prompt: PROMPT, max_tokens: 1, temperature: 0, add_special_tokens: false,
  });
  assert.equal(bare.usage.prompt_tokens, text.usage.prompt_tokens - 1);
});

test('a seed makes sampling repeatable', { timeout: 20000 }, async () => {
  const params = { model: 'qwen3', prompt: 'Once upon a time', max_tokens: 12, temperature: 1, top_p: 0.9, top_k: 50, seed: 7 };
  const a = await openai.completions.create(params);
  const b = await openai.completions.create(params);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const all = await openai.completions.create({ ...params, top_k: -1, min_p: 0.01 });
  assert.equal(typeof all.choices[0].text, 'string');
});

test('a stop string ends the text before it', { timeout: 20000 }, async () => {
  // sampled with a seed: a varied text, the same each time
  const params = { model: 'qwen3', prompt: 'the quick brown fox', max_tokens: 24, temperature: 1, seed: 3 };
  const whole = (await openai.completions.create(params)).choices[0].text;
  // two letters from the second half of the text: it ends before them
  const at = whole.slice(whole.length >> 1).search(/[A-Za-z]{2}/);
  assert.ok(at >= 0, `no two letters in ${JSON.stringify(whole)}`);
  const stop = whole.substr((whole.length >> 1) + at, 2);
  const cut = await openai.completions.create({ ...params, stop: [stop, 'never in the text'] });
  assert.equal(cut.choices[0].text, whole.slice(0, whole.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.ok(cut.usage.completion_tokens < 24);
});

test('logprobs: the legacy layout, each value a log-probability', { timeout: 20000 }, async () => {
  const a = await openai.completions.create({ model: 'llama3', prompt: PROMPT, max_tokens: 8, temperature: 0, logprobs: 3 });
  const [c] = a.choices;
  const lp = c.logprobs;
  const n = a.usage.completion_tokens;
  assert.equal(lp.tokens.length, n);
  assert.equal(lp.token_logprobs.length, n);
  assert.equal(lp.top_logprobs.length, n);
  assert.equal(lp.text_offset.length, n);
  for (let i = 0; i < n; i++) {
    assert.equal(typeof lp.tokens[i], 'string');
    assert.ok(lp.token_logprobs[i] <= 0, `token_logprobs[${i}] = ${lp.token_logprobs[i]}`);
    const values = Object.values(lp.top_logprobs[i]);
    // distinct tokens may share a text, and so a key: at most 3
    assert.ok(values.length >= 1 && values.length <= 3);
    for (const v of values) assert.ok(v <= 0);
    // greedy: the chosen token is the most probable (before temperature)
    assert.ok(Math.abs(Math.max(...values) - lp.token_logprobs[i]) < 1e-6);
    if (i) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
  assert.equal(lp.text_offset[0], 0);
  // the offsets count characters of the text, as the tokens spell it
  if (c.finish_reason === 'length' && !c.text.includes('\ufffd')) {
    assert.equal(lp.tokens.join(''), c.text);
    for (let i = 0; i < n; i++) assert.equal(lp.text_offset[i], [...lp.tokens.slice(0, i).join('')].length);
  }
  // logprobs: 0 gives the chosen tokens' own, the same values
  const none = await openai.completions.create({ model: 'llama3', prompt: PROMPT, max_tokens: 8, temperature: 0, logprobs: 0 });
  assert.deepEqual(none.choices[0].logprobs.token_logprobs, lp.token_logprobs);
});

test('echo with max_tokens 0 scores the prompt', { timeout: 20000 }, async () => {
  const { count, tokens } = await tokenize({ model: 'llama3', prompt: PROMPT });
  const a = await openai.completions.create({ model: 'llama3', prompt: PROMPT, max_tokens: 0, echo: true, logprobs: 2 });
  const [c] = a.choices;
  assert.equal(c.text, PROMPT);
  assert.equal(c.finish_reason, 'length');
  assert.equal(a.usage.prompt_tokens, count);
  assert.equal(a.usage.completion_tokens, 0);
  const lp = c.logprobs;
  assert.equal(lp.tokens.length, tokens.length);
  // the first token has nothing before it
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < count; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.ok(Object.keys(lp.top_logprobs[i]).length <= 2);
    assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
  // echo and a completion: the prompt, then the text made
  const more = await openai.completions.create({ model: 'llama3', prompt: PROMPT, max_tokens: 4, temperature: 0, echo: true });
  const plain = await openai.completions.create({ model: 'llama3', prompt: PROMPT, max_tokens: 4, temperature: 0 });
  assert.equal(more.choices[0].text, PROMPT + plain.choices[0].text);
});
