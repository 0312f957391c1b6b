// The "Does it matter?" panel in a real headless Chromium against the real
// server: token counts as typed, activation patching streamed with its
// progress and drawn as a heatmap, cancelling, a head on both prompts, the
// heads' direct logit attribution and an ablation's before and after,
// each checked against the server's own JSON for the same request.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { root, startServer, launchBrowser, metric } from './harness.js';

const shots = fileURLToPath(new URL('./screenshots/', import.meta.url));
// Deadlines: what the page waits on is a few requests of tiny models; a
// slow, busy machine gets this long before a wait fails.
const DEADLINE = 30000;

// Prompts the tiny checkpoints' vocabularies make into one token a word;
// " mat" and " cat" are single tokens of both.
const CLEAN = 'The quick brown fox sat on the';
const CORRUPTED = 'The lazy brown dog sat on the';
const SHORT = 'The brown fox sat on the';

// gpt2 and llama: 2 layers × 4 heads (llama on 2 KV heads); f32: a BERT
// encoder; big: 32 layers × 32 heads, for a patch that runs long enough
// to be cancelled; gemma2: 4 layers × 4 heads, 0 and 2 sliding with a
// window of 4, 1 and 3 global.
let srv, base, browser;

before(async () => {
  srv = await startServer(['--model', `gpt2=${root}tests/models/gpt2`,
    '--model', `llama=${root}tests/models/llama3`, '--model', `f32=${root}tests/models/f32`,
    '--model', `big=${root}tests/models/llama_32x32`, '--model', `gemma2=${root}tests/models/gemma2`]);
  base = srv.url;
  browser = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  await browser?.close();
  srv?.child.kill('SIGTERM');
});

async function post(path, body) {
  const r = await fetch(`${base}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

// The page with model chosen and the panel's form shown; the prompts and
// answers filled in when given.
async function openPanel(model, fill = {}, viewport = { width: 1280, height: 800 }) {
  const page = await browser.newPage({ viewport });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.errors = errors;
  await page.goto(`${base}/?model=${model}&sentence=${encodeURIComponent(CLEAN)}`);
  await page.waitForSelector('#patch-form:not([hidden])', { timeout: DEADLINE });
  for (const [k, v] of Object.entries(fill)) {
    if (k === 'kind' || k === 'over' || k === 'direction') await page.selectOption(`#patch-${k}`, v);
    else await page.fill(`#patch-${k}`, v);
  }
  return page;
}

const waitCount = (page, which, n) => page.waitForFunction(([w, c]) =>
  document.querySelector(`#patch-${w}-count`).dataset.count === String(c), [which, n], { timeout: DEADLINE });

const GPT2 = { clean: CLEAN, corrupted: CORRUPTED, correct: ' mat', incorrect: ' cat' };

// Runs the patch from the page and waits for its effects.
async function runPatch(page) {
  await page.click('#patch-run');
  await page.waitForFunction(() => /^Done: /.test(document.querySelector('#patch-status').textContent),
    null, { timeout: DEADLINE });
}

test('typing updates each prompt\'s token count; a length mismatch is flagged and cleared', async () => {
  const page = await openPanel('gpt2');
  await page.fill('#patch-clean', CLEAN);
  const clean = await post('/attention', { model: 'gpt2', sentence: CLEAN, return: [] });
  await waitCount(page, 'clean', clean.json.tokens.length);
  assert.equal(clean.json.tokens.length, 7);
  assert.deepEqual(await page.$$eval('#patch-clean-count .tok', (s) => s.map((x) => x.textContent)),
    clean.json.tokens.map((t) => t.replace(/ /g, '␣')));
  // a shorter corrupted prompt: its count, and the warning naming both
  await page.fill('#patch-corrupted', SHORT);
  await waitCount(page, 'corrupted', 6);
  await page.waitForSelector('#patch-mismatch:not([hidden])', { timeout: DEADLINE });
  assert.match(await page.textContent('#patch-mismatch'), /clean prompt is 7 tokens and the corrupted 6/);
  // typing on: the counts follow, and the warning goes once they agree
  await page.type('#patch-corrupted', ' mat', { delay: 20 });
  await waitCount(page, 'corrupted', 7);
  await page.waitForSelector('#patch-mismatch', { state: 'hidden', timeout: DEADLINE });
  // run anyway with a mismatch: the server's problem beside the corrupted prompt
  await page.fill('#patch-corrupted', SHORT);
  await page.click('#patch-run');
  await page.waitForFunction(() => document.querySelector('#patch-corrupted-error').textContent !== '',
    null, { timeout: DEADLINE });
  assert.match(await page.textContent('#patch-corrupted-error'), /clean is 7 tokens and corrupted 6/);
  assert.equal(await page.getAttribute('#patch-corrupted', 'aria-invalid'), 'true');
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('an answer that is not one token is refused beside its field', async () => {
  const page = await openPanel('gpt2', { ...GPT2, correct: ' Mary' });
  await page.click('#patch-run');
  await page.waitForFunction(() => document.querySelector('#patch-correct-error').textContent !== '',
    null, { timeout: DEADLINE });
  assert.match(await page.textContent('#patch-correct-error'), /is 5 tokens of the model "gpt2"/);
  assert.equal(await page.getAttribute('#patch-correct', 'aria-invalid'), 'true');
  // fixed, the run goes through and the message goes
  await page.fill('#patch-correct', ' mat');
  await runPatch(page);
  assert.equal(await page.textContent('#patch-correct-error'), '');
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('a patch shows its progress, then a layer × head heatmap of the server\'s effects', async () => {
  const page = await openPanel('gpt2', GPT2);
  // every state the progress bar passes through, from before the click
  await page.evaluate(() => {
    const bar = document.querySelector('#patch-progress');
    window.seen = [];
    new MutationObserver(() => window.seen.push({ hidden: bar.hidden, value: bar.value, max: bar.max,
      status: document.querySelector('#patch-status').textContent }))
      .observe(bar, { attributes: true });
  });
  await runPatch(page);
  const body = { model: 'gpt2', clean: CLEAN, corrupted: CORRUPTED,
    metric: { kind: 'logit_diff', correct: ' mat', incorrect: ' cat' }, over: 'heads', direction: 'denoise' };
  const direct = await post('/patch', body);
  assert.equal(direct.status, 200);
  const seen = await page.evaluate(() => window.seen);
  assert.ok(seen.some((s) => !s.hidden), 'the progress bar was shown');
  assert.ok(seen.some((s) => !s.hidden && s.max === direct.json.runs && s.value > 0),
    `the bar counted runs out of ${direct.json.runs}: ${JSON.stringify(seen)}`);
  assert.equal(await page.isHidden('#patch-progress'), true);
  assert.equal(await page.isHidden('#patch-cancel'), true);
  // one cell a head, each holding the server's number
  const cells = await page.$$eval('#patch-effects button.effect', (bs) => bs.map((b) =>
    ({ l: Number(b.dataset.layer), h: Number(b.dataset.head), v: Number(b.dataset.value), bg: b.style.background })));
  assert.equal(cells.length, 2 * 4);
  for (const c of cells) assert.equal(c.v, direct.json.effects[c.l][c.h]);
  // the colours diverge about 0: red above, blue below
  const rgb = (s) => s.match(/\d+/g).map(Number);
  for (const c of cells) {
    const [r, , b] = rgb(c.bg);
    if (c.v > 0.5) assert.ok(r > b, `L${c.l}H${c.h} ${c.v} is red: ${c.bg}`);
    if (c.v < -0.5) assert.ok(b > r, `L${c.l}H${c.h} ${c.v} is blue: ${c.bg}`);
  }
  assert.match(await page.textContent('#patch-summary'), /clean -2\.95, corrupted -3\.32/);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the residual stream and layers\' outputs: rows of layers, a column a token', async () => {
  const page = await openPanel('llama', { ...GPT2, kind: 'logprob', target: ' mat', over: 'residual' });
  await runPatch(page);
  const direct = await post('/patch', { model: 'llama', clean: CLEAN, corrupted: CORRUPTED,
    metric: { kind: 'logprob', target: ' mat' }, over: 'residual' });
  const n = direct.json.clean.tokens.length; // the BOS and 7 words
  assert.equal(n, 8);
  const size = await page.$eval('#patch-effects canvas', (c) => [c.width, c.height]);
  assert.deepEqual(size, [n, 2]);
  const labels = await page.$$eval('#patch-effects .col-labels span', (s) => s.map((x) => x.textContent));
  assert.deepEqual(labels.slice(2, 5), [' quick /  lazy', ' brown', ' fox /  dog']);
  // the arrow keys read the server's numbers
  await page.focus('#patch-effects .cells');
  await page.keyboard.press('ArrowDown');
  for (let j = 0; j < n - 1; j++) await page.keyboard.press('ArrowRight');
  assert.equal(await page.textContent('#patch-readout'),
    `layer 0 in at ${n - 1} ( the): ${direct.json.effects[0][n - 1]}`);
  // layers: an attention and an MLP row a layer
  await page.selectOption('#patch-over', 'layers');
  await runPatch(page);
  await page.waitForSelector('#patch-effects[data-over=layers] canvas', { timeout: DEADLINE });
  assert.deepEqual(await page.$eval('#patch-effects canvas', (c) => [c.width, c.height]), [n, 4]);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('cancelling stops the patch, in the page and on the server', async () => {
  const long = `${CLEAN} mat and the lazy dog sat on the cat and the quick brown fox sat on the`;
  const page = await openPanel('big', { clean: long, corrupted: long.replace('quick brown fox', 'lazy brown dog'),
    kind: 'logprob', target: ' mat', over: 'heads_positions' });
  const abandoned = await metric(base, 'attnd_patches_abandoned_total');
  await page.click('#patch-run');
  // a first batch counted, out of 32 × 32 heads at every position
  await page.waitForFunction(() => document.querySelector('#patch-progress').value > 0,
    null, { timeout: DEADLINE });
  const of = await page.$eval('#patch-progress', (b) => b.max);
  assert.ok(of > 32 * 32 * 20, `${of} runs`);
  assert.ok(await metric(base, 'attnd_requests_in_flight') >= 2, 'the patch is in flight beside /metrics');
  await page.click('#patch-cancel');
  assert.match(await page.textContent('#patch-status'), /^Cancelled/);
  assert.equal(await page.isHidden('#patch-progress'), true);
  assert.equal(await page.isHidden('#patch-cancel'), true);
  // the server stops: the patch counted as abandoned and nothing but this
  // /metrics request in flight, long before the whole patch could have ended
  const start = Date.now();
  for (;;) {
    if (await metric(base, 'attnd_requests_in_flight') <= 1
      && await metric(base, 'attnd_patches_abandoned_total') === abandoned + 1) break;
    assert.ok(Date.now() - start < DEADLINE, 'the server went on patching');
    await new Promise((r) => setTimeout(r, 100));
  }
  const runs = await metric(base, 'attnd_patched_runs_total');
  assert.ok(runs < of, `stopped at ${runs} patched runs of ${of}`);
  assert.equal(await page.isHidden('#patch-result'), true);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('clicking a head opens its attention on both prompts, side by side', async () => {
  const page = await openPanel('gpt2', GPT2);
  await runPatch(page);
  await page.click('#patch-effects button.effect[data-layer="1"][data-head="2"]');
  await page.waitForFunction(() => ['clean', 'corrupted'].every((p) =>
    document.querySelector(`#patch-pattern-${p} canvas`)), null, { timeout: DEADLINE });
  assert.equal(await page.textContent('#patch-heads-title'), 'Layer 1, head 2 on both prompts');
  for (const [p, text] of [['clean', CLEAN], ['corrupted', CORRUPTED]]) {
    const d = (await post('/attention', { model: 'gpt2', sentence: text, layer: 1, return: ['weights'] })).json;
    assert.deepEqual(await page.$eval(`#patch-pattern-${p} canvas`, (c) => [c.width, c.height]), [7, 7]);
    assert.deepEqual(await page.$$eval(`#patch-pattern-${p} .row-labels span`, (s) => s.map((x) => x.textContent)), d.tokens);
    // the last query's row, read by the arrow keys
    await page.focus(`#patch-pattern-${p} .cells`);
    await page.keyboard.press('ArrowDown');
    for (let i = 0; i < 6; i++) await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.textContent(`#patch-pattern-${p}-readout`),
      `${d.tokens[6]} → ${d.tokens[1]}: ${d.weights[2][6][1]}`);
  }
  assert.deepEqual(page.errors, []);
  await page.close();
});

// A head's pattern as the page draws it: which cells of the canvas in box
// are the hatching's greys (the dark one where row + column is a multiple
// of 4), and its side.
function hatchedCells(page, box) {
  return page.$eval(`${box} canvas`, (c) => {
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const grey = [];
    for (let i = 0; i < c.height; i++)
      for (let j = 0; j < c.width; j++) {
        const o = (i * c.width + j) * 4, want = (i + j) % 4 === 0 ? 170 : 232;
        grey.push(px[o] === want && px[o + 1] === want && px[o + 2] === want ? 1 : 0);
      }
    return { side: c.width, grey };
  });
}

// The channels of the canvas in box that differ from the server's bare PNG
// of query at one pixel a weight, and both sizes.
function differFromServer(page, box, query) {
  return page.evaluate(async ({ box, query }) => {
    const mine = document.querySelector(`${box} canvas`);
    const ours = mine.getContext('2d').getImageData(0, 0, mine.width, mine.height).data;
    const r = await fetch(`/attention?${query}&labels=false&cell=1&format=png`);
    const bitmap = await createImageBitmap(await r.blob(), { colorSpaceConversion: 'none' });
    const c = document.createElement('canvas');
    c.width = bitmap.width; c.height = bitmap.height;
    c.getContext('2d').drawImage(bitmap, 0, 0);
    const theirs = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let differ = 0;
    for (let k = 0; k < theirs.length; k++) if (theirs[k] !== ours[k]) differ++;
    return { size: [mine.width, mine.height, c.width, c.height], differ };
  }, { box, query });
}

test('a head on both prompts is hatched by its own layer\'s window: a sliding layer\'s, a global one\'s', async () => {
  const page = await openPanel('gemma2', GPT2);
  await runPatch(page);
  for (const [l, h, window] of [[0, 1, 4], [1, 3, 0]]) {
    await page.click(`#patch-effects button.effect[data-layer="${l}"][data-head="${h}"]`);
    await page.waitForFunction(([layer, head]) => ['clean', 'corrupted'].every((p) => {
      const box = document.querySelector(`#patch-pattern-${p}`);
      return box.dataset.layer === layer && box.dataset.head === head && box.querySelector('canvas');
    }), [String(l), String(h)], { timeout: DEADLINE });
    assert.equal(await page.textContent('#patch-heads-title'), `Layer ${l}, head ${h} on both prompts`);
    for (const [p, text] of [['clean', CLEAN], ['corrupted', CORRUPTED]]) {
      const d = (await post('/attention', { model: 'gemma2', sentence: text, layer: l, return: ['weights'] })).json;
      const n = d.tokens.length;
      assert.ok(n > 4 + 2);
      assert.deepEqual(d.config.layer_windows, [4, null, 4, null]);
      // hatched: the later keys, and on a sliding layer those outside its window
      const { side, grey } = await hatchedCells(page, `#patch-pattern-${p}`);
      assert.equal(side, n);
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++)
          assert.equal(grey[i * n + j], j > i || (window > 0 && j + window <= i) ? 1 : 0, `${p} L${l}: (${i}, ${j})`);
      // and pixel for pixel the server's image of that head
      const query = `model=gemma2&sentence=${encodeURIComponent(text)}&layer=${l}&head=${h}&colormap=viridis`;
      assert.deepEqual(await differFromServer(page, `#patch-pattern-${p}`, query), { size: [n, n, n, n], differ: 0 });
      // the last query on the second token: outside a sliding window, seen by a global layer
      await page.focus(`#patch-pattern-${p} .cells`);
      await page.keyboard.press('ArrowDown');
      for (let i = 0; i < n - 1; i++) await page.keyboard.press('ArrowDown');
      await page.keyboard.press('ArrowRight');
      assert.equal(await page.textContent(`#patch-pattern-${p}-readout`),
        `${d.tokens[n - 1]} → ${d.tokens[1]}: ${window ? 'not allowed (the query cannot see this key)' : d.weights[h][n - 1][1]}`);
    }
  }
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the DLA chart ranks every head; a bar ablates it and shows the server\'s before and after', async () => {
  const page = await openPanel('gpt2', GPT2);
  await runPatch(page);
  await page.waitForSelector('#dla-chart button.bar', { timeout: DEADLINE });
  const dla = (await post('/attention', { model: 'gpt2', sentence: CLEAN, return: ['dla'],
    dla_target: [' mat', ' cat'] })).json.dla;
  const bars = await page.$$eval('#dla-chart button.bar', (bs) => bs.map((b) =>
    ({ l: Number(b.dataset.layer), h: Number(b.dataset.head), v: Number(b.dataset.value) })));
  assert.equal(bars.length, 2 * 4);
  for (const b of bars) assert.equal(b.v, dla.heads[b.l][b.h]);
  for (let i = 1; i < bars.length; i++) assert.ok(bars[i - 1].v >= bars[i].v, 'highest first');
  assert.match(await page.textContent('#dla-summary'), /together -2\.95/);
  // the top bar: ablated, against the server's own answers
  const top = bars[0];
  await page.click('#dla-chart button.bar >> nth=0');
  await page.waitForSelector('#ablation:not([hidden])', { timeout: DEADLINE });
  const lens = async (extra) => {
    const d = (await post('/attention', { model: 'gpt2', sentence: CLEAN, return: ['logit_lens'], logit_lens_k: 5, ...extra })).json;
    return d.logit_lens[d.logit_lens.length - 1][d.tokens.length - 1];
  };
  const beforeAblation = await lens({});
  const afterAblation = await lens({ ablate: [{ layer: top.l, head: top.h }] });
  const column = (cls) => page.$$eval(`#ablation-table td.token.${cls}`, (tds) => tds.map((td) =>
    ({ token_id: Number(td.dataset.tokenId), p: Number(td.dataset.p) })));
  const strip = (xs) => xs.map(({ token_id, p }) => ({ token_id, p }));
  assert.deepEqual(await column('before'), strip(beforeAblation));
  assert.deepEqual(await column('after'), strip(afterAblation));
  assert.notDeepEqual(strip(beforeAblation), strip(afterAblation));
  assert.match(await page.textContent('#ablation-caption'), new RegExp(`layer ${top.l}, head ${top.h} zeroed`));
  // by its mean instead
  await page.selectOption('#ablate-mode', 'mean');
  await page.click('#dla-chart button.bar >> nth=0');
  await page.waitForFunction(() => /replaced by its mean/.test(document.querySelector('#ablation-caption').textContent),
    null, { timeout: DEADLINE });
  assert.deepEqual(await column('after'), strip(await lens({ ablate: [{ layer: top.l, head: top.h, mode: 'mean' }] })));
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('keyboard: Tab reaches a cell, the arrow keys move, Enter opens it; a bar likewise', async () => {
  const page = await openPanel('gpt2', GPT2);
  await page.focus('#patch-incorrect');
  await page.keyboard.press('Enter'); // submits the panel's form
  await page.waitForFunction(() => /^Done: /.test(document.querySelector('#patch-status').textContent),
    null, { timeout: DEADLINE });
  await page.focus('#patch-run');
  // past the run button, the heatmap's one cell in the tab order
  let at = '';
  for (let i = 0; i < 5 && !at.startsWith('effect'); i++) {
    await page.keyboard.press('Tab');
    at = await page.evaluate(() => `${document.activeElement.className} ${document.activeElement.dataset.layer}/${document.activeElement.dataset.head}`);
  }
  assert.equal(at, 'effect 0/0');
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  assert.notEqual(outline, 'none', 'the focused cell is outlined');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')),
    await page.$eval('button.effect[data-layer="1"][data-head="1"]', (b) => b.getAttribute('aria-label')));
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#patch-heads-title').textContent === 'Layer 1, head 1 on both prompts'
    && document.querySelector('#patch-pattern-corrupted canvas'), null, { timeout: DEADLINE });
  // Tab onwards reaches the charts' first bar; Down, then Space ablates the second
  await page.waitForSelector('#dla-chart button.bar', { timeout: DEADLINE });
  for (let i = 0; i < 20 && !(await page.evaluate(() => document.activeElement.classList.contains('bar'))); i++)
    await page.keyboard.press('Tab');
  const second = await page.$eval('#dla-chart li:nth-child(2) button', (b) => [b.dataset.layer, b.dataset.head]);
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press(' ');
  await page.waitForFunction(([l, h]) => {
    const t = document.querySelector('#ablation-table');
    return !document.querySelector('#ablation').hidden && t.dataset.layer === l && t.dataset.head === h;
  }, second, { timeout: DEADLINE });
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('an encoder says why there is no patching; no model, no panel', async () => {
  const page = await openPanel('gpt2');
  await page.selectOption('#model', 'f32');
  await page.waitForSelector('#patch-encoder:not([hidden])', { timeout: DEADLINE });
  assert.equal(await page.isHidden('#patch-form'), true);
  assert.match(await page.textContent('#patch-encoder'), /need a decoder .*“f32”\s+is an encoder/s);
  await page.selectOption('#model', '');
  await page.waitForSelector('#patch-view', { state: 'hidden', timeout: DEADLINE });
  // back to a decoder: the form, counted afresh
  await page.selectOption('#model', 'llama');
  await page.waitForSelector('#patch-form:not([hidden])', { timeout: DEADLINE });
  await page.fill('#patch-clean', CLEAN);
  await waitCount(page, 'clean', 8);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the panel at 1280 and 390 px, light and dark: nothing wider than the screen', async () => {
  for (const [w, h] of [[1280, 800], [390, 844]]) {
    for (const scheme of ['light', 'dark']) {
      const page = await openPanel('gpt2', GPT2, { width: w, height: h });
      await page.emulateMedia({ colorScheme: scheme });
      await runPatch(page);
      await page.click('#patch-effects button.effect[data-layer="0"][data-head="2"]');
      await page.waitForSelector('#patch-pattern-corrupted canvas', { timeout: DEADLINE });
      await page.waitForSelector('#dla-chart button.bar', { timeout: DEADLINE });
      await page.click('#dla-chart button.bar >> nth=0');
      await page.waitForSelector('#ablation:not([hidden])', { timeout: DEADLINE });
      const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(over <= 0, `${w}px ${scheme}: ${over}px too wide`);
      await page.locator('#patch-view').screenshot({ path: `${shots}patching-${w}x${h}-${scheme}.png` });
      assert.deepEqual(page.errors, []);
      await page.close();
    }
  }
});
