// SVG downloads: beside each PNG link the server's SVG of the same image
// (format=svg), and the lines view as drawn, written out by the page with
// its computed styles inlined so the file stands alone.
import { $ } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
const STYLED = ['fill', 'stroke', 'stroke-width', 'stroke-opacity', 'opacity', 'font-family',
  'font-size', 'font-weight', 'text-anchor', 'dominant-baseline'];

// The SVG link beside the PNG link a (made once): the same GET with
// format=svg; hidden where the PNG is a POST (embeddings).
export function svgLinkBeside(a) {
  let s = document.getElementById(`${a.id}-svg`);
  if (!s) {
    s = document.createElement('a');
    s.id = `${a.id}-svg`;
    s.textContent = '(SVG)';
    a.after(' ', s);
  }
  const get = a.dataset.post !== 'true' && a.href && !a.href.endsWith('#');
  s.hidden = !get || a.hidden;
  if (get) {
    s.href = a.href.replace('format=png', 'format=svg');
    s.download = (a.download || 'attention.png').replace(/\.png$/, '') + '.svg';
  }
  return s;
}

// The lines view as a standalone SVG document.
export function linesSvgText() {
  const svg = $('lines');
  const copy = svg.cloneNode(true);
  copy.setAttribute('xmlns', NS);
  const [, , w, h] = (svg.getAttribute('viewBox') || '0 0 0 0').split(' ');
  copy.setAttribute('width', w);
  copy.setAttribute('height', h);
  const from = [svg, ...svg.querySelectorAll('*')];
  const to = [copy, ...copy.querySelectorAll('*')];
  from.forEach((el, i) => {
    const cs = getComputedStyle(el);
    const style = STYLED.map((p) => `${p}:${cs.getPropertyValue(p)}`).join(';');
    to[i].setAttribute('style', style);
    to[i].removeAttribute('class');
  });
  return `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(copy)}\n`;
}

// The link that saves the lines view (made once, after the lines' svg).
export function listenLinesDownload() {
  if (document.getElementById('dl-lines-svg')) return;
  const a = document.createElement('a');
  a.id = 'dl-lines-svg';
  a.href = '#';
  a.download = 'attention-lines.svg';
  a.textContent = 'Download the lines (SVG)';
  $('lines').after(a);
  a.addEventListener('click', () => {
    const old = a.href;
    if (old.startsWith('blob:')) URL.revokeObjectURL(old);
    a.href = URL.createObjectURL(new Blob([linesSvgText()], { type: 'image/svg+xml' }));
  });
}
