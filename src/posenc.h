/*
 * posenc.h - positional information: sinusoidal encodings added to
 * embeddings, and rotary encodings applied to projected heads.
 */
#ifndef ATTN_POSENC_H
#define ATTN_POSENC_H

#include <stdbool.h>
#include <stddef.h>

/* x[pos][c] += PE(pos0 + pos, c) for pos < n, c < d.  x: [n][d] */
void posenc_add_sinusoidal(float *x, size_t n, size_t d, size_t pos0);

/* How rotary positions turn one head of d_head values (d_head even). */
struct posenc_rope {
    size_t d_head;
    bool half;              /* pairs (i, i + d_head/2); else (2i, 2i+1) */
    double base;            /* pair i turns base^(-2i/d_head) a position */
    const double *inv_freq; /* NULL, or [d_head/2]: those turns instead */
};

/*
 * Rotate each head of x in place: for row r (position pos0 + r) and head a,
 * pair i of x[r][a*d_head ...] turns by (pos0 + r) times its frequency:
 * (p, q) -> (p cos - q sin, p sin + q cos). x: [n][ld] with heads at
 * columns a*d_head, a < heads.
 */
void posenc_apply_rope(float *x, size_t n, size_t ld, size_t heads,
                       const struct posenc_rope *rope, size_t pos0);

#endif
