/*
 * test_jsonnum.c - float formatting on chosen edge cases and millions of
 * random floats, against two references of its own: a search over lengths
 * on glibc's correctly rounded snprintf and strtof (below), and the checks
 * `make jsonnum-exhaustive` runs on every float (jsonnum_check.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "attention.h"
#include "jsonnum.h"
#include "jsonnum_check.h"
#include "jsonnum_wide.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static float from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static bool same_float(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* -------------------------------------------------------- the reference */

/* m * 10^e as a double (correctly rounded by strtod). */
static double decimal_value(uint64_t m, int e)
{
    char s[48];
    snprintf(s, sizeof s, "%llue%d", (unsigned long long)m, e);
    return strtod(s, NULL);
}

static bool reads_back(float f, uint64_t m, int e)
{
    char s[48];
    snprintf(s, sizeof s, "%s%llue%d", signbit(f) ? "-" : "",
             (unsigned long long)m, e);
    return same_float(strtof(s, NULL), f);
}

/* Is there a decimal of at most p significant digits that reads back as
 * f (nonzero, finite)? If so, *m * 10^*e is the nearest such to f. Only
 * the two p-digit decimals around f can be the answer: the nearest one
 * (snprintf's, ties to even), and the one on the far side of f, which
 * reads back when the nearest does not at a power of two, where the
 * interval that reads back as f reaches twice as far up as down. */
static bool decimal_at(float f, int p, uint64_t *m, int *e)
{
    char s[64];
    snprintf(s, sizeof s, "%.*e", p - 1, fabs((double)f));
    uint64_t digits = 0;
    const char *c = s;
    for (; *c != 'e'; c++)
        if (*c >= '0' && *c <= '9')
            digits = digits * 10 + (uint64_t)(*c - '0');
    const int x = (int)strtol(c + 1, NULL, 10);
    *m = digits;
    *e = x - (p - 1);
    if (reads_back(f, *m, *e))
        return true;
    if (decimal_value(*m, *e) < fabs((double)f)) {
        ++*m;
    } else if (*m == (uint64_t)pow(10, p - 1)) { /* 1.00e5 to 9.99e4 */
        *m = *m * 10 - 1;
        --*e;
    } else {
        --*m;
    }
    return reads_back(f, *m, *e);
}

/* Significant digits in a JSON number, trailing zeros of an integer not
 * counted (100 has one). */
static int significant_digits(const char *s)
{
    int n = 0, leading = 1, trailing_zeros = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9')
            continue;
        if (*s == '0' && leading)
            continue;
        leading = 0;
        n++;
        trailing_zeros = *s == '0' ? trailing_zeros + 1 : 0;
    }
    return n - trailing_zeros > 0 ? n - trailing_zeros : 1;
}

/* ------------------------------------------------------------- checks */

/* f's shortest text, checked by jsonnum_check.c and, when search is set,
 * by the search too. */
static void check_shortest(float f, bool search)
{
    char out[JSONNUM_MAX], why[160];
    const size_t len = jsonnum_format(f, 0, out);
    assert_int_equal(len, strlen(out));
    assert_true(len < JSONNUM_MAX);
    if (!jsonnum_check_shortest(f, out, why, sizeof why))
        fail_msg("%.9g: %s", (double)f, why);
    if (f == 0.0f || !search)
        return;
    /* the search: the fewest digits at which a decimal reads back, and the
     * nearest such */
    const int p = significant_digits(out);
    uint64_t m;
    int e;
    if (p > 1 && decimal_at(f, p - 1, &m, &e))
        fail_msg("%.9g printed as %s; %llue%d reads back", (double)f, out,
                 (unsigned long long)m, e);
    assert_true(decimal_at(f, p, &m, &e));
    if (strtod(out, NULL) != (signbit(f) ? -1 : 1) * decimal_value(m, e))
        fail_msg("%.9g printed as %s; %llue%d is nearer", (double)f, out,
                 (unsigned long long)m, e);
}

static void check_one(float f)
{
    check_shortest(f, true);
}

static void check_fixed(float f, int p)
{
    char out[JSONNUM_MAX], why[160];
    const size_t len = jsonnum_format(f, p, out);
    assert_int_equal(len, strlen(out));
    if (!jsonnum_check_fixed(f, p, out, why, sizeof why))
        fail_msg("%s", why);
}

static void expect(float f, int precision, const char *text)
{
    char out[JSONNUM_MAX];
    jsonnum_format(f, precision, out);
    if (strcmp(out, text) != 0)
        fail_msg("%.9g at precision %d: %s, expected %s", (double)f, precision,
                 out, text);
}

/* -------------------------------------------------------------- tests */

static void test_special_values(void **state)
{
    (void)state;
    expect(0.0f, 0, "0");
    expect(-0.0f, 0, "-0");
    expect(0.1f, 0, "0.1");
    expect(1.0f, 0, "1");
    expect(3.0f, 0, "3");
    expect(100.0f, 0, "100");
    expect(1e10f, 0, "1e10");
    expect(1e20f, 0, "1e20");
    expect(1.5e-7f, 0, "1.5e-7");
    expect(0.000123f, 0, "0.000123");
    expect(-2.5f, 0, "-2.5");
    expect(1.0f / 3.0f, 0, "0.33333334");
    expect(NAN, 0, "null");
    expect(INFINITY, 0, "null");
    expect(-INFINITY, 3, "null");
    expect(1.0f / 3.0f, 3, "0.333");
    expect(123456.0f, 2, "120000");
    expect(0.99999f, 2, "1");
    expect(-0.0f, 4, "-0");
    const float specials[] = {
        1.17549435e-38f, 1.4e-45f, 3.40282347e38f, 16777216.0f, 16777215.0f,
        9.999999e-6f,    1e-5f,    123456789.0f,   0.3f,        2.3283064e-10f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        check_one(specials[i]);
        check_one(-specials[i]);
    }
}

/* Where the text's form changes, the extremes, and the lopsided and tied
 * cases of the shortest form. */
static void test_edges(void **state)
{
    (void)state;
    expect(from_bits(1), 0, "1e-45");                  /* smallest */
    expect(from_bits(0x007FFFFF), 0, "1.1754942e-38"); /* largest subnormal */
    expect(from_bits(0x00800000), 0, "1.1754944e-38"); /* smallest normal */
    expect(from_bits(0x7F7FFFFF), 0, "3.4028235e38");  /* largest */
    expect(-from_bits(0x7F7FFFFF), 0, "-3.4028235e38");
    expect(1e-5f, 0, "0.00001");
    expect(9.999999e-6f, 0, "9.999999e-6");
    expect(1.2345e-5f, 0, "0.000012345");
    expect(1e8f, 0, "100000000");
    expect(123456789.0f, 0, "123456790");
    expect(999999936.0f, 0, "999999940");
    expect(1e9f, 0, "1e9");
    expect(16777216.0f, 0, "16777216");
    expect(16777218.0f, 0, "16777218");
    /* 2^-96: the interval reaches twice as far up as down, and only the
     * decimal above, not the nearest, has 8 digits */
    expect(ldexpf(1.0f, -96), 0, "1.2621775e-29");
    /* 2^20 + 1/4: 1048576.2 and 1048576.3 both read back, equally near */
    expect(1048576.25f, 0, "1048576.2");
    expect(1048576.75f, 0, "1048576.8");
    /* the nearest of several 9-digit decimals that read back */
    expect(33554436.0f, 0, "33554436");
}

/* Powers of two: the gap below is half the gap above. Every exponent of a
 * float comes by, in both forms of its interval. */
static void test_powers_of_two(void **state)
{
    (void)state;
    for (int k = -149; k <= 127; k++) {
        const float f = ldexpf(1.0f, k);
        check_one(f);
        check_one(nextafterf(f, 0.0f));
        check_one(nextafterf(f, INFINITY));
    }
    check_one(3.40282347e38f);
}

/* Powers of ten print as one digit; their neighbours need many. */
static void test_powers_of_ten(void **state)
{
    (void)state;
    for (int k = -45; k <= 38; k++) {
        char s[16], out[JSONNUM_MAX];
        snprintf(s, sizeof s, "1e%d", k);
        const float f = strtof(s, NULL);
        jsonnum_format(f, 0, out);
        assert_int_equal(significant_digits(out), 1);
        assert_true(out[0] == '1' || (out[0] == '0' && out[1] == '.'));
        check_one(f);
        check_one(nextafterf(f, 0.0f));
        check_one(nextafterf(f, INFINITY));
        for (int p = 1; p <= 9; p++) {
            check_fixed(f, p);
            check_fixed(nextafterf(f, 0.0f), p);
            check_fixed(nextafterf(f, INFINITY), p);
        }
    }
}

/* Four million patterns, one in 16 also against the search (slower). */
static void test_random_bit_patterns(void **state)
{
    (void)state;
    const uint64_t key = attn_stream_key(1, "jsonnum", 7);
    for (uint64_t i = 0; i < 4000000; i++) {
        const float f = from_bits((uint32_t)attn_stream_draw(key, i));
        if (isfinite(f))
            check_shortest(f, i % 16 == 0);
        else
            expect(f, 0, "null");
    }
}

static void test_weights_range(void **state)
{
    (void)state;
    /* the values a response is made of: probabilities and activations */
    const uint64_t key = attn_stream_key(2, "jsonnum", 7);
    for (uint64_t i = 0; i < 1000000; i++) {
        const double u = (double)(attn_stream_draw(key, i) >> 11) * 0x1.0p-53;
        check_shortest((float)u, i % 16 == 0);
        check_shortest((float)((u - 0.5) * 8.0), i % 16 == 0);
    }
}

/* A list is its numbers' texts joined by commas, at every precision:
 * zeros of both signs, non-finite values, subnormals, the ends of the
 * plain form, and random bit patterns; a list of none writes nothing. */
static void test_list_is_joined_numbers(void **state)
{
    (void)state;
    enum { COUNT = 64 };
    float values[COUNT] = {0.0f,      -0.0f,   NAN,          INFINITY,
                           -INFINITY, 1e-45f,  1e-5f,        9.9e-6f,
                           1e8f,      1e9f,    0.1f,         1.0f / 3,
                           -2.5f,     3.4e38f, 123456789.0f, 0.34600133f};
    const uint64_t key = attn_stream_key(3, "jsonnum", 7);
    for (size_t i = 16; i < COUNT; i++)
        values[i] = from_bits((uint32_t)attn_stream_draw(key, i));
    char list[COUNT * JSONNUM_MAX], joined[COUNT * JSONNUM_MAX];
    for (int p = 0; p <= 9; p++)
        for (size_t count = 0; count <= COUNT; count++) {
            size_t n = 0;
            for (size_t i = 0; i < count; i++) {
                if (i)
                    joined[n++] = ',';
                n += jsonnum_format(values[i], p, joined + n);
            }
            memset(list, 'x', sizeof list);
            assert_int_equal(jsonnum_format_list(values, count, p, list), n);
            assert_memory_equal(list, joined, n);
            if (count)
                assert_int_equal(list[n], '\0');
            else
                assert_int_equal(list[0], 'x');
        }
}

/* jsonnum_wide_rows() with no row ending: a comma after every number */
static size_t wide_list(const float *values, size_t count, char *out)
{
    const struct jsonnum_rows no_end = {.row = SIZE_MAX};
    return jsonnum_wide_rows(values, count, &no_end, out);
}

/* wide_list() writes what jsonnum_format() writes, comma after comma
 * (wide and joined: room for count * JSONNUM_MAX bytes each) */
static void expect_wide_list(const float *values, size_t count, char *wide,
                             char *joined)
{
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        n += jsonnum_format(values[i], 0, joined + n);
        joined[n++] = ',';
    }
    assert_int_equal(wide_list(values, count, wide), n);
    assert_memory_equal(wide, joined, n);
}

/* The AVX-512 way writes what jsonnum_format() writes, comma after
 * comma, for every kind of float it meets in blocks of eight: each sign
 * with every count of digits at every decimal exponent from 1e-7 to 1e10
 * (each shuffle and length, and the scientific forms set aside), the
 * floats next to the plain form's ends and to powers of ten and two,
 * zeros, subnormals, non-finite values, probabilities, and any bit
 * pattern. */
static void test_wide_list_is_joined_numbers(void **state)
{
    (void)state;
    if (!jsonnum_wide_available())
        skip(); /* this CPU has no AVX-512: jsonnum_format_list() loops */
    enum { COUNT = 1 << 16, ROUNDS = 24 };
    static float values[COUNT];
    static char wide[COUNT * JSONNUM_MAX], joined[COUNT * JSONNUM_MAX];
    const uint64_t key = attn_stream_key(5, "jsonnum wide", 11);
    uint64_t draw = 0;
    for (int round = 0; round < ROUNDS; round++) {
        size_t count = 0;
        static const float ends[] = {1e-5f, 1e9f,        1.0f,      1e-7f,
                                     1e8f,  FLT_MIN,     FLT_MAX,   1e-45f,
                                     0.0f,  -0.0f,       INFINITY,  -INFINITY,
                                     NAN,   0.34600133f, 999999.94f};
        for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
            values[count++] = ends[i];
            values[count++] = nextafterf(ends[i], 0.0f);
            values[count++] = nextafterf(ends[i], INFINITY);
        }
        for (int e = -45; e <= 38 && count < COUNT / 2; e++) {
            const float power = (float)pow(10.0, e);
            values[count++] = power;
            values[count++] = -nextafterf(power, INFINITY);
            values[count++] = ldexpf(1.0f, e * 3); /* irregular intervals */
        }
        while (count < COUNT) {
            const uint64_t r = attn_stream_draw(key, draw++);
            const double u = (double)(r >> 11) * 0x1.0p-53;
            const int digits = 1 + (int)(r % 9), e = -7 + (int)(r / 9 % 18);
            float f;
            switch (r / 162 % 4) {
            case 0: /* `digits` significant digits from 10^e */
                f = (float)((double)(uint64_t)(u * pow(10.0, digits)) *
                            pow(10.0, e - digits + 1));
                break;
            case 1: f = (float)u; break;
            case 2: f = (float)((u - 0.5) * 8.0); break;
            default: f = from_bits((uint32_t)(r >> 32)); break;
            }
            values[count++] = (r >> 63) ? -f : f;
        }
        expect_wide_list(values, COUNT, wide, joined);
    }
    /* lists of any length: a last block of fewer than eight floats is
     * read no further than its last, which ends a page the next of which
     * may not be read */
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *two_pages;
    assert_int_equal(posix_memalign(&two_pages, page, 2 * page), 0);
    char *pages = two_pages;
    assert_int_equal(mprotect(pages + page, page, PROT_NONE), 0);
    for (size_t count = 0; count <= 70; count++) {
        float *from = (float *)(void *)(pages + page) - count;
        memcpy(from, values + COUNT - count, count * sizeof *from);
        expect_wide_list(from, count, wide, joined);
    }
    assert_int_equal(mprotect(pages + page, page, PROT_READ | PROT_WRITE), 0);
    free(two_pages);
}

/* A row's end for the tests: "]", a letter that counts the ends, "[". */
static size_t mark_row_end(void *context, char *out)
{
    size_t *ends = context;
    out[0] = ']';
    out[1] = (char)('a' + *ends % 26);
    out[2] = '[';
    ++*ends;
    return 3;
}

/* Rows: each number followed by a comma, or at a row's end by what the
 * caller writes, in its turn; rows of every length from one, starting
 * anywhere in a row, each way of formatting (eight at a time in the
 * shortest form, from four numbers on, where the CPU can). */
static void test_rows_are_joined_numbers(void **state)
{
    (void)state;
    enum { COUNT = 200 };
    float values[COUNT];
    const uint64_t key = attn_stream_key(9, "jsonnum rows", 3);
    for (size_t i = 0; i < COUNT; i++) {
        const uint64_t r = attn_stream_draw(key, i);
        values[i] = i % 3 ? (float)((double)(r >> 11) * 0x1.0p-53)
                          : from_bits((uint32_t)r);
    }
    static char rows_text[COUNT * (JSONNUM_MAX + JSONNUM_ROW_END_MAX)],
        joined[COUNT * (JSONNUM_MAX + JSONNUM_ROW_END_MAX)];
    static const size_t lengths[] = {1, 2, 3, 5, 8, 9, 16, 17, 64, 500};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (int p = 0; p <= 9; p += 3)
            for (size_t count = 0; count <= COUNT;
                 count += count < 20 ? 1 : 45) {
                const size_t row = lengths[l], col = count % row;
                size_t ends = 0, expected_ends = 0, n = 0;
                for (size_t i = 0, at = col; i < count; i++) {
                    n += jsonnum_format(values[i], p, joined + n);
                    if (++at < row) {
                        joined[n++] = ',';
                        continue;
                    }
                    at = 0;
                    n += mark_row_end(&expected_ends, joined + n);
                }
                const struct jsonnum_rows rows = {.row = row,
                                                  .col = col,
                                                  .row_end = mark_row_end,
                                                  .context = &ends};
                assert_int_equal(
                    jsonnum_format_rows(values, count, p, &rows, rows_text), n);
                assert_memory_equal(rows_text, joined, n);
                assert_int_equal(ends, expected_ends);
            }
}

/* Rounding to p digits: carries into a new digit, and exact ties, which
 * go to the even digit as printf's do. */
static void test_fixed_precision_edges(void **state)
{
    (void)state;
    expect(9.99f, 2, "10");
    expect(9.99f, 3, "9.99");
    expect(9.999999f, 3, "10");
    expect(0.0999999f, 2, "0.1");
    expect(99999.99f, 5, "100000");
    expect(999999.94f, 6, "1000000");
    expect(999999936.0f, 6, "1e9");
    expect(-9.96f, 2, "-10");
    expect(0.125f, 2, "0.12");
    expect(0.375f, 2, "0.38");
    expect(2.5f, 1, "2");
    expect(3.5f, 1, "4");
    expect(-2.5f, 1, "-2");
    expect(1048576.25f, 8, "1048576.2");
    expect(1048576.75f, 8, "1048576.8");
    expect(1048576.25f, 9, "1048576.25");
    expect(1.0f, 1, "1");
    expect(1.0f, 9, "1");
    expect(3.0f, 9, "3");
    expect(0.5f, 1, "0.5");
    expect(from_bits(0x7F7FFFFF), 1, "3e38");
    expect(from_bits(0x7F7FFFFF), 9, "3.40282347e38");
    expect(from_bits(1), 9, "1.40129846e-45");
    expect(from_bits(1), 1, "1e-45");
    expect(from_bits(0x007FFFFF), 3, "1.18e-38");
}

static void test_fixed_precision_matches_printf(void **state)
{
    (void)state;
    const uint64_t key = attn_stream_key(3, "jsonnum", 7);
    for (uint64_t i = 0; i < 150000; i++) {
        const float f = from_bits((uint32_t)attn_stream_draw(key, i));
        if (!isfinite(f))
            continue;
        for (int p = 1; p <= 9; p++)
            check_fixed(f, p);
    }
}

/* Short binary fractions i / 2^j are often exactly half-way between two
 * p-digit decimals, which only the exact comparison can settle. */
static void test_fixed_precision_ties(void **state)
{
    (void)state;
    for (int j = 0; j <= 12; j += 3)
        for (int i = 1; i < 20000; i += 7) {
            const float f = ldexpf((float)i, -j);
            for (int p = 1; p <= 9; p++) {
                check_fixed(f, p);
                check_fixed(ldexpf(f, 40), p);
            }
        }
}

/* The checks of jsonnum_check.c, which the exhaustive run relies on, turn
 * down texts that are wrong in each way. */
static void test_checker_rejects(void **state)
{
    (void)state;
    char why[160];
    struct {
        float f;
        const char *text;
    } shortest_wrong[] = {
        {0.1f, "0.100000001"},                 /* reads back, not shortest */
        {0.1f, "0.2"},                         /* does not read back */
        {-0.0f, "0"},                          /* sign lost */
        {ldexpf(1.0f, -96), "1.26217745e-29"}, /* 8 digits do */
        {1048576.25f, "1048576.3"},            /* a tie, to the odd digit */
        {33554436.0f, "33554435"}, /* reads back, 33554436 is nearer */
        {1e10f, "10000000000"},    /* plain above 1e9 */
        {1e-6f, "0.000001"},       /* plain below 1e-5 */
        {1.5f, "1.50"},            /* trailing zero */
        {1.5f, "+1.5"},
        {100.0f, "1e2"},
        {1e20f, "1e+20"},
        {1e20f, "1E20"},
        {1e-7f, "1e-07"},
        {NAN, "0"},
        {1.0f, "null"},
    };
    for (size_t i = 0; i < sizeof shortest_wrong / sizeof shortest_wrong[0];
         i++)
        if (jsonnum_check_shortest(shortest_wrong[i].f, shortest_wrong[i].text,
                                   why, sizeof why))
            fail_msg("%s passed for %.9g", shortest_wrong[i].text,
                     (double)shortest_wrong[i].f);
    assert_true(
        jsonnum_check_shortest(1048576.25f, "1048576.2", why, sizeof why));
    assert_false(jsonnum_check_fixed(0.125f, 2, "0.13", why, sizeof why));
    assert_false(jsonnum_check_fixed(9.99f, 2, "9.9", why, sizeof why));
    assert_false(jsonnum_check_fixed(123.0f, 2, "123", why, sizeof why));
    assert_false(jsonnum_check_fixed(-2.5f, 1, "2", why, sizeof why));
    assert_true(jsonnum_check_fixed(0.125f, 2, "0.12", why, sizeof why));
}

/* Unsigned integers: every length, no NUL, the largest there is. */
static void test_uint(void **state)
{
    (void)state;
    const struct {
        uint64_t v;
        const char *text;
    } cases[] = {{0, "0"},
                 {9, "9"},
                 {10, "10"},
                 {1234567, "1234567"},
                 {UINT64_MAX, "18446744073709551615"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[21];
        memset(out, 'x', sizeof out);
        const size_t n = jsonnum_uint(cases[i].v, out);
        assert_int_equal(n, strlen(cases[i].text));
        assert_memory_equal(out, cases[i].text, n);
        assert_int_equal(out[n], 'x');
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_powers_of_two),
        cmocka_unit_test(test_powers_of_ten),
        cmocka_unit_test(test_random_bit_patterns),
        cmocka_unit_test(test_weights_range),
        cmocka_unit_test(test_list_is_joined_numbers),
        cmocka_unit_test(test_wide_list_is_joined_numbers),
        cmocka_unit_test(test_rows_are_joined_numbers),
        cmocka_unit_test(test_fixed_precision_edges),
        cmocka_unit_test(test_fixed_precision_matches_printf),
        cmocka_unit_test(test_fixed_precision_ties),
        cmocka_unit_test(test_checker_rejects),
        cmocka_unit_test(test_uint),
    };
    return cmocka_run_group_tests_name("jsonnum", tests, NULL, NULL);
}
