/*
 * softmax.h - row softmax over attention scores where masked pairs hold
 * -INFINITY, in two forms: a whole row at once, and an online (streaming)
 * form that sees the keys a block at a time.
 */
#ifndef ATTN_SOFTMAX_H
#define ATTN_SOFTMAX_H

#include "vecmath.h"

#include <stdbool.h>
#include <stddef.h>

enum softmax_status {
    SOFTMAX_OK,
    SOFTMAX_ALL_MASKED, /* every entry was -INFINITY; the row is now 0 */
    SOFTMAX_OVERFLOW    /* a score is NaN or +Inf; the row (and the
                           online state) hold nothing of use then */
};

/*
 * s[j] <- cap * tanh(s[j] / cap) for j < m: scores capped before their
 * mask and softmax (Gemma 2's soft-capping); NaN stays NaN.  s: [m]
 */
void softmax_softcap(float *s, size_t m, float cap);

/*
 * s[j] <- exp(s[j] - max) / sum over the row. Masked entries (-INFINITY)
 * become exactly 0.  s: [m]
 */
enum softmax_status softmax_row(float *s, size_t m);

/*
 * Each row of s as softmax_row() does it, with the same statuses (st:
 * [rows]), for short rows: the exponentials of the whole block are taken
 * together, several vectors in flight, where a row of a few keys would be
 * one dependent chain of one or two vectors. A row whose status is not
 * SOFTMAX_OK is left all zeros. Its bits differ from softmax_row()'s (the
 * sum is taken in another order); a caller picks one of the two by the
 * row length alone.  s: [rows][m]
 */
void softmax_rows(float *s, size_t rows, size_t m, enum softmax_status *st);

/* Running state of one query row across key blocks. */
struct softmax_online {
    float max;  /* largest score seen, -INFINITY before any */
    double sum; /* sum of exp(score - max) over the keys seen */
};

void softmax_online_init(struct softmax_online *st);

/*
 * Fold a block of scores into st and turn them into exp(s - max) in place
 * (masked ones into 0). *rescale gets the factor by which everything
 * accumulated before this block must be multiplied (0 when nothing was, 1
 * when the maximum did not grow).  s: [m]
 */
enum softmax_status softmax_online_block(struct softmax_online *st, float *s,
                                         size_t m, float *rescale);

/*
 * The builds of the row kernels, for tests that hold them to the same
 * bits: each is used by the functions above on CPUs where it is the
 * widest available.
 */
float softmax_row_max_isa(enum vec_isa isa, const float *s, size_t m);
bool softmax_row_overflowed_isa(enum vec_isa isa, const float *s, size_t m);
/* s[j] <- exp(s[j] - shift); returns the sum of the new s. */
double softmax_exp_shifted_isa(enum vec_isa isa, float *s, size_t m,
                               float shift);

#endif
