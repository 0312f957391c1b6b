/*
 * test_logit_norm.c - softmax's normalizer over a vocabulary against
 * long double exponentials, in every build this CPU runs: each term, the
 * sums of vocabularies with NaN, infinite and very negative logits, and
 * the same bits from every build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "attention.h"
#include "logit_norm.h"

#include <math.h>
#include <stdlib.h>

static const enum vec_isa isas[] = {VEC_ISA_PLAIN, VEC_ISA_AVX2,
                                    VEC_ISA_AVX512};

/* exp(y) beside the largest logit's exp(0) = 1, for y from 0 down to
 * -700 by an irregular step: the sum within 3 ulp of 1 + expl(y). */
static void test_term_beside_the_largest(void **state)
{
    (void)state;
    for (size_t b = 0; b < sizeof isas / sizeof isas[0]; b++) {
        if (!vec_isa_available(isas[b]))
            continue;
        double worst = 0;
        for (double y = -1e-7; y > -700.0; y *= 1.0 + 1.0 / 4096) {
            /* logits {0, y}: total = 1 + exp(y); y a float */
            const float logits[2] = {0.0f, (float)y};
            double most, total;
            logit_norm_isa(isas[b], logits, 2, &most, &total);
            assert_true(most == 0.0);
            const long double want = 1.0L + expl((long double)logits[1]);
            const double err = fabs((double)((long double)total - want)) /
                               (nextafter(total, INFINITY) - total);
            if (err > worst)
                worst = err;
        }
        assert_true(worst <= 3.0);
    }
}

/* Vocabularies of every length to 70 and one of Llama 3's size, with
 * NaN, infinities and very negative logits: the largest finite logit, and
 * a total within the rounding of its additions (eight lanes of n / 8
 * terms, and their tree) of the long double sum; every build the same
 * bits. */
static void test_vocabularies(void **state)
{
    (void)state;
    const size_t big = 128256;
    float *logits = malloc(big * sizeof *logits);
    assert_non_null(logits);
    const uint64_t key = attn_stream_key(21, "logit norm", 1);
    for (size_t i = 0; i < big; i++) {
        const uint64_t r = attn_stream_draw(key, i);
        const double u = (double)(r >> 11) * 0x1.0p-53;
        logits[i] = (float)((u - 0.5) * 40.0);
        switch (r % 97) {
        case 0: logits[i] = NAN; break;
        case 1: logits[i] = -INFINITY; break;
        case 2: logits[i] = INFINITY; break;
        case 3: logits[i] = -3e4f; break;
        default: break;
        }
    }
    for (size_t n = 0; n <= big; n += n < 70 ? 1 : big - 70) {
        long double want_most = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (isfinite(logits[i]) && logits[i] > want_most)
                want_most = logits[i];
        long double want = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(logits[i]))
                want += expl((long double)logits[i] - want_most);
        double first_most = 0, first_total = 0;
        for (size_t b = 0; b < sizeof isas / sizeof isas[0]; b++) {
            if (!vec_isa_available(isas[b]))
                continue;
            double most, total;
            logit_norm_isa(isas[b], logits, n, &most, &total);
            assert_true((long double)most == want_most);
            if (want == 0)
                assert_true(total == 0.0);
            else
                assert_true(fabsl(total - want) / want <
                            (long double)(n / 8 + 8) * 0x1p-52L);
            if (b == 0) {
                first_most = most;
                first_total = total;
            }
            assert_true(most == first_most ||
                        (isinf(most) && isinf(first_most)));
            assert_true(total == first_total);
        }
    }
    free(logits);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_term_beside_the_largest),
        cmocka_unit_test(test_vocabularies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
