/*
 * softmax.c - numerically stable softmax: the row maximum is subtracted
 * before exponentiating, so logits of +-1e4 neither overflow nor vanish
 * wholesale.
 *
 * Exponentials are the hot spot of attention after the products, so the
 * row kernels work eight floats at a time with GCC/Clang vector extensions
 * (SSE on any x86-64, AVX2 + FMA where the CPU has them, picked per
 * call). Every element, tail included, goes through the same vector code,
 * so a value never depends on where it sits in a row.
 */
#include "softmax.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* x86-64 CPUs with AVX2 and FMA get a second build of each row kernel,
 * chosen per call from the CPU's feature bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_BUILD 1
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#else
#define HAVE_AVX2_BUILD 0
#endif

static bool cpu_has_avx2_fma(void)
{
#if HAVE_AVX2_BUILD
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Below this exp(x) is under FLT_MIN; it is returned as exactly 0. */
#define EXP_FLOOR -87.0f

/* Vectors pass between helpers by pointer: a 32-byte vector argument
 * would tie the helpers to the AVX calling convention. */
#define SELECT(mask, yes, no)                                                  \
    ((v8f)(((v8i)(yes) & (mask)) | ((v8i)(no) & ~(mask))))

/*
 * exp(x) for eight floats, within 2 ulp for x in [-87, 88]; 0 below -87,
 * including -INFINITY (a masked score).
 * exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in
 * [-ln2/2, ln2/2], exp(r) by Cephes' degree-6 polynomial.
 */
ALWAYS_INLINE void exp_v8(v8f *xp)
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

/* The first n (< 8) of s, padded to eight with pad. */
static inline void load_tail(v8f *v, const float *s, size_t n, float pad)
{
    *v = (v8f){pad, pad, pad, pad, pad, pad, pad, pad};
    memcpy(v, s, n * sizeof *s);
}

/*
 * The row kernels. Bodies are always inlined into a plain and an AVX2 +
 * FMA wrapper, so each build gets its own instruction selection. Whole
 * groups of eight load with a constant-size copy (one vector load); the
 * tail goes through the same vector code, padded.
 */
ALWAYS_INLINE float row_max_body(const float *s, size_t m)
{
    v8f mx, v;
    load_tail(&mx, s, 0, -INFINITY);
    size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        memcpy(&v, s + j, sizeof v);
        mx = SELECT(v > mx, v, mx);
    }
    if (j < m) {
        load_tail(&v, s + j, m - j, -INFINITY);
        mx = SELECT(v > mx, v, mx);
    }
    float best = mx[0];
    for (int l = 1; l < 8; l++)
        best = mx[l] > best ? mx[l] : best;
    return best;
}

/* True when some score is NaN or +Inf: the products overflowed float32. */
ALWAYS_INLINE bool row_overflowed_body(const float *s, size_t m)
{
    v8i bad = {0};
    v8f v;
    size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        memcpy(&v, s + j, sizeof v);
        bad |= (v != v) | (v == INFINITY);
    }
    if (j < m) {
        load_tail(&v, s + j, m - j, 0.0f);
        bad |= (v != v) | (v == INFINITY);
    }
    int any = 0;
    for (int l = 0; l < 8; l++)
        any |= bad[l];
    return any != 0;
}

/* s[j] <- exp(s[j] - shift); returns the sum, accumulated per lane in
 * float (at most 64 terms per lane for a 512-key block) and across lanes
 * in double. */
ALWAYS_INLINE double exp_shifted_body(float *s, size_t m, float shift)
{
    v8f acc = {0}, e;
    size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        memcpy(&e, s + j, sizeof e);
        e -= shift;
        exp_v8(&e);
        memcpy(s + j, &e, sizeof e);
        acc += e;
    }
    if (j < m) {
        load_tail(&e, s + j, m - j, -INFINITY);
        e -= shift;
        exp_v8(&e);
        memcpy(s + j, &e, (m - j) * sizeof *s);
        acc += e;
    }
    double sum = 0.0;
    for (int l = 0; l < 8; l++)
        sum += acc[l];
    return sum;
}

ALWAYS_INLINE void scale_row_body(float *s, size_t m, float factor)
{
    for (size_t j = 0; j < m; j++)
        s[j] *= factor;
}

static float row_max_plain(const float *s, size_t m)
{
    return row_max_body(s, m);
}
static bool row_overflowed_plain(const float *s, size_t m)
{
    return row_overflowed_body(s, m);
}
static double exp_shifted_plain(float *s, size_t m, float shift)
{
    return exp_shifted_body(s, m, shift);
}
static void scale_row_plain(float *s, size_t m, float f)
{
    scale_row_body(s, m, f);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static float row_max_avx2(const float *s, size_t m)
{
    return row_max_body(s, m);
}
AVX2_TARGET static bool row_overflowed_avx2(const float *s, size_t m)
{
    return row_overflowed_body(s, m);
}
AVX2_TARGET static double exp_shifted_avx2(float *s, size_t m, float shift)
{
    return exp_shifted_body(s, m, shift);
}
AVX2_TARGET static void scale_row_avx2(float *s, size_t m, float f)
{
    scale_row_body(s, m, f);
}
#define DISPATCH(name, ...)                                                    \
    (cpu_has_avx2_fma() ? name##_avx2(__VA_ARGS__) : name##_plain(__VA_ARGS__))
#else
#define DISPATCH(name, ...) name##_plain(__VA_ARGS__)
#endif

static float row_max(const float *s, size_t m)
{
    return DISPATCH(row_max, s, m);
}
static bool row_overflowed(const float *s, size_t m)
{
    return DISPATCH(row_overflowed, s, m);
}
static double exp_shifted(float *s, size_t m, float shift)
{
    return DISPATCH(exp_shifted, s, m, shift);
}
static void scale_row(float *s, size_t m, float f)
{
    DISPATCH(scale_row, s, m, f);
}

enum softmax_status softmax_row(float *s, size_t m)
{
    if (row_overflowed(s, m))
        return SOFTMAX_OVERFLOW;
    const float mx = row_max(s, m);
    if (mx == -INFINITY) {
        memset(s, 0, m * sizeof *s);
        return SOFTMAX_ALL_MASKED;
    }
    const double sum = exp_shifted(s, m, mx);
    scale_row(s, m, (float)(1.0 / sum));
    return SOFTMAX_OK;
}

void softmax_online_init(struct softmax_online *st)
{
    st->max = -INFINITY;
    st->sum = 0.0;
}

enum softmax_status softmax_online_block(struct softmax_online *st, float *s,
                                         size_t m, float *rescale)
{
    *rescale = 1.0f;
    if (row_overflowed(s, m))
        return SOFTMAX_OVERFLOW;
    const float block_max = row_max(s, m);
    if (block_max == -INFINITY) {
        memset(s, 0, m * sizeof *s);
        return SOFTMAX_OK;
    }
    // online softmax: rescale the running sum when the max grows
    if (block_max > st->max) {
        *rescale = st->max == -INFINITY ? 0.0f : expf(st->max - block_max);
        st->sum *= *rescale;
        st->max = block_max;
    }
    st->sum += exp_shifted(s, m, st->max);
    return SOFTMAX_OK;
}
