// The page in a real headless Chromium (Debian's /usr/bin/chromium, driven
// by playwright-core) against the real server on a loopback port.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { root, startServer, launchBrowser, metric } from './harness.js';

const shots = fileURLToPath(new URL('./screenshots/', import.meta.url));
const SENTENCE = 'The cat chased the mouse because it was hungry';
let server, base, browser;
// A server with committed test checkpoints loaded: f32 (2 layers of 4
// heads, uncased), bf (2 layers of 8 heads, cased), the decoders llama (2
// layers of 4 heads on 2 KV heads) and mistral (a sliding window of 5),
// gemma2 (4 layers of 4 heads, 0 and 2 sliding with a window of 4, 1 and
// 3 global), and the decoders of real models' head counts at a tiny
// width: llama16 (16 layers of 32 heads on 8 KV heads) and qwen24 (24 of
// 14 on 2).
let models;

before(async () => {
  ({ child: server, url: base } = await startServer());
  models = await startServer(['--model', `f32=${root}tests/models/f32`,
    '--model', `bf=${root}tests/models/bf16_legacy`,
    '--model', `llama=${root}tests/models/llama3`, '--model', `mistral=${root}tests/models/mistral`,
    '--model', `gemma2=${root}tests/models/gemma2`,
    '--model', `llama16=${root}tests/models/llama_16x32`, '--model', `qwen24=${root}tests/models/qwen2_24x14`,
    '--model', `q4=${root}tests/models/gguf/llama-Q4_K_M.gguf`]);
  browser = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.kill('SIGTERM');
  models?.child.kill('SIGTERM');
});

async function openPage(path = '/', viewport = { width: 1280, height: 800 }) {
  const page = await browser.newPage({ viewport });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.errors = errors;
  await page.goto(`${base}${path}`);
  await waitForHeatmaps(page);
  return page;
}

// The grid's heatmaps (count of them, when given) and the enlarged head
// drawn, and nothing being asked.
async function waitForHeatmaps(page, count) {
  await page.waitForFunction((n) => {
    const thumbs = [...document.querySelectorAll('#grid canvas')];
    const enlarged = document.querySelector('#matrix canvas');
    return thumbs.length > 0 && (n === undefined || thumbs.length === n) &&
      thumbs.every((c) => c.width > 0) && enlarged && enlarged.width > 0 &&
      document.querySelector('#controls').getAttribute('aria-busy') !== 'true';
  }, count, { timeout: 20000 });
}

async function apiWeights(query) {
  const r = await fetch(`${base}/attention?${query}&return=weights`);
  assert.equal(r.status, 200);
  return (await r.json()).weights;
}

// Hover the centre of cell (i, j) of the enlarged head; return the tooltip.
async function hoverCell(page, i, j) {
  const img = page.locator('#matrix .cells canvas');
  await img.scrollIntoViewIfNeeded();
  const box = await img.boundingBox();
  const n = await page.evaluate(() => Number(getComputedStyle(document.querySelector('#matrix')).getPropertyValue('--rows')));
  const m = await page.evaluate(() => Number(getComputedStyle(document.querySelector('#matrix')).getPropertyValue('--cols')));
  await page.mouse.move(box.x + (j + 0.5) * box.width / m, box.y + (i + 0.5) * box.height / n);
  await page.waitForSelector('#tooltip:not([hidden])');
  return page.textContent('#tooltip');
}

test('the default sentence gives one heatmap per head plus the mean', async () => {
  const page = await openPage();
  assert.equal(await page.inputValue('#sentence'), SENTENCE);
  const widths = await page.$$eval('#grid canvas', (all) => all.map((c) => c.width));
  assert.equal(widths.length, 8 + 1);
  assert.ok(widths.every((w) => w > 0));
  const captions = await page.$$eval('#grid button span', (s) => s.map((x) => x.textContent));
  assert.deepEqual(captions.slice(0, 2), ['head 0', 'head 1']);
  assert.equal(captions[8], 'mean of 8');
  // the thumbnails are drawn by the page; the server's PNGs are links
  const src = await page.getAttribute('#dl-head', 'href');
  assert.match(src, /^\/attention\?sentence=The\+cat.*head=0.*format=png/);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('hovering a cell of the enlarged head shows the weight the JSON has', async () => {
  const page = await openPage();
  await page.click('#grid button[data-head="3"]');
  await page.waitForFunction(() => document.querySelector('#enlarged-title').textContent === 'Head 3 of 8');
  await waitForHeatmaps(page);
  const weights = await apiWeights(`sentence=${encodeURIComponent(SENTENCE)}`);
  for (const [i, j] of [[0, 0], [2, 5], [8, 8], [4, 1]]) {
    const tip = await hoverCell(page, i, j);
    const [pair, value] = tip.split(': ');
    const tokens = SENTENCE.toLowerCase().split(' ');
    assert.equal(pair, `${tokens[i]} → ${tokens[j]}`);
    assert.equal(Number(value), weights[3][i][j]);
  }
  assert.match(await page.textContent('#readout'), /→/);
  await page.close();
});

test('with a causal mask, a cell above the diagonal reads 0', async () => {
  const page = await openPage();
  await page.selectOption('#mask', 'causal');
  await page.waitForFunction(() => location.search.includes('mask=causal'));
  await page.waitForFunction(() => document.querySelector('#dl-head').href.includes('mask=causal'));
  await waitForHeatmaps(page);
  const tip = await hoverCell(page, 1, 6);
  assert.equal(tip.split(': ')[1], '0');
  const below = await hoverCell(page, 6, 1);
  assert.ok(Number(below.split(': ')[1]) > 0);
  await page.close();
});

test('a bad input shows the server\'s message next to its field', async () => {
  const page = await openPage();
  await page.fill('#heads', '6');
  await page.waitForFunction(() => document.querySelector('#heads-error').textContent !== '');
  assert.equal(await page.textContent('#heads-error'),
    'heads (6) must divide d_model (64) when d_k is not given');
  assert.equal(await page.getAttribute('#heads', 'aria-invalid'), 'true');
  // fixing it clears the message
  await page.fill('#heads', '4');
  await page.waitForFunction(() => document.querySelector('#heads-error').textContent === '');
  await waitForHeatmaps(page, 4 + 1);
  await page.close();
});

test('the shared URL restores the form and the heatmaps', async () => {
  const page = await openPage();
  await page.fill('#heads', '4');
  await page.fill('#seed', '11');
  await page.fill('#context', 'a dog slept');
  await waitForHeatmaps(page, 4 + 1);
  await page.waitForFunction(() => location.search.includes('seed=11') && location.search.includes('context='));
  await page.click('#grid button[data-head="2"]');
  await page.waitForFunction(() => location.search.includes('head=2'));
  const shared = page.url();
  await page.close();

  const again = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await again.goto(shared);
  await waitForHeatmaps(again, 4 + 1);
  assert.equal(await again.inputValue('#heads'), '4');
  assert.equal(await again.inputValue('#seed'), '11');
  assert.equal(await again.inputValue('#context'), 'a dog slept');
  assert.equal(await again.textContent('#enlarged-title'), 'Head 2 of 4');
  assert.equal(await again.getAttribute('#grid button[data-head="2"]', 'aria-pressed'), 'true');
  await again.close();
});

test('the lines view draws one line per query-key pair', async () => {
  const page = await openPage();
  assert.equal(await page.locator('#lines line').count(), 9 * 9);
  // cross-attention: 9 queries x 3 keys
  await page.fill('#context', 'a dog slept');
  await page.waitForFunction(() => document.querySelectorAll('#lines line').length === 27);
  // hovering a token keeps only its lines
  await page.hover('#lines text.token >> nth=0');
  const lit = await page.locator('#lines line.lit').count();
  assert.equal(lit, 3);
  await page.close();
});

test('keyboard alone: tab to the sentence, type, press Enter', async () => {
  const page = await openPage();
  await page.keyboard.press('Tab'); // the first radio
  await page.keyboard.press('Tab'); // the sentence
  assert.equal(await page.evaluate(() => document.activeElement.id), 'sentence');
  await page.fill('#sentence', 'dogs bark');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelectorAll('#lines line').length === 4);
  // the matrix is reachable and readable with the arrow keys
  await page.focus('#matrix .cells');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  assert.match(await page.textContent('#readout'), /^dogs → bark: /);
  await page.close();
});

test('embeddings can be pasted instead of a sentence', async () => {
  const page = await openPage();
  await page.check('input[name=kind][value=embeddings]');
  await page.fill('#embeddings', '[[1, 0, 0, 1], [0, 1, 0, 1], [1, 1, 0, 0]]');
  await page.fill('#heads', '2');
  await waitForHeatmaps(page, 2 + 1);
  await page.waitForFunction(() => document.querySelectorAll('#lines line').length === 9);
  // the head's PNG: POSTed when its link is clicked, and saved
  const posted = requestsTo(page, '/attention');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#dl-head')]);
  assert.equal(download.suggestedFilename(), 'attention-head-0.png');
  const png = await readFile(await download.path());
  assert.deepEqual([...png.subarray(1, 4)], [...Buffer.from('PNG')]);
  assert.equal(posted.length, 1);
  assert.match(posted[0], /format=png/);
  // a batch: one sequence at a time, chosen in the page and kept in the URL
  await page.fill('#embeddings', '[[[1, 0, 0, 1], [0, 1, 0, 1]], [[1, 1, 0, 0], [0, 0, 1, 1]]]');
  await page.waitForSelector('#batch-field:not([hidden])');
  await page.selectOption('#batch', '1');
  await page.waitForFunction(() => location.search.includes('batch=1'));
  await page.waitForFunction(() => document.querySelectorAll('#lines line').length === 4);
  await page.fill('#embeddings', '[[1, 0], [0');
  await page.waitForFunction(() => document.querySelector('#embeddings-error').textContent !== '');
  await page.close();
});

test('screenshots at 1280x800 and 390x844 without horizontal overflow', async () => {
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    for (const scheme of ['light', 'dark']) {
      const page = await browser.newPage({ viewport: { width, height }, colorScheme: scheme });
      await page.goto(base);
      await waitForHeatmaps(page, 9);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(overflow <= width, `page is ${overflow}px wide at ${width}px`);
      await page.screenshot({ path: `${shots}page-${width}x${height}-${scheme}.png`, fullPage: true });
      await page.close();
    }
  }
});

test('the page runs as modules from its own server, without errors', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const requests = [], scripts = [], problems = [];
  page.on('request', (r) => {
    requests.push(r.url());
    if (r.resourceType() === 'script') scripts.push(r);
  });
  page.on('console', (m) => {
    // The browser asks for /favicon.ico on its own; the page has none.
    if (m.type() === 'error' && !m.location().url.endsWith('/favicon.ico')) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(base);
  await waitForHeatmaps(page, 9);

  // one entry point, a module from this server; no inline or classic script
  const tags = await page.$$eval('script', (all) =>
    all.map((s) => ({ type: s.type, src: s.src, inline: s.textContent.trim() !== '' })));
  assert.ok(tags.length > 0);
  for (const tag of tags) {
    assert.equal(tag.type, 'module');
    assert.equal(new URL(tag.src).origin, base);
    assert.equal(tag.inline, false);
  }
  // the modules it imports come from the same server, served as JavaScript
  assert.ok(scripts.length > tags.length, 'the entry point imports the other modules');
  for (const r of scripts) {
    assert.equal(new URL(r.url()).origin, base);
    const response = await r.response();
    assert.equal(response.status(), 200, r.url());
    assert.match(response.headers()['content-type'], /^text\/javascript/);
  }
  // nothing at all is fetched from elsewhere
  for (const url of requests)
    assert.ok(url.startsWith(`${base}/`) || url.startsWith('blob:'), `${url} is not from the server`);
  assert.deepEqual(problems, []);
  await page.close();
});

// The requests a page makes to a path of its server, as URLs, from now on.
function requestsTo(page, path) {
  const urls = [];
  page.on('request', (r) => { if (new URL(r.url()).pathname === path) urls.push(r.url()); });
  return urls;
}

test('with --max-heads 16, heads 17 is refused by the page and never sent', async () => {
  const small = await startServer(['--max-heads', '16']);
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  try {
    await page.goto(small.url);
    await waitForHeatmaps(page, 8 + 1);
    assert.equal(await page.getAttribute('#heads', 'max'), '16');
    assert.equal(await page.getAttribute('#kv_heads', 'max'), '16');
    const asked = requestsTo(page, '/attention');
    await page.fill('#heads', '17');
    await page.waitForFunction(() => document.querySelector('#heads-error').textContent !== '');
    assert.equal(await page.textContent('#heads-error'), 'heads (17) must be a whole number from 1 to 16');
    assert.equal(await page.getAttribute('#heads', 'aria-invalid'), 'true');
    await page.press('#heads', 'Enter');
    await page.waitForTimeout(1000); // past the pause after typing that would ask
    assert.deepEqual(asked, []);
    assert.doesNotMatch(page.url(), /heads=17/);
    // 16 is within the range: asked and drawn
    await page.fill('#heads', '16');
    await waitForHeatmaps(page, 16 + 1);
    assert.ok(asked.some((u) => new URL(u).searchParams.get('heads') === '16'));
  } finally {
    await page.close();
    small.child.kill('SIGTERM');
  }
});

test('the page fetches /config once per load', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const asked = requestsTo(page, '/config');
  await page.goto(base);
  await waitForHeatmaps(page, 9);
  assert.equal(asked.length, 1);
  // typing, submitting and going back reuse it
  await page.fill('#heads', '4');
  await page.press('#heads', 'Enter');
  await page.waitForFunction(() => location.search.includes('heads=4'));
  await waitForHeatmaps(page, 4 + 1);
  await page.evaluate(() => history.back());
  await page.waitForFunction(() => !location.search.includes('heads=4'));
  await waitForHeatmaps(page, 9);
  assert.equal(asked.length, 1);
  await page.reload();
  await waitForHeatmaps(page, 9);
  assert.equal(asked.length, 2);
  await page.close();
});

test('the lists offer the names /config gives, its defaults chosen', async () => {
  const doc = await (await fetch(`${base}/config`)).json();
  const page = await openPage();
  for (const name of ['mode', 'mask', 'positional', 'residual', 'colormap']) {
    const field = doc.fields.find((f) => f.name === name);
    const options = await page.$$eval(`#${name} option`, (all) => all.map((o) => o.value));
    assert.deepEqual(options, field.enum, name);
    assert.equal(await page.inputValue(`#${name}`), field.default, name);
  }
  await page.close();
});

test('without /config the page shows why, and no form', async () => {
  const answers = [
    [(route) => route.fulfill({ status: 503, contentType: 'application/problem+json',
      body: JSON.stringify({ title: 'Service Unavailable', status: 503, detail: 'shutting down' }) }),
    /GET \/config answered HTTP 503: shutting down/],
    [(route) => route.abort('connectionrefused'), /GET \/config could not be fetched/],
  ];
  for (const [answer, message] of answers) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.route('**/config', answer);
    const asked = requestsTo(page, '/attention');
    await page.goto(base);
    await page.waitForFunction(() => document.querySelector('#form-error').textContent !== '');
    assert.match(await page.textContent('#form-error'), message);
    assert.equal(await page.isVisible('#form-error'), true);
    for (const hidden of ['fieldset.input', 'fieldset.options', '#run', '#results'])
      assert.equal(await page.isHidden(hidden), true, hidden);
    assert.equal(await page.inputValue('#heads'), '');
    assert.deepEqual(asked, []);
    await page.close();
  }
});

// ---------------------------------------------------------------- models

// Sentences in the vocabulary of tests/models/f32.
const A = 'the cat sat on the mat because it was hungry';
const B = 'a dog chased the mouse';
const TOKENS_A = ['[CLS]', ...A.split(' '), '[SEP]'];
const TOKENS_AB = [...TOKENS_A, ...B.split(' '), '[SEP]'];

// f32's view drawn: layers x (heads + their mean) thumbnails, the enlarged
// head with lines between tokens queries and keys, and the rollout.
async function waitForModelView(page, { layers = 2, heads = 4, tokens } = {}) {
  await page.waitForFunction(({ layers, heads, tokens }) => {
    const thumbs = [...document.querySelectorAll('#grid button.thumb canvas')];
    const words = [...document.querySelectorAll('#lines text.token')].map((t) => t.textContent);
    return thumbs.length === layers * (heads + 1) && thumbs.every((c) => c.width > 0) &&
      document.querySelector('#matrix canvas') && document.querySelector('#rollout-matrix canvas') &&
      (!tokens || words.join(' ') === [...tokens, ...tokens].join(' ')) &&
      document.querySelector('#controls').getAttribute('aria-busy') !== 'true';
  }, { layers, heads, tokens }, { timeout: 20000 });
}

async function openModelPage(query = `model=f32&sentence=${encodeURIComponent(A)}`,
  viewport = { width: 1280, height: 800 }, scheme = 'light', view = {}) {
  const page = await browser.newPage({ viewport, colorScheme: scheme });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.errors = errors;
  await page.goto(`${models.url}/?${query}`);
  await waitForModelView(page, view);
  return page;
}

// The server's own answer for f32 (every layer, their means, the rollout).
async function modelAnswer(sentence, sentenceB) {
  const q = new URLSearchParams({ model: 'f32', sentence, return: 'weights,mean_weights,rollout' });
  if (sentenceB) q.set('sentence_b', sentenceB);
  const r = await fetch(`${models.url}/attention?${q}`);
  assert.equal(r.status, 200);
  return r.json();
}

// Hover cell (i, j) of the matrix in box ('#matrix', '#rollout-matrix');
// return the tooltip's "query → key" and value.
async function readCell(page, box, i, j) {
  const c = page.locator(`${box} .cells canvas`);
  await c.scrollIntoViewIfNeeded();
  const r = await c.boundingBox();
  const [n, m] = await page.evaluate((b) => {
    const st = getComputedStyle(document.querySelector(b));
    return [Number(st.getPropertyValue('--rows')), Number(st.getPropertyValue('--cols'))];
  }, box);
  await page.mouse.move(r.x + (j + 0.5) * r.width / m, r.y + (i + 0.5) * r.height / n);
  await page.waitForSelector('#tooltip:not([hidden])');
  const [pair, value] = (await page.textContent('#tooltip')).split(': ');
  await page.mouse.move(0, 0);
  return { pair, value: Number(value) };
}

test('a decoder shows every layer × head, takes one text, and hides its BOS', async () => {
  // tests/models/llama3: 2 layers of 4 query heads on 2 KV heads
  const page = await openModelPage(`model=llama&sentence=${encodeURIComponent('The cat sat on the mat')}`);
  assert.equal(await page.isHidden('#sentence_b'), true);
  const words = () => page.$$eval('#lines text.token', (ts) => ts.map((t) => t.textContent));
  const all = await words();
  // the BOS first (its label cut short with an ellipsis), and the toggle
  // names it
  assert.match(all[0], /^<\|begin_of_te/);
  assert.equal(await page.textContent('#hide_special_text'), 'hide <|begin_of_text|>');
  await page.check('#hide_special');
  await page.waitForFunction((n) => document.querySelectorAll('#lines text.token').length === n - 2,
    all.length);
  assert.equal((await words()).some((w) => w.startsWith('<|begin')), false);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('a GGUF file (Q4_K_M) is picked and browsed as a folder is, its weights those /attention gives', async () => {
  // tests/models/gguf/llama-Q4_K_M.gguf: 2 layers of 4 query heads, hidden 256
  const sentence = 'The cat sat on the mat';
  const page = await openModelPage(`model=q4&sentence=${encodeURIComponent(sentence)}`);
  assert.match(await page.textContent('#model option[value=q4]'), /2 layers × 4 heads, hidden 256, Q4_K_M GGUF/);
  assert.equal(await page.textContent('#results-title'), 'Every layer and head (2 × 4)');
  const r = await fetch(`${models.url}/attention?model=q4&layer=all&return=weights&sentence=${encodeURIComponent(sentence)}`);
  assert.equal(r.status, 200);
  const weights = (await r.json()).weights;
  // the enlarged head (layer 0, head 0): the tooltip of its last row's first cell
  const n = weights[0][0].length;
  const text = await hoverCell(page, n - 1, 0);
  assert.equal(Number(text.split(': ').pop()), weights[0][0][n - 1][0]);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('a decoder continues the text token by token; a token shows its row everywhere; the logit lens', async () => {
  const sentence = 'The cat sat on the mat';
  const page = await openModelPage(`model=llama&sentence=${encodeURIComponent(sentence)}`);
  assert.equal(await page.isVisible('#generate-view'), true);
  await page.fill('#max_new', '4');
  await page.click('#generate');
  await page.waitForFunction(() => /tokens \(/.test(document.querySelector('#generate-status').textContent),
    null, { timeout: 20000 });
  // the server's own tokens for the same request
  const r = await fetch(`${models.url}/generate`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' },
    body: JSON.stringify({ model: 'llama', prompt: sentence, max_new_tokens: 4, return: [] }),
  });
  const events = (await r.text()).trim().split('\n').map((l) => JSON.parse(l));
  const done = events.at(-1);
  assert.equal(done.event, 'done');
  const T = done.tokens.length;
  const shown = await page.$$eval('#generated button.token', (bs) => bs.map((b) => b.textContent));
  assert.deepEqual(shown, done.tokens.map((t) => t.replace(/^ /, '␣')));
  assert.equal(await page.locator('#generated button.token.generated').count(), 4);
  // every layer and head over the whole sequence
  const sizes = () => page.$$eval('#grid button.thumb canvas', (cs) => cs.map((c) => `${c.width}x${c.height}`));
  assert.ok((await sizes()).every((s) => s === `${T}x${T}`));
  // a generated token's row in every layer and head, then every row again
  await page.click(`#generated button.token >> nth=${T - 1}`);
  await page.waitForFunction((t) => [...document.querySelectorAll('#grid button.thumb canvas')]
    .every((c) => c.width === t && c.height === 1), T);
  assert.equal(await page.isVisible('#focus-note'), true);
  await page.click('#unfocus');
  await page.waitForFunction((t) => [...document.querySelectorAll('#grid button.thumb canvas')]
    .every((c) => c.height === t), T);
  // the lens: a row per layer, a column per position
  assert.equal(await page.locator('#lens tr').count(), 2 + 1);
  assert.equal(await page.locator('#lens tr >> nth=1 >> td').count(), T);
  // sampled from a seed: the server's own tokens for the same settings
  await page.fill('#temperature', '1.5');
  await page.fill('#top_k', '20');
  await page.fill('#seed_gen', '9');
  await page.click('#generate');
  await page.waitForFunction(() => /tokens \(/.test(document.querySelector('#generate-status').textContent),
    null, { timeout: 20000 });
  const sampled = await fetch(`${models.url}/generate`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' },
    body: JSON.stringify({ model: 'llama', prompt: sentence, max_new_tokens: 4, temperature: 1.5,
      top_k: 20, top_p: 1, seed: 9, return: [] }),
  });
  const last = (await sampled.text()).trim().split('\n').map((l) => JSON.parse(l)).at(-1);
  assert.deepEqual(await page.$$eval('#generated button.token', (bs) => bs.map((b) => b.textContent)),
    last.tokens.map((t) => t.replace(/^ /, '␣')));
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('without --model the page has no model picker', async () => {
  const page = await openPage();
  assert.equal(await page.isHidden('#model-field'), true);
  assert.equal(await page.isVisible('fieldset.options'), true);
  assert.equal(await page.isHidden('#sentence_b'), true);
  assert.equal(await page.isHidden('#rollout-view'), true);
  await page.close();
});

test('a link naming a model the server has not loaded says so and shows random weights', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${models.url}/?model=nosuch&sentence=${encodeURIComponent('the cat sat')}`);
  await waitForHeatmaps(page, 8 + 1);
  assert.equal(await page.inputValue('#model'), '');
  assert.match(await page.textContent('#status'), /model "nosuch", which this server has not loaded/);
  assert.doesNotMatch(page.url(), /model=nosuch/);
  await page.close();
});

test('the model picker offers "no model" and each loaded model, and shows every layer × head', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(models.url);
  await waitForHeatmaps(page, 8 + 1); // no model: the random weights, as before
  assert.equal(await page.isVisible('#model-field'), true);
  const listed = (await (await fetch(`${models.url}/models`)).json()).models.map((m) => m.name);
  assert.deepEqual(await page.$$eval('#model option', (o) => o.map((x) => x.value)), ['', ...listed]);
  assert.match(await page.textContent('#model option[value=f32]'), /2 layers × 4 heads/);
  assert.equal(await page.inputValue('#model'), '');
  assert.equal(await page.isVisible('fieldset.options'), true);

  await page.selectOption('#model', 'f32');
  await waitForModelView(page);
  assert.match(page.url(), /model=f32/);
  for (const gone of ['fieldset.options', '#context', 'input[name=kind]'])
    assert.equal(await page.isHidden(gone), true, gone);
  for (const shown of ['#sentence_b', '#hide_special', '#layer', '#rollout-view'])
    assert.equal(await page.isVisible(shown), true, shown);
  assert.equal(await page.textContent('#results-title'), 'Every layer and head (2 × 4)');
  assert.deepEqual(await page.$$eval('#grid .axis', (a) => a.map((x) => x.textContent)),
    ['head 0', 'head 1', 'head 2', 'head 3', 'mean', 'layer 0', 'layer 1']);
  assert.equal(await page.getAttribute('#grid button.thumb >> nth=6', 'title'), 'layer 1, head 1');
  assert.equal(await page.textContent('#enlarged-title'), 'Layer 0, head 0 of 4');

  await page.selectOption('#model', 'bf');
  await waitForModelView(page, { heads: 8 });
  await page.selectOption('#model', '');
  await waitForHeatmaps(page, 8 + 1);
  assert.equal(await page.isVisible('fieldset.options'), true);
  assert.equal(await page.isHidden('#rollout-view'), true);
  await page.close();
});

test('one view costs one /attention request; choosing within it costs none', async () => {
  const page = await openModelPage();
  const asked = requestsTo(page, '/attention');
  const count = () => metric(models.url, 'attnd_requests_total', 'route="/attention"');
  const flops = () => metric(models.url, 'attnd_attention_flops_total');
  const modelFlops = () => metric(models.url, 'attnd_model_flops_total', 'model="f32"');
  // the work of one forward pass: what the server counts for one request
  // of the page's kind, asked here directly
  const once = async (query) => {
    const f = await flops();
    assert.equal((await fetch(`${models.url}/attention?${query}`)).status, 200);
    return (await flops()) - f;
  };
  const pass = await once('model=f32&sentence=the+dog+sat+on+the+mat&return=weights,mean_weights,rollout,head_stats');
  const [before, flopsBefore, modelBefore] = [await count(), await flops(), await modelFlops()];
  await page.fill('#sentence', 'the dog sat on the mat');
  await page.press('#sentence', 'Enter');
  await waitForModelView(page, { tokens: ['[CLS]', 'the', 'dog', 'sat', 'on', 'the', 'mat', '[SEP]'] });
  assert.equal(await count() - before, 1);
  assert.ok(pass > 0);
  assert.equal(await flops() - flopsBefore, pass);
  assert.equal(await modelFlops() - modelBefore, pass);
  assert.equal(asked.length, 1);
  assert.doesNotMatch(asked[0], /format=png/);
  assert.match(asked[0], /return=weights%2Cmean_weights%2Crollout%2Chead_stats/);

  // a head, a layer, the hidden tokens, the colours: drawn from that answer
  await page.click('#grid button.thumb[data-layer="1"][data-head="2"]');
  await page.focus('#layer');
  await page.keyboard.press('ArrowLeft');
  await page.check('#hide_special');
  await page.waitForFunction(() => document.querySelectorAll('#lines line').length === 6 * 6);
  await page.selectOption('#colormap', 'magma');
  await page.waitForFunction(() => document.querySelector('#dl-head').href.includes('colormap=magma'));
  await page.waitForTimeout(600); // past the pause after typing that would ask
  assert.equal(asked.length, 1);
  assert.equal(await count() - before, 1);
  assert.equal(await flops() - flopsBefore, pass);

  // the random weights too: one request per view, 8 heads, their mean and
  // their measures
  const randomPass = await once('sentence=the+dog+sat+on+the+mat&return=weights,mean_weights,head_stats');
  const [before2, flopsBefore2] = [await count(), await flops()];
  await page.selectOption('#model', '');
  await waitForHeatmaps(page, 8 + 1);
  assert.equal(await count() - before2, 1);
  assert.equal(await flops() - flopsBefore2, randomPass);
  assert.equal(asked.length, 2);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('clicking a thumbnail enlarges that layer and head, with its lines', async () => {
  const answer = await modelAnswer(A);
  const page = await openModelPage();
  await page.click('#grid button.thumb[data-layer="1"][data-head="2"]');
  await page.waitForFunction(() => document.querySelector('#enlarged-title').textContent === 'Layer 1, head 2 of 4');
  assert.equal(await page.getAttribute('#grid button.thumb[data-layer="1"][data-head="2"]', 'aria-pressed'), 'true');
  assert.equal(await page.getAttribute('#grid button.thumb[data-layer="0"][data-head="0"]', 'aria-pressed'), 'false');
  assert.equal(await page.inputValue('#layer'), '1');
  await page.waitForFunction(() => location.search.includes('layer=1') && location.search.includes('head=2'));
  assert.deepEqual(answer.tokens, TOKENS_A);
  for (const [i, j] of [[0, 0], [3, 7], [11, 2]]) {
    const cell = await readCell(page, '#matrix', i, j);
    assert.equal(cell.pair, `${TOKENS_A[i]} → ${TOKENS_A[j]}`);
    assert.equal(cell.value, answer.weights[1][2][i][j]);
  }
  assert.equal(await page.locator('#lines line').count(), 12 * 12);
  assert.equal(await page.textContent('#lines line >> nth=13 >> title'),
    `${TOKENS_A[1]} → ${TOKENS_A[1]}: ${answer.weights[1][2][1][1]}`);
  // the mean of a layer's heads
  await page.click('#grid button.thumb[data-layer="0"][data-head="mean"]');
  await page.waitForFunction(() => document.querySelector('#enlarged-title').textContent === 'Layer 0, mean of 4 heads');
  assert.equal((await readCell(page, '#matrix', 4, 5)).value, answer.mean_weights[0][4][5]);
  // the downloads are the server's PNGs of this layer and head, not fetched until clicked
  const href = await page.getAttribute('#dl-head', 'href');
  assert.match(href, /^\/attention\?model=f32&sentence=.*layer=0&head=mean&format=png$/);
  assert.match(await page.getAttribute('#dl-grid', 'href'), /view=model&format=png$/);
  assert.match(await page.getAttribute('#dl-rollout', 'href'), /view=rollout&format=png$/);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#dl-head')]);
  assert.equal(download.suggestedFilename(), 'attention-layer-0-head-mean.png');
  const png = await readFile(await download.path());
  assert.deepEqual([...png.subarray(1, 4)], [...Buffer.from('PNG')]);
  // a shared link restores the layer and head
  const again = await openModelPage(new URL(page.url()).search.slice(1));
  assert.equal(await again.textContent('#enlarged-title'), 'Layer 0, mean of 4 heads');
  await again.close();
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the layer is chosen from the keyboard, and so is the thumbnail', async () => {
  const answer = await modelAnswer(A);
  const page = await openModelPage();
  await page.click('#grid button.thumb[data-layer="0"][data-head="3"]');
  await page.focus('#layer');
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction(() => document.querySelector('#enlarged-title').textContent === 'Layer 1, head 3 of 4');
  assert.equal(await page.textContent('#layer-out'), '1 of 2');
  assert.equal(await page.getAttribute('#grid button.thumb[data-layer="1"][data-head="3"]', 'aria-pressed'), 'true');
  assert.equal((await readCell(page, '#matrix', 2, 9)).value, answer.weights[1][3][2][9]);
  await page.focus('#layer');
  await page.keyboard.press('Home');
  await page.waitForFunction(() => document.querySelector('#enlarged-title').textContent === 'Layer 0, head 3 of 4');
  assert.equal((await readCell(page, '#matrix', 2, 9)).value, answer.weights[0][3][2][9]);

  // one thumbnail in the tab order, the selected one; arrows move, Enter selects
  assert.deepEqual(await page.$$eval('#grid button.thumb', (b) => b.filter((x) => x.tabIndex === 0)
    .map((x) => `${x.dataset.layer}/${x.dataset.head}`)), ['0/3']);
  await page.focus('#grid button.thumb[data-layer="0"][data-head="3"]');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.evaluate(() => document.activeElement.title), 'layer 1, mean of 4 heads');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#enlarged-title').textContent === 'Layer 1, head 3 of 4');
  assert.equal(await page.inputValue('#layer'), '1');
  await page.close();
});

test('sentence B makes the pair [CLS] A [SEP] B [SEP]', async () => {
  const answer = await modelAnswer(A, B);
  assert.deepEqual(answer.tokens, TOKENS_AB);
  const page = await openModelPage();
  await page.fill('#sentence_b', B);
  await page.press('#sentence_b', 'Enter');
  await waitForModelView(page, { tokens: TOKENS_AB });
  await page.waitForFunction(() => new URLSearchParams(location.search).get('sentence_b') === 'a dog chased the mouse');
  assert.equal(await page.locator('#lines line').count(), TOKENS_AB.length ** 2);
  const cell = await readCell(page, '#matrix', 14, 3);
  assert.equal(cell.pair, 'chased → sat');
  assert.equal(cell.value, answer.weights[0][0][14][3]);
  await page.close();
});

test('hiding [CLS] and [SEP] leaves out their rows and columns, weights not renormalised, in the downloads too', async () => {
  const answer = await modelAnswer(A, B);
  const page = await openModelPage(`model=f32&sentence=${encodeURIComponent(A)}&sentence_b=${encodeURIComponent(B)}`);
  const words = TOKENS_AB.filter((t) => t !== '[CLS]' && t !== '[SEP]');
  const kept = TOKENS_AB.map((t, i) => i).filter((i) => TOKENS_AB[i] !== '[CLS]' && TOKENS_AB[i] !== '[SEP]');
  assert.match(await page.textContent('#hide-note'), /not renormalised/);
  assert.equal(await page.textContent('#hide_special_text'), 'hide [CLS] and [SEP]');
  await page.click('#grid button.thumb[data-layer="1"][data-head="1"]');
  const links = ['#dl-head', '#dl-grid', '#dl-rollout'];
  for (const id of links) assert.doesNotMatch(await page.getAttribute(id, 'href'), /special=/);
  await page.check('#hide_special');
  await waitForModelView(page, { tokens: words });
  await page.waitForFunction(() => location.search.includes('hide_special=true'));
  // the downloads leave them out too: the server's PNG of the words alone
  for (const id of links) assert.match(await page.getAttribute(id, 'href'), /[?&]special=hide(&|$)/);
  const png = await page.evaluate(async () => {
    const r = await fetch(document.querySelector('#dl-head').href);
    const bytes = new Uint8Array(await r.arrayBuffer());
    // the attnd:tokens text chunk, read from the bytes
    const text = new TextDecoder('latin1').decode(bytes);
    const at = text.indexOf('attnd:tokens\0');
    return { type: r.headers.get('Content-Type'), tokens: text.slice(at + 13, text.indexOf(']', at) + 1) };
  });
  assert.equal(png.type, 'image/png');
  assert.deepEqual(JSON.parse(png.tokens), words);
  assert.deepEqual(await page.$$eval('#matrix .row-labels span', (s) => s.map((x) => x.textContent)), words);
  assert.deepEqual(await page.$$eval('#rollout-matrix .row-labels span', (s) => s.map((x) => x.textContent)), words);
  for (const [i, j] of [[0, 0], [4, 11], [14, 2]]) {
    const cell = await readCell(page, '#matrix', i, j);
    assert.equal(cell.pair, `${words[i]} → ${words[j]}`);
    assert.equal(cell.value, answer.weights[1][1][kept[i]][kept[j]]); // the model's own weight
    const rolled = await readCell(page, '#rollout-matrix', i, j);
    assert.equal(rolled.value, answer.rollout[kept[i]][kept[j]]);
  }
  // each row shown sums to less than 1: what [CLS] and [SEP] took is not handed out again
  const row = kept.reduce((sum, j) => sum + answer.weights[1][1][kept[4]][j], 0);
  assert.ok(row < 0.999, `row sums to ${row}`);
  // and the thumbnails are of the words alone too
  assert.equal(await page.$eval('#grid button.thumb canvas', (c) => c.width), words.length);
  await page.uncheck('#hide_special');
  await waitForModelView(page, { tokens: TOKENS_AB });
  for (const id of links) assert.doesNotMatch(await page.getAttribute(id, 'href'), /special=/);
  await page.close();
});

test('the rollout is its own view, read like a head', async () => {
  const answer = await modelAnswer(A);
  const page = await openModelPage();
  assert.equal(await page.textContent('#rollout-title'), 'Rollout: every layer together');
  // from the keyboard, with its own readout: the first key lands on the corner
  await page.focus('#rollout-matrix .cells');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.textContent('#rollout-readout'), `the → [CLS]: ${answer.rollout[1][0]}`);
  assert.equal(await page.textContent('#readout'), '\u00a0'); // the head's readout is its own
  for (const [i, j] of [[0, 0], [5, 2], [11, 11]]) {
    const cell = await readCell(page, '#rollout-matrix', i, j);
    assert.equal(cell.pair, `${TOKENS_A[i]} → ${TOKENS_A[j]}`);
    assert.equal(cell.value, answer.rollout[i][j]);
  }
  await page.close();
});

test('value-weighted: one request for the norms, drawn in the weights\' places, their values under the pointer', async () => {
  const q = `model=f32&sentence=${encodeURIComponent(A)}`;
  const page = await openModelPage(`${q}&layer=1&head=2`);
  const asked = requestsTo(page, '/attention');
  await page.selectOption('#values', 'value_weighted');
  await page.waitForFunction(() => !document.querySelector('#values-note').hidden);
  await waitForModelView(page);
  await page.waitForFunction(() => location.search.includes('values=value_weighted'));
  assert.equal(asked.length, 1);
  assert.match(asked[0], /return=value_weighted%2Crollout%2Chead_stats/);
  const r = await fetch(`${models.url}/attention?${q}&return=value_weighted`);
  const d = await r.json();
  // the enlarged head: the page's own drawing of the server's norms
  const differ = await page.evaluate(async (w) => {
    const { drawHeatmap } = await import('/js/heatmap.js');
    const mine = document.querySelector('#matrix .cells canvas');
    const want = document.createElement('canvas');
    drawHeatmap(want, w, document.querySelector('#colormap').value);
    const a = mine.getContext('2d').getImageData(0, 0, mine.width, mine.height).data;
    const b = want.getContext('2d').getImageData(0, 0, want.width, want.height).data;
    let n = a.length === b.length ? 0 : -1;
    for (let k = 0; n >= 0 && k < a.length; k++) if (a[k] !== b[k]) n++;
    return n;
  }, d.value_weighted[1][2]);
  assert.equal(differ, 0);
  // not the weights' picture: the norms differ from the weights
  assert.notDeepEqual(d.value_weighted[1][2], (await modelAnswer(A)).weights[1][2]);
  const cell = await readCell(page, '#matrix', 3, 1);
  assert.equal(cell.value, d.value_weighted[1][2][3][1]);
  // and back: the weights again, one more request
  await page.selectOption('#values', 'weights');
  await page.waitForFunction(() => document.querySelector('#values-note').hidden);
  await waitForModelView(page);
  assert.equal(asked.length, 2);
  assert.deepEqual(page.errors, []);
  await page.close();
});

// The pixels of the canvas in box ('#matrix', '#rollout-matrix') against
// the server's bare PNG of query at one pixel per weight: both sizes, and
// the channels that differ.
function compare(page, box, query) {
  return page.evaluate(async ({ box, query }) => {
    const mine = document.querySelector(`${box} .cells canvas`);
    const ours = mine.getContext('2d').getImageData(0, 0, mine.width, mine.height).data;
    const r = await fetch(`/attention?${query}&labels=false&cell=1&format=png`);
    const bitmap = await createImageBitmap(await r.blob(), { colorSpaceConversion: 'none' });
    const c = document.createElement('canvas');
    c.width = bitmap.width; c.height = bitmap.height;
    const ctx = c.getContext('2d');
    ctx.drawImage(bitmap, 0, 0);
    const theirs = ctx.getImageData(0, 0, c.width, c.height).data;
    let differ = 0;
    for (let k = 0; k < theirs.length; k++) if (theirs[k] !== ours[k]) differ++;
    return { size: [mine.width, mine.height, c.width, c.height], differ };
  }, { box, query });
}

test('the page draws the server\'s colours, pixel for pixel', async () => {
  const page = await openModelPage(`model=f32&sentence=${encodeURIComponent(A)}&sentence_b=${encodeURIComponent(B)}&layer=1&head=3`);
  const q = `model=f32&sentence=${encodeURIComponent(A)}&sentence_b=${encodeURIComponent(B)}`;
  for (const map of ['viridis', 'magma', 'gray']) {
    await page.selectOption('#colormap', map);
    await page.waitForFunction((m) => document.querySelector('#dl-head').href.includes(`colormap=${m}`), map);
    for (const [box, query] of [['#matrix', `${q}&layer=1&head=3`], ['#rollout-matrix', `${q}&view=rollout`]]) {
      const got = await compare(page, box, `${query}&colormap=${map}`);
      assert.deepEqual(got, { size: [18, 18, 18, 18], differ: 0 }, `${box} ${map}`);
    }
  }
  await page.close();
  // and the random weights' heads
  const random = await openPage('/?head=5&colormap=magma');
  const got = await compare(random, '#matrix', `sentence=${encodeURIComponent(SENTENCE)}&head=5&colormap=magma`);
  assert.deepEqual(got, { size: [9, 9, 9, 9], differ: 0 });
  await random.close();
});

// The page's thumbnails against the server's model view drawn bare at one
// pixel a weight (the grid download): the pixels that differ, and the
// tiles compared.
function compareThumbnails(page) {
  return page.evaluate(async () => {
    // the grid download, bare at one pixel per weight: a row of tiles per layer
    const href = document.querySelector('#dl-grid').getAttribute('href');
    const r = await fetch(`${href.replace(/&format=png$/, '')}&labels=false&cell=1&format=png`);
    const bitmap = await createImageBitmap(await r.blob(), { colorSpaceConversion: 'none' });
    const c = document.createElement('canvas');
    c.width = bitmap.width; c.height = bitmap.height;
    c.getContext('2d').drawImage(bitmap, 0, 0);
    const theirs = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let differ = 0, compared = 0;
    for (const b of document.querySelectorAll('#grid button.thumb')) {
      if (b.dataset.head === 'mean') continue;
      const canvas = b.querySelector('canvas');
      const n = canvas.width;
      const ours = canvas.getContext('2d').getImageData(0, 0, n, n).data;
      const x0 = Number(b.dataset.head) * (n + 1), y0 = Number(b.dataset.layer) * (n + 1);
      for (let y = 0; y < n; y++) {
        for (let x = 0; x < n; x++) {
          for (let k = 0; k < 3; k++) {
            if (ours[(y * n + x) * 4 + k] !== theirs[((y0 + y) * c.width + x0 + x) * 4 + k]) differ++;
          }
        }
      }
      compared++;
    }
    return { type: r.headers.get('Content-Type'), compared, differ };
  });
}

test('the server\'s model view colours each tile as the page colours each thumbnail', async () => {
  const page = await openModelPage();
  assert.deepEqual(await compareThumbnails(page), { type: 'image/png', compared: 8, differ: 0 });
  await page.close();
});

// A decoder's text: its BOS, then every word, long enough to pass
// mistral's window of 5.
const DECODER_TEXT = 'The quick brown fox jumps over the lazy dog';

test('a decoder\'s causal view hatches what no query may see, as the server does, and reads it as not allowed', async () => {
  const q = `model=mistral&sentence=${encodeURIComponent(DECODER_TEXT)}`;
  const page = await openModelPage(q, undefined, undefined, { layers: 2, heads: 6 });
  const answer = await (await fetch(`${models.url}/attention?${q}&return=weights,rollout`)).json();
  const n = answer.tokens.length, window = answer.config.sliding_window;
  assert.equal(answer.config.causal, true);
  assert.equal(window, 5);
  assert.ok(n > window + 2);
  // pixel for pixel the server's picture: colours, and the stripes of a
  // later key and of one outside the window
  assert.deepEqual(await compareThumbnails(page), { type: 'image/png', compared: 12, differ: 0 });
  const shades = await page.evaluate(() => {
    const c = document.querySelector('#grid button.thumb[data-layer="0"][data-head="0"] canvas');
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    return [[0, 4], [0, 5], [7, 0], [8, 0]].map(([i, j]) => px[(i * c.width + j) * 4]);
  });
  assert.deepEqual(shades, [170, 232, 232, 170]);
  // hovering: a seen key reads its weight, a later one and one outside
  // the window read "not allowed"
  const seen = await readCell(page, '#matrix', 6, 3);
  assert.equal(seen.value, answer.weights[0][0][6][3]);
  for (const [i, j] of [[2, 3], [6, 1]]) {
    const text = await hoverCell(page, i, j);
    assert.match(text, /: not allowed/, `${i}, ${j}`);
  }
  // the rollout's paths reach past the window: only later keys are hatched
  assert.match(await readRollout(page, 6, 1), /^[0-9.e-]+$/);
  assert.match(await readRollout(page, 1, 6), /not allowed/);
  // hiding the BOS shifts every cell; what is hatched moves with it
  await page.check('#hide_special');
  await page.waitForFunction((m) => document.querySelectorAll('#lines text.token').length === 2 * m, n - 1);
  assert.match(await hoverCell(page, 4, 5), /: not allowed/);
  assert.match(await hoverCell(page, 5, 0), /: not allowed/); // key 1 from query 6: outside the window
  assert.equal((await readCell(page, '#matrix', 5, 1)).value, answer.weights[0][0][6][2]);
  assert.deepEqual(page.errors, []);
  await page.close();
});

// Gemma 2's layers slide (0 and 2, a window of 4) and are global (1 and
// 3) in turn: the answer's config gives each one's window.
test('layers of two kinds: each layer hatched by its own window, as the server does, and named', async () => {
  const q = `model=gemma2&sentence=${encodeURIComponent(DECODER_TEXT)}`;
  const page = await openModelPage(q, undefined, undefined, { layers: 4, heads: 4 });
  const answer = await (await fetch(`${models.url}/attention?${q}&return=weights,rollout`)).json();
  const n = answer.tokens.length, windows = [4, 0, 4, 0];
  assert.deepEqual(answer.config.layer_windows, [4, null, 4, null]);
  assert.equal(answer.config.sliding_window, 4);
  assert.ok(n > 4 + 2);
  // every tile the server's model view, pixel for pixel: stripes outside
  // a sliding layer's window, over the later keys alone in a global one
  assert.deepEqual(await compareThumbnails(page), { type: 'image/png', compared: 16, differ: 0 });
  // and every thumbnail, the means too, hatches exactly what its layer
  // cannot see: counted against the windows, not against the server
  const tiles = await page.evaluate(() => [...document.querySelectorAll('#grid button.thumb')].map((b) => {
    const c = b.querySelector('canvas');
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const grey = [];
    for (let i = 0; i < c.height; i++)
      for (let j = 0; j < c.width; j++) {
        const o = (i * c.width + j) * 4, want = (i + j) % 4 === 0 ? 170 : 232;
        grey.push(px[o] === want && px[o + 1] === want && px[o + 2] === want ? 1 : 0);
      }
    return { layer: Number(b.dataset.layer), head: b.dataset.head, side: c.width, grey };
  }));
  assert.equal(tiles.length, 4 * 5);
  for (const t of tiles) {
    assert.equal(t.side, n);
    let outside = 0;
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        const w = windows[t.layer], far = w > 0 && j + w <= i;
        assert.equal(t.grey[i * n + j], j > i || far ? 1 : 0, `layer ${t.layer} ${t.head}: cell (${i}, ${j})`);
        outside += far && t.grey[i * n + j];
      }
    assert.equal(outside > 0, windows[t.layer] > 0, `layer ${t.layer} ${t.head}`);
  }
  // each layer's label says which it is
  assert.deepEqual(await page.$$eval('#grid .axis .layer-kind', (a) => a.map((x) => x.textContent)),
    ['sliding (4)', 'global', 'sliding (4)', 'global']);
  const said = await page.$$eval('#grid .axis[title]', (a) => a.map((x) => x.title));
  assert.deepEqual(said.map((t) => /slides/.test(t)), [true, false, true, false]);
  assert.equal(said[0], 'layer 0 slides: each token sees itself and the 3 before it (window 4)');
  // the enlarged head of a sliding layer: outside the window "not allowed"
  assert.equal(await page.textContent('#enlarged-title'), 'Layer 0 (sliding, window 4), head 0 of 4');
  assert.match(await hoverCell(page, 6, 1), /: not allowed/);
  assert.equal((await readCell(page, '#matrix', 6, 3)).value, answer.weights[0][0][6][3]);
  assert.deepEqual(await compare(page, '#matrix', `${q}&layer=0&head=0`), { size: [n, n, n, n], differ: 0 });
  // a global layer's: the same key read as its weight
  await page.click('#grid button.thumb[data-layer="1"][data-head="2"]');
  await page.waitForFunction(() => document.querySelector('#enlarged-title').textContent === 'Layer 1 (global), head 2 of 4');
  const seen = await readCell(page, '#matrix', 6, 1);
  assert.equal(seen.value, answer.weights[1][2][6][1]);
  assert.match(await hoverCell(page, 1, 6), /: not allowed/);
  assert.deepEqual(await compare(page, '#matrix', `${q}&layer=1&head=2`), { size: [n, n, n, n], differ: 0 });
  // the rollout reaches past every window: the later keys alone
  assert.match(await readRollout(page, 6, 1), /^[0-9.e-]+$/);
  assert.deepEqual(await compare(page, '#rollout-matrix', `${q}&view=rollout`), { size: [n, n, n, n], differ: 0 });
  // hiding the BOS moves every cell, and the windows' stripes with them
  await page.check('#hide_special');
  await page.waitForFunction((m) => document.querySelectorAll('#lines text.token').length === 2 * m, n - 1);
  assert.deepEqual(await compareThumbnails(page), { type: 'image/png', compared: 16, differ: 0 });
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    const shot = await openModelPage(q, { width, height }, width < 400 ? 'dark' : 'light', { layers: 4, heads: 4 });
    const overflow = await shot.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(overflow <= width, `page is ${overflow}px wide at ${width}px`);
    // the model view with its layers named: tests/web/screenshots/layer-kinds-*.png
    await shot.locator('#grid').screenshot({ path: `${shots}layer-kinds-${width}x${height}-${width < 400 ? 'dark' : 'light'}.png` });
    await shot.close();
  }
  assert.deepEqual(page.errors, []);
  await page.close();
});

// The rollout's cell (i, j) as its tooltip reads it.
async function readRollout(page, i, j) {
  const c = page.locator('#rollout-matrix .cells canvas');
  await c.scrollIntoViewIfNeeded();
  const r = await c.boundingBox();
  const n = await page.evaluate(() => Number(getComputedStyle(document.querySelector('#rollout-matrix')).getPropertyValue('--rows')));
  await page.mouse.move(r.x + (j + 0.5) * r.width / n, r.y + (i + 0.5) * r.height / n);
  await page.waitForSelector('#tooltip:not([hidden])');
  const text = (await page.textContent('#tooltip')).split(': ')[1];
  await page.mouse.move(0, 0);
  return text;
}

// The model view of a decoder of real heads: every tile in one request,
// the groups of heads sharing a KV head, the keyboard, the colours; the
// time from submit to the drawn view printed, not asserted.
for (const [name, layers, heads, kv] of [['llama16', 16, 32, 8], ['qwen24', 24, 14, 2]]) {
  test(`the model view of ${layers} layers × ${heads} heads on ${kv} KV heads: one request, grouped, keyboard`, async (t) => {
    const page = await openModelPage(`model=${name}&sentence=${encodeURIComponent(DECODER_TEXT)}`,
      undefined, undefined, { layers, heads });
    const asked = requestsTo(page, '/attention');
    const ms = await page.evaluate(async ({ layers, heads }) => {
      document.querySelector('#sentence').value = 'A small cat sat on the warm mat by the door';
      const t0 = performance.now();
      document.querySelector('#controls').requestSubmit();
      await new Promise((resolve) => {
        const tick = () => {
          const words = [...document.querySelectorAll('#lines text.token')].map((x) => x.textContent);
          const thumbs = document.querySelectorAll('#grid button.thumb canvas');
          return words.join('').includes('by the door') && thumbs.length === layers * (heads + 1) ? resolve() : setTimeout(tick, 0);
        };
        tick();
      });
      await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
      return performance.now() - t0;
    }, { layers, heads });
    t.diagnostic(`${layers} × ${heads} model view: ${ms.toFixed(0)} ms from submit to the drawn view`);
    assert.equal(asked.length, 1);
    assert.equal(await page.textContent('#results-title'), `Every layer and head (${layers} × ${heads})`);
    // the KV groups: a label over each, a gap between them wider than
    // between two heads of one group, the title naming the KV head
    const per = heads / kv;
    assert.deepEqual(await page.$$eval('#grid .kv-label', (a) => a.map((x) => x.textContent)),
      [...Array(kv).keys()].map((g) => `KV head ${g}`));
    const x = async (h) => (await page.locator(`#grid button.thumb[data-layer="0"][data-head="${h}"]`).boundingBox());
    const [a, b, c] = [await x(per - 2), await x(per - 1), await x(per)];
    const inside = b.x - (a.x + a.width), between = c.x - (b.x + b.width);
    assert.ok(between >= inside + 5, `gap between groups ${between} px, inside ${inside} px`);
    assert.equal(await page.getAttribute(`#grid button.thumb[data-layer="1"][data-head="${heads - 1}"]`, 'title'),
      `layer 1, head ${heads - 1} (KV head ${kv - 1})`);
    // every tile the server's colours, hatches included (the grid
    // download asks the server once more)
    assert.deepEqual(await compareThumbnails(page), { type: 'image/png', compared: layers * heads, differ: 0 });
    // the keyboard: from the selected tile, across a group and down
    await page.focus('#grid button.thumb[data-layer="0"][data-head="0"]');
    for (let k = 0; k < per + 1; k++) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.waitForFunction((want) => document.querySelector('#enlarged-title').textContent === want,
      `Layer 1, head ${per + 1} of ${heads}`);
    await page.keyboard.press('End');
    assert.equal(await page.evaluate(() => document.activeElement.title), `layer 1, mean of ${heads} heads`);
    assert.deepEqual(page.errors, []);
    await page.close();
  });
}

test('a long input keeps the layout; one past the model\'s positions gets the server\'s message', async () => {
  const words = 'the quick brown fox jump over the lazy dog and the cat sat on the mat because it was hungry'.split(' ');
  const long = [...words, ...words].slice(0, 38).join(' '); // 38 + [CLS] + [SEP] = f32's 40 positions
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    for (const scheme of ['light', 'dark']) {
      const page = await openModelPage(`model=f32&sentence=${encodeURIComponent(long)}`, { width, height }, scheme);
      await waitForModelView(page, { tokens: ['[CLS]', ...long.split(' '), '[SEP]'] });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(overflow <= width, `page is ${overflow}px wide at ${width}px`);
      await page.screenshot({ path: `${shots}model-${width}x${height}-${scheme}.png`, fullPage: true });
      await page.close();
    }
  }
  const page = await openModelPage();
  await page.fill('#sentence', `${long} dog`);
  await page.press('#sentence', 'Enter');
  await page.waitForFunction(() => document.querySelector('#sentence-error').textContent !== '');
  assert.match(await page.textContent('#sentence-error'), /40/);
  assert.equal(await page.getAttribute('#sentence', 'aria-invalid'), 'true');
  await page.close();
});
