// Showing an answer: the grid of every head, then the selected head enlarged, its lines and its downloads.
import { $ } from './dom.js';
import { state, pageUrl } from './state.js';
import { result, generation, pngUrl } from './api.js';
import { drawMatrix } from './matrix.js';
import { drawLines } from './lines.js';
import { showDownloads } from './downloads.js';

// The answer's sequence in view: its heads' weights [head][n][m], their
// mean [n][m], the token labels of rows (queries) and columns (keys).
function shape() {
  const d = result.data;
  const batched = d.config.batch > 1 || Array.isArray(d.weights[0][0][0]);
  const b = Math.min(Number(state.batch) || 0, d.config.batch - 1);
  const heads = batched ? d.weights[b] : d.weights;
  const mean = batched ? d.mean_weights[b] : d.mean_weights;
  const n = d.config.tokens, m = d.config.context_tokens || n;
  const rows = d.tokens || [...Array(n).keys()].map(String);
  const cols = d.context_tokens || (d.config.context_tokens ? [...Array(m).keys()].map(String) : rows);
  return { heads, mean, n, m, rows, cols, b, count: d.config.heads };
}

function selectedMatrix(sh) {
  return state.head === 'mean' ? sh.mean : sh.heads[Number(state.head)];
}

// mine: the generation drawn for; a newer one stops the drawing.
export async function render(mine) {
  const sequences = result.data.config.batch;
  const pick = $('batch');
  $('batch-field').hidden = sequences < 2;
  pick.replaceChildren(...[...Array(sequences).keys()].map((b) => new Option(String(b), String(b))));
  if (!(Number(state.batch) < sequences)) state.batch = '0';
  pick.value = state.batch;
  const sh = shape();
  if (state.head !== 'mean' && !(Number(state.head) < sh.count)) state.head = '0';
  $('results').hidden = false;
  const grid = $('grid');
  const cards = [];
  const common = { batch: String(sh.b), colormap: state.colormap };
  for (let k = 0; k < sh.count; k++) cards.push({ head: String(k), title: `head ${k}` });
  cards.push({ head: 'mean', title: `mean of ${sh.count}` });
  const urls = await Promise.all(cards.map((c) => pngUrl(state, { ...common, head: c.head })));
  if (mine !== generation) return;
  grid.replaceChildren(...cards.map((c, i) => {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'head';
    button.dataset.head = c.head;
    button.setAttribute('aria-pressed', String(c.head === state.head));
    const img = document.createElement('img');
    img.src = urls[i];
    img.alt = `attention weights, ${c.title}`;
    img.loading = 'lazy';
    const caption = document.createElement('span');
    caption.textContent = c.title;
    button.append(img, caption);
    button.addEventListener('click', () => selectHead(c.head));
    return button;
  }));
  await renderSelected(mine);
}

async function selectHead(head) {
  state.head = head;
  history.replaceState(null, '', pageUrl(state));
  for (const b of $('grid').querySelectorAll('button.head'))
    b.setAttribute('aria-pressed', String(b.dataset.head === head));
  await renderSelected(generation);
}

async function renderSelected(mine) {
  const sh = shape();
  const w = selectedMatrix(sh);
  const title = state.head === 'mean' ? `Mean of ${sh.count} heads` : `Head ${state.head} of ${sh.count}`;
  $('enlarged-title').textContent = title;
  const common = { batch: String(sh.b), colormap: state.colormap, head: state.head };
  const wide = Math.max(sh.n, sh.m);
  const room = Math.min(520, $('matrix').parentElement.clientWidth - 90);
  const cell = Math.max(2, Math.min(48, Math.floor(room / wide)));
  const [bare, labelled, all] = await Promise.all([
    pngUrl(state, { ...common, labels: 'false', cell: String(cell) }),
    pngUrl(state, common),
    pngUrl(state, { batch: String(sh.b), colormap: state.colormap, head: 'all' }),
  ]);
  if (mine !== generation) return;
  drawMatrix(sh, w, bare, cell);
  drawLines(sh, w);
  showDownloads(state.head, labelled, all, result.text);
}
