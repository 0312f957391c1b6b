/*
 * block_ops.c - the row-wise and elementwise pieces of a transformer
 * block (transformer.h): LayerNorm, RMSNorm, and the activations
 * transformers names "gelu", "gelu_new" and "silu".
 */
#include "norm.h"
#include "transformer.h"
#include "vecmath.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

void xf_layer_norm(const float *x, size_t rows, size_t cols, const float *w,
                   const float *b, float eps, float *y)
{
    norm_layer(x, rows, cols, w, b, eps, y);
}

void xf_rms_norm(const float *x, size_t rows, size_t cols, const float *w,
                 float eps, float *y)
{
    norm_rms(x, rows, cols, w, eps, y);
}

/*
 * The activations, eight or sixteen at a time with the same arithmetic
 * in every lane and build (vecmath.h), exponentials included.
 *
 * "gelu" is x/2 (1 + erf(x / sqrt 2)), computed through erfc: x - x/2
 * erfc(z) for x >= 0 and x/2 erfc(z) for x < 0, z = |x| / sqrt 2. So the
 * small values on the negative side keep float32's relative precision,
 * where 1 + erf(-z) would cancel to a few bits. erfc(z) = t exp(P(t) -
 * z^2), t = 1 / (1 + z/2), P of degree 9: the Chebyshev fit of Numerical
 * Recipes (2nd ed., 6.2), whose fractional error is under 1.2e-7.
 *
 * "gelu_new" is x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * which is x / (1 + exp(-2u)): no tanh, and no cancellation either.
 *
 * "silu" is x sigmoid(x) = x / (1 + exp(-x)), likewise.
 */
#define GELU_ERF_BODY(VF, VI, SEL, EXP)                                        \
    const VF x = *xp;                                                          \
    const VF zero = {0};                                                       \
    const VI negative = x < zero;                                              \
    const VF z = SEL(negative, -x, x) * 0.70710678118654752f;                  \
    const VF t = 1.0f / (1.0f + 0.5f * z);                                     \
    VF p = zero + 0.17087277f;                                                 \
    p = p * t + -0.82215223f;                                                  \
    p = p * t + 1.48851587f;                                                   \
    p = p * t + -1.13520398f;                                                  \
    p = p * t + 0.27886807f;                                                   \
    p = p * t + -0.18628806f;                                                  \
    p = p * t + 0.09678418f;                                                   \
    p = p * t + 0.37409196f;                                                   \
    p = p * t + 1.00002368f;                                                   \
    p = p * t + -1.26551223f;                                                  \
    VF e = p - z * z;                                                          \
    EXP(&e);                                                                   \
    const VF half_x_erfc = 0.5f * x * (t * e);                                 \
    *xp = SEL(negative, half_x_erfc, x - half_x_erfc)

#define GELU_TANH_BODY(VF, VI, SEL, EXP)                                       \
    const VF x = *xp;                                                          \
    const VF zero = {0};                                                       \
    const VF arg = -2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);  \
    LOGISTIC_BODY(VF, VI, SEL, EXP, arg)

/* x / (1 + exp(-s x)), 0 where exp(-s x) passes exp(88). */
#define LOGISTIC_BODY(VF, VI, SEL, EXP, arg)                                   \
    VF e = arg;                                                                \
    EXP(&e);                                                                   \
    /* past 88, exp(arg) is held at exp(88); the true x / (1 + exp(arg))       \
     * is then under 1e-37 */                                                  \
    const VI vanishes = arg > 88.0f;                                           \
    *xp = SEL(vanishes, zero, x / (1.0f + e))

#define SILU_BODY(VF, VI, SEL, EXP)                                            \
    const VF x = *xp;                                                          \
    const VF zero = {0};                                                       \
    const VF arg = -x;                                                         \
    LOGISTIC_BODY(VF, VI, SEL, EXP, arg)

ALWAYS_INLINE void gelu_erf_v8(v8f *xp)
{
    GELU_ERF_BODY(v8f, v8i, SELECT, exp_v8);
}
ALWAYS_INLINE void gelu_erf_v16(v16f *xp)
{
    GELU_ERF_BODY(v16f, v16i, SELECT16, exp_v16);
}
ALWAYS_INLINE void gelu_tanh_v8(v8f *xp)
{
    GELU_TANH_BODY(v8f, v8i, SELECT, exp_v8);
}
ALWAYS_INLINE void gelu_tanh_v16(v16f *xp)
{
    GELU_TANH_BODY(v16f, v16i, SELECT16, exp_v16);
}
ALWAYS_INLINE void silu_v8(v8f *xp)
{
    SILU_BODY(v8f, v8i, SELECT, exp_v8);
}
ALWAYS_INLINE void silu_v16(v16f *xp)
{
    SILU_BODY(v16f, v16i, SELECT16, exp_v16);
}

ALWAYS_INLINE void activation_v8(xf_act act, v8f *v)
{
    if (act == XF_ACT_GELU)
        gelu_erf_v8(v);
    else if (act == XF_ACT_GELU_TANH)
        gelu_tanh_v8(v);
    else
        silu_v8(v);
}
ALWAYS_INLINE void activation_v16(xf_act act, v16f *v)
{
    if (act == XF_ACT_GELU)
        gelu_erf_v16(v);
    else if (act == XF_ACT_GELU_TANH)
        gelu_tanh_v16(v);
    else
        silu_v16(v);
}

/* x[i] for i in [j, count), eight at a time, the tail padded. */
ALWAYS_INLINE void activation_from(xf_act act, float *x, size_t count, size_t j)
{
    v8f v;
    for (; j < count; j += 8) {
        const size_t take = count - j < 8 ? count - j : 8;
        v = (v8f){0};
        memcpy(&v, x + j, take * sizeof *x);
        activation_v8(act, &v);
        memcpy(x + j, &v, take * sizeof *x);
    }
}

static void activation_plain(xf_act act, float *x, size_t count)
{
    activation_from(act, x, count, 0);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static void activation_avx2(xf_act act, float *x, size_t count)
{
    activation_from(act, x, count, 0);
}
AVX512_TARGET static void activation_avx512(xf_act act, float *x, size_t count)
{
    v16f v;
    size_t j = 0;
    for (; j + 16 <= count; j += 16) {
        memcpy(&v, x + j, sizeof v);
        activation_v16(act, &v);
        memcpy(x + j, &v, sizeof v);
    }
    activation_from(act, x, count, j);
}
#endif

void xf_activation_isa(int isa, xf_act act, float *x, size_t count)
{
    VEC_DISPATCH(isa, activation, act, x, count);
}

void xf_activation(xf_act act, float *x, size_t count)
{
    VEC_DISPATCH(vec_isa_best(), activation, act, x, count);
}
