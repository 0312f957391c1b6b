// How long a view takes: from submitting the form to the next painted
// frame with the whole view of the new sentence on screen (every
// thumbnail of the grid, the enlarged head and its lines). Printed, not
// asserted: a timed assertion fails on a busy machine for no fault of the
// page. With ATTND_WEB_BEFORE=DIR (a copy of an earlier web/), the same
// run also times the page in DIR, on a server of its own, and prints the
// ratio, the two pages taking turns (docs/page.md says how the
// published figures were made).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, metric } from './harness.js';

const ROUNDS = 15;
const WORDS = ['cat', 'dog', 'fox', 'mouse', 'bird', 'owl', 'hare', 'deer', 'wolf', 'bear', 'frog'];
let browser;

before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

// The page's view of sentence, in the browser: true once the lines view
// shows its words and every image of the grid and the enlarged head is
// loaded (an <img> of an earlier page) or drawn (a <canvas>).
function viewShown({ words, thumbs }) {
  const tokens = [...document.querySelectorAll('#lines text.token')].map((t) => t.textContent);
  if (tokens.length !== 2 * words.length || tokens.slice(0, words.length).join(' ') !== words.join(' '))
    return false;
  const grid = document.querySelectorAll('#grid img, #grid canvas');
  const imgs = [...document.querySelectorAll('#grid img, #matrix img')];
  return grid.length === thumbs && !!document.querySelector('#matrix img, #matrix canvas') &&
    imgs.every((i) => i.complete && i.naturalWidth > 0) &&
    document.querySelector('#controls').getAttribute('aria-busy') !== 'true';
}

// A page at base showing its first view, ready to be timed.
async function openTimed(base, label) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(base);
  await page.waitForFunction(viewShown,
    { words: 'the cat chased the mouse because it was hungry'.split(' '), thumbs: 9 });
  return { page, base, label, times: [], asked: await metric(base, 'attnd_requests_total', 'route="/attention"') };
}

// Milliseconds from submit to the view of sentence r on screen.
function timeView(p, r) {
  const words = ['the', WORDS[r % WORDS.length], 'saw', `${p.label}${r}`, 'near', 'the', WORDS[(r + 3) % WORDS.length]];
  return p.page.evaluate(async ({ words, shown }) => {
    const isShown = new Function(`return (${shown})`)();
    document.querySelector('#sentence').value = words.join(' ');
    const t0 = performance.now();
    document.querySelector('#controls').requestSubmit();
    await new Promise((resolve) => {
      const tick = () => (isShown({ words, thumbs: 9 }) ? resolve() : setTimeout(tick, 0));
      tick();
    });
    // the frame that shows it: after the next animation frame is painted
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    return performance.now() - t0;
  }, { words, shown: viewShown.toString() });
}

// Times ROUNDS views of each page, taking turns so that both see the same
// load, each sentence never asked before; the median, the range and the
// /attention requests the server counted per view.
async function timePages(pages) {
  for (let r = 0; r < ROUNDS; r++) for (const p of pages) p.times.push(await timeView(p, r));
  return Promise.all(pages.map(async (p) => {
    const per = (await metric(p.base, 'attnd_requests_total', 'route="/attention"') - p.asked) / ROUNDS;
    await p.page.close();
    const t = p.times.sort((a, b) => a - b);
    return { median: t[Math.floor(t.length / 2)], min: t[0], max: t.at(-1), per };
  }));
}

const show = (r) => `median ${r.median.toFixed(1)} ms (min ${r.min.toFixed(1)}, max ${r.max.toFixed(1)}), ` +
  `${r.per} /attention requests per view`;

test('a view of 8 heads: time from submit to screen', async (t) => {
  const now = await startServer();
  const was = process.env.ATTND_WEB_BEFORE ? await startServer([], process.env.ATTND_WEB_BEFORE) : null;
  try {
    const pages = [await openTimed(now.url, 'now')];
    if (was) pages.push(await openTimed(was.url, 'was'));
    const [after_, before_] = await timePages(pages);
    t.diagnostic(`this page: ${show(after_)}`);
    if (before_) {
      t.diagnostic(`page in ${process.env.ATTND_WEB_BEFORE}: ${show(before_)}`);
      t.diagnostic(`speed-up: ${(before_.median / after_.median).toFixed(2)}x`);
    }
    assert.equal(after_.per, 1);
  } finally {
    now.child.kill('SIGTERM');
    was?.child.kill('SIGTERM');
  }
});
