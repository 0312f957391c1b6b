/*
 * posenc.h - positional information: sinusoidal encodings added to
 * embeddings, and rotary encodings applied to projected heads.
 */
#ifndef ATTN_POSENC_H
#define ATTN_POSENC_H

#include <stddef.h>

/* x[pos][c] += PE(pos0 + pos, c) for pos < n, c < d.  x: [n][d] */
void posenc_add_sinusoidal(float *x, size_t n, size_t d, size_t pos0);

/*
 * Rotate each head of x in place: for row r (position pos0 + r) and head a,
 * the pair (2i, 2i+1) of x[r][a*d_head ...] turns by (pos0+r) *
 * base^(-2i/d_head). x: [n][ld] with heads at columns a*d_head, a < heads;
 * d_head even.
 */
void posenc_apply_rope(float *x, size_t n, size_t ld, size_t heads,
                       size_t d_head, size_t pos0, double base);

#endif
