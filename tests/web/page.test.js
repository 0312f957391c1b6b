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

before(async () => {
  ({ child: server, url: base } = await startServer());
  browser = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.kill('SIGTERM');
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
