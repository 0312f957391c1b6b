/*
 * jsonnum_check.c - the promises of jsonnum_format(), checked from outside
 * (see jsonnum_check.h).
 *
 * Shortest: let the text be D * 10^Z with P significant digits. It reads
 * back as f (strtof). The decimals that read back as f fill an interval
 * around f that holds the text; if one with fewer digits were inside, so
 * would be one of the two (P-1)-digit decimals around the text, so those
 * two must not read back. Likewise a nearer P-digit decimal in the
 * interval means a neighbour D - 1 or D + 1 inside it and nearer than the
 * text: for each neighbour that reads back, f must be on the text's side of
 * the midpoint. That comparison is made in double precision, where f is
 * exact and the midpoint correctly rounded, and exactly (in decimal) when
 * the two are equal there.
 */
#include "jsonnum_check.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool fail(char *why, size_t why_size, const char *text,
                 const char *reason)
{
    snprintf(why, why_size, "\"%s\": %s", text, reason);
    return false;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool jsonnum_check_style(const char *text, struct jsonnum_decimal *d, char *why,
                         size_t why_size)
{
    const char *s = text;
    d->negative = *s == '-';
    if (d->negative)
        s++;
    const char *int_start = s;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (is_digit(*s))
            s++;
    else
        return fail(why, why_size, text, "no integer part");
    const int int_digits = (int)(s - int_start);
    const char *frac_start = s;
    int frac_digits = 0;
    if (*s == '.') {
        frac_start = ++s;
        while (is_digit(*s))
            s++;
        frac_digits = (int)(s - frac_start);
        if (frac_digits == 0 || s[-1] == '0')
            return fail(why, why_size, text, "empty or trailing zeros");
    }
    long x = 0;
    const bool scientific = *s == 'e';
    if (scientific) {
        s++;
        const bool negative = *s == '-';
        if (negative)
            s++;
        if (*s < '1' || *s > '9')
            return fail(why, why_size, text, "bad exponent");
        while (is_digit(*s) && x < 1000)
            x = x * 10 + (*s++ - '0');
        if (negative)
            x = -x;
    }
    if (*s != '\0')
        return fail(why, why_size, text, "trailing characters");

    /* the digits as one integer, the exponent of its last digit */
    uint64_t digits = 0;
    int n = 0;
    for (const char *c = int_start; c < s && *c != 'e'; c++) {
        if (!is_digit(*c))
            continue;
        if (n == 0 && *c == '0')
            continue; /* leading zeros */
        if (++n > 19)
            return fail(why, why_size, text, "too many digits");
        digits = digits * 10 + (uint64_t)(*c - '0');
    }
    int exp10 = (int)x - frac_digits;
    while (digits != 0 && digits % 10 == 0) {
        digits /= 10;
        exp10++;
        n--;
    }
    d->digits = digits;
    d->n_digits = n;
    d->exp10 = exp10;
    if (n > 9)
        return fail(why, why_size, text, "more than 9 significant digits");
    if (digits == 0) {
        if (int_digits != 1 || frac_digits || scientific)
            return fail(why, why_size, text, "a zero not written 0");
        return true;
    }
    const int point = exp10 + n - 1; /* exponent of the first digit */
    if (scientific != (point < -5 || point > 8))
        return fail(why, why_size, text, "wrong notation for its exponent");
    if (scientific && (int_digits != 1 || *int_start == '0'))
        return fail(why, why_size, text, "not one digit before the point");
    return true;
}

/* ------------------------------------------------------ exact decimals */

/* Integers in base 10^9, least significant limb first: as large as
 * 2^150 * 10^46 * 2^35, with room. */
#define DEC_LIMBS 16
#define DEC_BASE 1000000000u
struct dec {
    uint32_t limb[DEC_LIMBS];
};

static void dec_set(struct dec *a, uint64_t v)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; v; i++) {
        a->limb[i] = (uint32_t)(v % DEC_BASE);
        v /= DEC_BASE;
    }
}

static void dec_mul(struct dec *a, uint32_t m) /* m <= 2^30 */
{
    uint64_t carry = 0;
    for (int i = 0; i < DEC_LIMBS; i++) {
        const uint64_t t = (uint64_t)a->limb[i] * m + carry;
        a->limb[i] = (uint32_t)(t % DEC_BASE);
        carry = t / DEC_BASE;
    }
    assert(carry == 0);
}

static void dec_mul_pow2(struct dec *a, int n)
{
    for (; n >= 30; n -= 30)
        dec_mul(a, 1u << 30);
    dec_mul(a, 1u << n);
}

static void dec_mul_pow10(struct dec *a, int n)
{
    const int limbs = n / 9;
    for (int i = DEC_LIMBS - limbs; i < DEC_LIMBS; i++)
        assert(a->limb[i] == 0); /* nothing is shifted out */
    memmove(a->limb + limbs, a->limb,
            (DEC_LIMBS - (size_t)limbs) * sizeof a->limb[0]);
    memset(a->limb, 0, (size_t)limbs * sizeof a->limb[0]);
    for (int i = 0; i < n % 9; i++)
        dec_mul(a, 10);
}

static int dec_compare(const struct dec *a, const struct dec *b)
{
    for (int i = DEC_LIMBS - 1; i >= 0; i--)
        if (a->limb[i] != b->limb[i])
            return a->limb[i] < b->limb[i] ? -1 : 1;
    return 0;
}

/* The sign of 2|f| - a * 10^y, exactly. */
static int compare_twice(float f, uint64_t a, int y)
{
    int q;
    const float m = frexpf(fabsf(f), &q); /* |f| = m * 2^q, 1/2 <= m < 1 */
    const uint64_t c = (uint64_t)ldexpf(m, 24);
    q -= 24 - 1; /* 2|f| = c * 2^q */
    struct dec left, right;
    dec_set(&left, c);
    dec_set(&right, a);
    if (q >= 0)
        dec_mul_pow2(&left, q);
    else
        dec_mul_pow2(&right, -q);
    if (y >= 0)
        dec_mul_pow10(&right, y);
    else
        dec_mul_pow10(&left, -y);
    return dec_compare(&left, &right);
}

/* The same in double precision where that decides it. */
static int compare_twice_fast(float f, uint64_t a, int y)
{
    char s[48];
    snprintf(s, sizeof s, "%llue%d", (unsigned long long)a, y);
    const double twice = 2.0 * fabs((double)f), mid = strtod(s, NULL);
    if (twice != mid)
        return twice < mid ? -1 : 1;
    return compare_twice(f, a, y);
}

/* ------------------------------------------------------------- checks */

/* Does (-1)^negative * m * 10^e read back as f? */
static bool reads_back(float f, bool negative, uint64_t m, int e)
{
    char s[48], *p = s + sizeof s;
    *--p = '\0';
    const bool neg_e = e < 0;
    unsigned u = (unsigned)(neg_e ? -e : e);
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (neg_e)
        *--p = '-';
    *--p = 'e';
    do
        *--p = (char)('0' + m % 10);
    while (m /= 10);
    if (negative)
        *--p = '-';
    const float back = strtof(p, NULL);
    return memcmp(&back, &f, sizeof f) == 0;
}

static bool is_pow10(uint64_t m)
{
    while (m % 10 == 0 && m > 1)
        m /= 10;
    return m == 1;
}

bool jsonnum_check_shortest(float f, const char *text, char *why,
                            size_t why_size)
{
    if (!isfinite(f))
        return strcmp(text, "null") == 0 ||
               fail(why, why_size, text, "not null for a non-finite value");
    struct jsonnum_decimal d;
    if (!jsonnum_check_style(text, &d, why, why_size))
        return false;
    const float back = strtof(text, NULL);
    if (memcmp(&back, &f, sizeof f) != 0)
        return fail(why, why_size, text, "does not read back");
    if (f == 0.0f)
        return true;
    const uint64_t D = d.digits;
    const int Z = d.exp10;
    const bool neg = d.negative;
    if (d.n_digits > 1 && (reads_back(f, neg, D / 10, Z + 1) ||
                           reads_back(f, neg, D / 10 + 1, Z + 1)))
        return fail(why, why_size, text, "fewer digits read back");
    /* the neighbour above; the midpoint to it is (2D + 1) * 10^Z / 2 */
    if (reads_back(f, neg, D + 1, Z)) {
        const int s = compare_twice_fast(f, 2 * D + 1, Z);
        if (s > 0 || (s == 0 && D % 2))
            return fail(why, why_size, text, "the decimal above is nearer");
    }
    /* below, on the same grid unless D is a power of ten */
    const bool pow10 = is_pow10(D);
    const uint64_t below = pow10 ? 10 * D - 1 : D - 1;
    const int below_exp = pow10 ? Z - 1 : Z;
    if (reads_back(f, neg, below, below_exp)) {
        const int s = pow10 ? compare_twice_fast(f, 20 * D - 1, Z - 1)
                            : compare_twice_fast(f, 2 * D - 1, Z);
        if (s < 0 || (s == 0 && D % 2))
            return fail(why, why_size, text, "the decimal below is nearer");
    }
    return true;
}

bool jsonnum_check_fixed(float f, int p, const char *text, char *why,
                         size_t why_size)
{
    if (!isfinite(f))
        return strcmp(text, "null") == 0 ||
               fail(why, why_size, text, "not null for a non-finite value");
    struct jsonnum_decimal d;
    if (!jsonnum_check_style(text, &d, why, why_size))
        return false;
    char ref[64];
    snprintf(ref, sizeof ref, "%.*e", p - 1, (double)f);
    const double ours = strtod(text, NULL), theirs = strtod(ref, NULL);
    if (ours != theirs || !signbit(ours) != !signbit(theirs)) {
        char reason[96];
        snprintf(reason, sizeof reason, "%.9g at %d digits is %s", (double)f, p,
                 ref);
        return fail(why, why_size, text, reason);
    }
    if (d.n_digits > p)
        return fail(why, why_size, text, "more digits than asked for");
    return true;
}
