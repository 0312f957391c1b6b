/*
 * softmax.c - numerically stable softmax: the row maximum is subtracted
 * before exponentiating, so logits of +-1e4 neither overflow nor vanish
 * wholesale.
 *
 * Exponentials are the hot spot of attention after the products, so the
 * row kernels work eight floats at a time with GCC/Clang vector extensions
 * (SSE on any x86-64, AVX2 + FMA where the CPU has them, picked per
 * call), or sixteen with AVX-512. Every element, tail included, goes
 * through the same arithmetic, so a value never depends on where it sits
 * in a row; the sixteen-wide build adds its two halves into the same eight
 * per-lane sums in the same order as the eight-wide one, so every build
 * gives the same bits.
 */
#include "softmax.h"
#include "vecmath.h"

#include <math.h>
#include <string.h>

/* The first n (< 8) of s, padded to eight with pad. */
static inline void load_tail(v8f *v, const float *s, size_t n, float pad)
{
    *v = (v8f){pad, pad, pad, pad, pad, pad, pad, pad};
    memcpy(v, s, n * sizeof *s);
}

/* Running maxima a row's maximum keeps apart: one waits on the last
 * comparison (0.33 cycles an element on a 512-key row); four don't. The
 * maximum is the same whichever order the elements meet in. */
enum { MAX_WAYS = 4 };

/*
 * The row kernels. Bodies are always inlined into a plain, an AVX2 + FMA
 * and an AVX-512 wrapper, so each build gets its own instruction
 * selection. Whole groups of eight load with a constant-size copy (one
 * vector load); the tail goes through the same vector code, padded. The
 * *_from bodies start at element j with state a wider prefix
 * (exp_shifted_wide(), sixteen at a time) may have begun.
 */
ALWAYS_INLINE float row_max_from(const float *s, size_t m, size_t j, v8f *mx)
{
    v8f v;
    if (j + 8 * MAX_WAYS <= m) {
        v8f part[MAX_WAYS];
        EACH(i, MAX_WAYS) part[i] = *mx;
        for (; j + 8 * MAX_WAYS <= m; j += 8 * MAX_WAYS) {
            EACH(i, MAX_WAYS)
            {
                memcpy(&v, s + j + 8 * i, sizeof v);
                part[i] = SELECT(v > part[i], v, part[i]);
            }
        }
        EACH(i, MAX_WAYS)
        {
            *mx = SELECT(part[i] > *mx, part[i], *mx);
        }
    }
    for (; j + 8 <= m; j += 8) {
        memcpy(&v, s + j, sizeof v);
        *mx = SELECT(v > *mx, v, *mx);
    }
    if (j < m) {
        load_tail(&v, s + j, m - j, -INFINITY);
        *mx = SELECT(v > *mx, v, *mx);
    }
    float best = (*mx)[0];
    for (int l = 1; l < 8; l++)
        best = (*mx)[l] > best ? (*mx)[l] : best;
    return best;
}

/* True when some score is NaN or +Inf: the products overflowed float32. */
ALWAYS_INLINE bool row_overflowed_from(const float *s, size_t m, size_t j,
                                       v8i *bad)
{
    v8f v;
    for (; j + 8 <= m; j += 8) {
        memcpy(&v, s + j, sizeof v);
        *bad |= (v != v) | (v == INFINITY);
    }
    if (j < m) {
        load_tail(&v, s + j, m - j, 0.0f);
        *bad |= (v != v) | (v == INFINITY);
    }
    int any = 0;
    for (int l = 0; l < 8; l++)
        any |= (*bad)[l];
    return any != 0;
}

/* s[j] <- exp(s[j] - shift); returns the sum, accumulated per lane in
 * float (at most 64 terms per lane for a 512-key block) and across lanes
 * in double. */
ALWAYS_INLINE double exp_shifted_from(float *s, size_t m, float shift, size_t j,
                                      v8f *acc)
{
    v8f e;
    for (; j + 8 <= m; j += 8) {
        memcpy(&e, s + j, sizeof e);
        e -= shift;
        exp_v8(&e);
        memcpy(s + j, &e, sizeof e);
        *acc += e;
    }
    if (j < m) {
        load_tail(&e, s + j, m - j, -INFINITY);
        e -= shift;
        exp_v8(&e);
        memcpy(s + j, &e, (m - j) * sizeof *s);
        *acc += e;
    }
    double sum = 0.0;
    for (int l = 0; l < 8; l++)
        sum += (*acc)[l];
    return sum;
}

/* The halves of a sixteen-wide vector, as two groups of eight. */
ALWAYS_INLINE void halves(const v16f *w, v8f *lo, v8f *hi)
{
    memcpy(lo, w, sizeof *lo);
    memcpy(hi, (const char *)w + sizeof *lo, sizeof *hi);
}

/* Vectors of sixteen the wide exponentials take at a time (vecmath.h's
 * EACH): eight, which the 32 registers hold. A 512-key row's
 * exponentials 1.39 -> 0.95 cycles an element from one vector at a time
 * (docs/benchmarks.md); eight-wide vectors four at a time, with 16
 * registers, spill and take 3.6 cycles against 2.1 alone. */
enum { EXP_GROUP_16 = 8 };

/* The eight-wide sums' order: group j + 0..7 is added before j + 8..15,
 * vector after vector, however many go at once. */
ALWAYS_INLINE size_t exp_shifted_wide(float *s, size_t m, float shift, v8f *acc)
{
    v16f e;
    v8f lo, hi;
    size_t j = 0;
    for (; j + 16 * EXP_GROUP_16 <= m; j += 16 * EXP_GROUP_16) {
        v16f g[EXP_GROUP_16];
        memcpy(g, s + j, sizeof g);
        EACH(i, EXP_GROUP_16) g[i] -= shift;
        EXP_N(v16f, v16i, SELECT16, EXP_GROUP_16, g);
        memcpy(s + j, g, sizeof g);
        EACH(i, EXP_GROUP_16)
        {
            halves(&g[i], &lo, &hi);
            *acc += lo;
            *acc += hi;
        }
    }
    for (; j + 16 <= m; j += 16) {
        memcpy(&e, s + j, sizeof e);
        e -= shift;
        exp_v16(&e);
        memcpy(s + j, &e, sizeof e);
        halves(&e, &lo, &hi);
        *acc += lo;
        *acc += hi;
    }
    return j;
}

/* Eight at a time like the kernels above: the compiler's own loop costs
 * half again as much on the short rows of a short sentence. */
ALWAYS_INLINE void scale_row_body(float *s, size_t m, float factor)
{
    v8f v;
    size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        memcpy(&v, s + j, sizeof v);
        v *= factor;
        memcpy(s + j, &v, sizeof v);
    }
    for (; j < m; j++)
        s[j] *= factor;
}

static float row_max_plain(const float *s, size_t m)
{
    v8f mx;
    load_tail(&mx, s, 0, -INFINITY);
    return row_max_from(s, m, 0, &mx);
}
static bool row_overflowed_plain(const float *s, size_t m)
{
    v8i bad = {0};
    return row_overflowed_from(s, m, 0, &bad);
}
static double exp_shifted_plain(float *s, size_t m, float shift)
{
    v8f acc = {0};
    return exp_shifted_from(s, m, shift, 0, &acc);
}
static void scale_row_plain(float *s, size_t m, float f)
{
    scale_row_body(s, m, f);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static float row_max_avx2(const float *s, size_t m)
{
    v8f mx;
    load_tail(&mx, s, 0, -INFINITY);
    return row_max_from(s, m, 0, &mx);
}
AVX2_TARGET static bool row_overflowed_avx2(const float *s, size_t m)
{
    v8i bad = {0};
    return row_overflowed_from(s, m, 0, &bad);
}
AVX2_TARGET static double exp_shifted_avx2(float *s, size_t m, float shift)
{
    v8f acc = {0};
    return exp_shifted_from(s, m, shift, 0, &acc);
}
AVX2_TARGET static void scale_row_avx2(float *s, size_t m, float f)
{
    scale_row_body(s, m, f);
}
/* Maxima and checks are no faster sixteen-wide (GCC 12 turns the
 * comparisons into mask registers and back); only the exponentials are. */
static float row_max_avx512(const float *s, size_t m)
{
    return row_max_avx2(s, m);
}
static bool row_overflowed_avx512(const float *s, size_t m)
{
    return row_overflowed_avx2(s, m);
}
AVX512_TARGET static double exp_shifted_avx512(float *s, size_t m, float shift)
{
    v8f acc = {0};
    const size_t j = exp_shifted_wide(s, m, shift, &acc);
    return exp_shifted_from(s, m, shift, j, &acc);
}
static void scale_row_avx512(float *s, size_t m, float f)
{
    scale_row_avx2(s, m, f);
}
#endif

/* s[e] <- exp(s[e]) for e < n: the block form's exponentials, every
 * vector independent of the others, so that several are in flight. */
ALWAYS_INLINE void exp_flat_from(float *s, size_t n, size_t e)
{
    v8f v;
    for (; e + 8 <= n; e += 8) {
        memcpy(&v, s + e, sizeof v);
        exp_v8(&v);
        memcpy(s + e, &v, sizeof v);
    }
    if (e < n) {
        load_tail(&v, s + e, n - e, -INFINITY);
        exp_v8(&v);
        memcpy(s + e, &v, (n - e) * sizeof *s);
    }
}

static void exp_flat_plain(float *s, size_t n)
{
    exp_flat_from(s, n, 0);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static void exp_flat_avx2(float *s, size_t n)
{
    exp_flat_from(s, n, 0);
}
AVX512_TARGET static void exp_flat_avx512(float *s, size_t n)
{
    v16f w;
    size_t e = 0;
    for (; e + 16 * EXP_GROUP_16 <= n; e += 16 * EXP_GROUP_16) {
        v16f g[EXP_GROUP_16];
        memcpy(g, s + e, sizeof g);
        EXP_N(v16f, v16i, SELECT16, EXP_GROUP_16, g);
        memcpy(s + e, g, sizeof g);
    }
    for (; e + 16 <= n; e += 16) {
        memcpy(&w, s + e, sizeof w);
        exp_v16(&w);
        memcpy(s + e, &w, sizeof w);
    }
    exp_flat_from(s, n, e);
}
#endif

#define DISPATCH(name, ...) VEC_DISPATCH(vec_isa_best(), name, __VA_ARGS__)

float softmax_row_max_isa(enum vec_isa isa, const float *s, size_t m)
{
    return VEC_DISPATCH(isa, row_max, s, m);
}

bool softmax_row_overflowed_isa(enum vec_isa isa, const float *s, size_t m)
{
    return VEC_DISPATCH(isa, row_overflowed, s, m);
}

double softmax_exp_shifted_isa(enum vec_isa isa, float *s, size_t m,
                               float shift)
{
    return VEC_DISPATCH(isa, exp_shifted, s, m, shift);
}

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

/* NaN and +Inf scores are found without a pass of their own: +Inf is the
 * maximum, and a NaN makes the sum of the exponentials NaN; only a row
 * whose maximum is -inf (all masked, or NaN) is looked at again. */
enum softmax_status softmax_row(float *s, size_t m)
{
    const float mx = row_max(s, m);
    if (mx == INFINITY)
        return SOFTMAX_OVERFLOW;
    if (mx == -INFINITY) {
        if (row_overflowed(s, m))
            return SOFTMAX_OVERFLOW;
        memset(s, 0, m * sizeof *s);
        return SOFTMAX_ALL_MASKED;
    }
    const double sum = exp_shifted(s, m, mx);
    if (!isfinite(sum))
        return SOFTMAX_OVERFLOW;
    scale_row(s, m, (float)(1.0 / sum));
    return SOFTMAX_OK;
}

void softmax_rows(float *s, size_t rows, size_t m, enum softmax_status *st)
{
    for (size_t r = 0; r < rows; r++) {
        float *row = s + r * m;
        // the largest score, and any NaN or +inf (what row_overflowed()
        // looks for), in one pass over a short row
        float mx = -INFINITY;
        bool bad = false;
        for (size_t j = 0; j < m; j++) {
            mx = row[j] > mx ? row[j] : mx;
            bad |= row[j] != row[j] || row[j] == INFINITY;
        }
        st[r] = bad               ? SOFTMAX_OVERFLOW
                : mx == -INFINITY ? SOFTMAX_ALL_MASKED
                                  : SOFTMAX_OK;
        // a row that is not OK becomes zeros: exp(-inf) below
        for (size_t j = 0; j < m; j++)
            row[j] = st[r] == SOFTMAX_OK ? row[j] - mx : -INFINITY;
    }
    VEC_DISPATCH(vec_isa_best(), exp_flat, s, rows * m);
    for (size_t r = 0; r < rows; r++) {
        if (st[r] != SOFTMAX_OK)
            continue;
        float *row = s + r * m;
        double sum = 0.0;
        for (size_t j = 0; j < m; j++)
            sum += row[j];
        if (!isfinite(sum)) {
            st[r] = SOFTMAX_OVERFLOW;
            continue;
        }
        const float factor = (float)(1.0 / sum);
        for (size_t j = 0; j < m; j++)
            row[j] *= factor;
    }
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
    const float block_max = row_max(s, m);
    if (block_max == INFINITY)
        return SOFTMAX_OVERFLOW;
    if (block_max == -INFINITY) {
        if (row_overflowed(s, m))
            return SOFTMAX_OVERFLOW;
        memset(s, 0, m * sizeof *s);
        return SOFTMAX_OK;
    }
    // online softmax: rescale the running sum when the max grows
    if (block_max > st->max) {
        *rescale = st->max == -INFINITY ? 0.0f : expf(st->max - block_max);
        st->sum *= *rescale;
        st->max = block_max;
    }
    const double block_sum = exp_shifted(s, m, st->max);
    if (!isfinite(block_sum))
        return SOFTMAX_OVERFLOW;
    st->sum += block_sum;
    return SOFTMAX_OK;
}

void softmax_softcap(float *s, size_t m, float cap)
{
    for (size_t j = 0; j < m; j++)
        s[j] = tanhf(s[j] / cap) * cap;
}
