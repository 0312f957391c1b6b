/*
 * rng.h - internal helpers over the keyed streams of attention.h.
 */
#ifndef ATTN_RNG_H
#define ATTN_RNG_H

#include "vecmath.h"

#include <stddef.h>
#include <stdint.h>

/* Draw n of the stream as a double in [0, 1) with 53 random bits. */
double rng_unit(uint64_t key, uint64_t n);

/* attn_stream_key(seed, prefix + text) without building the label. */
uint64_t rng_key_prefixed(uint64_t seed, const char *prefix, const char *text,
                          size_t len);

/*
 * out[i] = (float)((2 u - 1) * bound), u = rng_unit(key, first + i), for
 * i < n: nn.Linear's U(-bound, bound) as attn_params_draw_tensor() draws
 * it, the same bits as that scalar formula, several draws at once in the
 * widest build this CPU runs (rng_draw.c). out: [n].
 */
void rng_uniform_floats(uint64_t key, uint64_t first, size_t n, double bound,
                        float *out);

/* The same in the build isa (which the CPU must run), for the tests. */
void rng_uniform_floats_isa(enum vec_isa isa, uint64_t key, uint64_t first,
                            size_t n, double bound, float *out);

/*
 * Pair i of the standard normals of stream key, dim wide (Box-Muller,
 * docs/math.md "Random streams"): out[2i] and, when 2i + 1 < dim,
 * out[2i + 1], by the scalar formula with libm's log, cos and sin.
 */
void rng_normal_pair(uint64_t key, size_t i, size_t dim, float *out);

/*
 * out[0 .. dim) = every pair of rng_normal_pair(), several at once in the
 * widest build this CPU runs, the same bits (rng_normal.c). out: [dim].
 */
void rng_normals(uint64_t key, size_t dim, float *out);

/* The same in the build isa (which the CPU must run), for the tests. */
void rng_normals_isa(enum vec_isa isa, uint64_t key, size_t dim, float *out);

#endif
