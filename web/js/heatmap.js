// A weight matrix drawn on a <canvas>, cell by cell, as the server draws its bare PNGs (labels=false).
import { colormapTable, colormapIndex } from './colormap.js';

// The top of the colour scale: the largest weight of w, 1 when all are 0
// (the server's rule, so that each image spans its own 0..max).
export function scaleTop(w) {
  let top = 0;
  for (const row of w) for (const v of row) if (Math.fround(v) > top) top = Math.fround(v);
  return top > 0 ? top : 1;
}

// The greys of a cell no query may attend (a causal model's later keys,
// those outside its window): stripes through the matrix, the dark grey
// where row + column is a multiple of 4, as the server draws them at one
// pixel a cell. No colour map's flat cells look like that, so a weight
// of 0 and a key that cannot be seen are told apart.
const HATCH_LIGHT = 232, HATCH_DARK = 170;

// Draws w ([n][m]) on canvas, one pixel per weight (m wide, n high), as
// the server's PNG with labels=false and cell=1; CSS scales it up with
// whole squares (image-rendering: pixelated), which costs the page
// nothing per pixel shown. The colour of a weight is the table entry of
// weight / top in float32, as on the server. blocked ([n * m] of 0 or 1,
// or null): the cells no query may attend, drawn hatched.
export function drawHeatmap(canvas, w, colormap, blocked = null) {
  const n = w.length, m = n ? w[0].length : 0;
  canvas.width = Math.max(1, m);
  canvas.height = Math.max(1, n);
  if (!n || !m) return;
  const ctx = canvas.getContext('2d');
  const image = ctx.createImageData(m, n);
  const px = image.data, table = colormapTable(colormap), top = scaleTop(w);
  for (let i = 0, o = 0; i < n; i++) {
    const row = w[i];
    for (let j = 0; j < m; j++, o += 4) {
      px[o + 3] = 255;
      if (blocked && blocked[i * m + j]) {
        px[o] = px[o + 1] = px[o + 2] = (i + j) % 4 === 0 ? HATCH_DARK : HATCH_LIGHT;
        continue;
      }
      const e = colormapIndex(Math.fround(Math.fround(row[j]) / top)) * 3;
      px[o] = table[e]; px[o + 1] = table[e + 1]; px[o + 2] = table[e + 2];
    }
  }
  ctx.putImageData(image, 0, 0);
}
