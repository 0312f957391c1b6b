/*
 * value_weighted.h - attention weighted by what each key carries
 * (Kobayashi et al. 2020, "Attention is not only a weight"): the norm of
 * alpha_ij * f_h(x_j), f_h(x) = (x W_V^h + b_V^h) W_O^h, per head, and of
 * their sum over the heads. Internal to the core; attention.h returns
 * them.
 */
#ifndef ATTN_VALUE_WEIGHTED_H
#define ATTN_VALUE_WEIGHTED_H

#include "attention.h"

#include <stddef.h>

/* Bytes value_weighted_of_result() allocates: its two arrays, and the
 * Gram matrices, vectors and panel it works in. */
size_t value_weighted_bytes(const struct attn_config *c);

/* Floating-point operations it costs. */
double value_weighted_flops(const struct attn_config *c);

/*
 * r->measures.value_weighted and r->measures.value_weighted_sum (attention.h)
 * of a pass's result r of resolved config c with parameters p: from r->weights
 * (after dropout: the weights the output is made of) and r->v (after the value
 * bias), through W_O's slice of each head (the identity without an
 * output projection), without the output bias. The arrays the pass
 * computed only for them (c->want_internal) are freed. On failure r is
 * released.
 */
attn_status value_weighted_of_result(const struct attn_config *c,
                                     const struct attn_params *p,
                                     struct attn_result *r,
                                     struct attn_error *err);

#endif
