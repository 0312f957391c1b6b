// SVG answers in Chromium: the server's SVG of a request drawn by the
// browser against the server's PNG of the same request, pixel by pixel
// (bare cells, labels=false: exact up to a level of rounding; with labels,
// the matrix area only, text being the browser's own anti-aliasing), and
// the page's SVG downloads: each parses and shows the same cells.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser } from './harness.js';

let server, browser, page;

before(async () => {
  server = await startServer(['--model', `llama=${process.cwd()}/tests/models/llama3`]);
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(server.url);
});
after(async () => {
  await browser?.close();
  server?.child.kill('SIGTERM');
});

// In the page: both images drawn into canvases; the count of pixels of
// the region [x0, y0, w, h] (whole image when absent) that differ by more
// than tol in a channel, the pixels compared, and the SVG's parse error.
function compareInPage({ svgUrl, pngUrl, region, tol }) {
  const load = (src) => new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error(`cannot draw ${src}`));
    img.src = src;
  });
  const pixels = (img) => {
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    return g.getImageData(0, 0, c.width, c.height);
  };
  return (async () => {
    const text = await (await fetch(svgUrl)).text();
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const error = doc.querySelector('parsererror')?.textContent || null;
    const blob = URL.createObjectURL(new Blob([text], { type: 'image/svg+xml' }));
    const [s, p] = [pixels(await load(blob)), pixels(await load(pngUrl))];
    if (s.width !== p.width || s.height !== p.height)
      return { error: `sizes ${s.width}x${s.height} and ${p.width}x${p.height}` };
    const [x0, y0, w, h] = region || [0, 0, p.width, p.height];
    let bad = 0;
    for (let y = y0; y < y0 + h; y++)
      for (let x = x0; x < x0 + w; x++) {
        const i = (y * p.width + x) * 4;
        for (let k = 0; k < 3; k++)
          if (Math.abs(s.data[i + k] - p.data[i + k]) > tol) { bad++; break; }
      }
    return { error, bad, total: w * h, rects: doc.querySelectorAll('rect').length };
  })();
}

const Q = 'sentence=the+cat+sat+on+the+mat+and+the+dog+sat+too';

test('bare cells: the SVG drawn by Chromium is the PNG', async () => {
  for (const q of [`${Q}&head=all&labels=false`, `${Q}&head=0&labels=false&colormap=magma`,
    `${Q}&model=llama&layer=0&head=all&labels=false`,
    `${Q}&model=llama&view=model&labels=false&pool=max&pool_size=2`]) {
    const r = await page.evaluate(compareInPage,
      { svgUrl: `/attention?${q}&format=svg`, pngUrl: `/attention?${q}&format=png`, tol: 1 });
    assert.equal(r.error, null, q);
    assert.ok(r.rects > 10, q);
    assert.equal(r.bad, 0, `${q}: ${r.bad} of ${r.total} pixels differ`);
  }
});

test('labelled: the matrix area of the SVG is the PNG\'s', async () => {
  // one head of 12 tokens at the automatic 25 px: where the matrix lies is
  // read from the SVG's cell rectangles
  const q = `${Q}&head=0&cell=20`;
  const text = await (await fetch(`${server.url}/attention?${q}&format=svg`)).text();
  const cells = [...text.matchAll(/<rect x="(\d+)" y="(\d+)" width="(\d+)" height="20" fill="#[0-9a-f]{6}"\/>/g)]
    .map((m) => m.slice(1, 4).map(Number));
  const x0 = Math.min(...cells.map((c) => c[0])), y0 = Math.min(...cells.map((c) => c[1]));
  const r = await page.evaluate(compareInPage, {
    svgUrl: `/attention?${q}&format=svg`, pngUrl: `/attention?${q}&format=png`,
    region: [x0, y0, 12 * 20, 12 * 20], tol: 1,
  });
  assert.equal(r.error, null);
  assert.equal(r.bad, 0, `${r.bad} of ${r.total} pixels differ`);
});

test('the page\'s SVG downloads parse and show the cells', async () => {
  await page.waitForSelector('#dl-grid-svg', { state: 'attached' });
  const href = await page.$eval('#dl-grid-svg', (a) => a.getAttribute('href'));
  assert.match(href, /format=svg/);
  const png = href.replace('format=svg', 'format=png');
  const r = await page.evaluate(compareInPage, { svgUrl: href, pngUrl: png, tol: 255 });
  assert.equal(r.error, null);
  assert.ok(r.rects > 10);
  // the lines view, written out by the page
  await page.waitForSelector('#lines text');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.click('#dl-lines-svg'),
  ]);
  const path = await download.path();
  const fs = await import('node:fs/promises');
  const text = await fs.readFile(path, 'utf8');
  const parsed = await page.evaluate((t) => {
    const doc = new DOMParser().parseFromString(t, 'image/svg+xml');
    return {
      error: doc.querySelector('parsererror')?.textContent || null,
      texts: [...doc.querySelectorAll('text')].map((e) => e.textContent),
      lines: doc.querySelectorAll('line, path').length,
    };
  }, text);
  assert.equal(parsed.error, null);
  assert.ok(parsed.texts.length > 4);
  assert.ok(parsed.lines > 0);
});
