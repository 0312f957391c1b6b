/*
 * test_softmax.c - the builds of the softmax row kernels (plain, AVX2,
 * AVX-512, whichever this CPU runs) give the same bits, and their
 * exponentials stay within 2 ulp of libm's, on rows of every length
 * around the vector widths, with masked (-inf) and extreme scores; and
 * the row functions report NaN and +inf scores wherever they are, and
 * find the maximum wherever it is; the
 * block form for short rows agrees with the row form.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "softmax.h"
#include "support.h"

enum { MAX_LEN = 1100 };

/* Scores of a row: normal ones, with -inf, very negative and large
 * values sprinkled in. */
static void fill_row(float *s, size_t m, uint64_t seed)
{
    fill_normal(s, m, seed, 8.0f);
    for (size_t j = 0; j < m; j++) {
        const uint64_t r = attn_stream_draw(seed, j) % 16;
        if (r == 0)
            s[j] = -INFINITY;
        else if (r == 1)
            s[j] = -200.0f;
        else if (r == 2)
            s[j] = 80.0f;
    }
}

static void test_builds_agree(void **state)
{
    (void)state;
    static float base[MAX_LEN], row[MAX_LEN], src[MAX_LEN];
    const size_t lengths[] = {0,   1,   7,   8,   9,   15,   16,   17,  23,
                              24,  31,  32,  33,  47,  63,   64,   65,  100,
                              255, 256, 511, 512, 513, 1023, 1024, 1100};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const size_t m = lengths[l];
        fill_row(src, m, 100 + m);
        const float shift =
            m ? softmax_row_max_isa(VEC_ISA_PLAIN, src, m) : 0.0f;
        memcpy(base, src, m * sizeof *src);
        const double base_sum =
            softmax_exp_shifted_isa(VEC_ISA_PLAIN, base, m, shift);
        for (size_t j = 0; j < m; j++) {
            /* within 2 ulp of libm's exp of the float difference, and
             * exactly 0 below -87, as softmax.c says */
            const float x = src[j] - shift;
            if (x < -87.0f) {
                assert_true(base[j] == 0.0f);
                continue;
            }
            const double want = exp((double)x);
            assert_true(fabs(base[j] - want) <= 2.5 * want * 0x1p-23);
        }
        for (int isa = VEC_ISA_AVX2; isa <= VEC_ISA_AVX512; isa++) {
            if (!vec_isa_available(isa))
                continue;
            memcpy(row, src, m * sizeof *src);
            assert_true(softmax_row_max_isa(isa, row, m) ==
                        softmax_row_max_isa(VEC_ISA_PLAIN, row, m));
            assert_true(softmax_row_overflowed_isa(isa, row, m) == false);
            const double sum = softmax_exp_shifted_isa(isa, row, m, shift);
            assert_memory_equal(&sum, &base_sum, sizeof sum);
            assert_memory_equal(row, base, m * sizeof *row);
        }
    }
}

/* NaN and +inf anywhere, the tail included, are overflow in every build;
 * -inf is not. */
static void test_overflow_found_everywhere(void **state)
{
    (void)state;
    float row[40];
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available(isa))
            continue;
        for (size_t at = 0; at < 37; at++) {
            const float bad[2] = {NAN, INFINITY};
            for (int b = 0; b < 2; b++) {
                fill_row(row, 37, 7);
                assert_false(softmax_row_overflowed_isa(isa, row, 37));
                row[at] = bad[b];
                assert_true(softmax_row_overflowed_isa(isa, row, 37));
            }
        }
    }
}

/* Every build finds a row's maximum wherever it sits: in each running
 * maximum the kernels keep apart, in the vectors after them, and in the
 * tail, on rows shorter and longer than the vectors they take at once;
 * with NaN beside it, which is never the maximum. */
static void test_max_found_anywhere(void **state)
{
    (void)state;
    enum { LONGEST = 130 };
    static const size_t lengths[] = {1, 9, 31, 32, 33, 63, 64, 71, 97, LONGEST};
    float row[LONGEST];
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available(isa))
            continue;
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            const size_t m = lengths[l];
            for (size_t at = 0; at < m; at++) {
                for (size_t j = 0; j < m; j++)
                    row[j] = -(float)((j * 37) % 101) - 1.0f;
                row[at] = 0.5f;
                assert_true(softmax_row_max_isa(isa, row, m) == 0.5f);
                if (at + 1 < m) {
                    row[at + 1] = NAN;
                    assert_true(softmax_row_max_isa(isa, row, m) == 0.5f);
                }
            }
        }
    }
}

/* softmax_row() and softmax_online_block() find NaN and +inf wherever
 * they sit, in rows of scores and in rows otherwise all masked; a row all
 * masked is that, and -inf alone is never overflow. */
static void test_rows_report_overflow(void **state)
{
    (void)state;
    enum { M = 37 };
    float row[M];
    const float bad[2] = {NAN, INFINITY};
    for (int masked = 0; masked < 2; masked++)
        for (size_t at = 0; at < M; at++)
            for (int b = 0; b < 2; b++) {
                fill_row(row, M, 9);
                if (masked)
                    for (size_t j = 0; j < M; j++)
                        row[j] = -INFINITY;
                row[at] = bad[b];
                assert_int_equal(softmax_row(row, M), SOFTMAX_OVERFLOW);
                fill_row(row, M, 9);
                if (masked)
                    for (size_t j = 0; j < M; j++)
                        row[j] = -INFINITY;
                row[at] = bad[b];
                struct softmax_online st;
                softmax_online_init(&st);
                float rescale;
                assert_int_equal(softmax_online_block(&st, row, M, &rescale),
                                 SOFTMAX_OVERFLOW);
            }
    for (size_t j = 0; j < M; j++)
        row[j] = -INFINITY;
    assert_int_equal(softmax_row(row, M), SOFTMAX_ALL_MASKED);
    for (size_t j = 0; j < M; j++)
        assert_true(row[j] == 0.0f);
    fill_row(row, M, 9);
    assert_int_equal(softmax_row(row, M), SOFTMAX_OK);
    double sum = 0.0;
    for (size_t j = 0; j < M; j++)
        sum += row[j];
    assert_true(fabs(sum - 1.0) < 1e-5);
}

/* softmax_rows() agrees with softmax_row() on every row of blocks of
 * short rows: the same status, the values within 4 ulp (the sums are
 * taken in another order), zeros where the status is not OK; rows all
 * masked, with NaN and with +inf among ordinary ones. */
static void test_short_rows_together(void **state)
{
    (void)state;
    enum { ROWS = 40, M_MOST = 31 };
    static float block[ROWS * M_MOST], one[ROWS * M_MOST];
    enum softmax_status st[ROWS];
    for (size_t m = 1; m <= M_MOST; m++) {
        for (size_t r = 0; r < ROWS; r++)
            fill_row(block + r * m, m, 1000 + m * ROWS + r);
        for (size_t j = 0; j < m; j++) {
            block[3 * m + j] = -INFINITY;
            block[5 * m + j] = j == m / 2 ? NAN : 1.0f;
            block[7 * m + j] = j == m - 1 ? INFINITY : 0.5f;
        }
        memcpy(one, block, ROWS * m * sizeof *one);
        softmax_rows(block, ROWS, m, st);
        for (size_t r = 0; r < ROWS; r++) {
            const enum softmax_status want = softmax_row(one + r * m, m);
            assert_int_equal(st[r], want);
            for (size_t j = 0; j < m; j++) {
                const float got = block[r * m + j], ref = one[r * m + j];
                if (want != SOFTMAX_OK)
                    assert_true(got == 0.0f);
                else if (fabsf(got - ref) > 4.0f * FLT_EPSILON * ref + 1e-30f)
                    fail_msg("m %zu row %zu key %zu: %g, one row at a time %g",
                             m, r, j, (double)got, (double)ref);
            }
        }
        assert_int_equal(st[3], SOFTMAX_ALL_MASKED);
        assert_int_equal(st[5], SOFTMAX_OVERFLOW);
        assert_int_equal(st[7], SOFTMAX_OVERFLOW);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builds_agree),
        cmocka_unit_test(test_overflow_found_everywhere),
        cmocka_unit_test(test_max_found_anywhere),
        cmocka_unit_test(test_rows_report_overflow),
        cmocka_unit_test(test_short_rows_together),
    };
    return cmocka_run_group_tests_name("softmax", tests, NULL, NULL);
}
