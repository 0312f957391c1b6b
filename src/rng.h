/*
 * rng.h - internal helpers over the keyed streams of attention.h.
 */
#ifndef ATTN_RNG_H
#define ATTN_RNG_H

#include "vecmath.h"

#include <stddef.h>
#include <stdint.h>

/* SplitMix64 (docs/math.md, "Random streams"): the counter's step and
 * the mixer, on a uint64_t or on every lane of a vector of them. */
#define RNG_GAMMA 0x9e3779b97f4a7c15ULL
#define RNG_MIX64(z)                                                           \
    do {                                                                       \
        (z) = ((z) ^ ((z) >> 30)) * 0xbf58476d1ce4e5b9ULL;                     \
        (z) = ((z) ^ ((z) >> 27)) * 0x94d049bb133111ebULL;                     \
        (z) ^= (z) >> 31;                                                      \
    } while (0)

/* A double's bits: 1.0's, and its mantissa's. */
#define RNG_ONE_BITS 0x3ff0000000000000ULL
#define RNG_MANTISSA ((1ULL << 52) - 1)

/* The lanes the vector draws work in (rng_draw.c, rng_normal.c). */
typedef uint64_t v4u64 __attribute__((vector_size(32)));
typedef double v4f64 __attribute__((vector_size(32)));
typedef float v4f32 __attribute__((vector_size(16)));
typedef uint64_t v8u64 __attribute__((vector_size(64)));
typedef double v8f64 __attribute__((vector_size(64)));
typedef float v8f32 __attribute__((vector_size(32)));

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
