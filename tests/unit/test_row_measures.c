/*
 * test_row_measures.c - what the pass measures of its weights a few rows
 * at a time (src/row_measures.h): the same as the measures of the whole
 * weights, the same bits on any number of threads, and each row's top
 * keys in order, ties to the earlier key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "attention.h"
#include "head_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, N = 150, D = 16, H = 4 };

static float *input(void)
{
    float *x = malloc(B * N * D * sizeof *x);
    for (size_t i = 0; i < B * N * D; i++)
        x[i] = (float)((int)(i * 2654435761u % 89) - 44) / 50.0f;
    // sequence 0 repeats rows: tokens 40..59 are 0..19 again
    memcpy(x + 40 * D, x, 20 * D * sizeof *x);
    return x;
}

static struct attn_config config(unsigned want, unsigned threads)
{
    return (struct attn_config){.mode = ATTN_MODE_PROJECTED,
                                .batch = B,
                                .n_query = N,
                                .d_model = D,
                                .heads = H,
                                .causal = true,
                                .window = 60,
                                .seed = 2,
                                .threads = threads,
                                .top_k = 5,
                                .want = want};
}

/* The rows' measures equal those of the whole weights, and do not depend
 * on the threads: a block of rows at a time on 1 thread or 3, the same
 * bits. */
static void test_rows_equal_whole(void **state)
{
    (void)state;
    float *x = input();
    const unsigned measured = ATTN_WANT_HEAD_STATS | ATTN_WANT_TOP_K;
    struct attn_config c = config(measured | ATTN_WANT_WEIGHTS, 1);
    struct attn_result one, three;
    struct attn_error err;
    assert_int_equal(attn_forward(&c, x, NULL, &one, &err), ATTN_OK);
    struct attn_config c3 = config(measured, 3);
    assert_int_equal(attn_forward(&c3, x, NULL, &three, &err), ATTN_OK);
    assert_null(three.weights);
    assert_memory_equal(one.measures.head_stats, three.measures.head_stats,
                        B * H * ATTN_HEAD_STATS * sizeof(double));
    assert_memory_equal(one.measures.key_received, three.measures.key_received,
                        B * H * N * sizeof(double));
    assert_memory_equal(one.measures.top_keys, three.measures.top_keys,
                        B * H * N * 5 * sizeof(uint32_t));
    assert_memory_equal(one.measures.top_weights, three.measures.top_weights,
                        B * H * N * 5 * sizeof(float));
    assert_int_equal(attn_config_resolve(&c, &err), ATTN_OK);
    size_t scratch[2 * N], earlier[N];
    for (size_t b = 0; b < B; b++) {
        head_stats_earlier_rows(x + b * N * D, N, D, scratch, earlier);
        const struct mask_view seq = mask_view_of(&c, b);
        for (size_t a = 0; a < H; a++) {
            const struct mask_view mv = mask_view_head(&seq, a);
            const struct head_view hv = {.n = N,
                                         .keys = N,
                                         .positions = N,
                                         .mask = &mv,
                                         .earlier = earlier};
            const size_t head = b * H + a;
            const float *w = one.weights + head * N * N;
            double want[ATTN_HEAD_STATS], received[N];
            head_stats(w, &hv, want);
            assert_memory_equal(one.measures.head_stats +
                                    head * ATTN_HEAD_STATS,
                                want, sizeof want);
            head_received(w, &hv, received);
            for (size_t j = 0; j < N; j++)
                assert_true(fabs(one.measures.key_received[head * N + j] -
                                 received[j]) < 1e-9);
            // each row's top keys: the largest weights, strongest first
            for (size_t i = 0; i < N; i++) {
                const float *row = w + i * N;
                const size_t at = head * N + i;
                size_t positive = 0;
                for (size_t j = 0; j < N; j++)
                    positive += row[j] > 0;
                assert_int_equal(one.measures.top_count[at],
                                 positive < 5 ? positive : 5);
                for (uint32_t e = 0; e < one.measures.top_count[at]; e++) {
                    const uint32_t j = one.measures.top_keys[at * 5 + e];
                    assert_true(one.measures.top_weights[at * 5 + e] == row[j]);
                    // no key outside the list is stronger, nor an earlier
                    // one as strong
                    size_t stronger = 0;
                    for (size_t q = 0; q < N; q++)
                        stronger +=
                            row[q] > row[j] || (row[q] == row[j] && q < j);
                    assert_int_equal(stronger, e);
                }
            }
        }
    }
    attn_result_free(&one);
    attn_result_free(&three);
    free(x);
}

/* Pooled blocks against the whole weights: a block's largest weight, or
 * its mean over the cells the masks allow, over rows and columns mapped
 * to blocks (some to none); the same bits on 1 thread and 3. */
static void test_pooled(void **state)
{
    (void)state;
    float *x = input();
    enum { K = 7, R = (N - 10 + K - 1) / K };
    uint32_t rows[N], cols[N];
    // the first 10 positions drawn nowhere, the rest in blocks of K
    for (size_t i = 0; i < N; i++)
        rows[i] = cols[i] = i < 10 ? ATTN_POOL_NONE : (uint32_t)((i - 10) / K);
    for (int mean = 0; mean < 2; mean++) {
        struct attn_config c = config(ATTN_WANT_POOLED | ATTN_WANT_WEIGHTS, 1);
        c.pool_row = rows;
        c.pool_col = cols;
        c.pool_rows = c.pool_cols = R;
        c.pool_mean = mean;
        struct attn_result one, three;
        struct attn_error err;
        assert_int_equal(attn_forward(&c, x, NULL, &one, &err), ATTN_OK);
        struct attn_config c3 = c;
        c3.want = ATTN_WANT_POOLED;
        c3.threads = 3;
        c3.resolved = false;
        assert_int_equal(attn_forward(&c3, x, NULL, &three, &err), ATTN_OK);
        assert_memory_equal(one.measures.pooled, three.measures.pooled,
                            B * H * R * R * sizeof(float));
        assert_int_equal(attn_config_resolve(&c, &err), ATTN_OK);
        for (size_t b = 0; b < B; b++)
            for (size_t a = 0; a < H; a++) {
                const size_t head = b * H + a;
                const float *w = one.weights + head * N * N;
                const struct mask_view seq = mask_view_of(&c, b);
                const struct mask_view mv = mask_view_head(&seq, a);
                for (size_t br = 0; br < R; br++)
                    for (size_t bc = 0; bc < R; bc++) {
                        double top = 0, sum = 0;
                        size_t allowed = 0;
                        for (size_t i = 0; i < N; i++)
                            for (size_t j = 0; j < N; j++) {
                                if (rows[i] != br || cols[j] != bc ||
                                    !mask_key_visible(&mv, i, j))
                                    continue;
                                allowed++;
                                sum += w[i * N + j];
                                top = w[i * N + j] > top ? w[i * N + j] : top;
                            }
                        const double want =
                            mean ? (allowed ? sum / (double)allowed : 0) : top;
                        const float got =
                            one.measures.pooled[(head * R + br) * R + bc];
                        if (!(fabs(got - want) <= 1e-7))
                            fail_msg("%s block (%zu, %zu) of head %zu: %g, "
                                     "want %g",
                                     mean ? "mean" : "max", br, bc, head,
                                     (double)got, want);
                    }
            }
        attn_result_free(&one);
        attn_result_free(&three);
    }
    free(x);
}

/* Ties go to the earlier key: equal keys give equal weights. */
static void test_ties(void **state)
{
    (void)state;
    // basic mode: scores x x^T; rows 1, 2 and 3 equal, so row 0 sees
    // three equal keys after itself
    const float x[4 * 2] = {0.2f, 0, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    struct attn_config c = {.mode = ATTN_MODE_BASIC,
                            .n_query = 4,
                            .d_model = 2,
                            .top_k = 3,
                            .want = ATTN_WANT_TOP_K | ATTN_WANT_WEIGHTS};
    struct attn_result r;
    struct attn_error err;
    assert_int_equal(attn_forward(&c, x, NULL, &r, &err), ATTN_OK);
    // row 1: keys 1, 2, 3 tie above key 0
    assert_int_equal(r.measures.top_count[1], 3);
    assert_int_equal(r.measures.top_keys[3 + 0], 1);
    assert_int_equal(r.measures.top_keys[3 + 1], 2);
    assert_int_equal(r.measures.top_keys[3 + 2], 3);
    attn_result_free(&r);
    // top_k out of range, named
    c.top_k = 0;
    c.resolved = false;
    assert_int_equal(attn_forward(&c, x, NULL, &r, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "top_k");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_equal_whole),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_pooled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
