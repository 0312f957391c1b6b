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
 * The activations, over N vectors of eight or sixteen at a time
 * (vecmath.h's EACH) with the same arithmetic in every lane, build and
 * N, exponentials included.
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
#define GELU_ERF_N(VF, VI, SEL, N, xs)                                         \
    do {                                                                       \
        const VF zero = {0};                                                   \
        VF gx[N], gz[N], gt[N], gp[N], ge[N];                                  \
        VI gneg[N];                                                            \
        EACH(i, N) gx[i] = (xs)[i];                                            \
        EACH(i, N) gneg[i] = gx[i] < zero;                                     \
        EACH(i, N) gz[i] = SEL(gneg[i], -gx[i], gx[i]) * 0.70710678118654752f; \
        EACH(i, N) gt[i] = 1.0f / (1.0f + 0.5f * gz[i]);                       \
        EACH(i, N) gp[i] = zero + 0.17087277f;                                 \
        EACH(i, N) gp[i] = gp[i] * gt[i] + -0.82215223f;                       \
        EACH(i, N) gp[i] = gp[i] * gt[i] + 1.48851587f;                        \
        EACH(i, N) gp[i] = gp[i] * gt[i] + -1.13520398f;                       \
        EACH(i, N) gp[i] = gp[i] * gt[i] + 0.27886807f;                        \
        EACH(i, N) gp[i] = gp[i] * gt[i] + -0.18628806f;                       \
        EACH(i, N) gp[i] = gp[i] * gt[i] + 0.09678418f;                        \
        EACH(i, N) gp[i] = gp[i] * gt[i] + 0.37409196f;                        \
        EACH(i, N) gp[i] = gp[i] * gt[i] + 1.00002368f;                        \
        EACH(i, N) gp[i] = gp[i] * gt[i] + -1.26551223f;                       \
        EACH(i, N) ge[i] = gp[i] - gz[i] * gz[i];                              \
        EXP_N(VF, VI, SEL, N, ge);                                             \
        EACH(i, N)                                                             \
        {                                                                      \
            const VF half_x_erfc = 0.5f * gx[i] * (gt[i] * ge[i]);             \
            (xs)[i] = SEL(gneg[i], half_x_erfc, gx[i] - half_x_erfc);          \
        }                                                                      \
    } while (0)

/* x / (1 + exp(arg)) for each of N vectors x (xs) and their args (arg),
 * 0 where arg passes 88: exp(arg) is held at exp(88) there, and the true
 * value is under 1e-37. */
#define LOGISTIC_N(VF, VI, SEL, N, xs, arg)                                    \
    do {                                                                       \
        const VF zero_l = {0};                                                 \
        VF le[N];                                                              \
        EACH(i, N) le[i] = (arg)[i];                                           \
        EXP_N(VF, VI, SEL, N, le);                                             \
        EACH(i, N)                                                             \
        (xs)[i] = SEL((arg)[i] > 88.0f, zero_l, (xs)[i] / (1.0f + le[i]));     \
    } while (0)

#define GELU_TANH_N(VF, VI, SEL, N, xs)                                        \
    do {                                                                       \
        VF arg[N];                                                             \
        EACH(i, N)                                                             \
        {                                                                      \
            const VF u = (xs)[i];                                              \
            arg[i] =                                                           \
                -2.0f * 0.7978845608028654f * (u + 0.044715f * u * u * u);     \
        }                                                                      \
        LOGISTIC_N(VF, VI, SEL, N, xs, arg);                                   \
    } while (0)

#define SILU_N(VF, VI, SEL, N, xs)                                             \
    do {                                                                       \
        VF arg[N];                                                             \
        EACH(i, N) arg[i] = -(xs)[i];                                          \
        LOGISTIC_N(VF, VI, SEL, N, xs, arg);                                   \
    } while (0)

/* act over N vectors of type VF at once (vecmath.h's EACH). */
#define ACTIVATION_N(act, VF, VI, SEL, N, xs)                                  \
    do {                                                                       \
        if ((act) == XF_ACT_GELU)                                              \
            GELU_ERF_N(VF, VI, SEL, N, xs);                                    \
        else if ((act) == XF_ACT_GELU_TANH)                                    \
            GELU_TANH_N(VF, VI, SEL, N, xs);                                   \
        else                                                                   \
            SILU_N(VF, VI, SEL, N, xs);                                        \
    } while (0)

/* Vectors an activation takes at a time where it has many: as many as
 * the registers hold with the steps' values, eight of sixteen floats
 * where there are 32 registers and four of eight where there are 16.
 * GELU's steps each wait on the one before, so the more vectors go
 * side by side the less each waits (docs/benchmarks.md). */
enum { ACT_GROUP_8 = 4, ACT_GROUP_16 = 8 };

ALWAYS_INLINE void activation_v8(xf_act act, v8f *v)
{
    ACTIVATION_N(act, v8f, v8i, SELECT, 1, v);
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

/*
 * The activation over rows [0, rows) of x, rows ld apart, cols to a row,
 * in vectors of VF (W floats): G of them at a time, from a row's
 * consecutive vectors where a row has that many, else from the same
 * columns of G rows (a product's finish gets blocks of 48 columns, or of
 * 64 rows' values of one output); then the vectors left one at a time,
 * and eight at a time past a row's last whole vector. Every lane's
 * arithmetic is the same whichever way it goes.
 */
#define ACTIVATION_ROWS(VF, VI, SEL, W, G)                                     \
    do {                                                                       \
        const size_t span = W * G;                                             \
        const size_t whole = cols / W * W;                                     \
        size_t r = 0;                                                          \
        if (cols < span) /* the same columns of G rows */                      \
            for (; r + G <= rows; r += G)                                      \
                for (size_t c = 0; c < whole; c += W) {                        \
                    VF v[G];                                                   \
                    EACH(i, G)                                                 \
                    memcpy(&v[i], x + (r + i) * ld + c, sizeof *v);            \
                    ACTIVATION_N(act, VF, VI, SEL, G, v);                      \
                    EACH(i, G)                                                 \
                    memcpy(x + (r + i) * ld + c, &v[i], sizeof *v);            \
                }                                                              \
        for (size_t q = 0; q < rows; q++) {                                    \
            float *row = x + q * ld;                                           \
            size_t c = q < r ? whole : 0;                                      \
            for (; c + span <= cols; c += span) {                              \
                VF v[G];                                                       \
                memcpy(v, row + c, sizeof v);                                  \
                ACTIVATION_N(act, VF, VI, SEL, G, v);                          \
                memcpy(row + c, v, sizeof v);                                  \
            }                                                                  \
            for (; c + W <= cols; c += W) {                                    \
                VF v;                                                          \
                memcpy(&v, row + c, sizeof v);                                 \
                ACTIVATION_N(act, VF, VI, SEL, 1, &v);                         \
                memcpy(row + c, &v, sizeof v);                                 \
            }                                                                  \
            activation_from(act, row, cols, c);                                \
        }                                                                      \
    } while (0)

static void activation_plain(xf_act act, float *x, size_t ld, size_t rows,
                             size_t cols)
{
    ACTIVATION_ROWS(v8f, v8i, SELECT, 8, ACT_GROUP_8);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static void activation_avx2(xf_act act, float *x, size_t ld,
                                        size_t rows, size_t cols)
{
    ACTIVATION_ROWS(v8f, v8i, SELECT, 8, ACT_GROUP_8);
}
AVX512_TARGET static void activation_avx512(xf_act act, float *x, size_t ld,
                                            size_t rows, size_t cols)
{
    ACTIVATION_ROWS(v16f, v16i, SELECT16, 16, ACT_GROUP_16);
}
#endif

void xf_activation_rows_isa(int isa, xf_act act, float *x, size_t ld,
                            size_t rows, size_t cols)
{
    VEC_DISPATCH(isa, activation, act, x, ld, rows, cols);
}

void xf_activation_rows(xf_act act, float *x, size_t ld, size_t rows,
                        size_t cols)
{
    VEC_DISPATCH(vec_isa_best(), activation, act, x, ld, rows, cols);
}

void xf_activation_isa(int isa, xf_act act, float *x, size_t count)
{
    VEC_DISPATCH(isa, activation, act, x, count, 1, count);
}

void xf_activation(xf_act act, float *x, size_t count)
{
    VEC_DISPATCH(vec_isa_best(), activation, act, x, count, 1, count);
}
