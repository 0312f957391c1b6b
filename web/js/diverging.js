// A diverging colour scale for signed values: blue below the centre, white at it, red above, on a scale symmetric about the centre.
//
// The colours run through ColorBrewer's RdBu anchors (its 11 classes,
// blue end first), linearly in RGB between neighbours; a value maps to
// t = (v - centre) / extent, clamped to -1 .. 1, -1 the darkest blue, 0
// the white anchor, 1 the darkest red.

const ANCHORS = [
  [5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240],
  [247, 247, 247],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31],
];

// [r, g, b] of t in -1 .. 1 (a value outside is clamped, NaN is white).
export function divergingRgb(t) {
  const x = Number.isFinite(t) ? Math.max(-1, Math.min(1, t)) : 0;
  const at = (x + 1) * 5; // 0 .. 10 along the anchors
  const i = Math.min(9, Math.floor(at)), f = at - i;
  const a = ANCHORS[i], b = ANCHORS[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
}

export function divergingCss(t) {
  const [r, g, b] = divergingRgb(t);
  return `rgb(${r}, ${g}, ${b})`;
}

// Whether text over the colour of t reads better white than black.
export const darkUnder = (t) => Math.abs(t) > 0.6;

// The extent of a scale about centre that holds every value of vs (a
// flat list): the largest distance from it, 1 when all sit on it.
export function extentAbout(vs, centre) {
  let top = 0;
  for (const v of vs) if (Number.isFinite(v) && Math.abs(v - centre) > top) top = Math.abs(v - centre);
  return top > 0 ? top : 1;
}

// Draws w ([n][m] of numbers) on canvas one pixel per value (CSS scales
// it up), each coloured by its place on the scale centre ± extent.
export function drawSigned(canvas, w, centre, extent) {
  const n = w.length, m = n ? w[0].length : 0;
  canvas.width = Math.max(1, m);
  canvas.height = Math.max(1, n);
  if (!n || !m) return;
  const ctx = canvas.getContext('2d');
  const image = ctx.createImageData(m, n);
  const px = image.data;
  for (let i = 0, o = 0; i < n; i++) {
    for (let j = 0; j < m; j++, o += 4) {
      const [r, g, b] = divergingRgb((w[i][j] - centre) / extent);
      px[o] = r; px[o + 1] = g; px[o + 2] = b; px[o + 3] = 255;
    }
  }
  ctx.putImageData(image, 0, 0);
}

// A CSS gradient of the whole scale, blue to red, for a legend.
export function divergingGradient() {
  const stops = ANCHORS.map(([r, g, b], i) => `rgb(${r}, ${g}, ${b}) ${i * 10}%`);
  return `linear-gradient(to right, ${stops.join(', ')})`;
}
