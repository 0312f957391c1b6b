/*
 * rng_draw.c - many uniform draws of one keyed stream at once, in the
 * plain, AVX2 and AVX-512 builds (vecmath.h), each value the same bits as
 * the scalar formula of docs/math.md, "Random streams".
 *
 * Draw n is mix64(key + (n + 1) * gamma), so lanes need no state but
 * their counter: lane j of a vector holds draw first + j, and a step adds
 * the vector's width times gamma. From the draw z the scalar code takes
 * u = (z >> 11) * 2^-53 and then 2u - 1, both exact; here 2u - 1 is
 * built from the bits instead of converted from a 53-bit integer (which
 * x86 has no vector instruction for below AVX-512DQ): with k = z >> 11 =
 * b 2^52 + m, 2u - 1 = (1 + m 2^-52) - (2 - b), a float64 in [1, 2)
 * made by setting m under 1.0's exponent, less 1 or 2, which is exact
 * (Sterbenz). The product by the bound and the rounding to float32 are
 * the scalar code's, one IEEE operation each, so every lane rounds as
 * the scalar code does.
 */
#include "rng.h"

#include "attention.h"
#include "vecmath.h"

#define TWO_BITS 0x4000000000000000ULL /* 2.0 */

/* The scalar formula, for the draws past the last whole vector. */
static float uniform_one(uint64_t key, uint64_t n, double bound)
{
    return (float)((2.0 * rng_unit(key, n) - 1.0) * bound);
}

/*
 * out[i] = (float)((2 u_{first+i} - 1) * bound) for i < n, W lanes at a
 * time (VU: W uint64s, VD: W doubles, VF: W floats).
 */
#define UNIFORM_BODY(VU, VD, VF, W)                                            \
    VU z0;                                                                     \
    for (int j = 0; j < (W); j++)                                              \
        z0[j] = key + (first + (uint64_t)j + 1) * RNG_GAMMA;                   \
    const VU step = (VU){0} + (uint64_t)(W)*RNG_GAMMA;                         \
    const VD bound_v = (VD){0} + bound;                                        \
    size_t i = 0;                                                              \
    for (; i + (W) <= n; i += (W)) {                                           \
        /* z = mix64(key + (first + i + j + 1) gamma), lane j */               \
        VU z = z0;                                                             \
        z0 += step;                                                            \
        RNG_MIX64(z);                                                          \
        /* 2u - 1 = (1 + m 2^-52) - (2 - b), k = z >> 11 = b 2^52 + m */       \
        const VU x = RNG_ONE_BITS | ((z >> 11) & RNG_MANTISSA);                \
        const VU c = TWO_BITS - ((z >> 63) << 52);                             \
        const VD v = ((VD)x - (VD)c) * bound_v;                                \
        const VF f = __builtin_convertvector(v, VF);                           \
        __builtin_memcpy(out + i, &f, sizeof f);                               \
    }                                                                          \
    for (; i < n; i++)                                                         \
        out[i] = uniform_one(key, first + i, bound);

/* SSE2 has no 64-bit multiply for the lanes: one draw at a time is
 * faster there than four emulated. */
static void uniform_plain(uint64_t key, uint64_t first, size_t n, double bound,
                          float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = uniform_one(key, first + i, bound);
}

#if HAVE_AVX2_BUILD
AVX2_TARGET static void uniform_avx2(uint64_t key, uint64_t first, size_t n,
                                     double bound, float *out){
    UNIFORM_BODY(v4u64, v4f64, v4f32, 4)}

AVX512_TARGET static void uniform_avx512(uint64_t key, uint64_t first, size_t n,
                                         double bound, float *out)
{
    UNIFORM_BODY(v8u64, v8f64, v8f32, 8)
}
#endif

void rng_uniform_floats_isa(enum vec_isa isa, uint64_t key, uint64_t first,
                            size_t n, double bound, float *out)
{
    VEC_DISPATCH(isa, uniform, key, first, n, bound, out);
}

void rng_uniform_floats(uint64_t key, uint64_t first, size_t n, double bound,
                        float *out)
{
    VEC_DISPATCH(vec_isa_best(), uniform, key, first, n, bound, out);
}
