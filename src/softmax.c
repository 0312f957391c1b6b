/*
 * softmax.c - numerically stable softmax: the row maximum is subtracted
 * before exponentiating, so logits of +-1e4 neither overflow nor vanish
 * wholesale.
 *
 * Exponentials are the hot spot of attention after the products, so the
 * row kernels work eight floats at a time with GCC/Clang vector extensions
 * (SSE on any x86-64, AVX2 + FMA where the CPU has them, picked at load
 * time). Every element, tail included, goes through the same vector code,
 * so a value never depends on where it sits in a row.
 */
#include "softmax.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__ELF__) && !defined(__SANITIZE_ADDRESS__)
#define KERNEL __attribute__((target_clones("arch=haswell", "default")))
#else
#define KERNEL
#endif

/* Below this exp(x) is under FLT_MIN; it is returned as exactly 0. */
#define EXP_FLOOR -87.0f

/* Vectors pass between helpers by pointer: a 32-byte vector argument
 * would tie the helpers to the AVX calling convention. */
#define SELECT(mask, yes, no) ((v8f)(((v8i)(yes) & (mask)) | ((v8i)(no) & ~(mask))))

/*
 * exp(x) for eight floats, within 2 ulp for x in [-87, 88]; 0 below -87,
 * including -INFINITY (a masked score).
 * exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in
 * [-ln2/2, ln2/2], exp(r) by Cephes' degree-6 polynomial.
 */
static inline void exp_v8(v8f *xp)
{
    v8f x = *xp;
    const v8f zero = {0};
    const v8i underflow = x < EXP_FLOOR;
    x = SELECT(underflow, zero + EXP_FLOOR, x);
    x = SELECT(x > 88.0f, zero + 88.0f, x);
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds */
    const v8f t = x * 1.44269504088896341f + shifter;
    const v8f n = t - shifter;
    const v8f r = x - n * 0.693359375f - n * -2.12194440e-4f;
    v8f p = zero + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const v8i bits = ((v8i)t - (v8i)(zero + shifter) + 127) << 23;
    *xp = SELECT(underflow, zero, p * (v8f)bits);
}

/* The first n of s, padded to eight with pad. */
static inline void load8(v8f *v, const float *s, size_t n, float pad)
{
    *v = (v8f){pad, pad, pad, pad, pad, pad, pad, pad};
    memcpy(v, s, n * sizeof *s);
}

KERNEL static float row_max(const float *s, size_t m)
{
    v8f mx, v;
    load8(&mx, s, 0, -INFINITY);
    for (size_t j = 0; j < m; j += 8) {
        load8(&v, s + j, m - j < 8 ? m - j : 8, -INFINITY);
        mx = SELECT(v > mx, v, mx);
    }
    float best = mx[0];
    for (int l = 1; l < 8; l++)
        best = mx[l] > best ? mx[l] : best;
    return best;
}

/* s[j] <- exp(s[j] - shift); returns the sum, accumulated per lane in
 * float (64 terms at most per lane per 512-key block) and across lanes in
 * double. */
KERNEL static double exp_shifted(float *s, size_t m, float shift)
{
    v8f acc = {0};
    for (size_t j = 0; j < m; j += 8) {
        const size_t n = m - j < 8 ? m - j : 8;
        v8f e;
        load8(&e, s + j, n, -INFINITY);
        e -= shift;
        exp_v8(&e);
        memcpy(s + j, &e, n * sizeof *s);
        acc += e;
    }
    double sum = 0.0;
    for (int l = 0; l < 8; l++)
        sum += acc[l];
    return sum;
}

KERNEL static void scale_row(float *s, size_t m, float factor)
{
    for (size_t j = 0; j < m; j += 8) {
        const size_t n = m - j < 8 ? m - j : 8;
        v8f v;
        load8(&v, s + j, n, 0.0f);
        v *= factor;
        memcpy(s + j, &v, n * sizeof *s);
    }
}

bool softmax_row(float *s, size_t m)
{
    const float mx = row_max(s, m);
    if (mx == -INFINITY) {
        memset(s, 0, m * sizeof *s);
        return false;
    }
    const double sum = exp_shifted(s, m, mx);
    scale_row(s, m, (float)(1.0 / sum));
    return true;
}

void softmax_online_init(struct softmax_online *st)
{
    st->max = -INFINITY;
    st->sum = 0.0;
}

float softmax_online_block(struct softmax_online *st, float *s, size_t m)
{
    const float block_max = row_max(s, m);
    if (block_max == -INFINITY) {
        memset(s, 0, m * sizeof *s);
        return 1.0f;
    }
    // online softmax: rescale the running sum when the max grows
    float rescale = 1.0f;
    if (block_max > st->max) {
        rescale = st->max == -INFINITY ? 0.0f : expf(st->max - block_max);
        st->sum *= rescale;
        st->max = block_max;
    }
    st->sum += exp_shifted(s, m, st->max);
    return rescale;
}
