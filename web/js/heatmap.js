// A weight matrix drawn on a <canvas>, cell by cell, as the server draws its bare PNGs (labels=false).
import { colormapTable, colormapIndex } from './colormap.js';

// The top of the colour scale: the largest weight of w, 1 when all are 0
// (the server's rule, so that each image spans its own 0..max).
export function scaleTop(w) {
  let top = 0;
  for (const row of w) for (const v of row) if (Math.fround(v) > top) top = Math.fround(v);
  return top > 0 ? top : 1;
}

// Draws w ([n][m]) on canvas, cell pixels per weight, and sizes the
// canvas to it (m * cell wide, n * cell high). The colour of a weight is
// the table entry of weight / top in float32, as on the server.
export function drawHeatmap(canvas, w, cell, colormap) {
  const n = w.length, m = n ? w[0].length : 0;
  canvas.width = Math.max(1, m * cell);
  canvas.height = Math.max(1, n * cell);
  if (!n || !m) return;
  const ctx = canvas.getContext('2d');
  const image = ctx.createImageData(m * cell, n * cell);
  const px = image.data, table = colormapTable(colormap), top = scaleTop(w);
  const stride = m * cell * 4;
  for (let i = 0; i < n; i++) {
    const row = w[i];
    for (let j = 0; j < m; j++) {
      const e = colormapIndex(Math.fround(Math.fround(row[j]) / top)) * 3;
      const r = table[e], g = table[e + 1], b = table[e + 2];
      // the cell's square: cell rows of cell pixels, opaque
      for (let y = 0; y < cell; y++) {
        let o = (i * cell + y) * stride + j * cell * 4;
        for (let x = 0; x < cell; x++, o += 4) {
          px[o] = r; px[o + 1] = g; px[o + 2] = b; px[o + 3] = 255;
        }
      }
    }
  }
  ctx.putImageData(image, 0, 0);
}
