/*
 * test_pool.c - pooled images of long inputs against the real binary: a
 * block's colour is the max or the mean of the weights of the same
 * request's JSON over the block (over its allowed cells, hatched when it
 * has none), the texts say pooled, and the server's peak resident memory
 * drawing pooled images of the longest input its limits allow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decoded_png.h"
#include "harness.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The memory budget the server is started with: what every pooled image
 * of the longest input must fit. */
#define BUDGET ((size_t)1536 << 20) /* --max-memory below */

static struct server srv;

static int setup(void **state)
{
    (void)state;
    const char *args[] = {"--model", "llama=tests/models/llama3",
                          "--max-memory", "1610612736", NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

/* {"sentence": "w0 w1 ..."[, extra]} of words words */
static char *words_json(size_t words, const char *extra)
{
    const size_t cap = words * 8 + (extra ? strlen(extra) : 0) + 64;
    char *b = malloc(cap);
    size_t n = (size_t)snprintf(b, cap, "{\"sentence\":\"");
    for (size_t i = 0; i < words; i++)
        n += (size_t)snprintf(b + n, cap - n, "%sw%zu", i ? " " : "", i);
    snprintf(b + n, cap - n, "\"%s%s}", extra ? "," : "", extra ? extra : "");
    return b;
}

/* {"sentence": "cat cat ...", extra} of words words */
static char *cats_json(size_t words, const char *extra)
{
    const size_t cap = words * 4 + strlen(extra) + 64;
    char *b = malloc(cap);
    size_t n = (size_t)snprintf(b, cap, "{\"sentence\":\"");
    for (size_t i = 0; i < words; i++)
        n += (size_t)snprintf(b + n, cap - n, "%scat", i ? " " : "");
    snprintf(b + n, cap - n, "\",%s}", extra);
    return b;
}

static cJSON *post_ok_json(const char *path, const char *body)
{
    struct reply r;
    assert_true(post_json(&srv, path, body, &r));
    if (r.status != 200)
        fail_msg("%s: %ld %.300s", path, r.status, r.body);
    cJSON *j = cJSON_ParseWithLength(r.body, r.len);
    assert_non_null(j);
    reply_free(&r);
    return j;
}

static void post_png(const char *path, const char *body,
                     struct decoded_png *img)
{
    struct reply r;
    assert_true(post_json(&srv, path, body, &r));
    if (r.status != 200)
        fail_msg("%s: %ld %.300s", path, r.status, r.body);
    assert_string_equal(r.content_type, "image/png");
    decoded_png_read(&r, img);
    reply_free(&r);
}

/* [n][n] floats of a JSON matrix */
static float *matrix_of(const cJSON *m, size_t n)
{
    assert_int_equal(cJSON_GetArraySize(m), (int)n);
    float *v = malloc(n * n * sizeof *v);
    size_t i = 0;
    const cJSON *row, *x;
    cJSON_ArrayForEach(row, m)
    {
        assert_int_equal(cJSON_GetArraySize(row), (int)n);
        cJSON_ArrayForEach(x, row) v[i++] = (float)x->valuedouble;
    }
    return v;
}

/* The block (bi, bj) of k of an n x n matrix: max or mean over the cells
 * where allowed(i, j); NAN when none is. */
static double block_of(const float *v, size_t n, size_t k, size_t bi, size_t bj,
                       bool mean, bool causal)
{
    double acc = 0;
    size_t count = 0;
    for (size_t i = bi * k; i < n && i < bi * k + k; i++)
        for (size_t j = bj * k; j < n && j < bj * k + k; j++) {
            if (causal && j > i)
                continue;
            acc = mean
                      ? acc + v[i * n + j]
                      : (count == 0 || v[i * n + j] > acc ? v[i * n + j] : acc);
            count++;
        }
    return count ? (mean ? acc / (double)count : acc) : NAN;
}

/*
 * Blocks' grey levels against the JSON weights, gray colour map, bare
 * image (labels=false: cell px per block, no gutter): the level of a block
 * is round(value / top * 255), top the largest block; within one level
 * (the JSON's decimals). A hatched block is grey 232 or 170.
 */
static void check_blocks(const struct decoded_png *img, const float *v,
                         size_t n, size_t k, bool mean, bool causal)
{
    const size_t blocks = (n + k - 1) / k;
    assert_int_equal(img->width % blocks, 0);
    const size_t cell = img->width / blocks;
    assert_int_equal(img->height, blocks * cell);
    double top = 0;
    for (size_t bi = 0; bi < blocks; bi++)
        for (size_t bj = 0; bj < blocks; bj++) {
            const double b = block_of(v, n, k, bi, bj, mean, causal);
            if (!isnan(b) && b > top)
                top = b;
        }
    size_t hatched = 0;
    for (size_t bi = 0; bi < blocks; bi++)
        for (size_t bj = 0; bj < blocks; bj++) {
            const double b = block_of(v, n, k, bi, bj, mean, causal);
            const unsigned char *px =
                img->rgb + ((bi * cell) * img->width + bj * cell) * 3;
            if (isnan(b)) { /* every cell not allowed: hatched */
                assert_true(px[0] == 232 || px[0] == 170);
                hatched++;
                continue;
            }
            const double want = b / top * 255.0;
            if (fabs(px[0] - want) > 1.01)
                fail_msg("block (%zu, %zu) of %zu: grey %u, the %s %.6f of "
                         "top %.6f gives %.2f",
                         bi, bj, k, px[0], mean ? "mean" : "max", b, top, want);
        }
    if (causal)
        assert_int_equal(hatched, blocks * (blocks - 1) / 2);
}

/* Random weights, 300 tokens: pool=auto takes blocks of 3 by max;
 * pool=mean and pool_size=7 (a last block of 6) by mean. */
static void test_blocks_random_weights(void **state)
{
    (void)state;
    const size_t n = 300;
    char *body = words_json(n, "\"heads\":2");
    cJSON *j = post_ok_json("/attention", body);
    const cJSON *w = cJSON_GetObjectItem(j, "weights");
    float *v = matrix_of(cJSON_GetArrayItem(w, 1), n);
    struct decoded_png img;
    post_png("/attention?format=png&head=1&labels=false&colormap=gray", body,
             &img);
    assert_string_equal(decoded_png_text(&img, "attnd:pool"), "max");
    assert_string_equal(decoded_png_text(&img, "attnd:pool_size"), "3");
    check_blocks(&img, v, n, 3, false, false);
    decoded_png_free(&img);
    post_png("/attention?format=png&head=1&labels=false&colormap=gray&"
             "pool=mean&pool_size=7",
             body, &img);
    assert_string_equal(decoded_png_text(&img, "attnd:pool"), "mean");
    assert_string_equal(decoded_png_text(&img, "attnd:pool_size"), "7");
    check_blocks(&img, v, n, 7, true, false);
    decoded_png_free(&img);
    /* pool=none draws every weight; a short input is not pooled */
    post_png("/attention?format=png&head=1&labels=false&pool=none", body, &img);
    assert_string_equal(decoded_png_text(&img, "attnd:pool"), "none");
    assert_int_equal(img.width, n);
    decoded_png_free(&img);
    free(v);
    cJSON_Delete(j);
    free(body);
}

/* A decoder's causal blocks: the mean over allowed cells only, hatched
 * when no cell is allowed; and the labelled image's note and texts. */
static void test_blocks_causal_model(void **state)
{
    (void)state;
    const size_t words = 299;
    char *body = words_json(words, "\"model\":\"llama\",\"layer\":1");
    cJSON *j = post_ok_json("/attention", body);
    const size_t n =
        (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens"));
    const cJSON *w = cJSON_GetObjectItem(j, "weights");
    while (cJSON_GetArraySize(cJSON_GetArrayItem(w, 0)) != (int)n)
        w = cJSON_GetArrayItem(w, 0); /* down to [heads][n][n] */
    float *v = matrix_of(cJSON_GetArrayItem(w, 2), n);
    const size_t k = (n + 127) / 128;
    struct decoded_png img;
    post_png("/attention?format=png&head=2&labels=false&colormap=gray&"
             "pool=mean",
             body, &img);
    char want[24];
    snprintf(want, sizeof want, "%zu", k);
    assert_string_equal(decoded_png_text(&img, "attnd:pool_size"), want);
    check_blocks(&img, v, n, k, true, true);
    decoded_png_free(&img);
    post_png("/attention?format=png&head=2&labels=false&colormap=gray", body,
             &img);
    check_blocks(&img, v, n, k, false, true);
    decoded_png_free(&img);
    /* labelled: wider than the bare blocks, the tokens whole in the text */
    post_png("/attention?format=png&head=2", body, &img);
    assert_true(img.width > (n + k - 1) / k * 4);
    cJSON *tokens = cJSON_Parse(decoded_png_text(&img, "attnd:tokens"));
    assert_int_equal(cJSON_GetArraySize(tokens), (int)n);
    cJSON_Delete(tokens);
    decoded_png_free(&img);
    free(v);
    cJSON_Delete(j);
    free(body);
}

/*
 * The longest input the limits allow (--max-tokens, 4096, under llama3's
 * 131072 positions): the pooled model view, layer grid and rollout, as
 * PNG and SVG. Prints the server's peak resident memory; it must stay
 * within the memory budget the server was given (what it reserves before
 * allocating) and the process's own few MiB.
 */
static void test_longest_input_peak_rss(void **state)
{
    (void)state;
    const size_t before = status_bytes(srv.pid, "VmHWM:");
    /* "cat cat ...": a BOS, "c" "at", then " cat" a word: 4096 in all */
    char *body = cats_json(4094, "\"model\":\"llama\"");
    char *layer = cats_json(4094, "\"model\":\"llama\",\"layer\":0");
    char *stats = cats_json(4094, "\"model\":\"llama\",\"return\":"
                                  "[\"head_stats\",\"sparse_weights\"]");
    const struct {
        const char *path;
        const char *body;
        const char *type;
    } asks[] = {
        {"/attention?format=png&view=model", body, "image/png"},
        {"/attention?format=png&view=heads&head=all", layer, "image/png"},
        {"/attention?format=svg&view=model&pool_size=64", body,
         "image/svg+xml"},
        {"/attention?format=svg&view=heads&head=0", layer, "image/svg+xml"},
        /* the measures and each row's top keys, as JSON */
        {"/attention", stats, "application/json"},
        /* the rollout is one dense N x N product, held whole: last */
        {"/attention?format=png&view=rollout&pool=mean", body, "image/png"},
    };
    /* the heads' images, the measures and the top keys are taken from
     * the pass a few rows at a time: far below one layer's heads of 4096
     * x 4096 weights (256 MiB) */
    const size_t heads_views = 5;
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        struct reply r;
        const double t0 = clock_seconds();
        assert_true(post_json(&srv, asks[i].path, asks[i].body, &r));
        if (r.status != 200)
            fail_msg("%s: %ld %.300s", asks[i].path, r.status, r.body);
        assert_string_equal(r.content_type, asks[i].type);
        if (!strcmp(asks[i].type, "image/png")) {
            struct decoded_png img;
            decoded_png_read(&r, &img);
            assert_string_not_equal(decoded_png_text(&img, "attnd:pool"),
                                    "none");
            print_message("%s: %u x %u px, %zu bytes, %.2f s, peak RSS "
                          "%zu MiB\n",
                          asks[i].path, img.width, img.height, r.len,
                          clock_seconds() - t0,
                          status_bytes(srv.pid, "VmHWM:") >> 20);
            decoded_png_free(&img);
        } else if (!strcmp(asks[i].type, "application/json")) {
            assert_non_null(strstr(r.body, "\"head_stats\""));
            assert_non_null(strstr(r.body, "\"sparse_weights\""));
            print_message("%s head_stats, sparse_weights: %zu bytes, %.2f s, "
                          "peak RSS %zu MiB\n",
                          asks[i].path, r.len, clock_seconds() - t0,
                          status_bytes(srv.pid, "VmHWM:") >> 20);
        } else {
            assert_non_null(strstr(r.body, "<chunk key=\"attnd:pool\">"));
            print_message("%s: %zu bytes, %.2f s, peak RSS %zu MiB\n",
                          asks[i].path, r.len, clock_seconds() - t0,
                          status_bytes(srv.pid, "VmHWM:") >> 20);
        }
        reply_free(&r);
        if (i + 1 == heads_views && !UNDER_ASAN) {
            const size_t grown = status_bytes(srv.pid, "VmHWM:") - before;
            print_message("pooled images, measures and top keys at 4096 "
                          "tokens: peak RSS grew by %zu MiB\n",
                          grown >> 20);
            assert_true(grown < ((size_t)64 << 20));
        }
    }
    const size_t peak = status_bytes(srv.pid, "VmHWM:");
    print_message("4096 tokens of llama3, pooled images: peak RSS %zu MiB "
                  "(%zu MiB before them; budget %zu MiB)\n",
                  peak >> 20, before >> 20, BUDGET >> 20);
    if (!UNDER_ASAN)
        assert_true(peak < BUDGET + ((size_t)128 << 20));
    /* every reservation given back once the exchanges end */
    double reserved = -1;
    for (int tries = 0; tries < 100 && reserved != 0; tries++) {
        if (tries)
            pause_ms(20);
        assert_true(metric_read(&srv, "127.0.0.1",
                                "attnd_memory_reserved_bytes", &reserved));
    }
    assert_true(reserved == 0);
    free(body);
    free(layer);
    free(stats);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_random_weights),
        cmocka_unit_test(test_blocks_causal_model),
        cmocka_unit_test(test_longest_input_peak_rss),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
