/*
 * test_sampling.c - the next token from logits (src/sampling.h): greedy,
 * and transformers' temperature, top-k, top-p and min-p before a seeded
 * draw; the log-probabilities of the model's own distribution.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sampling.h"

#include <math.h>
#include <string.h>

enum { DRAWS = 20000 };

/* How often each of three tokens is drawn from logits over DRAWS steps. */
static void frequencies(const float logits[3], const struct xf_sampling *s,
                        double out[3])
{
    struct xf_candidate scratch[3];
    size_t seen[3] = {0};
    for (uint64_t step = 0; step < DRAWS; step++) {
        const uint32_t id = xf_sample(logits, 3, s, step, scratch);
        assert_true(id < 3);
        seen[id]++;
    }
    for (int i = 0; i < 3; i++)
        out[i] = (double)seen[i] / DRAWS;
}

static void test_greedy(void **state)
{
    (void)state;
    struct xf_candidate scratch[6];
    const struct xf_sampling g = {.temperature = 0, .top_p = 1};
    const float a[6] = {0.5f, 2.0f, -1.0f, 2.0f, NAN, 1.0f};
    assert_int_equal(xf_sample(a, 6, &g, 0, scratch), 1); /* the lower of two */
    const float b[3] = {-INFINITY, NAN, -3.0f};
    assert_int_equal(xf_sample(b, 3, &g, 7, scratch), 2);
    // top_k 1 and a small top_p leave the most probable alone, any seed
    const float c[3] = {0.1f, 0.3f, 0.2f};
    for (uint64_t seed = 0; seed < 50; seed++) {
        const struct xf_sampling k1 = {
            .temperature = 2, .top_k = 1, .top_p = 1, .seed = seed};
        const struct xf_sampling p = {
            .temperature = 2, .top_p = 0.01, .seed = seed};
        assert_int_equal(xf_sample(c, 3, &k1, seed, scratch), 1);
        assert_int_equal(xf_sample(c, 3, &p, seed, scratch), 1);
    }
}

/* The draws follow softmax(logits / temperature), cut as transformers
 * cuts them. */
static void test_distribution(void **state)
{
    (void)state;
    const float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    double f[3];
    struct xf_sampling s = {.temperature = 1, .top_p = 1, .seed = 42};
    frequencies(logits, &s, f);
    assert_true(fabs(f[0] - 0.5) < 0.015 && fabs(f[1] - 0.3) < 0.015 &&
                fabs(f[2] - 0.2) < 0.015);
    // temperature 1/2 squares the probabilities
    s.temperature = 0.5;
    frequencies(logits, &s, f);
    assert_true(fabs(f[0] - 0.25 / 0.38) < 0.015 &&
                fabs(f[1] - 0.09 / 0.38) < 0.015);
    // top-k 2: the third never, the two renormalised
    s = (struct xf_sampling){.temperature = 1, .top_k = 2, .top_p = 1};
    frequencies(logits, &s, f);
    assert_true(f[2] == 0.0 && fabs(f[0] - 0.625) < 0.015);
    // top-p: a token goes when those more probable reach top_p (0.5 +
    // 0.3 = 0.8 reaches 0.79: 1 - 0.79 >= the 0.2 of the least probable)
    s = (struct xf_sampling){.temperature = 1, .top_p = 0.79};
    frequencies(logits, &s, f);
    assert_true(f[2] == 0.0 && f[1] > 0.3);
    s.top_p = 0.81;
    frequencies(logits, &s, f);
    assert_true(f[2] > 0.15);
    s.top_p = 0.49; /* 0.5 reaches it: the most probable alone */
    frequencies(logits, &s, f);
    assert_true(f[0] == 1.0);
}

/* min_p: a token less probable than min_p times the most probable is
 * never drawn, the rest renormalised (MinPLogitsWarper, after the
 * temperature). */
static void test_min_p(void **state)
{
    (void)state;
    const float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    double f[3];
    // 0.2 / 0.5 = 0.4 < 0.45 <= 0.3 / 0.5: the third goes
    struct xf_sampling s = {.temperature = 1, .top_p = 1, .min_p = 0.45};
    frequencies(logits, &s, f);
    assert_true(f[2] == 0.0 && fabs(f[0] - 0.625) < 0.015);
    s.min_p = 0.39; /* all three stay */
    frequencies(logits, &s, f);
    assert_true(fabs(f[2] - 0.2) < 0.015);
    // at temperature 1/2 the ratios square: 0.36 and 0.16
    s = (struct xf_sampling){.temperature = 0.5, .top_p = 1, .min_p = 0.2};
    frequencies(logits, &s, f);
    assert_true(f[2] == 0.0 && fabs(f[0] - 0.25 / 0.34) < 0.015);
    s.min_p = 1; /* the most probable alone */
    frequencies(logits, &s, f);
    assert_true(f[0] == 1.0);
}

/* Log-probabilities against a double log-softmax written out here. */
static void test_top_logprobs(void **state)
{
    (void)state;
    const float logits[6] = {1.0f, 3.0f, NAN, 3.0f, -2.0f, -90.0f};
    const double total = 2 * exp(3.0) + exp(1.0) + exp(-2.0) + exp(-90.0);
    struct xf_candidate top[6];
    double chosen = 0;
    assert_int_equal(xf_top_logprobs(logits, 6, 2, top, 5, &chosen), 2);
    assert_int_equal(top[0].id, 1);
    assert_int_equal(top[1].id, 3);
    assert_true(fabs(top[0].score - (3.0 - log(total))) < 1e-6);
    // a probability float32 cannot hold keeps its log
    assert_true(fabs(chosen - (-90.0 - log(total))) < 1e-9);
    assert_int_equal(xf_top_logprobs(logits, 6, 0, top, 2, &chosen), 0);
    assert_true(isinf(chosen) && chosen < 0);
}

/* The same seed and step give the same token, whatever came before; a
 * different seed gives a different sequence. */
static void test_seeded(void **state)
{
    (void)state;
    float logits[50];
    for (int i = 0; i < 50; i++)
        logits[i] = (float)sin(i * 1.7) * 2.0f;
    struct xf_candidate scratch[50];
    const struct xf_sampling a = {
        .temperature = 1.3, .top_k = 20, .top_p = 0.9, .seed = 7};
    struct xf_sampling b = a;
    b.seed = 8;
    uint32_t first[30];
    size_t differ = 0;
    for (uint64_t step = 0; step < 30; step++) {
        first[step] = xf_sample(logits, 50, &a, step, scratch);
        differ += xf_sample(logits, 50, &b, step, scratch) != first[step];
    }
    for (uint64_t step = 30; step-- > 0;)
        assert_int_equal(xf_sample(logits, 50, &a, step, scratch), first[step]);
    assert_true(differ > 5);
}

static void test_top_tokens(void **state)
{
    (void)state;
    const float logits[6] = {1.0f, 3.0f, NAN, 3.0f, -2.0f, 0.0f};
    struct xf_candidate top[6];
    assert_int_equal(xf_top_tokens(logits, 6, 3, top), 3);
    assert_int_equal(top[0].id, 1);
    assert_int_equal(top[1].id, 3);
    assert_int_equal(top[2].id, 0);
    const double total = 2 * exp(3.0) + exp(1.0) + exp(-2.0) + 1.0;
    assert_true(fabs(top[0].score - exp(3.0) / total) < 1e-7);
    assert_true(fabs(top[2].score - exp(1.0) / total) < 1e-7);
    // more asked for than there are: every finite one
    assert_int_equal(xf_top_tokens(logits, 6, 6, top), 5);
    assert_int_equal(top[4].id, 4);
}

static void test_check(void **state)
{
    (void)state;
    struct attn_error err;
    struct xf_sampling s = {.temperature = -1, .top_p = 1};
    assert_int_equal(xf_sampling_check(&s, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "temperature");
    s.temperature = NAN;
    assert_int_equal(xf_sampling_check(&s, &err), ATTN_E_INVALID);
    s.temperature = 1e-9; /* the scores would overflow */
    assert_int_equal(xf_sampling_check(&s, &err), ATTN_E_INVALID);
    s.temperature = 0.7;
    s.top_p = 0;
    assert_int_equal(xf_sampling_check(&s, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "top_p");
    assert_non_null(strstr(err.message, "top_p (0)"));
    s.top_p = 1;
    assert_int_equal(xf_sampling_check(&s, &err), ATTN_OK);
    s.min_p = 1.5;
    assert_int_equal(xf_sampling_check(&s, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "min_p");
    s.min_p = NAN;
    assert_int_equal(xf_sampling_check(&s, &err), ATTN_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_seeded),
        cmocka_unit_test(test_top_tokens),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_top_logprobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
