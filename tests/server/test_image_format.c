/*
 * test_image_format.c - the table of answer formats (base/image_format.h):
 * each row's name, content type and writers, the field "format" read by
 * name and refused naming the value, the Accept header's choice, and the
 * PNG and SVG writers against the drawing library called directly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "image_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_rows(void **state)
{
    (void)state;
    static const char *const names[IMAGE_FORMATS] = {"json", "png", "svg"};
    static const char *const types[IMAGE_FORMATS] = {
        "application/json", "image/png", "image/svg+xml"};
    for (int f = 0; f < IMAGE_FORMATS; f++) {
        const struct image_writer *w = &image_writers[f];
        assert_string_equal(w->name, names[f]);
        assert_string_equal(w->content_type, types[f]);
        assert_string_equal(image_format_name(f), names[f]);
        /* JSON is not drawn; every image is measured, encoded, held */
        const bool drawn = f != IMAGE_JSON;
        assert_true((w->measure != NULL) == drawn);
        assert_true((w->encode != NULL) == drawn);
        assert_true((w->held != NULL) == drawn);
        /* a GET's ETag tells the formats apart by their first letter */
        for (int g = 0; g < f; g++)
            assert_int_not_equal(w->name[0], image_writers[g].name[0]);
    }
    assert_null(image_format_name(-1));
    assert_null(image_format_name(IMAGE_FORMATS));
}

static void test_parse_names(void **state)
{
    (void)state;
    for (int f = 0; f < IMAGE_FORMATS; f++) {
        enum image_format out = (enum image_format) - 1;
        struct problem pb;
        assert_true(image_format_parse(image_writers[f].name, "\"", &out, &pb));
        assert_int_equal(out, f);
        out = (enum image_format) - 1;
        assert_true(image_format_parse(image_writers[f].name, "", &out, &pb));
        assert_int_equal(out, f);
    }
}

/* An unknown name is a 422 at /format naming the field, the value and
 * every name: quoted as /attention writes them, bare as /patch does. */
static void test_parse_refuses(void **state)
{
    (void)state;
    enum image_format out = IMAGE_PNG;
    struct problem pb;
    assert_false(image_format_parse("gif", "\"", &out, &pb));
    assert_int_equal(pb.status, 422);
    assert_string_equal(pb.pointer, "/format");
    assert_string_equal(
        pb.detail, "format (\"gif\") must be \"json\", \"png\" or \"svg\"");
    assert_false(image_format_parse("gif", "", &out, &pb));
    assert_int_equal(pb.status, 422);
    assert_string_equal(pb.pointer, "/format");
    assert_string_equal(pb.detail, "format (\"gif\") must be json, png or svg");
    assert_int_equal(out, IMAGE_PNG); /* left as it was */
    /* names are matched whole and by case */
    const char *const near[] = {"", "PNG", "pngx", "sv", "image/png", "jsonp"};
    for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
        assert_false(image_format_parse(near[i], "", &out, &pb));
        char want[96];
        snprintf(want, sizeof want, "format (\"%s\")", near[i]);
        assert_non_null(strstr(pb.detail, want));
    }
    /* a long value is cut at 40 bytes */
    char longer[100];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_false(image_format_parse(longer, "", &out, &pb));
    assert_string_equal(pb.detail, "format (\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                   "xxxxxxxx\") must be json, png or svg");
}

static void test_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *accept;
        enum image_format want;
    } cases[] = {
        {NULL, IMAGE_JSON},
        {"", IMAGE_JSON},
        {"*/*", IMAGE_JSON},
        {"text/html", IMAGE_JSON},
        {"application/json", IMAGE_JSON},
        {"image/png", IMAGE_PNG},
        {"image/svg+xml", IMAGE_SVG},
        /* PNG over SVG, whichever comes first */
        {"image/png, image/svg+xml", IMAGE_PNG},
        {"image/svg+xml, image/png", IMAGE_PNG},
        /* JSON named at all decides over any image */
        {"image/png, application/json", IMAGE_JSON},
        {"image/svg+xml;q=0.9, application/json;q=0.1", IMAGE_JSON},
        {"text/event-stream, image/svg+xml", IMAGE_SVG},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (image_format_accepted(cases[i].accept) != cases[i].want)
            fail_msg(
                "Accept: %s gave %s", cases[i].accept,
                image_writers[image_format_accepted(cases[i].accept)].name);
}

/* A bare 2 x 3 picture of 4 px cells (no labels: no font needed). */
static const float values[6] = {0.0f, 0.25f, 0.5f, 1.0f, 0.75f, 0.125f};
static const struct heatmap_matrix mats[1] = {{values, 2, 3, NULL}};
static const struct heatmap_options opts = {.colormap = HEATMAP_VIRIDIS,
                                            .cell = 4,
                                            .labels = false,
                                            .max_pixels = 1 << 20};
static const struct heatmap_text texts[2] = {{"Title", "a & b"},
                                             {"attnd:min", "0"}};
static const struct image_picture picture = {mats, 1, &opts, texts, 2};

static void test_png_writer(void **state)
{
    (void)state;
    const struct image_writer *w = &image_writers[IMAGE_PNG];
    char err[256];
    int width = -1, height = -1;
    size_t bytes = 99;
    /* the size the drawing library measures; no bound, whatever grow */
    assert_int_equal(
        w->measure(&picture, 1000, &width, &height, &bytes, err, sizeof err),
        DRAW_OK);
    int lw, lh;
    assert_int_equal(
        heatmap_measure(mats, 1, &opts, texts, 2, &lw, &lh, err, sizeof err),
        DRAW_OK);
    assert_int_equal(width, lw);
    assert_int_equal(height, lh);
    assert_int_equal(width, 12);
    assert_int_equal(height, 8);
    assert_int_equal(bytes, 0);
    /* the bytes heatmap_render_png() gives, max_bytes ignored */
    unsigned char *png = NULL, *direct = NULL;
    size_t len = 0, direct_len = 0;
    assert_int_equal(w->encode(&picture, 1, &png, &len, err, sizeof err),
                     DRAW_OK);
    assert_int_equal(heatmap_render_png(mats, 1, &opts, texts, 2, &direct,
                                        &direct_len, err, sizeof err),
                     DRAW_OK);
    assert_true(len > 8 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
    assert_int_equal(len, direct_len);
    assert_memory_equal(png, direct, len);
    free(png);
    free(direct);
    /* the canvas and the encoder's room: 3 + 4.5 bytes a pixel */
    assert_int_equal(w->held(12, 8, 0), 96 * 3 + 96 * 9 / 2);
    assert_int_equal(w->held(12, 8, 12345), 96 * 3 + 96 * 9 / 2);
    /* a refusal is the library's, with its message */
    struct heatmap_options small = opts;
    small.max_pixels = 95;
    const struct image_picture too_big = {mats, 1, &small, NULL, 0};
    assert_int_equal(
        w->measure(&too_big, 0, &width, &height, &bytes, err, sizeof err),
        DRAW_E_TOO_BIG);
    assert_non_null(strstr(err, "95"));
}

static void test_svg_writer(void **state)
{
    (void)state;
    const struct image_writer *w = &image_writers[IMAGE_SVG];
    char err[256];
    int width = -1, height = -1;
    size_t bytes = 0, bound = 0;
    int lw, lh;
    assert_int_equal(heatmap_measure_svg(mats, 1, &opts, texts, 2, &lw, &lh,
                                         &bound, err, sizeof err),
                     DRAW_OK);
    /* the library's size and bound, and grow more */
    assert_int_equal(
        w->measure(&picture, 100, &width, &height, &bytes, err, sizeof err),
        DRAW_OK);
    assert_int_equal(width, 12);
    assert_int_equal(height, 8);
    assert_int_equal(width, lw);
    assert_int_equal(height, lh);
    assert_true(bound > 0);
    assert_int_equal(bytes, bound + 100);
    /* the text heatmap_render_svg() gives within the bound */
    unsigned char *svg = NULL;
    char *direct = NULL;
    size_t len = 0, direct_len = 0;
    assert_int_equal(w->encode(&picture, bytes, &svg, &len, err, sizeof err),
                     DRAW_OK);
    assert_int_equal(heatmap_render_svg(mats, 1, &opts, texts, 2, bound,
                                        &direct, &direct_len, err, sizeof err),
                     DRAW_OK);
    assert_true(len > 5 && !memcmp(svg, "<?xml", 5));
    assert_true(len <= bytes);
    assert_int_equal(len, direct_len);
    assert_memory_equal(svg, direct, len);
    assert_non_null(strstr((const char *)svg, "<title>a &amp; b</title>"));
    free(svg);
    free(direct);
    /* past max_bytes it is refused, naming the cap */
    assert_int_equal(w->encode(&picture, 64, &svg, &len, err, sizeof err),
                     DRAW_E_TOO_BIG);
    assert_null(svg);
    assert_non_null(strstr(err, "over 64 bytes"));
    /* the buffer doubling as it grows: half again, and its first room */
    assert_int_equal(w->held(12, 8, 1000), 1000 + 500 + 4096);
    assert_int_equal(w->held(0, 0, 0), 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_png_writer),
        cmocka_unit_test(test_svg_writer),
    };
    return cmocka_run_group_tests_name("image_format", tests, NULL, NULL);
}
