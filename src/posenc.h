/*
 * posenc.h - positional information: sinusoidal encodings added to
 * embeddings, and rotary encodings applied to projected heads.
 */
#ifndef ATTN_POSENC_H
#define ATTN_POSENC_H

#include "attention.h"

#include <stdbool.h>
#include <stddef.h>

/* x[pos][c] += PE(pos0 + pos, c) for pos < n, c < d.  x: [n][d] */
void posenc_add_sinusoidal(float *x, size_t n, size_t d, size_t pos0);

/*
 * Rotate each head of x in place as rope says (attention.h, resolved: its
 * base, dims and factor filled in): for row r (position pos0 + r) and head
 * a, pair i of the first rope->dims values of x[r][a*d_head ...] turns by
 * (pos0 + r) times its frequency, (p, q) -> f (p cos - q sin, p sin + q
 * cos) with f the rotary's factor; the rest of the head passes. x: [n][ld]
 * with heads at columns a*d_head, a < heads.
 */
void posenc_apply_rope(float *x, size_t n, size_t ld, size_t heads,
                       size_t d_head, const struct attn_rotary *rope,
                       size_t pos0);

#endif
