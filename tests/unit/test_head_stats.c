/*
 * test_head_stats.c - the per-head measures (src/head_stats.h) on
 * weights worked out by hand, and through a model's pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "head_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A square head of n tokens under a causal mask (and a window) or none. */
struct square {
    struct mask_view mask;
    struct head_view view;
};

static const struct head_view *square(struct square *sq, size_t n, bool causal,
                                      size_t window, const size_t *earlier)
{
    sq->mask =
        (struct mask_view){.causal = causal, .window = window, .n_ctx = n};
    sq->view = (struct head_view){.n = n,
                                  .keys = n,
                                  .positions = n,
                                  .mask = &sq->mask,
                                  .earlier = earlier};
    return &sq->view;
}

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-7)
        fail_msg("%s: %.9g, want %.9g", what, got, want);
}

/* A causal head over four tokens, the first and third the same token,
 * the second and fourth too. */
static void test_by_hand(void **state)
{
    (void)state;
    const float w[16] = {1,    0,    0,    0, 0.5f, 0.5f, 0,    0,
                         0.2f, 0.3f, 0.5f, 0, 0.1f, 0.2f, 0.3f, 0.4f};
    const uint32_t ids[4] = {5, 7, 5, 7};
    double s[ATTN_HEAD_STATS];
    size_t scratch[8], earlier[4];
    struct square sq;
    head_stats_earlier(ids, 4, scratch, earlier);
    assert_true(earlier[0] == HEAD_NONE && earlier[1] == HEAD_NONE);
    assert_int_equal(earlier[2], 0);
    assert_int_equal(earlier[3], 1);
    head_stats(w, square(&sq, 4, true, 0, earlier), s);
    const double h2 = -(0.2 * log(0.2) + 0.3 * log(0.3) + 0.5 * log(0.5)),
                 h3 = -(0.1 * log(0.1) + 0.2 * log(0.2) + 0.3 * log(0.3) +
                        0.4 * log(0.4));
    // row 0 sees one key: it does not count
    near(s[ATTN_STAT_ENTROPY], (1.0 + h2 / log(3.0) + h3 / log(4.0)) / 3,
         "entropy");
    near(s[ATTN_STAT_SINK], (0.5 + 0.2 + 0.1) / 3, "sink");
    near(s[ATTN_STAT_PREVIOUS], (0.5 + 0.3 + 0.3) / 4, "previous_token");
    // token 2 repeats token 0, token 3 token 1
    near(s[ATTN_STAT_DUPLICATE], (0.2 + 0.2) / 4, "duplicate_token");
    near(s[ATTN_STAT_INDUCTION], (0.3 + 0.3) / 4, "induction");
    near(s[ATTN_STAT_SELF], (1 + 0.5 + 0.5 + 0.4) / 4, "self");
    near(s[ATTN_STAT_DISTANCE], (0.5 + (0.4 + 0.3) + (0.3 + 0.4 + 0.3)) / 4,
         "distance");
    // what each key receives from the queries that see it
    double got[4];
    head_received(w, square(&sq, 4, true, 0, earlier), got);
    near(got[0], (1 + 0.5 + 0.2 + 0.1) / 4, "key 0");
    near(got[1], (0.5 + 0.3 + 0.2) / 3, "key 1");
    near(got[3], 0.4, "key 3");
    // a window of 2: row 2 sees keys 1 and 2, row 3 keys 2 and 3
    const float win[16] = {1, 0,     0,     0, 0.5f, 0.5f, 0,    0,
                           0, 0.25f, 0.75f, 0, 0,    0,    0.5f, 0.5f};
    head_stats(win, square(&sq, 4, true, 2, earlier), s);
    const double h = -(0.25 * log(0.25) + 0.75 * log(0.75)) / log(2.0);
    near(s[ATTN_STAT_ENTROPY], (1.0 + h + 1.0) / 3, "windowed entropy");
    // key 1 is seen by queries 1 and 2 only
    head_received(win, square(&sq, 4, true, 2, earlier), got);
    near(got[1], (0.5 + 0.25) / 2, "windowed key 1");
    // a full (encoder) row is normalised by the log of every key
    const float full[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    const uint32_t two[2] = {1, 2};
    head_stats_earlier(two, 2, scratch, earlier);
    head_stats(full, square(&sq, 2, false, 0, earlier), s);
    near(s[ATTN_STAT_ENTROPY], 1.0, "full rows");
    assert_string_equal(attn_head_stat_name(ATTN_STAT_INDUCTION), "induction");
    assert_null(attn_head_stat_name(ATTN_HEAD_STATS));
}

/* The heads the measures are for, on six causal positions, each with
 * its answer known by hand. */
enum { SIX = 6 };

static void six_stats(const float w[SIX * SIX], const uint32_t ids[SIX],
                      double s[ATTN_HEAD_STATS], double received[SIX])
{
    size_t scratch[2 * SIX], earlier[SIX];
    struct square sq;
    head_stats_earlier(ids, SIX, scratch, earlier);
    head_stats(w, square(&sq, SIX, true, 0, earlier), s);
    head_received(w, square(&sq, SIX, true, 0, earlier), received);
}

static void test_known_heads(void **state)
{
    (void)state;
    const uint32_t distinct[SIX] = {10, 11, 12, 13, 14, 15};
    // a repeated sequence: positions 3..5 repeat 0..2
    const uint32_t repeated[SIX] = {10, 11, 12, 10, 11, 12};
    float w[SIX * SIX];
    double s[ATTN_HEAD_STATS], got[SIX];

    // previous token: row 0 on itself, every other row on the one before
    memset(w, 0, sizeof w);
    w[0] = 1;
    for (size_t i = 1; i < SIX; i++)
        w[i * SIX + i - 1] = 1;
    six_stats(w, distinct, s, got);
    near(s[ATTN_STAT_PREVIOUS], 5.0 / 6, "previous head: previous_token");
    near(s[ATTN_STAT_ENTROPY], 0, "previous head: entropy");
    near(s[ATTN_STAT_SELF], 1.0 / 6, "previous head: self");
    near(s[ATTN_STAT_SINK], 1.0 / 5, "previous head: sink");
    near(s[ATTN_STAT_DISTANCE], 5.0 / 6, "previous head: distance");
    near(s[ATTN_STAT_INDUCTION], 0, "previous head: induction");
    near(got[SIX - 1], 0, "previous head: the last key");

    // induction: on the repeat, each row attends to the token after its
    // earlier copy; before it, to itself
    memset(w, 0, sizeof w);
    for (size_t i = 0; i < 3; i++)
        w[i * SIX + i] = 1;
    for (size_t i = 3; i < SIX; i++)
        w[i * SIX + i - 3 + 1] = 1;
    six_stats(w, repeated, s, got);
    near(s[ATTN_STAT_INDUCTION], 3.0 / 6, "induction head: induction");
    near(s[ATTN_STAT_DUPLICATE], 0, "induction head: duplicate_token");
    near(s[ATTN_STAT_SELF], 3.0 / 6, "induction head: self");
    // the same weights on tokens that do not repeat score nothing
    six_stats(w, distinct, s, got);
    near(s[ATTN_STAT_INDUCTION], 0, "induction head on distinct tokens");
    // a duplicate-token head: each repeat on its earlier copy
    memset(w, 0, sizeof w);
    for (size_t i = 0; i < 3; i++)
        w[i * SIX + i] = 1;
    for (size_t i = 3; i < SIX; i++)
        w[i * SIX + i - 3] = 1;
    six_stats(w, repeated, s, got);
    near(s[ATTN_STAT_DUPLICATE], 3.0 / 6, "duplicate head: duplicate_token");
    near(s[ATTN_STAT_INDUCTION], 0, "duplicate head: induction");
    near(s[ATTN_STAT_DISTANCE], 9.0 / 6, "duplicate head: distance");

    // uniform over what each row sees
    double sink = 0, self = 0, previous = 0, distance = 0;
    for (size_t i = 0; i < SIX; i++) {
        for (size_t j = 0; j <= i; j++)
            w[i * SIX + j] = 1.0f / (float)(i + 1);
        for (size_t j = i + 1; j < SIX; j++)
            w[i * SIX + j] = 0;
        self += 1.0 / (double)(i + 1);
        sink += i ? 1.0 / (double)(i + 1) : 0;
        previous += i ? 1.0 / (double)(i + 1) : 0;
        distance += (double)i / 2; /* the mean of 0 .. i */
    }
    six_stats(w, distinct, s, got);
    near(s[ATTN_STAT_ENTROPY], 1, "uniform head: entropy");
    near(s[ATTN_STAT_SINK], sink / 5, "uniform head: sink");
    near(s[ATTN_STAT_SELF], self / 6, "uniform head: self");
    near(s[ATTN_STAT_PREVIOUS], previous / 6, "uniform head: previous_token");
    near(s[ATTN_STAT_DISTANCE], distance / 6, "uniform head: distance");
    for (size_t j = 0; j < SIX; j++) {
        double want = 0;
        for (size_t i = j; i < SIX; i++)
            want += 1.0 / (double)(i + 1);
        near(got[j], want / (double)(SIX - j), "uniform head: key_received");
    }

    // a sink: every row on position 0
    memset(w, 0, sizeof w);
    for (size_t i = 0; i < SIX; i++)
        w[i * SIX] = 1;
    six_stats(w, distinct, s, got);
    near(s[ATTN_STAT_SINK], 1, "sink head: sink");
    near(s[ATTN_STAT_ENTROPY], 0, "sink head: entropy");
    near(s[ATTN_STAT_DISTANCE], 15.0 / 6, "sink head: distance");
    near(got[0], 1, "sink head: key 0 receives");
    near(got[1], 0, "sink head: key 1 receives");
}

/* The stripe of w [n][n] from its rows' parts. */
static double stripe(const float *w, size_t n, size_t start, size_t period)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += head_stripe_row(w + i * n, i, start, period);
    return sum / (double)period;
}

/* The induction stripe of a repeated input: a BOS, three tokens, the
 * same three; the second copy's rows on the token after their earlier
 * copy score 1, on the copy itself 0. */
static void test_induction_stripe(void **state)
{
    (void)state;
    enum { N = 7 };
    float w[N * N] = {0};
    for (size_t i = 0; i < 4; i++)
        w[i * N] = 1; /* the first copy on the BOS */
    for (size_t i = 4; i < N; i++)
        w[i * N + i - 3 + 1] = 1;
    near(stripe(w, N, 1, 3), 1, "induction head");
    for (size_t i = 4; i < N; i++) {
        w[i * N + i - 3 + 1] = 0;
        w[i * N + i - 3] = 1;
    }
    near(stripe(w, N, 1, 3), 0, "duplicate head");
    w[6 * N + 3] = 0.5f;
    w[6 * N + 4] = 0.5f; /* the last row: half on its copy's successor */
    near(stripe(w, N, 1, 3), 0.5 / 3, "half a row");
}

/* A sink away from position 0 shows in what each key receives. */
static void test_sink_elsewhere(void **state)
{
    (void)state;
    const uint32_t ids[SIX] = {1, 2, 3, 4, 5, 6};
    float w[SIX * SIX] = {0};
    for (size_t i = 0; i < SIX; i++)
        w[i * SIX + (i < 2 ? i : 2)] = 1; /* rows from 2 on: key 2 */
    double s[ATTN_HEAD_STATS], got[SIX];
    six_stats(w, ids, s, got);
    near(s[ATTN_STAT_SINK], 0, "no sink at 0");
    near(got[2], 1, "key 2 receives every row that sees it");
}

/* Masks with arrays: a row counts only the keys it may see, keys past the
 * context (bias_k's) count for every row and have no position. */
static void test_masks_and_appended_keys(void **state)
{
    (void)state;
    // three queries, three context keys and one appended key; key 1 is
    // padding
    const uint8_t padding[3] = {0, 1, 0};
    const struct mask_view mv = {.key_padding = padding, .n_ctx = 3};
    const float w[12] = {0.5f,  0, 0.25f, 0.25f, /* */
                         0.25f, 0, 0.5f,  0.25f, /* */
                         0,     0, 1,     0};
    const size_t earlier[3] = {HEAD_NONE, HEAD_NONE, HEAD_NONE};
    const struct head_view hv = {
        .n = 3, .keys = 4, .positions = 3, .mask = &mv, .earlier = earlier};
    double s[ATTN_HEAD_STATS], got[4];
    head_stats(w, &hv, s);
    const double h0 = -(0.5 * log(0.5) + 2 * 0.25 * log(0.25)) / log(3.0);
    // every row sees three keys: 0, 2 and the appended one
    near(s[ATTN_STAT_ENTROPY], (h0 + h0 + 0) / 3, "entropy");
    near(s[ATTN_STAT_SELF], (0.5 + 0 + 1) / 3, "self");
    // the appended key has no position: it adds no distance
    near(s[ATTN_STAT_DISTANCE], (0.25 * 2 + 0.25 * 1 + 0.5 * 1 + 0) / 3,
         "distance");
    head_received(w, &hv, got);
    near(got[1], 0, "padding receives nothing and no query sees it");
    near(got[3], (0.25 + 0.25 + 0) / 3, "the appended key");
    // cross-attention: the keys have no positions of the queries'
    const struct head_view cross = {
        .n = 3, .keys = 4, .positions = 0, .mask = &mv, .earlier = NULL};
    head_stats(w, &cross, s);
    near(s[ATTN_STAT_ENTROPY], (h0 + h0 + 0) / 3, "cross entropy");
    assert_true(isnan(s[ATTN_STAT_PREVIOUS]) && isnan(s[ATTN_STAT_SELF]) &&
                isnan(s[ATTN_STAT_DISTANCE]) && isnan(s[ATTN_STAT_DUPLICATE]) &&
                isnan(s[ATTN_STAT_INDUCTION]));
    // every query on the first context key: none is at its position
    near(s[ATTN_STAT_SINK], (0.5 + 0.25 + 0) / 3, "cross sink");
}

/* Tokens given as rows: the same bits are the same token. */
static void test_earlier_rows(void **state)
{
    (void)state;
    const float rows[5][2] = {{1, 2}, {3, 4}, {1, 2}, {1, 2.0000002f}, {1, 2}};
    size_t scratch[10], earlier[5];
    head_stats_earlier_rows(&rows[0][0], 5, 2, scratch, earlier);
    assert_true(earlier[0] == HEAD_NONE && earlier[1] == HEAD_NONE &&
                earlier[3] == HEAD_NONE);
    assert_int_equal(earlier[2], 0);
    assert_int_equal(earlier[4], 2);
}

/* attn_forward() with ATTN_WANT_HEAD_STATS: every head of every sequence
 * measured on the weights before dropout, under a per-head mask, whether
 * or not the caller takes the weights; those computed only for the
 * measures are not returned. */
static void test_forward_measures(void **state)
{
    (void)state;
    enum { B = 2, N = 5, D = 8, H = 2 };
    float x[B * N * D];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)((int)(i * 37 % 23) - 11) / 7.0f;
    // sequence 0 repeats its token 1 at 3
    memcpy(x + 3 * D, x + 1 * D, D * sizeof *x);
    uint8_t mask[B * H * N * N];
    for (size_t i = 0; i < sizeof mask; i++)
        mask[i] = (i * 7 % 5) != 0;
    struct attn_config cfg = {.mode = ATTN_MODE_PROJECTED,
                              .batch = B,
                              .n_query = N,
                              .d_model = D,
                              .heads = H,
                              .seed = 3,
                              .dropout = 0.25f,
                              .mask = mask,
                              .mask_per_head = true,
                              .want = ATTN_WANT_HEAD_STATS | ATTN_WANT_WEIGHTS};
    struct attn_result got, raw;
    struct attn_error err;
    assert_int_equal(attn_forward(&cfg, x, NULL, &got, &err), ATTN_OK);
    assert_non_null(got.weights);
    assert_null(got.weights_raw);
    cfg.want = ATTN_WANT_WEIGHTS_RAW;
    assert_int_equal(attn_forward(&cfg, x, NULL, &raw, &err), ATTN_OK);
    size_t scratch[2 * N], earlier[N];
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
    for (size_t b = 0; b < B; b++) {
        head_stats_earlier_rows(x + b * N * D, N, D, scratch, earlier);
        assert_int_equal(earlier[3], b == 0 ? 1 : HEAD_NONE);
        const struct mask_view seq = mask_view_of(&cfg, b);
        for (size_t a = 0; a < H; a++) {
            const struct mask_view mv = mask_view_head(&seq, a);
            const struct head_view hv = {.n = N,
                                         .keys = N,
                                         .positions = N,
                                         .mask = &mv,
                                         .earlier = earlier};
            double want[ATTN_HEAD_STATS], received[N];
            const size_t head = b * H + a;
            head_stats(raw.weights_raw + head * N * N, &hv, want);
            head_received(raw.weights_raw + head * N * N, &hv, received);
            assert_memory_equal(got.measures.head_stats +
                                    head * ATTN_HEAD_STATS,
                                want, sizeof want);
            assert_memory_equal(got.measures.key_received + head * N, received,
                                sizeof received);
        }
    }
    // the measures alone: the same numbers, and no weights returned
    struct attn_result alone;
    cfg.want = ATTN_WANT_HEAD_STATS;
    cfg.resolved = false;
    assert_int_equal(attn_forward(&cfg, x, NULL, &alone, &err), ATTN_OK);
    assert_null(alone.weights);
    assert_null(alone.weights_raw);
    assert_memory_equal(alone.measures.head_stats, got.measures.head_stats,
                        B * H * ATTN_HEAD_STATS * sizeof(double));
    attn_result_free(&alone);
    attn_result_free(&raw);
    attn_result_free(&got);

    // cross-attention: no positional measures
    float context[B * 3 * D]; /* small: no key takes all the weight */
    for (size_t i = 0; i < sizeof context / sizeof context[0]; i++)
        context[i] = x[i] / 32;
    struct attn_config cross = {.mode = ATTN_MODE_PROJECTED,
                                .batch = B,
                                .n_query = N,
                                .d_model = D,
                                .n_ctx = 3,
                                .cross = true,
                                .heads = H,
                                .want = ATTN_WANT_HEAD_STATS};
    assert_int_equal(attn_forward(&cross, x, context, &got, &err), ATTN_OK);
    for (size_t head = 0; head < B * H; head++) {
        const double *m = got.measures.head_stats + head * ATTN_HEAD_STATS;
        assert_true(m[ATTN_STAT_ENTROPY] > 0.5 &&
                    m[ATTN_STAT_ENTROPY] <= 1 + 1e-12);
        assert_true(isnan(m[ATTN_STAT_PREVIOUS]) && isnan(m[ATTN_STAT_SELF]));
    }
    attn_result_free(&got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_known_heads),
        cmocka_unit_test(test_sink_elsewhere),
        cmocka_unit_test(test_induction_stripe),
        cmocka_unit_test(test_masks_and_appended_keys),
        cmocka_unit_test(test_earlier_rows),
        cmocka_unit_test(test_forward_measures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
