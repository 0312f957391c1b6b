/*
 * test_png.c - PNG answers of the random-weights mode against the real
 * binary: an image past the drawing's caps is refused before anything is
 * computed, and a grid of heads on a scale per head.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"
#include "decoded_png.h"

#include <curl/curl.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct server srv;

static int setup(void **state)
{
    (void)state;
    return server_start(&srv, NULL) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

static double flops_now(void)
{
    double v = -1;
    assert_true(
        metric_read(&srv, "127.0.0.1", "attnd_attention_flops_total", &v));
    return v;
}

/* "/attention?sentence=w0+w1+...&" words long, then query (the
 * harness takes URLs of up to 2 KiB) */
static char *sentence_path(size_t words, const char *query)
{
    const size_t cap = words * 8 + strlen(query) + 64;
    char *p = malloc(cap);
    size_t n = (size_t)snprintf(p, cap, "/attention?sentence=");
    for (size_t i = 0; i < words; i++)
        n += (size_t)snprintf(p + n, cap - n, "%sw%zu", i ? "+" : "", i);
    snprintf(p + n, cap - n, "&%s", query);
    return p;
}

/*
 * Sixteen heads of 200 tokens at 64 px a cell: a grid of 4 x 4 matrices of
 * 12800 px, past the drawing's caps. Refused with the drawing's 422 at
 * /cell, before the attention is computed: /metrics counts no FLOP for it,
 * where the same request as JSON counts its work.
 */
static void test_too_big_is_refused_before_computing(void **state)
{
    (void)state;
    char *giant = sentence_path(200, "heads=16&format=png&head=all&cell=64");
    const double before = flops_now();
    struct reply r;
    const double t0 = clock_seconds();
    assert_true(http_call(&srv, "GET", giant, NULL, 0, NULL, &r));
    const double took = clock_seconds() - t0;
    if (r.status != 422 || !strstr(r.body, "\"pointer\":\"/cell\"") ||
        !strstr(r.body, "32768 px"))
        fail_msg("%ld %s", r.status, r.body);
    reply_free(&r);
    print_message("refused in %.3f s\n", took);
    assert_true(flops_now() == before);
    /* the same as a bare image of one head is drawn, and counted */
    char *one = sentence_path(200, "heads=16&format=png&head=0&labels=false");
    assert_true(http_call(&srv, "GET", one, NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    assert_true(flops_now() > before);
    free(one);
    free(giant);
}

/*
 * head=all with color_scale=tile, bare in gray: every head's brightest
 * cell is white (255), each on its own scale; shared, only the heads whose
 * largest weight is the largest of all are. attnd:color_scale says which.
 */
static void test_grid_scale_per_head(void **state)
{
    (void)state;
    const char *scales[] = {"tile", "shared"};
    for (int s = 0; s < 2; s++) {
        char query[160];
        snprintf(query, sizeof query,
                 "heads=8&format=png&head=all&labels=false&cell=1&"
                 "colormap=gray&color_scale=%s",
                 scales[s]);
        char *path = sentence_path(6, query);
        struct reply r;
        assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
        free(path);
        assert_int_equal(r.status, 200);
        struct decoded_png d;
        decoded_png_read(&r, &d);
        assert_int_equal(d.color_type, PNG_COLOR_TYPE_RGB);
        reply_free(&r);
        /* 8 heads about square: 3 across, 3 down, a 1-cell gutter */
        assert_int_equal(d.width, 3 * 6 + 2);
        assert_int_equal(d.height, 3 * 6 + 2);
        assert_string_equal(decoded_png_text(&d, "attnd:color_scale"),
                            scales[s]);
        unsigned white = 0;
        for (unsigned k = 0; k < 8; k++) {
            unsigned top = 0;
            for (unsigned y = 0; y < 6; y++)
                for (unsigned x = 0; x < 6; x++) {
                    const size_t at = ((size_t)((k / 3) * 7 + y) * d.width +
                                       (k % 3) * 7 + x) *
                                      3;
                    top = d.rgb[at] > top ? d.rgb[at] : top;
                }
            white += top == 255;
        }
        if (s == 0)
            assert_int_equal(white, 8);
        else
            assert_true(white >= 1 && white < 8);
        decoded_png_free(&d);
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_big_is_refused_before_computing),
        cmocka_unit_test(test_grid_scale_per_head),
    };
    const int failed = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return failed;
}
