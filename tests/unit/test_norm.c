/*
 * test_norm.c - RMSNorm and LayerNorm of rows (norm.h): every build gives
 * the same bits, in place or not, at every width (whole blocks of lanes
 * and tails); and each is within float32's rounding of a float64
 * reference, also for a row far from zero with a small spread, where a
 * one-pass variance would cancel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "norm.h"
#include "vecmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x9E3779B97F4A7C15u;

static double uniform(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static void fill(float *v, size_t n, double centre, double spread)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(centre + spread * uniform());
}

/* |got - want| within a few float32 roundings of the size of the terms
 * want was made of (scale[i]: the normed value times the weight, plus
 * the bias, in magnitude) */
static void near(const float *got, const double *want, const double *scale,
                 size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(got[i] - want[i]) <= 4e-7 * scale[i]);
}

static const size_t widths[] = {1, 3, 15, 16, 17, 64, 100, 768, 2053};

static void test_rms_every_build_same_bits(void **state_)
{
    (void)state_;
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        const size_t cols = widths[k], rows = 3;
        float *x = malloc(rows * cols * sizeof *x);
        float *w = malloc(cols * sizeof *w);
        float *plain = malloc(rows * cols * sizeof *plain);
        float *got = malloc(rows * cols * sizeof *got);
        double *want = malloc(rows * cols * sizeof *want);
        double *scale = malloc(rows * cols * sizeof *scale);
        fill(x, rows * cols, 0.0, 3.0);
        fill(w, cols, 1.0, 0.5);
        norm_rms_isa(VEC_ISA_PLAIN, x, rows, cols, w, 1e-6f, plain);
        for (size_t r = 0; r < rows; r++) {
            double sq = 0.0;
            for (size_t c = 0; c < cols; c++)
                sq += (double)x[r * cols + c] * x[r * cols + c];
            const double rstd = 1.0 / sqrt(sq / (double)cols + 1e-6);
            for (size_t c = 0; c < cols; c++) {
                want[r * cols + c] = x[r * cols + c] * rstd * w[c];
                scale[r * cols + c] = fabs(want[r * cols + c]);
            }
        }
        near(plain, want, scale, rows * cols);
        for (int isa = VEC_ISA_AVX2; isa <= VEC_ISA_AVX512; isa++) {
            if (!vec_isa_available((enum vec_isa)isa))
                continue;
            norm_rms_isa((enum vec_isa)isa, x, rows, cols, w, 1e-6f, got);
            assert_memory_equal(got, plain, rows * cols * sizeof *got);
        }
        memcpy(got, x, rows * cols * sizeof *got); /* in place */
        norm_rms(got, rows, cols, w, 1e-6f, got);
        assert_memory_equal(got, plain, rows * cols * sizeof *got);
        free(x), free(w), free(plain), free(got), free(want), free(scale);
    }
}

static void test_layer_every_build_same_bits(void **state_)
{
    (void)state_;
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        const size_t cols = widths[k], rows = 3;
        float *x = malloc(rows * cols * sizeof *x);
        float *w = malloc(cols * sizeof *w), *b = malloc(cols * sizeof *b);
        float *plain = malloc(rows * cols * sizeof *plain);
        float *got = malloc(rows * cols * sizeof *got);
        double *want = malloc(rows * cols * sizeof *want);
        double *scale = malloc(rows * cols * sizeof *scale);
        /* the last row far from zero, with a small spread */
        fill(x, (rows - 1) * cols, 0.5, 2.0);
        fill(x + (rows - 1) * cols, cols, 1e4, 1e-2);
        fill(w, cols, 1.0, 0.5);
        fill(b, cols, 0.0, 0.1);
        norm_layer_isa(VEC_ISA_PLAIN, x, rows, cols, w, b, 1e-12f, plain);
        for (size_t r = 0; r < rows; r++) {
            const float *xr = x + r * cols;
            double mean = 0.0, sq = 0.0;
            for (size_t c = 0; c < cols; c++)
                mean += xr[c];
            mean /= (double)cols;
            for (size_t c = 0; c < cols; c++)
                sq += (xr[c] - mean) * (xr[c] - mean);
            const double rstd = 1.0 / sqrt(sq / (double)cols + 1e-12);
            for (size_t c = 0; c < cols; c++) {
                const double term = (xr[c] - mean) * rstd * w[c];
                want[r * cols + c] = term + b[c];
                scale[r * cols + c] = fabs(term) + fabs(b[c]);
            }
        }
        if (cols > 1)
            near(plain, want, scale, rows * cols);
        else /* one value: its own mean, so the bias alone */
            for (size_t r = 0; r < rows; r++)
                assert_true(plain[r] == b[0]);
        for (int isa = VEC_ISA_AVX2; isa <= VEC_ISA_AVX512; isa++) {
            if (!vec_isa_available((enum vec_isa)isa))
                continue;
            norm_layer_isa((enum vec_isa)isa, x, rows, cols, w, b, 1e-12f, got);
            assert_memory_equal(got, plain, rows * cols * sizeof *got);
        }
        memcpy(got, x, rows * cols * sizeof *got); /* in place */
        norm_layer(got, rows, cols, w, b, 1e-12f, got);
        assert_memory_equal(got, plain, rows * cols * sizeof *got);
        free(x), free(w), free(b), free(plain), free(got), free(want);
        free(scale);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rms_every_build_same_bits),
        cmocka_unit_test(test_layer_every_build_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
