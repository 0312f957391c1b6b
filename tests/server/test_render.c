/*
 * test_render.c - render_png end to end, from query parameters through
 * the core to the drawing library: a PNG when it can be drawn, and when it
 * cannot, the problem that says whose failure it is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "answer.h"
#include "attend.h"
#include "heatmap.h"
#include "render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct request_limits limits = {
    .max_tokens = 64,
    .max_dim = 256,
    .max_heads = 16,
    .max_output = (size_t)1 << 20,
};

static int setup(void **state)
{
    (void)state;
    char err[256];
    if (heatmap_font_init(NULL, err, sizeof err) != DRAW_OK) {
        fprintf(stderr, "heatmap_font_init: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    heatmap_font_free();
    return 0;
}

/*
 * Parse labels ("true"/"false") into a PNG request for one head of "the
 * cat sat on the mat", plan, compute it, and render it with max_pixels.
 * Returns false with the problem in pb when the request is refused where
 * its image is measured (planning) or drawn; a PNG is checked for its
 * signature and freed.
 */
static bool render_with(const char *labels, size_t max_pixels,
                        struct problem *pb)
{
    const struct request_param p[] = {
        {"sentence", "the cat sat on the mat"},
        {"format", "png"},
        {"head", "0"},
        {"labels", labels},
    };
    const size_t n = sizeof p / sizeof *p;
    struct request req;
    struct answer_plan plan;
    struct attn_result res;
    request_init(&req);
    memset(pb, 0, sizeof *pb);
    memset(&res, 0, sizeof res);
    if (!request_parse_image(&req, p, n, IMAGE_JSON, pb) ||
        !request_parse_query(&req, p, n, &limits, pb) ||
        !answer_ops(req.kind)->plan(&req, &plan, pb)) {
        request_free(&req);
        return false;
    }
    if (!attend_run(&req, 1, NULL, NULL, &res, pb))
        fail_msg("request refused: %d %s", pb->status, pb->detail);
    unsigned char *png = NULL;
    size_t len = 0;
    const bool ok = render_png(&req, &res, max_pixels, &png, &len, pb);
    if (ok) {
        assert_true(len > 8 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
        free(png);
    } else {
        assert_null(png);
    }
    attn_result_free(&res);
    request_free(&req);
    return ok;
}

static void test_drawn(void **state)
{
    (void)state;
    struct problem pb;
    assert_true(render_with("true", (size_t)64 << 20, &pb));
    assert_true(render_with("false", 0, &pb));
}

/* Too many pixels for the server's cap: the request's, at "/cell", with
 * the sizes in the detail. */
static void test_too_big_is_422(void **state)
{
    (void)state;
    struct problem pb;
    assert_false(render_with("true", 1000, &pb));
    assert_int_equal(pb.status, 422);
    assert_string_equal(pb.pointer, "/cell");
    assert_int_equal(pb.retry_after, 0);
    if (!strstr(pb.detail, "exceeds max_pixels 1000"))
        fail_msg("detail: %s", pb.detail);
}

/* No font: the server's failure, not the client's, found when the
 * labelled image is measured, before anything is computed; bare images
 * still work. */
static void test_no_font_is_500(void **state)
{
    (void)state;
    struct problem labelled, bare;
    heatmap_font_free();
    const bool labelled_ok = render_with("true", 0, &labelled);
    const bool bare_ok = render_with("false", 0, &bare);
    /* the font back before any assertion, which would end the test */
    char err[256];
    assert_int_equal(heatmap_font_init(NULL, err, sizeof err), DRAW_OK);
    assert_true(bare_ok);
    assert_false(labelled_ok);
    assert_int_equal(labelled.status, 500);
    assert_string_equal(labelled.pointer, "");
    assert_int_equal(labelled.retry_after, 0);
    if (strncmp(labelled.detail, "the heatmap could not be drawn: ", 32) ||
        !strstr(labelled.detail, "font"))
        fail_msg("detail: %s", labelled.detail);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drawn),
        cmocka_unit_test(test_too_big_is_422),
        cmocka_unit_test(test_no_font_is_500),
    };
    return cmocka_run_group_tests_name("render", tests, setup, teardown);
}
