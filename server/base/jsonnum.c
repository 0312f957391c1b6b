/*
 * jsonnum.c - float32 to JSON text: the shortest decimal that reads back as
 * the same float (as JavaScript and Python print numbers), or a fixed
 * number of significant digits, correctly rounded.
 *
 * Both are exact and use only integer arithmetic: no libm, no printf, no
 * strtof, no loop over candidate lengths. A weights array can hold millions
 * of floats, and formatting them was a third of a small request's work.
 *
 * A finite nonzero float is c * 2^q with c an integer below 2^24. Scaling
 * it by a power of ten uses a 64-bit approximation g of that power from a
 * generated table (jsonnum_pow10.h), never below the true value and above
 * it by less than one unit in its last place.
 *
 * Shortest: the Schubfach method (R. Giulietti, "The Schubfach way to render
 * doubles", 2020). The decimals that read back as the float fill its
 * rounding interval R, half-way to each neighbour (a quarter of the way to
 * the lower one at a power of two, where the gap below is half the gap
 * above). Choose k so that 10^k <= width(R) < 10^(k+1): R then holds at
 * most one multiple of 10^(k+1), which if present is the shortest answer,
 * and otherwise at least one of the two multiples of 10^k around the float,
 * of which the answer is the nearer. The float and R's ends, scaled by
 * 10^-k, are counted in quarters and rounded to odd, which decides every
 * comparison with an even number of quarters as the exact values would
 * (`make jsonnum-exhaustive` checks every float).
 *
 * Fixed digits: the float scaled to p or p + 1 digits before the point,
 * with 28 bits after it. Only when those bits put it within the error of a
 * multiple of 1/2 (where rounding is decided) is it compared exactly with
 * that multiple, in big-integer arithmetic.
 */
#include "jsonnum.h"
#include "jsonnum_wide.h"

#include "jsonnum_pow10.h"

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The steps of one number are inlined into both loops that format
 * numbers (jsonnum_format(), jsonnum_format_list()): called, they cost a
 * tenth of the work in moving registers. */
#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

static const uint32_t pow10_u32[10] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

static int floor_log10_pow2(int q)
{
    return (q * JSONNUM_LOG10_2_MUL) >> JSONNUM_LOG_SHIFT;
}

static int floor_log10_three_quarters_pow2(int q)
{
    return (q * JSONNUM_LOG10_2_MUL + JSONNUM_LOG10_3_4_ADD) >>
           JSONNUM_LOG_SHIFT;
}

/* floor(n * g / 2^shift) exactly, for n < 2^32 and 0 < shift < 96 when
 * the result fits 64 bits. */
INLINE uint64_t mul_shr(uint64_t n, uint64_t g, int shift)
{
    const uint64_t lo = n * (uint32_t)g, hi = n * (g >> 32);
    /* n * g = hi * 2^32 + lo, both parts below 2^64 */
    if (shift <= 32)
        return (hi << (32 - shift)) + (lo >> shift);
    return (hi + (lo >> 32)) >> (shift - 32);
}

/* The table's 10^e: g, a hair above 10^e * 2^(63 - b), and b. */
static uint64_t pow10_g(int e)
{
    return jsonnum_pow10[e - JSONNUM_POW10_MIN];
}

static int pow10_b(int e)
{
    return (e * JSONNUM_LOG2_10_MUL) >> JSONNUM_LOG_SHIFT;
}

/* ------------------------------------------------------------ shortest */

/* digits * 10^exp10, returned by value: a result through a pointer would
 * keep the caller's variable in memory. */
struct decimal {
    uint32_t digits;
    int exp10;
};

/* x = n * 2^q * 10^e rounded to odd: x itself when it is an integer,
 * otherwise whichever of the two integers around it is odd. Comparing the
 * result with an even integer gives the exact x's answer. n < 2^30
 * (quarter units of a float's c, times up to 8), e = -k for the k of
 * shortest(), so x is below 2^30; with g from there, n * g / 2^31 is
 * x * 2^32. The shift is a constant: shortest() scales n instead. */
INLINE uint32_t round_to_odd(uint64_t n, uint64_t g)
{
    /* floor(n * g / 2^31), exactly: n * g = hi * 2^32 + lo, both parts
     * below 2^62 */
    const uint64_t lo = n * (uint32_t)g, hi = n * (g >> 32);
    const uint64_t x32 = (hi << 1) + (lo >> 31);
    return (uint32_t)(x32 >> 32) | ((uint32_t)x32 != 0);
}

/* 4d at or above the interval's low end (above it when the interval is
 * open), and below the high end likewise, compared without a branch:
 * which way a comparison goes is as good as random from one number to the
 * next, and branches mispredicted on every other number cost a third of
 * the formatting's time. */
static bool above_low(uint32_t four_d, uint32_t low, bool closed)
{
    return (uint64_t)low < (uint64_t)four_d + closed;
}

static bool below_high(uint32_t four_d, uint32_t high, bool closed)
{
    return (uint64_t)four_d < (uint64_t)high + closed;
}

/* The shortest decimal in the rounding interval of c * 2^q, nearest to it
 * among the shortest, ties to an even last digit: returns its digits and
 * that decimal. */
INLINE struct decimal shortest(uint32_t c, int q, bool irregular)
{
    /* in quarter units of 2^q: the float, its interval's low and high end */
    const uint64_t mid = (uint64_t)c << 2;
    const uint64_t low = mid - (irregular ? 1 : 2), high = mid + 2;
    const int k =
        irregular ? floor_log10_three_quarters_pow2(q) : floor_log10_pow2(q);
    /* x * 2^32 = n * 2^q * 10^-k * 2^32 = n * g * 2^(q + b - 31) */
    const uint64_t g = pow10_g(-k);
    const int shift = 31 - q - pow10_b(-k);
    assert(shift >= 28 && shift <= 31);
    /* n * g / 2^shift = (n * 2^lift) * g / 2^31 */
    const int lift = 31 - shift;
    const uint32_t vm = round_to_odd(mid << lift, g);
    const uint32_t vl = round_to_odd(low << lift, g);
    const uint32_t vh = round_to_odd(high << lift, g);
    /* Reading a decimal rounds to nearest, ties to even c: the interval
     * includes its ends when c is even. A decimal d * 10^k is compared as
     * 4d with the scaled ends. */
    const bool closed = (c & 1) == 0;
    const uint32_t s = vm >> 2; /* floor(float / 10^k) */

    /* one digit fewer: the multiples of 10^(k+1) below and above, at most
     * one of them inside */
    const uint32_t s10 = s / 10 * 10;
    const bool down10 = above_low(4 * s10, vl, closed);
    const bool up10 = below_high(4 * (s10 + 10), vh, closed);
    const uint32_t fewer = s10 + 10 * !down10;

    /* otherwise the multiples of 10^k around the float, at least one of
     * them inside; of two, the nearer, ties to even */
    const bool down = above_low(4 * s, vl, closed);
    const bool up = below_high(4 * (s + 1), vh, closed);
    const uint32_t half = 4 * s + 2;
    const bool nearer = (vm < half) | ((vm == half) & ((s & 1) == 0));
    const uint32_t one = s + !(down & (!up | nearer));
    /* every choice made by arithmetic, none by a branch (see above_low()),
     * which compilers keep for a conditional expression */
    const uint32_t pick_fewer = -(uint32_t)(down10 != up10);
    return (struct decimal){one ^ ((one ^ fewer) & pick_fewer), k};
}

/* --------------------------------------------------------- fixed digits */

/* Unsigned integers of up to 256 bits, for the rare exact comparison. */
#define BIG_LIMBS 8
struct big {
    uint32_t limb[BIG_LIMBS]; /* least significant first */
};

static void big_set(struct big *a, uint64_t v)
{
    memset(a, 0, sizeof *a);
    a->limb[0] = (uint32_t)v;
    a->limb[1] = (uint32_t)(v >> 32);
}

static void big_mul_small(struct big *a, uint32_t m)
{
    uint64_t carry = 0;
    for (int i = 0; i < BIG_LIMBS; i++) {
        const uint64_t t = (uint64_t)a->limb[i] * m + carry;
        a->limb[i] = (uint32_t)t;
        carry = t >> 32;
    }
    assert(carry == 0); /* the callers' sizes stay below 2^224 */
}

static void big_mul_pow10(struct big *a, int n)
{
    for (; n >= 9; n -= 9)
        big_mul_small(a, pow10_u32[9]);
    big_mul_small(a, pow10_u32[n]);
}

static void big_shift_left(struct big *a, int bits)
{
    const int words = bits / 32, rest = bits % 32;
    assert(words < BIG_LIMBS);
    for (int i = BIG_LIMBS - words; i < BIG_LIMBS; i++)
        assert(a->limb[i] == 0); /* nothing is shifted out */
    assert(rest == 0 || a->limb[BIG_LIMBS - 1 - words] >> (32 - rest) == 0);
    for (int i = BIG_LIMBS - 1; i >= 0; i--) {
        const int from = i - words;
        uint32_t v = from >= 0 ? a->limb[from] << rest : 0;
        if (rest && from >= 1)
            v |= a->limb[from - 1] >> (32 - rest);
        a->limb[i] = v;
    }
}

static int big_compare(const struct big *a, const struct big *b)
{
    for (int i = BIG_LIMBS - 1; i >= 0; i--)
        if (a->limb[i] != b->limb[i])
            return a->limb[i] < b->limb[i] ? -1 : 1;
    return 0;
}

/* The sign of 2 * c * 2^q * 10^m - h, exactly. */
static int compare_exact(uint32_t c, int q, int m, uint64_t h)
{
    struct big a, b;
    big_set(&a, c);
    big_set(&b, h);
    if (q + 1 >= 0)
        big_shift_left(&a, q + 1);
    else
        big_shift_left(&b, -(q + 1));
    if (m >= 0)
        big_mul_pow10(&a, m);
    else
        big_mul_pow10(&b, -m);
    return big_compare(&a, &b);
}

/* c * 2^q (2^23 <= c < 2^24) rounded to p significant digits, ties to
 * even. */
static struct decimal fixed(uint32_t c, int q, int p)
{
    /* The float lies in [2^(q+23), 2^(q+24)), which holds at most one power
     * of ten: its decimal exponent is est or est + 1, so x = float * 10^m
     * has p or p + 1 digits before the point. */
    const int est = floor_log10_pow2(q + 23);
    const int m = p - 1 - est;
    /* 2x with 28 bits below the point: 2x * 2^28 = c * g * 2^(q + b - 34).
     * The table's g is high by less than 2^-63 relatively, and the
     * product is rounded down: the result is within (-1, 2] of the
     * exact value. */
    const int shift = 34 - q - pow10_b(m);
    assert(shift >= 23 && shift <= 59);
    const uint64_t y = mul_shr(c, pow10_g(m), shift);
    uint64_t twice = y >> 28; /* floor(2x), unless near a multiple */
    int side = 1;             /* x lies above twice / 2 */
    if ((y & 0xFFFFFFF) <= 2) /* just below, at or just above twice / 2 */
        side = compare_exact(c, q, m, twice);

    /* Round x / 10^d to an integer, d = 1 when x has p + 1 digits. Counted
     * in halves of x: a unit is 2 * 10^d of them, its half 10^d. */
    const int d = twice >= 2ull * pow10_u32[p];
    const uint64_t unit = d ? 20 : 2, half = unit / 2;
    uint64_t n = twice / unit;
    const uint64_t rest = twice % unit;
    if (rest > half || (rest == half && (side > 0 || (side == 0 && (n & 1)))))
        n++;
    if (n == pow10_u32[p]) /* 9.99 to 3 digits: 10.0 */
        return (struct decimal){(uint32_t)(n / 10), d - m + 1};
    return (struct decimal){(uint32_t)n, d - m};
}

/* -------------------------------------------------------------- writing */

/* The eight decimal digits of v < 10^8, leading zeros included, one in
 * each byte of the result, the first in the lowest byte: the halves of
 * four digits split into pairs, the pairs into digits, every lane at once
 * (a lane's product never reaches the next lane). x * 10486 >> 20 is x /
 * 100 for x < 10^4, x * 103 >> 10 is x / 10 for x < 100. */
INLINE uint64_t eight_digits(uint32_t v)
{
    uint64_t x = v / 10000 | (uint64_t)(v % 10000) << 32;
    uint64_t q = (x * 10486) >> 20 & 0x0000007F0000007Fu;
    x = q | (x - q * 100) << 16;
    q = (x * 103) >> 10 & 0x000F000F000F000Fu;
    return q | (x - q * 10) << 8;
}

/* The four decimal digits of v < 10^4 in the bytes of a 32-bit word, as
 * eight_digits() lays out eight. */
INLINE uint32_t four_digits(uint32_t v)
{
    uint32_t q = (v * 10486) >> 20;
    const uint32_t x = q | (v - q * 100) << 16;
    q = (x * 103) >> 10 & 0x000F000Fu;
    return q | (x - q * 10) << 8;
}

/* The digits of v (0 < v < 10^9; below 10^4 when four is set) as text at
 * text[0 .. 9), leading zeros included, with '0's after them up to
 * text[24]: returns the index of the first significant digit and sets
 * *trailing to the number of zeros that end v. */
INLINE int nine_digits(uint32_t v, bool four, char text[24], int *trailing)
{
    if (four) { /* v < 10^4, known to the caller: a cheaper split */
        const uint32_t lanes = four_digits(v);
        uint32_t ascii4 = lanes + 0x30303030u;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        ascii4 = __builtin_bswap32(ascii4);
#endif
        memcpy(text, "00000", 5);
        memcpy(text + 5, &ascii4, 4);
        memcpy(text + 9, "000000000000000", 15);
        *trailing = __builtin_clz(lanes) / 8;
        return 5 + __builtin_ctz(lanes) / 8;
    }
    const uint32_t first = v / 100000000;
    const uint64_t rest = eight_digits(v % 100000000);
    uint64_t ascii = rest + 0x3030303030303030u;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    ascii = __builtin_bswap64(ascii); /* the first digit first in memory */
#endif
    text[0] = (char)('0' + first);
    memcpy(text + 1, &ascii, 8);
    memcpy(text + 9, "000000000000000", 15);
    /* a zero digit is a zero byte of rest: those below the first nonzero
     * one lead, those above the last one trail */
    if (!rest) {
        *trailing = 8;
        return 0;
    }
    *trailing = __builtin_clzll(rest) / 8;
    /* 0 when first is nonzero, without a branch: whether it is, is as
     * good as random */
    return (1 + __builtin_ctzll(rest) / 8) & -(int)(first == 0);
}

/* a sign and 16 bytes copied at once, the NUL after 15 of them */
_Static_assert(JSONNUM_MAX >= 1 + 7 + 16, "write_decimal's copies fit");

/* Write v (v.digits > 0; below 10^4 when four is set) in JSON form,
 * without trailing zeros: plain for decimal exponents -5..8, as
 * JavaScript does below 1e21 and Python's repr() above 1e-5, scientific
 * otherwise. At most 15 bytes and the NUL; the fixed-size copies below
 * stay within JSONNUM_MAX. */
INLINE size_t write_decimal(char *out, bool negative, struct decimal v,
                            bool four)
{
    char *o = out;
    if (negative)
        *o++ = '-';
    char text[24];
    int trailing;
    const int lead = nine_digits(v.digits, four, text, &trailing);
    const char *d = text + lead; /* the n significant digits, then '0's */
    const int n = 9 - lead - trailing;
    const int point = v.exp10 + 8 - lead; /* exponent of the first digit */
    int len;
    if (point >= 0 && point < 9) {
        memcpy(o, d, 16);
        if (n <= point + 1) { /* an integer: the digits, then zeros */
            len = point + 1;
        } else { /* the digits, the point after point + 1 of them */
            o[point + 1] = '.';
            memcpy(o + point + 2, d + point + 1, 8);
            len = n + 1;
        }
    } else if (point < 0 && point >= -5) { /* 0.000ddd */
        memcpy(o, "0.00000", 8);
        memcpy(o + 1 - point, d, 16);
        len = 1 - point + n;
    } else { /* d.ddde-7 */
        o[0] = d[0];
        o[1] = '.';
        memcpy(o + 2, d + 1, 8);
        len = n > 1 ? n + 1 : 1;
        o[len++] = 'e';
        int e = point;
        if (e < 0) {
            o[len++] = '-';
            e = -e;
        }
        if (e >= 10) {
            o[len++] = (char)('0' + e / 10);
            e %= 10;
        }
        o[len++] = (char)('0' + e);
    }
    o[len] = '\0';
    return (size_t)(o - out) + (size_t)len;
}

/* jsonnum_format()'s work, inlined into the list's loop as well. */
INLINE size_t format_one(float f, int precision, char *out)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const bool negative = bits >> 31;
    const uint32_t field = (bits >> 23) & 0xFF, fraction = bits & 0x7FFFFF;
    if (field == 0xFF) { /* Inf, NaN */
        memcpy(out, "null", 5);
        return 4;
    }
    if (field == 0 && fraction == 0) { /* a zero keeps its sign */
        size_t n = 0;
        if (negative)
            out[n++] = '-';
        memcpy(out + n, "0", 2);
        return n + 1;
    }
    /* subnormals: c = fraction, q = -149; normals carry the hidden bit */
    uint32_t c = field ? fraction | 0x800000 : fraction;
    int q = field ? (int)field - 150 : -149;
    if (precision == 0) {
        /* Below a power of two the gap halves, except at the smallest
         * normal, whose lower neighbour is a subnormal as far away. */
        const bool irregular = fraction == 0 && field > 1;
        return write_decimal(out, negative, shortest(c, q, irregular), false);
    }
    for (; c < 0x800000; c <<= 1) /* same value, 24 bits */
        q--;
    /* to p <= 4 digits, the digits are below 10^4 */
    return write_decimal(out, negative, fixed(c, q, precision), precision <= 4);
}

size_t jsonnum_format(float f, int precision, char *out)
{
    assert(precision >= 0 && precision <= 9);
    return format_one(f, precision, out);
}

/* What follows a number: a comma, or at the end of a row what the
 * caller writes there. */
INLINE size_t after_number(const struct jsonnum_rows *rows, size_t *col,
                           char *out)
{
    if (++*col < rows->row) {
        *out = ',';
        return 1;
    }
    *col = 0;
    return rows->row_end(rows->context, out);
}

/* A block of eight numbers costs jsonnum_wide.c about what four cost one
 * at a time: fewer are formatted so. */
enum { WIDE_FROM = 4 };

size_t jsonnum_format_rows(const float *values, size_t count, int precision,
                           const struct jsonnum_rows *rows, char *out)
{
    assert(precision >= 0 && precision <= 9);
    assert(rows->row > 0 && rows->col < rows->row);
    if (precision == 0 && count >= WIDE_FROM && jsonnum_wide_available())
        return jsonnum_wide_rows(values, count, rows, out);
    size_t n = 0, col = rows->col;
    /* one loop a form, so that each keeps its state in registers */
    if (precision == 0)
        for (size_t i = 0; i < count; i++) {
            n += format_one(values[i], 0, out + n);
            n += after_number(rows, &col, out + n);
        }
    else
        for (size_t i = 0; i < count; i++) {
            n += format_one(values[i], precision, out + n);
            n += after_number(rows, &col, out + n);
        }
    return n;
}

static size_t end_of_list(void *context, char *out)
{
    (void)context;
    *out = '\0';
    return 0;
}

size_t jsonnum_format_list(const float *values, size_t count, int precision,
                           char *out)
{
    if (!count)
        return 0;
    const struct jsonnum_rows one_row = {.row = count, .row_end = end_of_list};
    return jsonnum_format_rows(values, count, precision, &one_row, out);
}

size_t jsonnum_uint(uint64_t v, char *out)
{
    char digits[20];
    size_t n = 0;
    do
        digits[sizeof digits - ++n] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    memcpy(out, digits + sizeof digits - n, n);
    return n;
}
