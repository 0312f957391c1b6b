// POST /v1/chat/completions through OpenAI's client: conversations
// rendered by the models' own chat templates, log-probabilities, tools,
// and /tokenize agreeing with what a chat is given.
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

const MESSAGES = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'What does attention compute?' },
];

async function post(path, body) {
  const r = await fetch(`${server.url}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

async function tokenize(body) {
  const { status, body: answer } = await post('/tokenize', body);
  assert.equal(status, 200, JSON.stringify(answer));
  return answer;
}

test('a chat completes through the model\'s template', { timeout: 20000 }, async () => {
  const params = { model: 'llama3', messages: MESSAGES, max_tokens: 8, temperature: 0, chat_template_kwargs: LLAMA_KWARGS };
  const a = await openai.chat.completions.create(params);
  assert.match(a.id, /^chatcmpl-/);
  assert.equal(a.object, 'chat.completion');
  assert.equal(a.model, 'llama3');
  assert.equal(a.choices.length, 1);
  const [c] = a.choices;
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.equal(c.logprobs, null);
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
  // the prompt is the render /tokenize shows: Llama 3.2's header, the
  // date given, one BOS (the template's; the tokenizer adds none)
  const t = await tokenize({ model: 'llama3', messages: MESSAGES, chat_template_kwargs: LLAMA_KWARGS, return_token_strs: true });
  assert.equal(a.usage.prompt_tokens, t.count);
  assert.ok(t.prompt.startsWith('<|begin_of_text|><|start_header_id|>system<|end_header_id|>'), t.prompt);
  assert.match(t.prompt, /Today Date: 05 Mar 2026/);
  assert.ok(t.prompt.endsWith('<|start_header_id|>assistant<|end_header_id|>\n\n'), t.prompt);
  assert.equal(t.token_strs[0], '<|begin_of_text|>');
  assert.notEqual(t.token_strs[1], '<|begin_of_text|>');
  assert.equal(t.special[0], true);
  // the same request, the same text
  const b = await openai.chat.completions.create(params);
  assert.equal(b.choices[0].message.content, c.message.content);
  // max_completion_tokens is max_tokens' newer name
  const m = await openai.chat.completions.create({ ...params, max_tokens: undefined, max_completion_tokens: 3 });
  assert.ok(m.usage.completion_tokens <= 3);
  const short = m.choices[0].message.content;
  if (!short.includes('\ufffd')) assert.ok(c.message.content.startsWith(short), `${short} / ${c.message.content}`);
});

test('Qwen3\'s template takes chat_template_kwargs', { timeout: 20000 }, async () => {
  const messages = [{ role: 'user', content: 'Hello' }];
  const off = await tokenize({ model: 'qwen3', messages, chat_template_kwargs: { enable_thinking: false } });
  const on = await tokenize({ model: 'qwen3', messages });
  assert.ok(off.prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), off.prompt);
  assert.ok(on.prompt.endsWith('<|im_start|>assistant\n'), on.prompt);
  const a = await openai.chat.completions.create({
    model: 'qwen3', messages, max_tokens: 5, temperature: 0, chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(a.usage.prompt_tokens, off.count);
  const b = await openai.chat.completions.create({ model: 'qwen3', messages, max_tokens: 5, temperature: 0 });
  assert.equal(b.usage.prompt_tokens, on.count);
});

test('text parts are joined by newlines for a template that reads strings', { timeout: 20000 }, async () => {
  const parts = [{ role: 'user', content: [{ type: 'text', text: 'first line' }, { type: 'text', text: 'second line' }] }];
  const joined = [{ role: 'user', content: 'first line\nsecond line' }];
  const params = { model: 'llama3', max_tokens: 6, temperature: 0, chat_template_kwargs: LLAMA_KWARGS };
  const a = await openai.chat.completions.create({ ...params, messages: parts });
  const b = await openai.chat.completions.create({ ...params, messages: joined });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.deepEqual(a.usage, b.usage);
});

test('tools and tool calls reach the template', { timeout: 20000 }, async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const messages = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 18}' },
  ];
  const t = await tokenize({ model: 'llama3', messages, tools, chat_template_kwargs: LLAMA_KWARGS });
  assert.match(t.prompt, /"name": "get_weather"/);
  // the arguments, a JSON string in OpenAI's shape, are the object they hold
  assert.match(t.prompt, /"parameters": \{"city": "Paris"\}/);
  // and the tool's answer as Llama 3.2's template writes a string: tojson
  assert.ok(t.prompt.includes('<|start_header_id|>ipython<|end_header_id|>\n\n"{\\"temperature\\": 18}"<|eot_id|>'), t.prompt);
  const a = await openai.chat.completions.create({
    model: 'llama3', messages, tools, tool_choice: 'auto', max_tokens: 4, temperature: 0, chat_template_kwargs: LLAMA_KWARGS,
  });
  assert.equal(a.usage.prompt_tokens, t.count);
  assert.equal(typeof a.choices[0].message.content, 'string');
});

test('continue_final_message goes on with the assistant\'s last message', { timeout: 20000 }, async () => {
  const messages = [{ role: 'user', content: 'Name a colour.' }, { role: 'assistant', content: 'The colour is' }];
  const fields = { continue_final_message: true, add_generation_prompt: false, chat_template_kwargs: LLAMA_KWARGS };
  const t = await tokenize({ model: 'llama3', messages, ...fields });
  assert.ok(t.prompt.endsWith('<|start_header_id|>assistant<|end_header_id|>\n\nThe colour is'), t.prompt);
  const a = await openai.chat.completions.create({ model: 'llama3', messages, max_tokens: 4, temperature: 0, ...fields });
  assert.equal(a.usage.prompt_tokens, t.count);
});

test('chat logprobs: entries with bytes and sorted alternatives', { timeout: 20000 }, async () => {
  const a = await openai.chat.completions.create({
    model: 'llama3', messages: MESSAGES, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3, chat_template_kwargs: LLAMA_KWARGS,
  });
  const [c] = a.choices;
  const content = c.logprobs.content;
  assert.equal(content.length, a.usage.completion_tokens);
  const bytes = [];
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0, `logprob ${e.logprob}`);
    assert.ok(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
    assert.equal(e.top_logprobs.length, 3);
    for (let i = 0; i < 3; i++) {
      const alt = e.top_logprobs[i];
      assert.equal(typeof alt.token, 'string');
      assert.ok(Array.isArray(alt.bytes));
      assert.ok(alt.logprob <= 0);
      if (i) assert.ok(alt.logprob <= e.top_logprobs[i - 1].logprob, 'sorted, most probable first');
    }
    // greedy: the token chosen is the most probable one
    assert.deepEqual(e.top_logprobs[0].bytes, e.bytes);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6);
    // probabilities of distinct tokens add up to at most 1
    assert.ok(e.top_logprobs.reduce((s, t) => s + Math.exp(t.logprob), 0) <= 1 + 1e-6);
    bytes.push(...e.bytes);
  }
  // the tokens' bytes spell the content (when no EOS ended it)
  if (c.finish_reason === 'length')
    assert.equal(Buffer.from(bytes).toString('utf8'), c.message.content);
  // logprobs without alternatives
  const b = await openai.chat.completions.create({
    model: 'llama3', messages: MESSAGES, max_tokens: 8, temperature: 0, logprobs: true, chat_template_kwargs: LLAMA_KWARGS,
  });
  assert.deepEqual(b.choices[0].logprobs.content.map((e) => e.logprob), content.map((e) => e.logprob));
  for (const e of b.choices[0].logprobs.content) assert.deepEqual(e.top_logprobs, []);
});

test('/tokenize and /detokenize', { timeout: 20000 }, async () => {
  const t = await tokenize({ model: 'gpt2', prompt: 'hello world', return_token_strs: true });
  assert.equal(t.count, t.tokens.length);
  assert.equal(t.max_model_len, 64);
  assert.equal(t.token_strs.length, t.count);
  assert.equal((await tokenize({ model: 'gpt2', prompt: 'hello world' })).token_strs, null);
  const d = await post('/detokenize', { model: 'gpt2', tokens: t.tokens });
  assert.equal(d.status, 200);
  assert.equal(d.body.prompt, 'hello world');
  // these two answer failures as problem+json, naming the field
  const bad = await fetch(`${server.url}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'gpt2' }),
  });
  assert.equal(bad.status, 422);
  assert.match(bad.headers.get('content-type'), /application\/problem\+json/);
});
