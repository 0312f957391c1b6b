/*
 * jsonnum_wide.c - the shortest form of eight floats at a time
 * (jsonnum_wide.h), in the lanes of AVX-512 registers: a weights array
 * is mostly number text, and one float after another the formatter's
 * multiplies and the branches of its writing took a quarter of a small
 * request's time.
 *
 * Each 64-bit lane takes one float through jsonnum.c's steps: the same
 * Schubfach choice between the multiples of 10^k and 10^(k+1) in the
 * float's rounding interval, with the same table and the same rounding
 * to odd, every choice a mask instead of a branch. The digits are then
 * scaled to nine (the first nonzero), split into bytes, and laid out in
 * sixteen bytes with the characters a number may need besides digits
 * ("-", "0", ".") beside them. One byte shuffle a number, chosen by its
 * sign and where its point falls, writes its text: the only branch on a
 * value is whether it is set aside. A float in scientific form (below
 * 1e-5 or from 1e9 on), or Inf or NaN, is set aside for
 * jsonnum_format(): rare in answers, and a layout of its own.
 */
#include "jsonnum_wide.h"
#include "jsonnum.h"

#include "jsonnum_pow10.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_WIDE_BUILD 1
#else
#define HAVE_WIDE_BUILD 0
#endif

bool jsonnum_wide_available(void)
{
#if HAVE_WIDE_BUILD
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

#if HAVE_WIDE_BUILD
/*
 * A number's sixteen bytes before its shuffle: byte 0 its first digit,
 * bytes 1..3 "-0.", bytes 8..15 its other eight digits. Its text is
 * built by picking bytes of these. A digit past the ninth falls past the
 * text's length (nine are all there are, the last the number's end or a
 * zero), where the bytes are written over by what follows.
 */
enum { FIRST = 0, MINUS = 1, ZERO = 2, POINT = 3 };
#define DIGIT(j) ((j) == 0 ? FIRST : (j) <= 8 ? 7 + (j) : ZERO)

/* Byte i of the text of a number with sign s (1: negative) whose first
 * digit has decimal exponent p: "ddd.ddd" for p in 0..8 (the digits
 * after the point past the length when there are none), "0.000ddd" for
 * p in -5..-1. */
#define PLAIN(s, p, i)                                                         \
    ((i) <= (s) + (p)       ? DIGIT((i) - (s))                                 \
     : (i) == (s) + (p) + 1 ? POINT                                            \
                            : DIGIT((i) - (s)-1))
#define SMALL(s, p, i)                                                         \
    ((i) == (s)            ? ZERO                                              \
     : (i) == (s) + 1      ? POINT                                             \
     : (i) < (s) + 1 - (p) ? ZERO                                              \
                           : DIGIT((i) - (s)-1 + (p)))
#define PICK(s, p, i)                                                          \
    ((i) < (s) ? MINUS : (p) >= 0 ? PLAIN(s, p, i) : SMALL(s, p, i))
#define ROW(s, p)                                                              \
    {                                                                          \
        PICK(s, p, 0), PICK(s, p, 1), PICK(s, p, 2), PICK(s, p, 3),            \
            PICK(s, p, 4), PICK(s, p, 5), PICK(s, p, 6), PICK(s, p, 7),        \
            PICK(s, p, 8), PICK(s, p, 9), PICK(s, p, 10), PICK(s, p, 11),      \
            PICK(s, p, 12), PICK(s, p, 13), PICK(s, p, 14), PICK(s, p, 15)     \
    }
#define SIGN(s)                                                                \
    ROW(s, -5), ROW(s, -4), ROW(s, -3), ROW(s, -2), ROW(s, -1), ROW(s, 0),     \
        ROW(s, 1), ROW(s, 2), ROW(s, 3), ROW(s, 4), ROW(s, 5), ROW(s, 6),      \
        ROW(s, 7), ROW(s, 8)

/* Exponents of the first digit written plainly (jsonnum.c's
 * write_decimal()), and the shuffles: picks[s * PLAIN_SPAN + p -
 * PLAIN_MIN]. */
enum { PLAIN_MIN = -5, PLAIN_MAX = 8, PLAIN_SPAN = PLAIN_MAX - PLAIN_MIN + 1 };
static const uint8_t picks[2 * PLAIN_SPAN][16]
    __attribute__((aligned(16))) = {SIGN(0), SIGN(1)};

#define WIDE_TARGET                                                            \
    __attribute__((target("avx512f,avx512dq,avx512cd,avx512bw,avx512vl")))
#define WIDE_INLINE WIDE_TARGET static inline __attribute__((always_inline))

/* set1 of a 64-bit constant */
#define K(v) _mm512_set1_epi64((long long)(v))

/* jsonnum.c's round_to_odd() in each lane: n < 2^32, g the table's
 * 64-bit power. */
WIDE_INLINE __m512i round_to_odd(__m512i n, __m512i g)
{
    const __m512i lo = _mm512_mul_epu32(n, g);
    const __m512i hi = _mm512_mul_epu32(n, _mm512_srli_epi64(g, 32));
    const __m512i x32 =
        _mm512_add_epi64(_mm512_slli_epi64(hi, 1), _mm512_srli_epi64(lo, 31));
    const __m512i whole = _mm512_srli_epi64(x32, 32);
    return _mm512_mask_or_epi64(
        whole, _mm512_test_epi64_mask(x32, K(0xffffffffu)), whole, K(1));
}

/* What one block of eight floats leaves for their writing. */
struct block {
    __m128i image[2][4]; /* bytes before the shuffle: float j's are
                          * image[j % 2][j / 2] */
    uint8_t pick[8];     /* the shuffle's row in picks */
    uint8_t length[8];   /* of the text */
    __mmask8 aside;      /* floats left to jsonnum_format() */
};

/* jsonnum.c's shortest() and write_decimal() for eight floats, or the
 * first of them that take says (the others read as zeros). */
WIDE_TARGET static void prepare(const float *values, __mmask8 take,
                                struct block *out)
{
    const __m512i bits =
        _mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32(take, values));
    const __mmask8 negative = _mm512_test_epi64_mask(bits, K(0x80000000u));
    const __m512i field =
        _mm512_and_si512(_mm512_srli_epi64(bits, 23), K(0xff));
    const __m512i fraction = _mm512_and_si512(bits, K(0x7fffff));
    const __mmask8 nonfinite = _mm512_cmpeq_epi64_mask(field, K(0xff));
    const __mmask8 zero =
        _mm512_testn_epi64_mask(bits, K(0x7fffffffu)); /* +0 and -0 */
    const __mmask8 normal = _mm512_test_epi64_mask(field, field);
    /* c * 2^q; subnormals: c = fraction, q = -149 */
    const __m512i c =
        _mm512_mask_or_epi64(fraction, normal, fraction, K(0x800000));
    const __m512i q = _mm512_mask_blend_epi64(normal, K(-149),
                                              _mm512_sub_epi64(field, K(150)));
    const __mmask8 irregular = _mm512_testn_epi64_mask(fraction, fraction) &
                               _mm512_cmpgt_epi64_mask(field, K(1));
    /* k = floor(log10(the gap)), as floor_log10[_three_quarters]_pow2() */
    const __m512i k = _mm512_srai_epi64(
        _mm512_mask_add_epi64(_mm512_mul_epi32(q, K(JSONNUM_LOG10_2_MUL)),
                              irregular,
                              _mm512_mul_epi32(q, K(JSONNUM_LOG10_2_MUL)),
                              K(JSONNUM_LOG10_3_4_ADD)),
        JSONNUM_LOG_SHIFT);
    /* 10^-k: g from the table, b = floor(log2(10^-k)) by its formula */
    const __m512i g = _mm512_i64gather_epi64(
        _mm512_sub_epi64(K(-JSONNUM_POW10_MIN), k), jsonnum_pow10, 8);
    const __m512i b = _mm512_srai_epi64(
        _mm512_mul_epi32(_mm512_sub_epi64(_mm512_setzero_si512(), k),
                         K(JSONNUM_LOG2_10_MUL)),
        JSONNUM_LOG_SHIFT);
    const __m512i lift = _mm512_add_epi64(q, b); /* 31 - shift: 0..3 */
    /* the float and its interval's ends in quarters, scaled */
    const __m512i mid = _mm512_slli_epi64(c, 2);
    const __m512i low =
        _mm512_sub_epi64(mid, _mm512_mask_blend_epi64(irregular, K(2), K(1)));
    const __m512i high = _mm512_add_epi64(mid, K(2));
    const __m512i vm = round_to_odd(_mm512_sllv_epi64(mid, lift), g);
    const __m512i vl = round_to_odd(_mm512_sllv_epi64(low, lift), g);
    const __m512i vh = round_to_odd(_mm512_sllv_epi64(high, lift), g);
    /* the ends belong to the interval when c is even: 1 then, else 0 */
    const __m512i closed = _mm512_andnot_si512(c, K(1));
    const __m512i vh_closed = _mm512_add_epi64(vh, closed);
    const __m512i s = _mm512_srli_epi64(vm, 2);
    /* s / 10 * 10: s < 2^32 */
    const __m512i s10 = _mm512_mul_epu32(
        _mm512_srli_epi64(_mm512_mul_epu32(s, K(0xCCCCCCCDu)), 35), K(10));
    const __m512i four_s10 = _mm512_slli_epi64(s10, 2);
    const __mmask8 down10 =
        _mm512_cmplt_epu64_mask(vl, _mm512_add_epi64(four_s10, closed));
    const __mmask8 up10 =
        _mm512_cmplt_epu64_mask(_mm512_add_epi64(four_s10, K(40)), vh_closed);
    const __m512i fewer =
        _mm512_mask_add_epi64(s10, (__mmask8)~down10, s10, K(10));
    const __m512i four_s = _mm512_slli_epi64(s, 2);
    const __mmask8 down =
        _mm512_cmplt_epu64_mask(vl, _mm512_add_epi64(four_s, closed));
    const __mmask8 up =
        _mm512_cmplt_epu64_mask(_mm512_add_epi64(four_s, K(4)), vh_closed);
    const __m512i half = _mm512_add_epi64(four_s, K(2));
    const __mmask8 nearer =
        _mm512_cmplt_epu64_mask(vm, half) |
        (_mm512_cmpeq_epi64_mask(vm, half) & _mm512_testn_epi64_mask(s, K(1)));
    const __m512i one = _mm512_mask_add_epi64(
        s, (__mmask8) ~(down & (__mmask8)(~up | nearer)), s, K(1));
    __m512i digits = _mm512_mask_blend_epi64(down10 ^ up10, one, fewer);

    /* how many digits: with bits the digits' bit length, t = floor(bits *
     * 1233 / 4096) (1233 / 4096 just above log10(2)) is the count or one
     * less, as digits reaches 10^t or not */
    const __m512i powers_lo =
        _mm512_setr_epi64(1, 10, 100, 1000, 10000, 100000, 1000000, 10000000);
    const __m512i powers_hi =
        _mm512_setr_epi64(100000000, 1000000000, 0, 0, 0, 0, 0, 0);
    const __m512i t = _mm512_srli_epi64(
        _mm512_mul_epu32(_mm512_sub_epi64(K(64), _mm512_lzcnt_epi64(digits)),
                         K(1233)),
        12);
    const __m512i count = _mm512_mask_add_epi64(
        t,
        _mm512_cmpge_epu64_mask(
            digits, _mm512_permutex2var_epi64(powers_lo, t, powers_hi)),
        t, K(1));
    /* the digits scaled to nine, the first nonzero */
    const __m512i scale = _mm512_permutex2var_epi64(
        powers_lo, _mm512_sub_epi64(K(9), count), powers_hi);
    digits = _mm512_maskz_mul_epu32((__mmask8)~zero, digits, scale);

    /* the first digit, and the other eight in bytes (eight_digits()).
     * Division by a multiply and a shift: by 10^8, M = ceil(2^56 / 10^8)
     * is high by 0.63 / 2^56, which moves a quotient below 10^9 / 10^8 by
     * less than 10^-8, the least its fraction lies below 1; by 10^4 of a
     * value below 10^8, M = ceil(2^40 / 10^4) moves it by less than 10^-4
     * likewise. */
    const __m512i first =
        _mm512_srli_epi64(_mm512_mul_epu32(digits, K(720575941u)), 56);
    const __m512i rest =
        _mm512_sub_epi64(digits, _mm512_mul_epu32(first, K(100000000u)));
    const __m512i upper =
        _mm512_srli_epi64(_mm512_mul_epu32(rest, K(109951163u)), 40);
    __m512i x = _mm512_or_si512(
        upper,
        _mm512_slli_epi64(
            _mm512_sub_epi64(rest, _mm512_mul_epu32(upper, K(10000))), 32));
    __m512i d =
        _mm512_and_si512(_mm512_srli_epi64(_mm512_mullo_epi64(x, K(10486)), 20),
                         K(0x0000007F0000007Fu));
    x = _mm512_or_si512(
        d, _mm512_slli_epi64(_mm512_sub_epi64(x, _mm512_mullo_epi64(d, K(100))),
                             16));
    d = _mm512_and_si512(_mm512_srli_epi64(_mm512_mullo_epi64(x, K(103)), 10),
                         K(0x000F000F000F000Fu));
    const __m512i eight = _mm512_or_si512(
        d, _mm512_slli_epi64(_mm512_sub_epi64(x, _mm512_mullo_epi64(d, K(10))),
                             8));
    /* a zero digit is a zero byte: those at the top end the number */
    const __m512i trailing = _mm512_srli_epi64(_mm512_lzcnt_epi64(eight), 3);
    const __m512i significant =
        _mm512_mask_blend_epi64(zero, _mm512_sub_epi64(K(9), trailing), K(1));
    /* the exponent of the first digit; a zero is written "0" */
    const __m512i point = _mm512_maskz_add_epi64((__mmask8)~zero, k,
                                                 _mm512_sub_epi64(count, K(1)));
    const __mmask8 small = _mm512_cmplt_epi64_mask(point, K(0));
    const __mmask8 aside = nonfinite |
                           _mm512_cmplt_epi64_mask(point, K(PLAIN_MIN)) |
                           _mm512_cmpgt_epi64_mask(point, K(PLAIN_MAX));

    /* lengths: "ddd" (the point past the digits), "dd.ddd", "0.00ddd" */
    const __m512i point1 = _mm512_add_epi64(point, K(1));
    __m512i length =
        _mm512_mask_blend_epi64(_mm512_cmpgt_epi64_mask(significant, point1),
                                point1, _mm512_add_epi64(significant, K(1)));
    length = _mm512_mask_sub_epi64(length, small,
                                   _mm512_add_epi64(significant, K(1)), point);
    length = _mm512_mask_add_epi64(length, negative, length, K(1));
    const __m512i pick = _mm512_maskz_add_epi64(
        (__mmask8)~aside, _mm512_maskz_mov_epi64(negative, K(PLAIN_SPAN)),
        _mm512_sub_epi64(point, K(PLAIN_MIN)));
    _mm_storel_epi64((__m128i *)out->pick, _mm512_cvtepi64_epi8(pick));
    _mm_storel_epi64((__m128i *)out->length, _mm512_cvtepi64_epi8(length));
    out->aside = aside;

    /* the bytes: the first digit and "-0." in the low half of a float's
     * sixteen, the other digits in the high half */
    const __m512i head =
        _mm512_or_si512(first, K('0' | '-' << 8 | '0' << 16 | '.' << 24));
    const __m512i tail = _mm512_add_epi64(eight, K(0x3030303030303030u));
    /* floats 0, 2, 4, 6 and 1, 3, 5, 7 in 128-bit lanes */
    _mm512_storeu_si512(out->image[0], _mm512_unpacklo_epi64(head, tail));
    _mm512_storeu_si512(out->image[1], _mm512_unpackhi_epi64(head, tail));
}

/* Blocks prepared before any is written: one block's steps wait on each
 * other from its first to its last, and the core runs the next ones
 * meanwhile only when no writing stands between them. */
enum { BLOCKS = 8 };

WIDE_TARGET size_t jsonnum_wide_rows(const float *values, size_t count,
                                     const struct jsonnum_rows *rows, char *out)
{
    size_t n = 0, col = rows->col;
    struct block blocks[BLOCKS];
    for (size_t i0 = 0; i0 < count; i0 += 8 * BLOCKS) {
        const size_t left = count - i0;
        const size_t ready = left < 8 * BLOCKS ? (left + 7) / 8 : BLOCKS;
        for (size_t b = 0; b < ready; b++) {
            const size_t take = left - 8 * b < 8 ? left - 8 * b : 8;
            prepare(values + i0 + 8 * b, (__mmask8)((1u << take) - 1u),
                    &blocks[b]);
        }
        const size_t last = left < 8 * BLOCKS ? left : 8 * BLOCKS;
        for (size_t i = 0; i < last; i++) {
            const struct block *block = &blocks[i / 8];
            const size_t j = i % 8;
            if (block->aside >> j & 1) {
                n += jsonnum_format(values[i0 + i], 0, out + n);
            } else {
                const __m128i text = _mm_shuffle_epi8(
                    block->image[j % 2][j / 2],
                    _mm_load_si128((const __m128i *)picks[block->pick[j]]));
                _mm_storeu_si128((__m128i *)(out + n), text);
                n += block->length[j];
            }
            if (++col < rows->row) {
                out[n++] = ',';
            } else {
                col = 0;
                n += rows->row_end(rows->context, out + n);
            }
        }
    }
    return n;
}
#else
size_t jsonnum_wide_rows(const float *values, size_t count,
                         const struct jsonnum_rows *rows, char *out)
{
    (void)values, (void)count, (void)rows, (void)out; /* never available */
    return 0;
}
#endif
