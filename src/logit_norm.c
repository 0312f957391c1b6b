/*
 * logit_norm.c - softmax's normalizer over a vocabulary (logit_norm.h).
 *
 * A decoder's every token had its normalizer summed with libm's exp(),
 * one logit after another: 128,256 of them for Llama 3, 0.7 ms a token,
 * as long as a tenth of a decoding step with eight sequences, while the
 * step's other core waited. Here the exponentials go eight doubles at a
 * time: exp(y) = 2^k exp(r), k = round(y / ln 2), r = y - k ln 2 by
 * Cody and Waite's two-part ln 2 (k ln2_hi exact for |k| < 2^11), and
 * exp(r) for |r| <= ln 2 / 2 by its Taylor series to r^13 / 13!, whose
 * next term is below 5e-18 of the sum. Each term is then within 2 ulp
 * (1.15 at worst over 2.5 million points from 0 to -700 against
 * expl()); rounded to float, a probability is almost always the bits
 * of libm's.
 */
#include "logit_norm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8l __attribute__((vector_size(64)));

/* Below this, exp(y) is under 1e-304: a term of nothing beside the 1 of
 * the largest logit, and its 2^k would need a subnormal. */
#define TERM_FLOOR -700.0

#define SELECT8D(mask, yes, no)                                                \
    ((v8d)(((v8l)(yes) & (mask)) | ((v8l)(no) & ~(mask))))

/* exp(y) in each lane, y in [TERM_FLOOR, 0]; lanes below: 0. (Vectors
 * pass by pointer, as vecmath.h's helpers pass them.) */
ALWAYS_INLINE void exp8(v8d *yp)
{
    v8d y = *yp;
    const v8d zero = {0};
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52: rounds */
    const v8l under = y < TERM_FLOOR;
    y = SELECT8D(under, zero, y);
    const v8d t = y * 1.4426950408889634 + shifter;
    const v8d k = t - shifter;
    const v8d r =
        (y - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    /* Horner from 1/13! down to 1 */
    v8d p = zero + 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* 2^k: k sits in t's low bits */
    const v8l two_k = ((v8l)t - (v8l)(zero + shifter) + 1023) << 52;
    *yp = SELECT8D(under, zero, p * (v8d)two_k);
}

/* Logits i .. i + 7, those past n -INFINITY: a constant-size copy but
 * for the last eight. */
ALWAYS_INLINE void load8(const float *x, size_t i, size_t n, v8f *out)
{
    const v8f none = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                      -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    v8f v = none;
    if (n - i >= 8)
        memcpy(&v, x + i, sizeof v);
    else
        memcpy(&v, x + i, (n - i) * sizeof *x);
    *out = v;
}

/* The largest finite logit, -INFINITY when none is: eight floats wide,
 * a logit whose exponent field is all ones (an infinity or a NaN) left
 * out. */
ALWAYS_INLINE float max_body(const float *logits, size_t vocab)
{
    v8f top, v;
    load8(logits, vocab, vocab, &top); /* all -INFINITY */
    for (size_t i = 0; i < vocab; i += 8) {
        load8(logits, i, vocab, &v);
        const v8i finite = ((v8i)v & 0x7f800000) != 0x7f800000;
        top = SELECT(finite & (v > top), v, top);
    }
    float m = -INFINITY;
    for (int l = 0; l < 8; l++)
        m = top[l] > m ? top[l] : m;
    return m;
}

/* Lanes holding a finite value (v - v is NaN for an infinity or NaN). */
#define FINITE8(v) ((v8l)((v) - (v) == (v) - (v)))

/* The sum of exp(logit - most) over the finite logits, most finite. */
ALWAYS_INLINE double sum_body(const float *logits, size_t vocab, double most)
{
    const v8d none = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                      -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    v8d sum = {0}, v;
    v8f f;
    for (size_t i = 0; i < vocab; i += 8) {
        load8(logits, i, vocab, &f);
        v = __builtin_convertvector(f, v8d);
        v8d y = SELECT8D(FINITE8(v), v - most, none);
        exp8(&y);
        sum += y;
    }
    /* the lanes in a fixed tree */
    double s4[4], s2[2];
    for (int l = 0; l < 4; l++)
        s4[l] = sum[l] + sum[l + 4];
    for (int l = 0; l < 2; l++)
        s2[l] = s4[l] + s4[l + 2];
    return s2[0] + s2[1];
}

static float max_plain(const float *logits, size_t vocab)
{
    return max_body(logits, vocab);
}
static double sum_plain(const float *logits, size_t vocab, double most)
{
    return sum_body(logits, vocab, most);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static float max_avx2(const float *logits, size_t vocab)
{
    return max_body(logits, vocab);
}
AVX2_TARGET static double sum_avx2(const float *logits, size_t vocab,
                                   double most)
{
    return sum_body(logits, vocab, most);
}
/* The maximum is no faster, and GCC 12 no better at it, sixteen wide
 * (softmax.c says why); the exponentials are. */
static float max_avx512(const float *logits, size_t vocab)
{
    return max_avx2(logits, vocab);
}
AVX512_TARGET static double sum_avx512(const float *logits, size_t vocab,
                                       double most)
{
    return sum_body(logits, vocab, most);
}
#endif

void logit_norm_isa(enum vec_isa isa, const float *logits, size_t vocab,
                    double *most, double *total)
{
    *most = VEC_DISPATCH(isa, max, logits, vocab);
    *total =
        *most == -INFINITY ? 0.0 : VEC_DISPATCH(isa, sum, logits, vocab, *most);
}

void logit_norm(const float *logits, size_t vocab, double *most, double *total)
{
    logit_norm_isa(vec_isa_best(), logits, vocab, most, total);
}
