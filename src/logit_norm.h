/*
 * logit_norm.h - softmax's normalizer over a decoder's vocabulary, in
 * double: what every probability and log-probability reported for a
 * token is divided by. Internal to the core.
 */
#ifndef ATTN_LOGIT_NORM_H
#define ATTN_LOGIT_NORM_H

#include "vecmath.h"

#include <stddef.h>

/*
 * The largest finite logit into *most (-INFINITY when none is), and the
 * sum over the finite logits of exp(logit - *most) into *total, each
 * term within 2 ulp of the exact exponential (below 1e-304 a term
 * counts as 0, against the 1 of the largest), summed in double in an
 * order that is the same in every build. NaN and infinite logits count
 * for nothing.
 */
void logit_norm(const float *logits, size_t vocab, double *most, double *total);

/* The same with the build named (tests compare them). */
void logit_norm_isa(enum vec_isa isa, const float *logits, size_t vocab,
                    double *most, double *total);

#endif
