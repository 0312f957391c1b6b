/*
 * test_jsonnum.c - float formatting against snprintf/strtof by brute force.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "attention.h"
#include "jsonnum.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fewest %g digits that read back as f. */
static int shortest_digits(float f)
{
    char s[64];
    for (int p = 1; p <= 9; p++) {
        snprintf(s, sizeof s, "%.*g", p, (double)f);
        if (strtof(s, NULL) == f)
            return p;
    }
    return 9;
}

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

static void check_one(float f)
{
    char out[JSONNUM_MAX];
    const size_t len = jsonnum_format(f, 0, out);
    assert_int_equal(len, strlen(out));
    assert_true(len < JSONNUM_MAX);
    const float back = strtof(out, NULL);
    if (memcmp(&back, &f, sizeof f) != 0)
        fail_msg("%.9g printed as %s reads back as %.9g", (double)f, out,
                 (double)back);
    if (significant_digits(out) != shortest_digits(f))
        fail_msg("%.9g printed as %s; %d digits suffice", (double)f, out,
                 shortest_digits(f));
    /* JSON grammar: no leading '+', no leading zeros, no bare '.' */
    assert_true(out[0] == '-' || (out[0] >= '0' && out[0] <= '9'));
    assert_null(strchr(out, '+'));
}

static void test_special_values(void **state)
{
    (void)state;
    char out[JSONNUM_MAX];
    jsonnum_format(0.0f, 0, out);
    assert_string_equal(out, "0");
    jsonnum_format(-0.0f, 0, out);
    assert_string_equal(out, "-0");
    jsonnum_format(0.1f, 0, out);
    assert_string_equal(out, "0.1");
    jsonnum_format(1.0f, 0, out);
    assert_string_equal(out, "1");
    jsonnum_format(100.0f, 0, out);
    assert_string_equal(out, "100");
    jsonnum_format(1e10f, 0, out);
    assert_string_equal(out, "1e10");
    jsonnum_format(1.5e-7f, 0, out);
    assert_string_equal(out, "1.5e-7");
    jsonnum_format(0.000123f, 0, out);
    assert_string_equal(out, "0.000123");
    jsonnum_format(-2.5f, 0, out);
    assert_string_equal(out, "-2.5");
    jsonnum_format(1.0f / 3.0f, 0, out);
    assert_string_equal(out, "0.33333334");
    jsonnum_format(NAN, 0, out);
    assert_string_equal(out, "null");
    jsonnum_format(1.0f / 3.0f, 3, out);
    assert_string_equal(out, "0.333");
    jsonnum_format(123456.0f, 2, out);
    assert_string_equal(out, "120000");
    jsonnum_format(0.99999f, 2, out);
    assert_string_equal(out, "1");
    const float specials[] = {
        1.17549435e-38f, 1.4e-45f, 3.40282347e38f, 16777216.0f, 16777215.0f,
        9.999999e-6f,    1e-5f,    123456789.0f,   0.3f,        2.3283064e-10f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        check_one(specials[i]);
        check_one(-specials[i]);
    }
}

/* Powers of two: the gap below is half the gap above. */
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

static void test_random_bit_patterns(void **state)
{
    (void)state;
    const uint64_t key = attn_stream_key(1, "jsonnum", 7);
    for (uint64_t i = 0; i < 300000; i++) {
        const uint32_t bits = (uint32_t)attn_stream_draw(key, i);
        float f;
        memcpy(&f, &bits, sizeof f);
        if (isfinite(f))
            check_one(f);
    }
}

static void test_weights_range(void **state)
{
    (void)state;
    /* the values a response is made of: probabilities and activations */
    const uint64_t key = attn_stream_key(2, "jsonnum", 7);
    for (uint64_t i = 0; i < 300000; i++) {
        const double u = (double)(attn_stream_draw(key, i) >> 11) * 0x1.0p-53;
        check_one((float)u);
        check_one((float)((u - 0.5) * 8.0));
    }
}

static void test_fixed_precision_matches_printf(void **state)
{
    (void)state;
    const uint64_t key = attn_stream_key(3, "jsonnum", 7);
    for (uint64_t i = 0; i < 100000; i++) {
        const uint32_t bits = (uint32_t)attn_stream_draw(key, i);
        float f;
        memcpy(&f, &bits, sizeof f);
        if (!isfinite(f))
            continue;
        for (int p = 1; p <= 9; p++) {
            char ours[JSONNUM_MAX], ref[64];
            jsonnum_format(f, p, ours);
            snprintf(ref, sizeof ref, "%.*g", p, (double)f);
            if (strtod(ours, NULL) != strtod(ref, NULL))
                fail_msg("%.9g at %d digits: %s, printf says %s", (double)f, p,
                         ours, ref);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_powers_of_two),
        cmocka_unit_test(test_random_bit_patterns),
        cmocka_unit_test(test_weights_range),
        cmocka_unit_test(test_fixed_precision_matches_printf),
    };
    return cmocka_run_group_tests_name("jsonnum", tests, NULL, NULL);
}
