/*
 * jsonnum.c - float32 to JSON text: the shortest decimal that reads back as
 * the same float (as JavaScript and Python print numbers), or a fixed
 * number of significant digits.
 *
 * Candidates come from double arithmetic, one per digit count, and are
 * accepted only when strtof() (correctly rounded) reads them back as the
 * same float, so the output always round-trips; nine digits always do.
 * No snprintf on the hot path: a weights array can hold millions of floats.
 */
#include "jsonnum.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 10^k for k in [-60, 60], each the double nearest to it. */
static const double pow10_table[] = {
    1e-60, 1e-59, 1e-58, 1e-57, 1e-56, 1e-55, 1e-54, 1e-53, 1e-52, 1e-51, 1e-50,
    1e-49, 1e-48, 1e-47, 1e-46, 1e-45, 1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39,
    1e-38, 1e-37, 1e-36, 1e-35, 1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29, 1e-28,
    1e-27, 1e-26, 1e-25, 1e-24, 1e-23, 1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17,
    1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9,  1e-8,  1e-7,  1e-6,
    1e-5,  1e-4,  1e-3,  1e-2,  1e-1,  1e0,   1e1,   1e2,   1e3,   1e4,   1e5,
    1e6,   1e7,   1e8,   1e9,   1e10,  1e11,  1e12,  1e13,  1e14,  1e15,  1e16,
    1e17,  1e18,  1e19,  1e20,  1e21,  1e22,  1e23,  1e24,  1e25,  1e26,  1e27,
    1e28,  1e29,  1e30,  1e31,  1e32,  1e33,  1e34,  1e35,  1e36,  1e37,  1e38,
    1e39,  1e40,  1e41,  1e42,  1e43,  1e44,  1e45,  1e46,  1e47,  1e48,  1e49,
    1e50,  1e51,  1e52,  1e53,  1e54,  1e55,  1e56,  1e57,  1e58,  1e59,  1e60};

static double pow10i(int k)
{
    return k >= -60 && k <= 60 ? pow10_table[k + 60] : pow(10.0, k);
}

static const uint32_t pow10_u32[10] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

/* Write digits (no trailing zeros) of a number d.ddd x 10^exp10 in JSON
 * form: plain for exponents -5..8, scientific otherwise. */
static size_t write_decimal(char *out, bool negative, uint32_t digits,
                            int n_digits, int exp10)
{
    while (n_digits > 1 && digits % 10 == 0) {
        digits /= 10;
        n_digits--;
    }
    char d[10];
    for (int i = n_digits - 1; i >= 0; i--) {
        d[i] = (char)('0' + digits % 10);
        digits /= 10;
    }
    size_t n = 0;
    if (negative)
        out[n++] = '-';
    if (exp10 >= 0 && exp10 < 9) {
        for (int i = 0; i <= exp10; i++)
            out[n++] = i < n_digits ? d[i] : '0';
        if (n_digits > exp10 + 1) {
            out[n++] = '.';
            for (int i = exp10 + 1; i < n_digits; i++)
                out[n++] = d[i];
        }
    } else if (exp10 < 0 && exp10 >= -5) {
        out[n++] = '0';
        out[n++] = '.';
        for (int i = -1; i > exp10; i--)
            out[n++] = '0';
        for (int i = 0; i < n_digits; i++)
            out[n++] = d[i];
    } else {
        out[n++] = d[0];
        if (n_digits > 1) {
            out[n++] = '.';
            for (int i = 1; i < n_digits; i++)
                out[n++] = d[i];
        }
        out[n++] = 'e';
        int e = exp10;
        if (e < 0) {
            out[n++] = '-';
            e = -e;
        }
        if (e >= 10)
            out[n++] = (char)('0' + e / 10);
        out[n++] = (char)('0' + e % 10);
    }
    out[n] = '\0';
    return n;
}

size_t jsonnum_format(float f, int precision, char *out)
{
    if (!isfinite(f)) {
        memcpy(out, "null", 5);
        return 4;
    }
    const bool negative = signbit(f);
    if (f == 0.0f)
        return write_decimal(out, negative, 0, 1, 0);
    const double d = fabs((double)f);
    int exp10 = (int)floor(log10(d));
    if (pow10i(exp10) > d)
        exp10--;
    else if (pow10i(exp10 + 1) <= d)
        exp10++;
    /* Half the gaps to the neighbouring floats: decimals strictly inside
     * read back as f. The gap below is half the one above at powers of
     * two; past FLT_MAX there is no float above. */
    const float a = fabsf(f);
    const double gap_lo = 0.5 * ((double)a - (double)nextafterf(a, 0.0f));
    const float up = nextafterf(a, INFINITY);
    const double gap_hi = isinf(up) ? gap_lo : 0.5 * ((double)up - (double)a);
    const double inside = (gap_lo < gap_hi ? gap_lo : gap_hi) * 0.999999;
    const double outside = (gap_lo > gap_hi ? gap_lo : gap_hi) * 1.000001;

    const int first = precision ? precision : 1;
    const int last = precision ? precision : 9;
    for (int p = first; p <= last; p++) {
        const int shift = p - 1 - exp10;
        const double scaled = d * pow10i(shift);
        uint32_t digits = (uint32_t)rint(scaled); /* ties to even, as printf */
        int e = exp10;
        if (digits >= pow10_u32[p]) { /* rounded up to 10^p */
            digits /= 10;
            e++;
        }
        if (precision || p == 9) /* nine digits always read back */
            return write_decimal(out, negative, digits, p, e);
        /* Does the decimal read back as f? Its distance from f, in double,
         * is off by far less than the margin; only a candidate within the
         * margin of the half-ulp boundary needs strtof()'s exact answer. */
        const double off = fabs((double)digits * pow10i(e - (p - 1)) - d);
        if (off > outside)
            continue;
        const size_t len = write_decimal(out, negative, digits, p, e);
        if (off < inside || strtof(out, NULL) == f)
            return len;
    }
    return 0; /* not reached: nine digits return above */
}
