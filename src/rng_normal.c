/*
 * rng_normal.c - the Box-Muller pairs of a token's embedding
 * (attn_embed_token(), docs/math.md "Random streams"), several at once in
 * the AVX2 and AVX-512 builds, each value the same bits as the scalar
 * formula, rng_normal_pair(), with libm's log, cos and sin.
 *
 * A lane draws its pair's two uniforms as the scalar code does (the
 * 53-bit integer made a double through its bits, as rng_draw.c does) and
 * forms u1 = 1 - u and theta = 2 pi u2 with the same IEEE operations, so
 * those are the scalar code's doubles. log(u1), cos(theta) and
 * sin(theta) are then computed here in double, each to within a few
 * units in its last place:
 *
 * - log: u1 = 2^e m with m in [sqrt(2)/2, sqrt(2)), f = m - 1 (exact),
 *   s = f / (2 + f), and log(1 + f) = 2 atanh(s) = f - (f^2/2 - s (f^2/2
 *   + R(s^2))), R the atanh series' terms 2 z^k / (2k + 1), k = 1..10
 *   (|s| <= 0.172, so the first term left out is under 2^-60 of the
 *   value); e ln 2 added in two parts, the first exact for any e here.
 * - cos and sin: theta less the nearest multiple k of pi/2 in three
 *   parts (Cody and Waite: the first two of 33 bits, so that k times
 *   them is exact), then the Taylor series of sin and cos to x^17 and
 *   x^18 on |x| <= pi/4 (the first term left out under 2^-62), and the
 *   quadrant k mod 4 choosing and signing them.
 *
 * So r cos(theta) and r sin(theta), in double before their rounding to
 * float32, are within a few dozen units in the last place of the scalar
 * code's (libm's log, cos and sin are within one unit of the true values
 * too). Where a double is further than MARGIN units from the point
 * halfway between two float32s, both round to the same float. A pair
 * with a value nearer than that (about one in 30,000), with u1 = 1
 * (whose log is 0 and r a signed zero), or with theta within 2^-40 of a
 * multiple of pi/2 (where the reduction's relative error grows) is
 * computed again by the scalar formula. The plain build is the scalar
 * formula throughout.
 */
#include "rng.h"

#include "vecmath.h"

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

#define HALF_BITS 0x3fe0000000000000ULL /* 0.5 */
/* 2^52 + 2^51: added to a double in [0, 2^51), it leaves the nearest
 * integer in the low mantissa bits */
#define ROUNDER 0x1.8p52
/* 2^52 as a double's bits: ORed with an integer below 2^52, the double
 * 2^52 + that integer */
#define TWO52_BITS 0x4330000000000000ULL

/* Units in the last place of a double between it and the point halfway
 * between two float32s below which the pair is computed again: far more
 * than the few dozen the two computations can differ by. */
#define MARGIN 4096

#define LN2_HI 0x1.62e42fefa4000p-1 /* ln 2 rounded to 40 bits */
#define LN2_LO -0x1.8432a1b0e2634p-43
#define SQRT2 0x1.6a09e667f3bcdp+0
#define TWO_OVER_PI 0x1.45f306dc9c883p-1
#define PIO2_1 0x1.921fb54400000p+0 /* pi/2 rounded to 33 bits */
#define PIO2_2 0x1.0b4611a600000p-34
#define PIO2_3 0x1.3198a2e037073p-69
#define TINY_REDUCED 0x1p-40

static void normals_plain(uint64_t key, size_t dim, float *out)
{
    for (size_t i = 0; 2 * i < dim; i++)
        rng_normal_pair(key, i, dim, out);
}

#if HAVE_AVX2_BUILD
/*
 * Pairs [0, dim / 2) of out, W lanes at a time (VU: W uint64s, VD: W
 * doubles, VF: W floats; SQRT their square root), the pairs past the last
 * whole vector and an odd dim's last value by the scalar formula.
 */
#define NORMALS_BODY(VU, VD, VF, W, SQRT, PAIRS, ANY)                          \
    /* lane j: pair j's first draw, key + (2j + 1) gamma */                    \
    VU z1;                                                                     \
    for (int j = 0; j < (W); j++)                                              \
        z1[j] = key + (2 * (uint64_t)j + 1) * RNG_GAMMA;                       \
    size_t i = 0;                                                              \
    for (; 2 * (i + (W)) <= dim; i += (W)) {                                   \
        VD u[2];                                                               \
        const VU z[2] = {z1, z1 + RNG_GAMMA};                                  \
        z1 += 2 * (W)*RNG_GAMMA;                                               \
        for (int d = 0; d < 2; d++) {                                          \
            VU v = z[d];                                                       \
            RNG_MIX64(v);                                                      \
            /* u = k 2^-53, k = v >> 11 = b 2^52 + m: (1 + m 2^-52 - 1) / 2    \
             * + b / 2, each step exact */                                     \
            const VU k = v >> 11;                                              \
            const VD x = (VD)(RNG_ONE_BITS | (k & RNG_MANTISSA));              \
            const VD half_b = (VD)(((VU){0} - (k >> 52)) & HALF_BITS);         \
            u[d] = (x - 1.0) * 0.5 + half_b;                                   \
        }                                                                      \
        const VD u1 = 1.0 - u[0];                                              \
        const VD theta = 6.283185307179586476925286766559 * u[1];              \
        /* log(u1) */                                                          \
        const VU bits = (VU)u1;                                                \
        VD e = ((VD)(TWO52_BITS | (bits >> 52)) - 0x1p52) - 1023.0;            \
        VD m = (VD)((bits & RNG_MANTISSA) | RNG_ONE_BITS);                     \
        const VU big = (VU)(m > SQRT2);                                        \
        m = (VD)(((VU)(m * 0.5) & big) | ((VU)m & ~big));                      \
        e = e + (VD)((VU)((VD){0} + 1.0) & big);                               \
        const VD f = m - 1.0;                                                  \
        const VD s = f / (2.0 + f);                                            \
        const VD sz = s * s;                                                   \
        VD R = sz * 0x1.8618618618618p-4;                                      \
        R = sz * (R + 0x1.af286bca1af28p-4);                                   \
        R = sz * (R + 0x1.e1e1e1e1e1e1ep-4);                                   \
        R = sz * (R + 0x1.1111111111111p-3);                                   \
        R = sz * (R + 0x1.3b13b13b13b14p-3);                                   \
        R = sz * (R + 0x1.745d1745d1746p-3);                                   \
        R = sz * (R + 0x1.c71c71c71c71cp-3);                                   \
        R = sz * (R + 0x1.2492492492492p-2);                                   \
        R = sz * (R + 0x1.999999999999ap-2);                                   \
        R = sz * (R + 0x1.5555555555555p-1);                                   \
        const VD hfsq = 0.5 * f * f;                                           \
        const VD log_u1 =                                                      \
            e * LN2_HI + (f - (hfsq - (s * (hfsq + R) + e * LN2_LO)));         \
        const VD r = SQRT(-2.0 * log_u1);                                      \
        /* cos(theta), sin(theta) */                                           \
        const VD rounded = theta * TWO_OVER_PI + ROUNDER;                      \
        const VU quadrant = (VU)rounded & 3;                                   \
        const VD kd = rounded - ROUNDER;                                       \
        VD x = theta - kd * PIO2_1;                                            \
        x = x - kd * PIO2_2;                                                   \
        x = x - kd * PIO2_3;                                                   \
        const VD xz = x * x;                                                   \
        VD S = xz * 0x1.952c77030ad4ap-49;                                     \
        S = xz * (S + -0x1.ae7f3e733b81fp-41);                                 \
        S = xz * (S + 0x1.6124613a86d09p-33);                                  \
        S = xz * (S + -0x1.ae64567f544e4p-26);                                 \
        S = xz * (S + 0x1.71de3a556c734p-19);                                  \
        S = xz * (S + -0x1.a01a01a01a01ap-13);                                 \
        S = xz * (S + 0x1.1111111111111p-7);                                   \
        S = S + -0x1.5555555555555p-3;                                         \
        const VD sin_x = x + x * xz * S;                                       \
        VD C = xz * -0x1.6827863b97d97p-53;                                    \
        C = xz * (C + 0x1.ae7f3e733b81fp-45);                                  \
        C = xz * (C + -0x1.93974a8c07c9dp-37);                                 \
        C = xz * (C + 0x1.1eed8eff8d898p-29);                                  \
        C = xz * (C + -0x1.27e4fb7789f5cp-22);                                 \
        C = xz * (C + 0x1.a01a01a01a01ap-16);                                  \
        C = xz * (C + -0x1.6c16c16c16c17p-10);                                 \
        C = C + 0x1.5555555555555p-5;                                          \
        const VD cos_x = (1.0 - 0.5 * xz) + xz * xz * C;                       \
        /* quadrant q: cos theta = c, -s, -c, s; sin theta = s, c, -s, -c */   \
        const VU odd = (VU){0} - (quadrant & 1);                               \
        const VU cos_sign = ((quadrant + 1) & 2) << 62;                        \
        const VU sin_sign = (quadrant & 2) << 62;                              \
        const VD cos_t =                                                       \
            (VD)((((VU)sin_x & odd) | ((VU)cos_x & ~odd)) ^ cos_sign);         \
        const VD sin_t =                                                       \
            (VD)((((VU)cos_x & odd) | ((VU)sin_x & ~odd)) ^ sin_sign);         \
        const VD a = r * cos_t, b = r * sin_t;                                 \
        /* within MARGIN units of halfway between two float32s: the low 29     \
         * bits near 2^28 */                                                   \
        const uint64_t low = (1ULL << 29) - 1;                                 \
        const VU near_a =                                                      \
            (VU)((((VU)a & low) - ((1ULL << 28) - MARGIN)) <= 2 * MARGIN);     \
        const VU near_b =                                                      \
            (VU)((((VU)b & low) - ((1ULL << 28) - MARGIN)) <= 2 * MARGIN);     \
        const VD abs_x = (VD)((VU)x & ~(1ULL << 63));                          \
        const VU again =                                                       \
            near_a | near_b | (VU)(u1 == 1.0) | (VU)(abs_x < TINY_REDUCED);    \
        /* the pairs side by side: a[0], b[0], a[1], b[1], ... */              \
        const PAIRS ab = PAIRS_OF(__builtin_convertvector(a, VF),              \
                                  __builtin_convertvector(b, VF));             \
        __builtin_memcpy(out + 2 * i, &ab, sizeof ab);                         \
        if (ANY(again))                                                        \
            for (int j = 0; j < (W); j++)                                      \
                if (again[j])                                                  \
                    rng_normal_pair(key, i + j, dim, out);                     \
    }                                                                          \
    for (; 2 * i < dim; i++)                                                   \
        rng_normal_pair(key, i, dim, out);

#define ANY4(v) (!_mm256_testz_si256((__m256i)(v), (__m256i)(v)))
#define ANY8(v) (_mm512_test_epi64_mask((__m512i)(v), (__m512i)(v)) != 0)

AVX2_TARGET static void normals_avx2(uint64_t key, size_t dim, float *out){
#define PAIRS_OF(fa, fb) __builtin_shufflevector(fa, fb, 0, 4, 1, 5, 2, 6, 3, 7)
    NORMALS_BODY(v4u64, v4f64, v4f32, 4, _mm256_sqrt_pd, v8f, ANY4)
#undef PAIRS_OF
}

AVX512_TARGET static void normals_avx512(uint64_t key, size_t dim, float *out)
{
#define PAIRS_OF(fa, fb)                                                       \
    __builtin_shufflevector(fa, fb, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, \
                            14, 7, 15)
    NORMALS_BODY(v8u64, v8f64, v8f32, 8, _mm512_sqrt_pd, v16f, ANY8)
#undef PAIRS_OF
}
#endif

void rng_normals_isa(enum vec_isa isa, uint64_t key, size_t dim, float *out)
{
    VEC_DISPATCH(isa, normals, key, dim, out);
}

void rng_normals(uint64_t key, size_t dim, float *out)
{
    VEC_DISPATCH(vec_isa_best(), normals, key, dim, out);
}
