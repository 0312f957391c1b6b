/*
 * test_draw.c - the drawing library's statuses: each way a render, the font
 * or the PNG writer can fail returns the status that says whose failure it
 * is (the request's, the caller's, the font's, memory's), with a message
 * that names the value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "draw.h"
#include "errbuf.h"
#include "font.h"
#include "heatmap.h"
#include "pngw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* heatmap_font_init's default: ATTND_FONT, DejaVu Sans */
#define FONT NULL

static float weights[300 * 300];

static int setup(void **state)
{
    (void)state;
    char err[256];
    for (size_t i = 0; i < sizeof weights / sizeof *weights; i++)
        weights[i] = (float)(i % 13) / 13.0f;
    if (heatmap_font_init(FONT, err, sizeof err) != DRAW_OK) {
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

/* Render m (n matrices) with o; the status, and the message in err. */
static draw_status try_render(const struct heatmap_matrix *m, size_t n,
                              const struct heatmap_options *o,
                              const struct heatmap_text *t, size_t nt,
                              char *err, size_t err_len)
{
    unsigned char *png = (unsigned char *)1;
    size_t len = 1;
    const draw_status st =
        heatmap_render_png(m, n, o, t, nt, &png, &len, err, err_len);
    if (st != DRAW_OK) {
        assert_null(png);
        assert_int_equal(len, 0);
    }
    free(png);
    return st;
}

static void expect_text(const char *err, const char *needle)
{
    if (!strstr(err, needle))
        fail_msg("message \"%s\" lacks \"%s\"", err, needle);
}

/* Past max_pixels, a size cap or the cell cap: the request's doing, and
 * the message names the sizes. */
static void test_too_big(void **state)
{
    (void)state;
    char err[256];
    struct heatmap_matrix m = {weights, 9, 9, NULL};
    struct heatmap_options o = {.cell = 10, .max_pixels = 8099};
    assert_int_equal(try_render(&m, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_TOO_BIG);
    expect_text(err, "90 x 90 = 8100 px");
    expect_text(err, "max_pixels 8099");

    o = (struct heatmap_options){.cell = 300};
    assert_int_equal(try_render(&m, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_TOO_BIG);
    expect_text(err, "cell 300 px");

    /* 300 x 300 at 200 px a cell is 60000 px a side */
    struct heatmap_matrix big = {weights, 300, 300, NULL};
    o = (struct heatmap_options){.cell = 200};
    assert_int_equal(try_render(&big, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_TOO_BIG);
    expect_text(err, "200 px per cell");

    /* 100 panels of 3000 px: each fits, the whole image does not */
    struct heatmap_matrix *many = calloc(1025, sizeof *many);
    assert_non_null(many);
    for (size_t i = 0; i < 1025; i++)
        many[i] = big;
    o = (struct heatmap_options){.cell = 10};
    assert_int_equal(try_render(many, 100, &o, NULL, 0, err, sizeof err),
                     DRAW_E_TOO_BIG);
    expect_text(err, "px in all");
    assert_int_equal(try_render(many, 1025, &o, NULL, 0, err, sizeof err),
                     DRAW_E_TOO_BIG);
    expect_text(err, "1025 matrices");
    free(many);

    /* a text chunk over PNGW_MAX_TEXT_BYTES */
    char *text = malloc(PNGW_MAX_TEXT_BYTES + 2);
    assert_non_null(text);
    memset(text, 'a', PNGW_MAX_TEXT_BYTES + 1);
    text[PNGW_MAX_TEXT_BYTES + 1] = '\0';
    const struct heatmap_text long_text = {"Comment", text};
    o = (struct heatmap_options){.cell = 2};
    assert_int_equal(try_render(&m, 1, &o, &long_text, 1, err, sizeof err),
                     DRAW_E_TOO_BIG);
    expect_text(err, "Comment");
    free(text);
}

/* Arguments that break the contract are the caller's bug. */
static void test_invalid(void **state)
{
    (void)state;
    char err[256];
    struct heatmap_matrix m = {weights, 3, 3, NULL};
    struct heatmap_options o = {.colormap = (enum heatmap_colormap)9};
    assert_int_equal(try_render(&m, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_INVALID);
    expect_text(err, "colormap 9");

    const float nan[4] = {0.1f, 0.2f, 0.3f, NAN};
    struct heatmap_matrix with_nan = {nan, 2, 2, NULL};
    o = (struct heatmap_options){.cell = 2};
    assert_int_equal(try_render(&with_nan, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_INVALID);
    expect_text(err, "[1][1]");

    /* signed values: refused on the scales from 0, with the message they
     * always had; the symmetric scale takes them, but not NaN */
    const float signed_values[4] = {0.1f, -0.2f, 0.3f, 0.4f};
    struct heatmap_matrix with_negative = {signed_values, 2, 2, NULL};
    o = (struct heatmap_options){.cell = 2, .scale = HEATMAP_SCALE_TILE};
    assert_int_equal(
        try_render(&with_negative, 1, &o, NULL, 0, err, sizeof err),
        DRAW_E_INVALID);
    expect_text(err, "[0][1] is -0.2; weights must be finite and >= 0");
    o.scale = HEATMAP_SCALE_SYMMETRIC;
    assert_int_equal(
        try_render(&with_negative, 1, &o, NULL, 0, err, sizeof err), DRAW_OK);
    assert_int_equal(try_render(&with_nan, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_INVALID);
    expect_text(err, "[1][1] is nan; values must be finite");
    o.scale = (enum heatmap_scale)(HEATMAP_SCALE_SYMMETRIC + 1);
    assert_int_equal(try_render(&m, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_INVALID);
    expect_text(err, "unknown scale 3");
    o = (struct heatmap_options){.cell = 2};

    /* a message buffer is optional: the status alone still says it */
    assert_int_equal(try_render(&with_nan, 1, &o, NULL, 0, NULL, 0),
                     DRAW_E_INVALID);
    assert_int_equal(try_render(&m, 1, &o, NULL, 0, NULL, 0), DRAW_OK);
}

/* No font loaded, or a file that is not one: DRAW_E_FONT. */
static void test_font(void **state)
{
    (void)state;
    char err[256];
    struct font *f = (struct font *)1;
    assert_int_equal(font_open(FONT_MAX_PX + 1, &f, err, sizeof err),
                     DRAW_E_INVALID);
    assert_null(f);
    expect_text(err, "97 px");
    assert_int_equal(font_open(12, &f, err, sizeof err), DRAW_OK);
    assert_non_null(f);
    font_close(f);

    assert_int_equal(heatmap_font_init("/", err, sizeof err), DRAW_E_FONT);
    expect_text(err, "font /");

    heatmap_font_free();
    f = (struct font *)1;
    assert_int_equal(font_open(12, &f, err, sizeof err), DRAW_E_FONT);
    assert_null(f);
    struct heatmap_matrix m = {weights, 3, 3, "three"};
    struct heatmap_options o = {.labels = true};
    assert_int_equal(try_render(&m, 1, &o, NULL, 0, err, sizeof err),
                     DRAW_E_FONT);
    expect_text(err, "font not loaded");
    assert_int_equal(heatmap_font_init(FONT, err, sizeof err), DRAW_OK);
    assert_int_equal(try_render(&m, 1, &o, NULL, 0, err, sizeof err), DRAW_OK);
}

/* errbuf_fail returns the status it is given and always terminates. */
static void test_errbuf(void **state)
{
    (void)state;
    char err[8];
    memset(err, 'x', sizeof err);
    assert_int_equal(errbuf_fail(err, sizeof err, DRAW_E_PNG, "value %d", 1234),
                     DRAW_E_PNG);
    assert_string_equal(err, "value 1");
    assert_int_equal(errbuf_fail(NULL, 0, DRAW_E_NOMEM, "nowhere"),
                     DRAW_E_NOMEM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_font),
        cmocka_unit_test(test_errbuf),
    };
    return cmocka_run_group_tests_name("draw", tests, setup, teardown);
}
