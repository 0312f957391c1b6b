/*
 * test_heatmap.c - heatmap PNGs decoded back with libpng and checked:
 * sizes, colours against matplotlib's published colormap values, text
 * chunks, label margins, grid layout, determinism, caps and bad input;
 * the diverging map and the symmetric scale of signed values, in the PNG
 * and in the SVG drawn from the same arguments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "colormap.h"
#include "heatmap.h"
#include "heatmap_layout.h" /* the tick texts */
#include "pngw.h"

#include <png.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* heatmap_font_init's default: ATTND_FONT, DejaVu Sans */
#define FONT NULL

static const char *const sentence[9] = {
    "the", "cat", "chased", "the", "mouse", "because", "it", "was", "hungry"};

/* ------------------------------------------------------------ decoding */

#define MAX_TEXTS 8

/* A decoded PNG: RGB pixels [h][w][3] and its text chunks. */
struct image {
    unsigned w, h;
    unsigned char *rgb;
    int n_text;
    char key[MAX_TEXTS][80];
    char *text[MAX_TEXTS];
    int compression[MAX_TEXTS];
};

struct reader {
    const unsigned char *p;
    size_t len, pos;
};

static void read_bytes(png_structp png, png_bytep out, size_t n)
{
    struct reader *r = png_get_io_ptr(png);
    if (n > r->len - r->pos)
        png_error(png, "truncated");
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
}

static void image_free(struct image *img)
{
    free(img->rgb);
    for (int i = 0; i < img->n_text; i++)
        free(img->text[i]);
    memset(img, 0, sizeof *img);
}

/* Decode an 8-bit RGB PNG; fails the test on anything else. */
static void decode(const unsigned char *data, size_t len, struct image *img)
{
    memset(img, 0, sizeof *img);
    assert_true(len > 8 && png_sig_cmp(data, 0, 8) == 0);
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    assert_non_null(png);
    png_infop info = png_create_info_struct(png);
    assert_non_null(info);
    struct reader r = {data, len, 0};
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        fail_msg("libpng could not decode the heatmap");
    }
    png_set_read_fn(png, &r, read_bytes);
    png_read_info(png, info);
    assert_int_equal(png_get_color_type(png, info), PNG_COLOR_TYPE_RGB);
    assert_int_equal(png_get_bit_depth(png, info), 8);
    img->w = png_get_image_width(png, info);
    img->h = png_get_image_height(png, info);
    img->rgb = malloc((size_t)img->w * img->h * 3);
    assert_non_null(img->rgb);
    for (unsigned y = 0; y < img->h; y++)
        png_read_row(png, img->rgb + (size_t)y * img->w * 3, NULL);
    png_read_end(png, info);
    png_textp t;
    int n = 0;
    png_get_text(png, info, &t, &n);
    assert_true(n <= MAX_TEXTS);
    for (int i = 0; i < n; i++) {
        snprintf(img->key[i], sizeof img->key[i], "%s", t[i].key);
        img->text[i] = strdup(t[i].text);
        img->compression[i] = t[i].compression;
    }
    img->n_text = n;
    png_destroy_read_struct(&png, &info, NULL);
}

static const unsigned char *px(const struct image *img, unsigned x, unsigned y)
{
    return img->rgb + ((size_t)y * img->w + x) * 3;
}

static bool is_white(const unsigned char *p)
{
    return p[0] == 255 && p[1] == 255 && p[2] == 255;
}

/* Render and decode in one step; the render must succeed. */
static void render(const struct heatmap_matrix *m, size_t n,
                   const struct heatmap_options *o,
                   const struct heatmap_text *t, size_t nt, struct image *img)
{
    unsigned char *png = NULL;
    size_t len = 0;
    char err[256];
    if (heatmap_render_png(m, n, o, t, nt, &png, &len, err, sizeof err) !=
        DRAW_OK)
        fail_msg("render failed: %s", err);
    decode(png, len, img);
    free(png);
}

/* The table entry nearest to rgb (squared RGB distance). */
static unsigned nearest_index(enum heatmap_colormap map,
                              const unsigned char *rgb)
{
    const unsigned char(*t)[3] = colormap_table(map);
    unsigned best = 0;
    long best_d = -1;
    for (unsigned i = 0; i < COLORMAP_SIZE; i++) {
        long d = 0;
        for (int k = 0; k < 3; k++)
            d += (long)(t[i][k] - rgb[k]) * (t[i][k] - rgb[k]);
        if (best_d < 0 || d < best_d)
            best_d = d, best = i;
    }
    return best;
}

/* Attention-like rows: a bright diagonal over a falling background. */
static void fill_weights(float *w, size_t rows, size_t cols, unsigned seed)
{
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++)
            w[r * cols + c] = (float)((r * 7 + c * 3 + seed) % 11) / 40.0f +
                              (r == c ? 0.5f : 0.0f);
    }
}

/* ---------------------------------------------------------------- tests */

static int setup(void **state)
{
    (void)state;
    char err[256];
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

static void test_colormap_tables(void **state)
{
    (void)state;
    /* matplotlib: viridis(0) = #440154, viridis(0.5) = #21918c,
     * viridis(1) = #fde725, magma(0) = #000004, magma(1) = #fcfdbf */
    const unsigned char(*v)[3] = colormap_table(HEATMAP_VIRIDIS);
    const unsigned char(*m)[3] = colormap_table(HEATMAP_MAGMA);
    const unsigned char(*g)[3] = colormap_table(HEATMAP_GRAY);
    assert_memory_equal(v[0], ((unsigned char[]){0x44, 0x01, 0x54}), 3);
    assert_memory_equal(v[128], ((unsigned char[]){0x21, 0x91, 0x8c}), 3);
    assert_memory_equal(v[255], ((unsigned char[]){0xfd, 0xe7, 0x25}), 3);
    assert_memory_equal(m[0], ((unsigned char[]){0x00, 0x00, 0x04}), 3);
    assert_memory_equal(m[255], ((unsigned char[]){0xfc, 0xfd, 0xbf}), 3);
    for (unsigned i = 0; i < COLORMAP_SIZE; i++) {
        assert_true(g[i][0] == i && g[i][1] == i && g[i][2] == i);
        /* both maps grow lighter all the way (Rec. 709 luma, 0.5 slack
         * for the 8-bit rounding) */
        if (i > 0) {
            for (int k = 0; k < 2; k++) {
                const unsigned char(*t)[3] = k ? m : v;
                const double y0 = 0.2126 * t[i - 1][0] + 0.7152 * t[i - 1][1] +
                                  0.0722 * t[i - 1][2];
                const double y1 =
                    0.2126 * t[i][0] + 0.7152 * t[i][1] + 0.0722 * t[i][2];
                assert_true(y1 > y0 - 0.5);
            }
        }
    }
    assert_int_equal(colormap_index(0.0f), 0);
    assert_int_equal(colormap_index(0.5f), 128);
    assert_int_equal(colormap_index(1.0f), 255);
    assert_int_equal(colormap_index(-3.0f), 0);
    assert_int_equal(colormap_index(7.0f), 255);
    assert_int_equal(colormap_index(NAN), 0);

    enum heatmap_colormap map;
    const char *names[] = {"viridis", "magma", "gray", "diverging"};
    for (int i = 0; i < 4; i++) {
        assert_true(heatmap_colormap_parse(names[i], &map));
        assert_int_equal(map, i);
        assert_string_equal(heatmap_colormap_name(map), names[i]);
    }
    assert_false(heatmap_colormap_parse("jet", &map));
    assert_false(heatmap_colormap_parse("", &map));
    assert_false(heatmap_colormap_parse(NULL, &map));
}

/* Without labels the image is the matrix alone, pixel for pixel. */
static void test_bare_is_exact(void **state)
{
    (void)state;
    float w[15];
    for (int i = 0; i < 15; i++)
        w[i] = (float)((i * 7) % 15) / 10.0f; /* max 1.4 */
    struct heatmap_matrix m = {w, 3, 5, "ignored without labels"};
    struct heatmap_options o = {.colormap = HEATMAP_MAGMA, .cell = 7};
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    assert_int_equal(img.w, 35);
    assert_int_equal(img.h, 21);
    const unsigned char(*t)[3] = colormap_table(HEATMAP_MAGMA);
    for (unsigned y = 0; y < img.h; y++) {
        for (unsigned x = 0; x < img.w; x++) {
            const float v = w[(y / 7) * 5 + x / 7];
            const unsigned want = (unsigned)lroundf(v / 1.4f * 255.0f);
            assert_memory_equal(px(&img, x, y), t[want], 3);
        }
    }
    image_free(&img);

    /* automatic cells: 300 px on the longer side, 1 to 48 px a cell */
    static float big[1600];
    const struct {
        size_t rows, cols;
        unsigned w, h;
    } cases[] = {{9, 9, 306, 306}, {1, 1, 48, 48},     {1, 700, 700, 1},
                 {3, 12, 300, 75}, {40, 40, 320, 320}, {100, 3, 9, 300}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct heatmap_matrix a = {big, cases[i].rows, cases[i].cols, NULL};
        struct heatmap_options ao = {.colormap = HEATMAP_VIRIDIS};
        render(&a, 1, &ao, NULL, 0, &img);
        assert_int_equal(img.w, cases[i].w);
        assert_int_equal(img.h, cases[i].h);
        image_free(&img);
    }
}

/* Cells along a rising row get rising colours, for each colormap. */
static void test_colours_follow_weights(void **state)
{
    (void)state;
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (float)i / 15.0f;
    for (int map = HEATMAP_VIRIDIS; map <= HEATMAP_MAGMA; map++) {
        struct heatmap_matrix m = {w, 1, 16, NULL};
        struct heatmap_options o = {.colormap = map, .cell = 4};
        struct image img;
        render(&m, 1, &o, NULL, 0, &img);
        unsigned prev = 0;
        for (unsigned c = 0; c < 16; c++) {
            const unsigned idx = nearest_index(map, px(&img, c * 4 + 2, 2));
            assert_true(abs((int)idx - (int)lroundf(w[c] * 255.0f)) <= 1);
            if (c > 0)
                assert_true(idx > prev);
            prev = idx;
        }
        image_free(&img);
    }
}

/* Weights above 1 (dropout scaling): the scale runs to the largest. */
static void test_scale_uses_max(void **state)
{
    (void)state;
    float w[4] = {0.0f, 1.25f, 2.5f, 0.625f};
    struct heatmap_matrix m = {w, 2, 2, NULL};
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS, .cell = 3};
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    const unsigned char(*t)[3] = colormap_table(HEATMAP_VIRIDIS);
    assert_memory_equal(px(&img, 1, 1), t[0], 3);
    assert_memory_equal(px(&img, 4, 1), t[128], 3);
    assert_memory_equal(px(&img, 1, 4), t[255], 3);
    assert_memory_equal(px(&img, 4, 4), t[64], 3);
    image_free(&img);

    /* all zero: the scale is 0 .. 1 and every cell the low end */
    float z[4] = {0};
    m.values = z;
    render(&m, 1, &o, NULL, 0, &img);
    assert_memory_equal(px(&img, 4, 4), t[0], 3);
    image_free(&img);
}

/* A grid of two matrices, one of large weights and one of small: with a
 * shared scale the small one stays at the bottom of the colour map; with
 * a scale per tile its largest weight takes the top colour, as the large
 * one's does, and every weight is coloured by its share of its own
 * matrix's largest. */
static void test_scale_per_tile(void **state)
{
    (void)state;
    float big[4] = {0.0f, 0.5f, 1.0f, 0.25f};
    float small[4] = {0.0f, 0.005f, 0.01f, 0.0025f};
    const struct heatmap_matrix m[2] = {{big, 2, 2, NULL}, {small, 2, 2, NULL}};
    struct heatmap_options o = {
        .colormap = HEATMAP_VIRIDIS, .cell = 3, .grid_cols = 2};
    const unsigned char(*t)[3] = colormap_table(HEATMAP_VIRIDIS);
    struct image img;
    /* bare: the second matrix starts after 2 cells and a 1-cell gutter */
    const unsigned x1 = 9;
    render(m, 2, &o, NULL, 0, &img);
    assert_memory_equal(px(&img, 1, 4), t[255], 3);
    assert_true(nearest_index(HEATMAP_VIRIDIS, px(&img, x1 + 1, 4)) <= 3);
    image_free(&img);

    o.scale = HEATMAP_SCALE_TILE;
    render(m, 2, &o, NULL, 0, &img);
    for (unsigned k = 0; k < 2; k++) {
        const unsigned x = k * x1;
        assert_memory_equal(px(&img, x + 1, 1), t[0], 3);
        assert_memory_equal(px(&img, x + 4, 1), t[128], 3);
        assert_memory_equal(px(&img, x + 1, 4), t[255], 3);
        assert_memory_equal(px(&img, x + 4, 4), t[64], 3);
    }
    image_free(&img);

    /* labelled, the colorbar reads in percent of each tile's largest */
    o.labels = true;
    o.cell = 24;
    render(m, 2, &o, NULL, 0, &img);
    assert_true(img.w > 2 * 48);
    image_free(&img);

    /* a scale the library does not know is the caller's bug */
    o.scale = (enum heatmap_scale)7;
    unsigned char *png = NULL;
    size_t len = 0;
    char err[256];
    assert_int_equal(
        heatmap_render_png(m, 2, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_E_INVALID);
    assert_null(png);
}

/* Every tick text heatmap_ticks_make writes has one of the forms whose
 * room the layout keeps (D.DDDD, DDDDD, D.De-DD, D.DeDD), over every scale
 * a float can top. */
static void test_tick_texts_keep_their_forms(void **state)
{
    (void)state;
    for (double top = 1.5e-45; top < 3.4e38; top *= 1.37) {
        struct heatmap_ticks t;
        heatmap_ticks_make(top, HEATMAP_MAX_TICKS, false, &t);
        assert_true(t.n >= 3 && t.n <= HEATMAP_MAX_TICKS);
        for (size_t i = 0; i < t.n; i++) {
            const char *s = t.text[i];
            const char *e = strchr(s, 'e');
            const size_t len = strlen(s);
            bool ok = strspn(s, "0123456789.e-") == len;
            if (e) /* a digit or two, maybe a point, e, a sign, two digits */
                ok = ok && e - s <= 3 && strlen(e + 1) <= 3;
            else
                ok = ok && (strchr(s, '.') ? len <= 6 : len <= 5);
            if (!ok)
                fail_msg("top %g: tick \"%s\"", top, s);
        }
    }
    struct heatmap_ticks t;
    heatmap_ticks_make(1.0, 5, true, &t);
    assert_int_equal(t.n, 5);
    assert_string_equal(t.text[0], "0%");
    assert_string_equal(t.text[1], "25%");
    assert_string_equal(t.text[4], "100%");
    heatmap_ticks_make(7.5e-5, 5, false, &t);
    assert_string_equal(t.text[1], "2e-5");
    heatmap_ticks_make(1.0, 5, false, &t);
    assert_string_equal(t.text[1], "0.25");
}

/* heatmap_measure: the size heatmap_render_png draws, for any values, and
 * its refusals, without values. */
static void test_measure_is_the_drawn_size(void **state)
{
    (void)state;
    static const char *const tokens[] = {"[CLS]", "the", "cat", "sat",
                                         "on",    "the", "mat", "[SEP]"};
    float w[64];
    const struct heatmap_text texts[] = {{"attnd:x", "y"}};
    /* values whose ticks are as different as they come: 0 .. 1, tiny,
     * huge, all zero */
    static const float tops[] = {1.0f, 3.7e-7f, 8.5e6f, 0.0f, 0.031f};
    const enum heatmap_scale scales[] = {
        HEATMAP_SCALE_SHARED, HEATMAP_SCALE_TILE, HEATMAP_SCALE_SYMMETRIC};
    for (size_t sc = 0; sc < 3; sc++) {
        for (size_t grid = 1; grid <= 4; grid += 3) {
            struct heatmap_matrix m[4], shapes[4];
            const struct heatmap_options o = {.colormap = HEATMAP_MAGMA,
                                              .labels = true,
                                              .title = "every head",
                                              .row_labels = tokens,
                                              .col_labels = tokens,
                                              .scale = scales[sc]};
            for (size_t k = 0; k < grid; k++) {
                m[k] = (struct heatmap_matrix){w, 8, 8, "head"};
                shapes[k] = (struct heatmap_matrix){NULL, 8, 8, "head"};
            }
            int mw = 0, mh = 0;
            char err[256];
            assert_int_equal(heatmap_measure(shapes, grid, &o, texts, 1, &mw,
                                             &mh, err, sizeof err),
                             DRAW_OK);
            for (size_t v = 0; v < sizeof tops / sizeof tops[0]; v++) {
                /* signed on the symmetric scale: ticks with a minus */
                const bool sym = scales[sc] == HEATMAP_SCALE_SYMMETRIC;
                for (size_t i = 0; i < 64; i++)
                    w[i] = tops[v] * (float)((i * 5) % 9) / 8.0f *
                           (sym && i % 2 ? -1.0f : 1.0f);
                struct image img;
                render(m, grid, &o, texts, 1, &img);
                if ((int)img.w != mw || (int)img.h != mh)
                    fail_msg("top %g, %zu matrices: drawn %u x %u, measured "
                             "%d x %d",
                             (double)tops[v], grid, img.w, img.h, mw, mh);
                image_free(&img);
            }
        }
    }
    /* the refusals are the drawing's: past max_pixels, and a text too long */
    const struct heatmap_matrix one = {NULL, 8, 8, NULL};
    struct heatmap_options o = {.cell = 64, .labels = false, .max_pixels = 100};
    int mw = 1, mh = 1;
    char err[256];
    assert_int_equal(
        heatmap_measure(&one, 1, &o, NULL, 0, &mw, &mh, err, sizeof err),
        DRAW_E_TOO_BIG);
    assert_non_null(strstr(err, "exceeds max_pixels 100"));
    assert_int_equal(mw, 0);
    o.max_pixels = 0;
    char *long_text = malloc(((size_t)1 << 20) + 2);
    memset(long_text, 'a', ((size_t)1 << 20) + 1);
    long_text[((size_t)1 << 20) + 1] = '\0';
    const struct heatmap_text too_long[] = {{"attnd:tokens", long_text}};
    assert_int_equal(
        heatmap_measure(&one, 1, &o, too_long, 1, &mw, &mh, err, sizeof err),
        DRAW_E_TOO_BIG);
    free(long_text);
    assert_int_equal(
        heatmap_measure(&one, 1, &o, NULL, 0, &mw, &mh, err, sizeof err),
        DRAW_OK);
    assert_int_equal(mw, 8 * 64);
    assert_int_equal(mh, 8 * 64);
}

/* The bounding box of the matrix: pixels of colormap colours (never gray
 * in viridis and magma, unlike text) in runs of at least min_run, longer
 * than the colorbar is wide. */
static void find_matrix(const struct image *img, enum heatmap_colormap map,
                        unsigned min_run, unsigned box[4])
{
    const unsigned char(*t)[3] = colormap_table(map);
    unsigned x0 = img->w, y0 = img->h, x1 = 0, y1 = 0;
    for (unsigned y = 0; y < img->h; y++) {
        unsigned run = 0;
        for (unsigned x = 0; x < img->w; x++) {
            const unsigned char *p = px(img, x, y);
            const bool in_map = !(p[0] == p[1] && p[1] == p[2]) &&
                                !memcmp(p, t[nearest_index(map, p)], 3);
            run = in_map ? run + 1 : 0;
            if (run >= min_run) {
                if (x + 1 - run < x0)
                    x0 = x + 1 - run;
                if (x > x1)
                    x1 = x;
                if (y < y0)
                    y0 = y;
                if (y > y1)
                    y1 = y;
            }
        }
    }
    box[0] = x0, box[1] = y0, box[2] = x1, box[3] = y1;
}

static size_t count_ink(const struct image *img, unsigned x0, unsigned y0,
                        unsigned x1, unsigned y1)
{
    size_t n = 0;
    for (unsigned y = y0; y < y1; y++)
        for (unsigned x = x0; x < x1; x++)
            n += !is_white(px(img, x, y));
    return n;
}

/* With labels: tokens left and above the matrix, a colorbar right of it. */
static void test_labels_in_margins(void **state)
{
    (void)state;
    float w[81];
    fill_weights(w, 9, 9, 0);
    struct heatmap_matrix m = {w, 9, 9, "layer 1, head 1"};
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS,
                                .labels = true,
                                .row_labels = sentence,
                                .col_labels = sentence};
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    assert_true(img.w >= 300 && img.h >= 300);
    assert_true(img.w > 306 && img.h > 306);
    unsigned box[4];
    find_matrix(&img, HEATMAP_VIRIDIS, 40, box);
    assert_int_equal(box[2] - box[0] + 1, 306);
    assert_int_equal(box[3] - box[1] + 1, 306);
    assert_true(box[0] > 20 && box[1] > 40);
    /* row labels: ink left of the matrix, level with it */
    assert_true(count_ink(&img, 0, box[1], box[0] - 2, box[3]) > 200);
    /* key labels and title: ink above it */
    assert_true(count_ink(&img, box[0], 0, box[2], box[1] - 2) > 300);
    /* colorbar and ticks: ink right of it */
    assert_true(count_ink(&img, box[2] + 3, box[1], img.w, box[3]) > 1000);
    /* every row label: some ink level with each row, left of the matrix */
    for (unsigned r = 0; r < 9; r++) {
        const unsigned y = box[1] + r * 34;
        assert_true(count_ink(&img, 0, y + 8, box[0] - 2, y + 26) > 10);
    }
    /* nothing below the matrix but margin */
    assert_int_equal(count_ink(&img, 0, box[3] + 1, box[2], img.h), 0);
    image_free(&img);

    /* labels off: not one pixel outside the colormap */
    o.labels = false;
    render(&m, 1, &o, NULL, 0, &img);
    assert_int_equal(img.w, 306);
    assert_int_equal(img.h, 306);
    const unsigned char(*t)[3] = colormap_table(HEATMAP_VIRIDIS);
    for (unsigned y = 0; y < img.h; y++) {
        for (unsigned x = 0; x < img.w; x++) {
            const unsigned char *p = px(&img, x, y);
            assert_memory_equal(p, t[nearest_index(HEATMAP_VIRIDIS, p)], 3);
        }
    }
    image_free(&img);
}

/* The gray map with labels: every pixel is a gray, cells darker to
 * lighter with the weight. */
static void test_gray_is_gray(void **state)
{
    (void)state;
    float w[81];
    for (int i = 0; i < 81; i++)
        w[i] = (float)i / 80.0f;
    struct heatmap_matrix m = {w, 9, 9, "gray"};
    struct heatmap_options o = {.colormap = HEATMAP_GRAY,
                                .labels = true,
                                .row_labels = sentence,
                                .col_labels = sentence};
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    for (unsigned y = 0; y < img.h; y++) {
        for (unsigned x = 0; x < img.w; x++) {
            const unsigned char *p = px(&img, x, y);
            assert_true(p[0] == p[1] && p[1] == p[2]);
        }
    }
    image_free(&img);
    o.labels = false;
    o.cell = 5;
    render(&m, 1, &o, NULL, 0, &img);
    int prev = -1;
    for (unsigned i = 0; i < 81; i++) {
        const int lum = px(&img, (i % 9) * 5 + 2, (i / 9) * 5 + 2)[0];
        assert_int_equal(lum, (int)lroundf(w[i] * 255.0f));
        assert_true(lum >= prev);
        prev = lum;
    }
    image_free(&img);
}

static void test_text_chunks(void **state)
{
    (void)state;
    float w[4] = {0.1f, 0.9f, 0.5f, 0.5f};
    struct heatmap_matrix m = {w, 2, 2, NULL};
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS, .cell = 2};
    const struct heatmap_text texts[] = {
        {"Title", "attention weights"},
        {"Tokens", "the cat \xe6\xb3\xa8\xe6\x84\x8f \xf0\x9f\x99\x82"},
        {"Comment", "two\nlines"},
    };
    struct image img;
    render(&m, 1, &o, texts, 3, &img);
    assert_int_equal(img.n_text, 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(img.key[i], texts[i].key);
        assert_string_equal(img.text[i], texts[i].text);
    }
    assert_int_equal(img.compression[0], PNG_TEXT_COMPRESSION_NONE); /* tEXt */
    assert_int_equal(img.compression[1], PNG_ITXT_COMPRESSION_NONE); /* iTXt */
    assert_int_equal(img.compression[2], PNG_TEXT_COMPRESSION_NONE);
    image_free(&img);

    /* bad keys and texts fail with a message */
    const struct heatmap_text bad[][1] = {
        {{"", "x"}},
        {{" lead", "x"}},
        {{"two  spaces", "x"}},
        {{"K\xc3\xa9y", "x"}},
        {{"0123456789012345678901234567890123456789012345678901234567890123"
          "4567890123456789", /* 80 characters */
          "x"}},
        {{"Key", "\xff\xfe"}},
        {{"Key", "\xed\xa0\x80"}}, /* a surrogate */
        {{"Key", NULL}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        unsigned char *png = (unsigned char *)1;
        size_t len = 1;
        char err[256] = "";
        if (heatmap_render_png(&m, 1, &o, bad[i], 1, &png, &len, err,
                               sizeof err) != DRAW_E_INVALID)
            fail_msg("text %zu not refused as invalid", i);
        assert_null(png);
        assert_int_equal(len, 0);
        assert_true(strlen(err) > 10);
    }
}

static void test_grid_layout(void **state)
{
    (void)state;
    float w[8][81];
    struct heatmap_matrix m[8];
    char titles[8][32];
    for (int h = 0; h < 8; h++) {
        fill_weights(w[h], 9, 9, (unsigned)h);
        snprintf(titles[h], sizeof titles[h], "head %d of 8", h + 1);
        m[h] = (struct heatmap_matrix){w[h], 9, 9, titles[h]};
    }
    /* 8 panels: 3 across, 3 down, the last place empty; 1-cell gutters */
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS, .cell = 10};
    struct image img;
    render(m, 8, &o, NULL, 0, &img);
    assert_int_equal(img.w, 3 * 90 + 2 * 10);
    assert_int_equal(img.h, 3 * 90 + 2 * 10);
    float vmax = 0;
    for (int h = 0; h < 8; h++)
        for (int i = 0; i < 81; i++)
            vmax = w[h][i] > vmax ? w[h][i] : vmax;
    const unsigned char(*t)[3] = colormap_table(HEATMAP_VIRIDIS);
    for (int h = 0; h < 8; h++) {
        const unsigned x = (unsigned)(h % 3) * 100, y = (unsigned)(h / 3) * 100;
        for (int i = 0; i < 81; i += 10) {
            const unsigned want = colormap_index(w[h][i] / vmax);
            assert_memory_equal(
                px(&img, x + (i % 9) * 10 + 5, y + (i / 9) * 10 + 5), t[want],
                3);
        }
    }
    assert_int_equal(count_ink(&img, 90, 0, 100, img.h), 0);  /* gutter */
    assert_int_equal(count_ink(&img, 0, 190, img.w, 200), 0); /* gutter */
    assert_int_equal(count_ink(&img, 200, 200, 290, 290), 0); /* 9th place */
    image_free(&img);

    /* with labels: three labelled panels across and down */
    o.cell = 0;
    o.labels = true;
    o.title = "layer 1";
    o.row_labels = sentence;
    o.col_labels = sentence;
    render(m, 8, &o, NULL, 0, &img);
    assert_true(img.w >= 3 * 306 + 2 * 60 && img.w <= 1600);
    assert_true(img.h >= 3 * 306 + 2 * 60 && img.h <= 1600);
    /* the empty ninth place stays white */
    assert_int_equal(count_ink(&img, img.w * 70 / 100, img.h * 75 / 100,
                               img.w * 85 / 100, img.h * 95 / 100),
                     0);
    image_free(&img);
}

struct job {
    const struct heatmap_matrix *m;
    size_t n;
    const struct heatmap_options *o;
    unsigned char *png;
    size_t len;
};

static void *render_job(void *arg)
{
    struct job *j = arg;
    char err[256];
    if (heatmap_render_png(j->m, j->n, j->o, NULL, 0, &j->png, &j->len, err,
                           sizeof err) != DRAW_OK)
        j->png = NULL;
    return NULL;
}

/* Same input, same bytes: again, and from several threads at once. */
static void test_deterministic(void **state)
{
    (void)state;
    float w[4][81];
    struct heatmap_matrix m[4];
    for (int h = 0; h < 4; h++) {
        fill_weights(w[h], 9, 9, (unsigned)h);
        m[h] = (struct heatmap_matrix){w[h], 9, 9, "head"};
    }
    struct heatmap_options o = {.colormap = HEATMAP_MAGMA,
                                .labels = true,
                                .title = "grid",
                                .row_labels = sentence,
                                .col_labels = sentence};
    struct job base = {m, 4, &o, NULL, 0};
    render_job(&base);
    assert_non_null(base.png);
    enum { THREADS = 4 };
    struct job jobs[THREADS];
    pthread_t tid[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct job){m, (size_t)(i % 2 ? 4 : 1), &o, NULL, 0};
        assert_int_equal(pthread_create(&tid[i], NULL, render_job, &jobs[i]),
                         0);
    }
    struct job again = {m, 4, &o, NULL, 0};
    render_job(&again);
    assert_int_equal(again.len, base.len);
    assert_memory_equal(again.png, base.png, base.len);
    struct job single = {m, 1, &o, NULL, 0};
    render_job(&single);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(tid[i], NULL), 0);
        const struct job *want = i % 2 ? &base : &single;
        assert_non_null(jobs[i].png);
        assert_int_equal(jobs[i].len, want->len);
        assert_memory_equal(jobs[i].png, want->png, want->len);
        free(jobs[i].png);
    }
    /* no timestamp chunk */
    for (size_t i = 8; i + 8 <= base.len;) {
        const size_t n = (size_t)base.png[i] << 24 | base.png[i + 1] << 16 |
                         base.png[i + 2] << 8 | base.png[i + 3];
        assert_true(memcmp(base.png + i + 4, "tIME", 4) != 0);
        i += n + 12;
    }
    free(base.png);
    free(again.png);
    free(single.png);
}

static void test_max_pixels(void **state)
{
    (void)state;
    float w[81];
    fill_weights(w, 9, 9, 1);
    struct heatmap_matrix m = {w, 9, 9, NULL};
    struct heatmap_options o = {
        .colormap = HEATMAP_VIRIDIS, .cell = 10, .max_pixels = 8099};
    unsigned char *png = NULL;
    size_t len = 0;
    char err[256] = "";
    assert_int_equal(
        heatmap_render_png(&m, 1, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_E_TOO_BIG);
    assert_null(png);
    assert_non_null(strstr(err, "90 x 90"));
    assert_non_null(strstr(err, "max_pixels"));
    o.max_pixels = 8100;
    assert_int_equal(
        heatmap_render_png(&m, 1, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_OK);
    free(png);

    /* labels count too: the bare 8100 px pass, the labelled image not */
    o.labels = true;
    o.row_labels = o.col_labels = sentence;
    o.max_pixels = 9000;
    assert_int_equal(
        heatmap_render_png(&m, 1, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_E_TOO_BIG);
    assert_non_null(strstr(err, "max_pixels"));

    /* the built-in caps hold with max_pixels 0 */
    static float big[4 * 3000];
    struct heatmap_matrix tall = {big, 3000, 4, NULL};
    o = (struct heatmap_options){.colormap = HEATMAP_GRAY, .cell = 20};
    assert_int_equal(
        heatmap_render_png(&tall, 1, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_E_TOO_BIG);
    assert_non_null(strstr(err, "3000"));
}

static void test_bad_input(void **state)
{
    (void)state;
    float w[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    struct heatmap_matrix ok = {w, 2, 3, NULL};
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS};
    unsigned char *png = NULL;
    size_t len = 0;
    char err[256];

#define REFUSED(mats, n, opts, texts, nt, status, needle)                      \
    do {                                                                       \
        err[0] = '\0';                                                         \
        assert_int_equal(heatmap_render_png(mats, n, opts, texts, nt, &png,    \
                                            &len, err, sizeof err),            \
                         status);                                              \
        assert_null(png);                                                      \
        if (!strstr(err, needle))                                              \
            fail_msg("message \"%s\" lacks \"%s\"", err, needle);              \
    } while (0)

    REFUSED(&ok, 1, NULL, NULL, 0, DRAW_E_INVALID, "options");
    REFUSED(NULL, 1, &o, NULL, 0, DRAW_E_INVALID, "matrices");
    REFUSED(&ok, 0, &o, NULL, 0, DRAW_E_INVALID, "matrices");
    struct heatmap_matrix empty = {w, 0, 3, NULL};
    REFUSED(&empty, 1, &o, NULL, 0, DRAW_E_INVALID, "0 x 3");
    struct heatmap_matrix no_values = {NULL, 2, 3, NULL};
    REFUSED(&no_values, 1, &o, NULL, 0, DRAW_E_INVALID, "no values");
    struct heatmap_matrix two[2] = {ok, {w, 3, 2, NULL}};
    REFUSED(two, 2, &o, NULL, 0, DRAW_E_INVALID, "3 x 2");
    float neg[6] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, 0.6f};
    struct heatmap_matrix negative = {neg, 2, 3, NULL};
    REFUSED(&negative, 1, &o, NULL, 0, DRAW_E_INVALID, "[0][2]");
    float inf[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, INFINITY};
    struct heatmap_matrix infinite = {inf, 2, 3, NULL};
    REFUSED(&infinite, 1, &o, NULL, 0, DRAW_E_INVALID, "[1][2]");
    struct heatmap_options big_cell = {.cell = 1000};
    REFUSED(&ok, 1, &big_cell, NULL, 0, DRAW_E_TOO_BIG, "cell 1000");
    struct heatmap_options bad_map = {.colormap = (enum heatmap_colormap)7};
    REFUSED(&ok, 1, &bad_map, NULL, 0, DRAW_E_INVALID, "colormap");
    struct heatmap_matrix huge = {w, (size_t)1 << 40, 3, NULL};
    REFUSED(&huge, 1, &o, NULL, 0, DRAW_E_TOO_BIG, "matrix of");
    struct heatmap_matrix wide = {w, 2, 20000, NULL};
    struct heatmap_options cell2 = {.cell = 2};
    REFUSED(&wide, 1, &cell2, NULL, 0, DRAW_E_TOO_BIG, "32768");
    const struct heatmap_text many[40] = {{"k", "v"}};
    REFUSED(&ok, 1, &o, many, 40, DRAW_E_INVALID, "40 texts");
    REFUSED(&ok, 1, &o, NULL, 1, DRAW_E_INVALID, "no array");
#undef REFUSED
}

static void test_font_errors(void **state)
{
    (void)state;
    char err[256] = "";
    assert_int_equal(
        heatmap_font_init("/nonexistent/attnd/font.ttf", err, sizeof err),
        DRAW_E_FONT);
    assert_non_null(strstr(err, "/nonexistent/attnd/font.ttf"));

    char path[] = "/tmp/attnd_test_font_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not a font at all", 17), 17);
    close(fd);
    err[0] = '\0';
    assert_int_equal(heatmap_font_init(path, err, sizeof err), DRAW_E_FONT);
    assert_non_null(strstr(err, path));
    unlink(path);

    /* the font loaded before still serves */
    float w[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    struct heatmap_matrix m = {w, 2, 2, "t"};
    struct heatmap_options o = {.labels = true};
    unsigned char *png = NULL;
    size_t len = 0;
    assert_int_equal(
        heatmap_render_png(&m, 1, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_OK);
    free(png);

    /* without a font, labelled renders fail cleanly, bare ones work */
    heatmap_font_free();
    assert_int_equal(
        heatmap_render_png(&m, 1, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_E_FONT);
    assert_null(png);
    assert_non_null(strstr(err, "font"));
    o.labels = false;
    assert_int_equal(
        heatmap_render_png(&m, 1, &o, NULL, 0, &png, &len, err, sizeof err),
        DRAW_OK);
    free(png);
    assert_int_equal(heatmap_font_init(FONT, err, sizeof err), DRAW_OK);
}

/* Labels the font lacks, broken UTF-8 and very long tokens draw without
 * harm, and long ones are cut short rather than widening the image. */
static void test_awkward_tokens(void **state)
{
    (void)state;
    char *long_token = malloc(20001);
    assert_non_null(long_token);
    for (int i = 0; i < 20000; i++)
        long_token[i] = (char)('a' + i % 26);
    long_token[20000] = '\0';
    char *long_cjk = malloc(3 * 3000 + 1);
    assert_non_null(long_cjk);
    for (int i = 0; i < 3000; i++)
        memcpy(long_cjk + 3 * i, "\xe6\xb3\xa8", 3);
    long_cjk[3 * 3000] = '\0';
    const char *tokens[12] = {
        "\xe6\xb3\xa8\xe6\x84\x8f\xe5\x8a\x9b", /* CJK */
        "\xf0\x9f\x99\x82\xf0\x9f\x8e\x89",     /* emoji */
        long_token,
        long_cjk,
        "\xff\xfe\xc3", /* broken UTF-8, cut mid-character */
        "\xed\xa0\x80 surrogate",
        "",
        NULL,
        "tab\there\nnewline",
        "   ",
        "e\xcc\x81\xcc\x81\xcc\x81", /* stacked combining marks */
        "\xe2\x80\xae"
        "rtl override",
    };
    float w[144];
    fill_weights(w, 12, 12, 3);
    struct heatmap_matrix m = {w, 12, 12, long_token};
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS,
                                .labels = true,
                                .row_labels = tokens,
                                .col_labels = tokens};
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    assert_true(img.w < 1000 && img.h < 1000);
    image_free(&img);
    /* and as the grid title and panel titles */
    struct heatmap_matrix two[2] = {m, m};
    o.title = long_cjk;
    render(two, 2, &o, NULL, 0, &img);
    assert_true(img.w < 2000 && img.h < 1000);
    image_free(&img);
    free(long_token);
    free(long_cjk);
}

/* Thousands of tokens: labels thin out or go, nothing overflows. */
static void test_many_tokens(void **state)
{
    (void)state;
    enum { N = 2000 };
    static char names[N][24];
    static const char *labels[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "token%d", i);
        labels[i] = names[i];
    }
    float *w = malloc((size_t)N * 3 * sizeof *w);
    assert_non_null(w);
    for (size_t i = 0; i < (size_t)N * 3; i++)
        w[i] = (float)(i % 7) / 7.0f;
    struct heatmap_matrix m = {w, N, 3, "tall"};
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS,
                                .labels = true,
                                .row_labels = labels,
                                .col_labels = labels};
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    assert_true(img.h >= N && img.h < N + 200);
    image_free(&img);

    /* 60 x 60 at 6 px: every k-th label, lines of text kept apart */
    float *sq = malloc(60 * 60 * sizeof *sq);
    assert_non_null(sq);
    fill_weights(sq, 60, 60, 5);
    struct heatmap_matrix s = {sq, 60, 60, NULL};
    o.cell = 6;
    render(&s, 1, &o, NULL, 0, &img);
    unsigned box[4];
    find_matrix(&img, HEATMAP_VIRIDIS, 40, box);
    assert_int_equal(box[3] - box[1] + 1, 360);
    /* the label column has blank rows between the lines of text */
    size_t blank = 0;
    for (unsigned y = box[1]; y <= box[3]; y++)
        blank += count_ink(&img, 0, y, box[0] - 8, y + 1) == 0;
    assert_true(blank > 120);
    assert_true(count_ink(&img, 0, box[1], box[0] - 8, box[3]) > 500);
    image_free(&img);
    free(sq);
    free(w);
}

/* The PNG writer alone: its output cap fails cleanly mid-stream (a
 * longjmp out of libpng that must leak nothing), bad shapes are refused. */
static void test_png_writer(void **state)
{
    (void)state;
    static unsigned char rgba[64 * 64 * 4];
    uint32_t x = 2463534242u; /* xorshift32: noise that does not deflate */
    for (size_t i = 0; i < sizeof rgba; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        rgba[i] = (unsigned char)(x >> 24);
    }
    unsigned char *out = NULL;
    size_t len = 0;
    char err[256] = "";
    assert_int_equal(pngw_encode(rgba, 64, 64, 4, NULL, 0, sizeof rgba * 2,
                                 &out, &len, err, sizeof err),
                     DRAW_OK);
    assert_true(len > 64 * 64 * 3);
    const size_t full = len;
    free(out);
    assert_int_equal(pngw_encode(rgba, 64, 64, 4, NULL, 0, full - 1, &out, &len,
                                 err, sizeof err),
                     DRAW_E_TOO_BIG);
    assert_null(out);
    assert_non_null(strstr(err, "cap"));
    assert_int_equal(pngw_encode(rgba, 64, 64, 4, NULL, 0, full, &out, &len,
                                 err, sizeof err),
                     DRAW_OK);
    assert_int_equal(len, full);
    free(out);
    assert_int_equal(pngw_encode(rgba, 64, 64, 2, NULL, 0, full, &out, &len,
                                 err, sizeof err),
                     DRAW_E_INVALID);
    assert_int_equal(
        pngw_encode(rgba, 0, 64, 3, NULL, 0, full, &out, &len, err, sizeof err),
        DRAW_E_INVALID);
    assert_int_equal(pngw_encode(rgba, 70000, 1, 3, NULL, 0, full, &out, &len,
                                 err, sizeof err),
                     DRAW_E_TOO_BIG);
    assert_null(out);
}

/* ------------------------------------------- diverging map, signed scale */

/* ColorBrewer's RdBu, 11 classes, from its blue end to its red end. */
static const unsigned char rdbu_r[11][3] = {
    {0x05, 0x30, 0x61}, {0x21, 0x66, 0xac}, {0x43, 0x93, 0xc3},
    {0x92, 0xc5, 0xde}, {0xd1, 0xe5, 0xf0}, {0xf7, 0xf7, 0xf7},
    {0xfd, 0xdb, 0xc7}, {0xf4, 0xa5, 0x82}, {0xd6, 0x60, 0x4d},
    {0xb2, 0x18, 0x2b}, {0x67, 0x00, 0x1f}};

static const unsigned char diverging_white[3] = {0xf7, 0xf7, 0xf7};

/* CIE L* of an sRGB colour, 0 (black) to 100 (white). */
static double lightness(const unsigned char *c)
{
    double y = 0.0;
    static const double weight[3] = {0.2126, 0.7152, 0.0722};
    for (int k = 0; k < 3; k++) {
        const double v = c[k] / 255.0;
        y += weight[k] *
             (v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4));
    }
    return y > 216.0 / 24389.0 ? 116.0 * cbrt(y) - 16.0 : y * 24389.0 / 27.0;
}

static bool is_red(const unsigned char *c)
{
    return c[0] > c[2] + 40 && c[0] > c[1] + 40;
}

static bool is_blue(const unsigned char *c)
{
    return c[2] > c[0] + 40;
}

/* The diverging table against its anchors: a reference interpolation
 * written here, lightness rising to the white middle and falling after,
 * and the map's name. */
static void test_diverging_table(void **state)
{
    (void)state;
    const unsigned char(*t)[3] = colormap_table(HEATMAP_DIVERGING);
    for (unsigned i = 0; i < COLORMAP_SIZE; i++) {
        /* each half: 6 anchors evenly over its 128 entries */
        const unsigned base = i < 128 ? 0 : 5, k = i < 128 ? i : i - 128;
        const double x = 5.0 * k / 127.0;
        const unsigned j = x >= 5.0 ? 4 : (unsigned)x;
        for (int c = 0; c < 3; c++) {
            const double a = rdbu_r[base + j][c], b = rdbu_r[base + j + 1][c];
            const long want = lround(a + (b - a) * (x - j));
            if (t[i][c] != want)
                fail_msg("entry %u channel %d is %u, want %ld", i, c, t[i][c],
                         want);
        }
        if (i > 0 && i < 128)
            assert_true(lightness(t[i]) > lightness(t[i - 1]) - 0.3);
        if (i > 128)
            assert_true(lightness(t[i]) < lightness(t[i - 1]) + 0.3);
    }
    assert_memory_equal(t[0], rdbu_r[0], 3);
    assert_memory_equal(t[127], diverging_white, 3);
    assert_memory_equal(t[128], diverging_white, 3);
    assert_memory_equal(t[255], rdbu_r[10], 3);
    /* the two ends about as dark as each other */
    assert_true(fabs(lightness(t[0]) - lightness(t[255])) < 2.0);

    enum heatmap_colormap map;
    assert_true(heatmap_colormap_parse("diverging", &map));
    assert_int_equal(map, HEATMAP_DIVERGING);
    assert_string_equal(heatmap_colormap_name(HEATMAP_DIVERGING), "diverging");
}

/* The entry a value v takes on a scale from -top to top. */
static unsigned symmetric_entry(float v, float top)
{
    return (unsigned)lround(127.5 + 127.5 * (double)v / (double)top);
}

/* Signed values: 0 is the white middle, the largest |value| the ends,
 * blue below and red above; one scale over every matrix of a grid. */
static void test_symmetric_colours(void **state)
{
    (void)state;
    float w[6] = {-1.5f, 0.0f, 3.0f, -3.0f, 1.5f, 0.75f};
    struct heatmap_matrix m = {w, 2, 3, NULL};
    struct heatmap_options o = {.colormap = HEATMAP_DIVERGING,
                                .cell = 5,
                                .scale = HEATMAP_SCALE_SYMMETRIC};
    const unsigned char(*t)[3] = colormap_table(HEATMAP_DIVERGING);
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    assert_int_equal(img.w, 15);
    assert_int_equal(img.h, 10);
    for (unsigned y = 0; y < img.h; y++) {
        for (unsigned x = 0; x < img.w; x++) {
            const unsigned want = symmetric_entry(w[(y / 5) * 3 + x / 5], 3.0f);
            assert_memory_equal(px(&img, x, y), t[want], 3);
        }
    }
    assert_memory_equal(px(&img, 7, 2), diverging_white, 3); /* 0 */
    assert_memory_equal(px(&img, 12, 2), t[255], 3);         /* 3, the max */
    assert_memory_equal(px(&img, 2, 7), t[0], 3);            /* -3, the min */
    assert_true(is_red(px(&img, 12, 2)));
    assert_true(is_blue(px(&img, 2, 7)));
    assert_true(is_blue(px(&img, 2, 2))); /* -1.5 */
    assert_true(is_red(px(&img, 7, 7)));  /* 1.5 */
    image_free(&img);

    /* the scale is the largest |value| even when that is negative, and
     * it is shared: the second matrix's 0.5 is pale beside the first's -4 */
    float a[4] = {-4.0f, 0.0f, 1.0f, 2.0f}, b[4] = {0.5f, 0.0f, 0.0f, 0.0f};
    const struct heatmap_matrix two[2] = {{a, 2, 2, NULL}, {b, 2, 2, NULL}};
    o.cell = 3;
    o.grid_cols = 2;
    render(two, 2, &o, NULL, 0, &img);
    assert_memory_equal(px(&img, 1, 1), t[0], 3);
    assert_memory_equal(px(&img, 4, 1), diverging_white, 3);
    assert_memory_equal(px(&img, 1, 4), t[symmetric_entry(1.0f, 4.0f)], 3);
    assert_memory_equal(px(&img, 4, 4), t[symmetric_entry(2.0f, 4.0f)], 3);
    assert_memory_equal(px(&img, 9 + 1, 1), t[symmetric_entry(0.5f, 4.0f)], 3);
    image_free(&img);

    /* a sequential map on the symmetric scale: 0 at its middle entry */
    o = (struct heatmap_options){.colormap = HEATMAP_VIRIDIS,
                                 .cell = 5,
                                 .scale = HEATMAP_SCALE_SYMMETRIC};
    render(&m, 1, &o, NULL, 0, &img);
    assert_memory_equal(px(&img, 7, 2), colormap_table(HEATMAP_VIRIDIS)[128],
                        3);
    image_free(&img);
}

/* All zero on the symmetric scale: the scale is -1 .. 1 and every cell
 * the middle, bare or labelled; the sizes are the measured ones. */
static void test_symmetric_all_zero(void **state)
{
    (void)state;
    float z[81] = {0};
    struct heatmap_matrix m = {z, 9, 9, "no effect"};
    struct heatmap_options o = {.colormap = HEATMAP_DIVERGING,
                                .cell = 4,
                                .scale = HEATMAP_SCALE_SYMMETRIC};
    struct image img;
    render(&m, 1, &o, NULL, 0, &img);
    for (unsigned y = 0; y < img.h; y++)
        for (unsigned x = 0; x < img.w; x++)
            assert_memory_equal(px(&img, x, y), diverging_white, 3);
    image_free(&img);

    o.cell = 0;
    o.labels = true;
    o.row_labels = o.col_labels = sentence;
    const struct heatmap_matrix shape = {NULL, 9, 9, "no effect"};
    int mw = 0, mh = 0;
    char err[256];
    assert_int_equal(
        heatmap_measure(&shape, 1, &o, NULL, 0, &mw, &mh, err, sizeof err),
        DRAW_OK);
    render(&m, 1, &o, NULL, 0, &img);
    assert_int_equal((int)img.w, mw);
    assert_int_equal((int)img.h, mh);
    image_free(&img);
}

/* Negative values stay refused on the scales that start at 0, with the
 * message they had; the symmetric scale takes them but still refuses
 * NaN and infinities. */
static void test_signed_refusals(void **state)
{
    (void)state;
    float neg[6] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, 0.6f};
    struct heatmap_matrix m = {neg, 2, 3, NULL};
    unsigned char *png = NULL;
    size_t len = 0;
    char err[256];
    const enum heatmap_scale unsigned_scales[] = {HEATMAP_SCALE_SHARED,
                                                  HEATMAP_SCALE_TILE};
    for (size_t i = 0; i < 2; i++) {
        const struct heatmap_options o = {.colormap = HEATMAP_DIVERGING,
                                          .scale = unsigned_scales[i]};
        assert_int_equal(
            heatmap_render_png(&m, 1, &o, NULL, 0, &png, &len, err, sizeof err),
            DRAW_E_INVALID);
        assert_null(png);
        assert_string_equal(err, "heatmap: matrix 0 [0][2] is -0.3; weights "
                                 "must be finite and >= 0");
        char *svg = NULL;
        assert_int_equal(heatmap_render_svg(&m, 1, &o, NULL, 0,
                                            HEATMAP_SVG_MAX_BYTES, &svg, &len,
                                            err, sizeof err),
                         DRAW_E_INVALID);
        assert_null(svg);
        assert_non_null(strstr(err, ">= 0"));
    }
    const struct heatmap_options sym = {.colormap = HEATMAP_DIVERGING,
                                        .scale = HEATMAP_SCALE_SYMMETRIC};
    assert_int_equal(
        heatmap_render_png(&m, 1, &sym, NULL, 0, &png, &len, err, sizeof err),
        DRAW_OK);
    free(png);
    const float bad[] = {NAN, -INFINITY, INFINITY};
    for (size_t i = 0; i < 3; i++) {
        float v[6] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f};
        v[4] = bad[i];
        const struct heatmap_matrix b = {v, 2, 3, NULL};
        png = NULL;
        assert_int_equal(heatmap_render_png(&b, 1, &sym, NULL, 0, &png, &len,
                                            err, sizeof err),
                         DRAW_E_INVALID);
        assert_null(png);
        assert_non_null(strstr(err, "[1][1]"));
        assert_non_null(strstr(err, "must be finite"));
    }
}

/* Symmetric ticks: 0 in the middle, the negatives mirrored, every text
 * one of the plain forms after a '-'; over every scale a float can top. */
static void test_symmetric_ticks(void **state)
{
    (void)state;
    struct heatmap_ticks t;
    heatmap_ticks_symmetric(2.0, HEATMAP_MAX_TICKS, &t);
    assert_int_equal(t.n, 5);
    const char *want[] = {"-2", "-1", "0", "1", "2"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(t.text[i], want[i]);
        assert_true(t.value[i] == (double)i - 2.0);
    }
    heatmap_ticks_symmetric(1.0, HEATMAP_MAX_TICKS, &t);
    assert_string_equal(t.text[0], "-1");
    assert_string_equal(t.text[1], "-0.5");
    assert_string_equal(t.text[2], "0");
    heatmap_ticks_symmetric(1.0, 1, &t);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.text[0], "0");

    for (double top = 1.5e-45; top < 3.4e38; top *= 1.37) {
        for (size_t fit = 1; fit <= HEATMAP_MAX_TICKS; fit++) {
            heatmap_ticks_symmetric(top, fit, &t);
            assert_true(t.n % 2 == 1 && t.n <= fit);
            assert_true(fit < 3 || t.n >= 3);
            const size_t mid = t.n / 2;
            assert_string_equal(t.text[mid], "0");
            assert_true(t.value[mid] == 0.0);
            for (size_t i = 0; i < t.n; i++) {
                assert_true(fabs(t.value[i]) <= top * (1.0 + 1e-9));
                assert_true(i == 0 || t.value[i] > t.value[i - 1]);
                if (i >= mid)
                    continue;
                /* "-" and the text of its mirror */
                const char *pos = t.text[t.n - 1 - i];
                if (t.text[i][0] != '-' || strcmp(t.text[i] + 1, pos) != 0)
                    fail_msg("top %g: tick \"%s\" mirrors \"%s\"", top,
                             t.text[i], pos);
                assert_true(t.value[i] == -t.value[t.n - 1 - i]);
            }
        }
    }
}

/* The rectangles of an SVG outside its <defs>, painted in order onto
 * rgb ([h][w][3], white first); returns how many there were. A rectangle
 * filled with a pattern (hatched cells) is skipped. With check, every
 * solid rectangle's centre pixel must already have its fill in png: the
 * PNG's colour at the SVG's position. */
static size_t svg_rects(const char *svg, const struct image *png,
                        bool check_centres, unsigned char *rgb)
{
    const char *p = strstr(svg, "</defs>");
    assert_non_null(p);
    size_t n = 0;
    while ((p = strstr(p, "<rect "))) {
        int x, y, w, h;
        unsigned r, g, b;
        const int got = sscanf(p,
                               "<rect x=\"%d\" y=\"%d\" width=\"%d\" "
                               "height=\"%d\" fill=\"#%2x%2x%2x\"/>",
                               &x, &y, &w, &h, &r, &g, &b);
        p++;
        if (got != 7)
            continue;
        n++;
        assert_true(x >= 0 && y >= 0 && w > 0 && h > 0);
        assert_true((unsigned)(x + w) <= png->w && (unsigned)(y + h) <= png->h);
        const unsigned char fill[3] = {(unsigned char)r, (unsigned char)g,
                                       (unsigned char)b};
        if (check_centres && n > 1 &&
            memcmp(px(png, (unsigned)(x + w / 2), (unsigned)(y + h / 2)), fill,
                   3) != 0)
            fail_msg("SVG rect at %d,%d (%dx%d) is #%02x%02x%02x, the PNG "
                     "differs there",
                     x, y, w, h, r, g, b);
        for (int yy = y; rgb && yy < y + h; yy++)
            for (int xx = x; xx < x + w; xx++)
                memcpy(rgb + ((size_t)yy * png->w + (size_t)xx) * 3, fill, 3);
    }
    return n;
}

/* Render an SVG within the measured bound, which must be DRAW_OK; its
 * measured size must be the PNG's. */
static char *render_svg_measured(const struct heatmap_matrix *m, size_t n,
                                 const struct heatmap_options *o,
                                 const struct image *png)
{
    struct heatmap_matrix shapes[4];
    assert_true(n <= 4);
    for (size_t i = 0; i < n; i++)
        shapes[i] =
            (struct heatmap_matrix){NULL, m[i].rows, m[i].cols, m[i].title};
    int w = 0, h = 0;
    size_t bound = 0, len = 0;
    char err[256];
    if (heatmap_measure_svg(shapes, n, o, NULL, 0, &w, &h, &bound, err,
                            sizeof err) != DRAW_OK)
        fail_msg("measure_svg: %s", err);
    assert_int_equal(w, (int)png->w);
    assert_int_equal(h, (int)png->h);
    char *svg = NULL;
    if (heatmap_render_svg(m, n, o, NULL, 0, bound, &svg, &len, err,
                           sizeof err) != DRAW_OK)
        fail_msg("render_svg within %zu bytes: %s", bound, err);
    assert_true(len <= bound && strlen(svg) == len);
    char head[128];
    snprintf(head, sizeof head, "width=\"%u\" height=\"%u\"", png->w, png->h);
    assert_non_null(strstr(svg, head));
    return svg;
}

/* Whether pixel (x, y) is the hatching's grey at that place of a panel
 * whose corner is (x0, y0): the dark one where x + y is a multiple of 4
 * counted from the corner, else the light one. */
static bool hatched(const struct image *img, unsigned x0, unsigned y0,
                    unsigned x, unsigned y)
{
    const unsigned char want = (x + y) % 4 == 0 ? 170 : 232;
    const unsigned char *p = px(img, x0 + x, y0 + y);
    return p[0] == want && p[1] == want && p[2] == want;
}

/* not_allowed_each gives each matrix of a grid its own mask in place of
 * the shared one (a model's layers that see differently: a sliding
 * window on one, none on the other); a NULL entry hatches nothing. */
static void test_not_allowed_each(void **state)
{
    (void)state;
    enum { N = 6, WINDOW = 2 };
    float w[3][N * N];
    unsigned char causal[N * N], windowed[N * N];
    for (size_t k = 0; k < 3; k++)
        fill_weights(w[k], N, N, (unsigned)k);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            causal[i * N + j] = j > i;
            windowed[i * N + j] = j > i || j + WINDOW <= i;
        }
    const struct heatmap_matrix m[3] = {
        {w[0], N, N, NULL}, {w[1], N, N, NULL}, {w[2], N, N, NULL}};
    const unsigned char *const each[3] = {windowed, causal, NULL};
    struct heatmap_options o = {.colormap = HEATMAP_VIRIDIS,
                                .cell = 1,
                                .grid_cols = 3,
                                .scale = HEATMAP_SCALE_TILE,
                                .not_allowed = causal};
    const unsigned char *const want_shared[3] = {causal, causal, causal};
    const unsigned char *const want_each[3] = {windowed, causal, NULL};
    for (int pass = 0; pass < 2; pass++) {
        o.not_allowed_each = pass ? each : NULL;
        const unsigned char *const *want = pass ? want_each : want_shared;
        struct image img;
        render(m, 3, &o, NULL, 0, &img);
        assert_int_equal(img.w, 3 * N + 2);
        for (unsigned k = 0; k < 3; k++)
            for (unsigned i = 0; i < N; i++)
                for (unsigned j = 0; j < N; j++) {
                    const bool hidden = want[k] && want[k][i * N + j];
                    if (hatched(&img, k * (N + 1), 0, j, i) != hidden)
                        fail_msg("pass %d, matrix %u, cell (%u, %u): %s", pass,
                                 k, i, j, hidden ? "not hatched" : "hatched");
                }
        // the SVG hatches the same cells: one patterned rectangle a run
        // of hatched cells in a row, the PNG's colours elsewhere
        char *svg = render_svg_measured(m, 3, &o, &img);
        size_t runs = 0, patterned = 0;
        for (unsigned k = 0; k < 3; k++)
            for (unsigned i = 0; i < N; i++)
                for (unsigned j = 0; j < N; j++)
                    runs += want[k] && want[k][i * N + j] &&
                            (j == 0 || !want[k][i * N + j - 1]);
        for (const char *q = svg; (q = strstr(q, "fill=\"url(#na")); q++)
            patterned++;
        assert_int_equal(patterned, runs);
        svg_rects(svg, &img, true, NULL);
        free(svg);
        image_free(&img);
    }
}

/* The SVG of signed values draws the PNG's colours at the PNG's
 * positions: bare, pixel for pixel; labelled, every solid rectangle
 * (cells, colorbar, ticks) at its centre, the colorbar red at its top,
 * white at 0 and blue at its bottom, and the ticks from -M to M whole. */
static void test_symmetric_svg_matches_png(void **state)
{
    (void)state;
    float w[2][81];
    for (size_t i = 0; i < 81; i++) {
        w[0][i] = (float)((int)((i * 7) % 13) - 5) / 4.0f; /* -1.25 .. 1.75 */
        w[1][i] = (float)((int)((i * 5) % 11) - 8) / 4.0f; /* -2 .. 0.5 */
    }
    w[1][40] = 0.0f;
    const struct heatmap_matrix m[2] = {{w[0], 9, 9, "layer 0"},
                                        {w[1], 9, 9, "layer 1"}};
    struct heatmap_options o = {.colormap = HEATMAP_DIVERGING,
                                .cell = 6,
                                .grid_cols = 2,
                                .scale = HEATMAP_SCALE_SYMMETRIC};
    struct image img;
    render(m, 2, &o, NULL, 0, &img);
    char *svg = render_svg_measured(m, 2, &o, &img);
    unsigned char *painted = malloc((size_t)img.w * img.h * 3);
    assert_non_null(painted);
    memset(painted, 0, (size_t)img.w * img.h * 3);
    assert_true(svg_rects(svg, &img, true, painted) > 2);
    for (unsigned y = 0; y < img.h; y++)
        for (unsigned x = 0; x < img.w; x++)
            if (memcmp(painted + ((size_t)y * img.w + x) * 3, px(&img, x, y),
                       3) != 0)
                fail_msg("pixel %u,%u differs between SVG and PNG", x, y);
    free(painted);
    free(svg);
    image_free(&img);

    /* labelled, with token labels so that no label reads as a tick */
    static const char *const heads[9] = {"h0", "h1", "h2", "h3", "h4",
                                         "h5", "h6", "h7", "h8"};
    o.cell = 24;
    o.labels = true;
    o.title = "patching effect";
    o.row_labels = sentence;
    o.col_labels = heads;
    render(m, 2, &o, NULL, 0, &img);
    svg = render_svg_measured(m, 2, &o, &img);
    assert_true(svg_rects(svg, &img, true, NULL) > 20);
    /* M = 2: the ticks are -2 .. 2, none cut short */
    const char *ticks[] = {">-2</text>", ">-1</text>", ">0</text>", ">1</text>",
                           ">2</text>"};
    for (size_t i = 0; i < 5; i++)
        if (!strstr(svg, ticks[i]))
            fail_msg("no tick %s in the SVG", ticks[i]);
    assert_null(strstr(svg, "\xE2\x80\xA6"));
    /* the colorbar: its rectangles are HEATMAP_BAR_W wide, top to bottom */
    int top_y = -1, bottom_y = -1, bar_x = -1;
    for (const char *p = svg; (p = strstr(p, "<rect ")); p++) {
        int x, y, bw, bh;
        if (sscanf(p, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"", &x,
                   &y, &bw, &bh) == 4 &&
            bw == HEATMAP_BAR_W) {
            if (top_y < 0)
                top_y = y;
            bottom_y = y + bh - 1;
            bar_x = x;
        }
    }
    assert_true(top_y > 0 && bottom_y > top_y + 80);
    const unsigned bx = (unsigned)bar_x + HEATMAP_BAR_W / 2;
    const unsigned char(*t)[3] = colormap_table(HEATMAP_DIVERGING);
    assert_memory_equal(px(&img, bx, (unsigned)top_y), t[255], 3);
    assert_memory_equal(px(&img, bx, (unsigned)bottom_y), t[0], 3);
    assert_memory_equal(px(&img, bx, (unsigned)(top_y + bottom_y) / 2),
                        diverging_white, 3);
    /* tick marks right of the bar, drawn from -2 up: -2 at the bottom
     * row, 0 at the middle (a white row), 2 at the top row */
    int marks[8], n_marks = 0;
    for (const char *p = svg; (p = strstr(p, "<rect ")); p++) {
        int x, y, mw, mh;
        if (sscanf(p, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"", &x,
                   &y, &mw, &mh) == 4 &&
            x == bar_x + HEATMAP_BAR_W + 1 && mw == HEATMAP_TICK_LEN &&
            mh == 1 && n_marks < 8)
            marks[n_marks++] = y;
    }
    assert_int_equal(n_marks, 5);
    assert_int_equal(marks[0], bottom_y);
    assert_true(abs(2 * marks[2] - (top_y + bottom_y)) <= 1);
    assert_memory_equal(px(&img, bx, (unsigned)marks[2]), diverging_white, 3);
    assert_int_equal(marks[4], top_y);
    free(svg);
    image_free(&img);
}

/* The SVG bound holds for the longest ticks a signed scale writes. */
static void test_symmetric_svg_bound(void **state)
{
    (void)state;
    /* the largest |value| of each image; among them ones whose ticks
     * are as wide as a tick can be: "-2.5e-11", "-0.0025", "-25000" */
    static const float tops[] = {1.0f, -3.7e-7f, 8.5e6f, -0.031f,
                                 0.0f, -7e-11f,  7e-3f,  -70000.0f};
    float w[64];
    const struct heatmap_matrix m = {w, 8, 8, "x"};
    const struct heatmap_options o = {.colormap = HEATMAP_DIVERGING,
                                      .labels = true,
                                      .row_labels = sentence,
                                      .col_labels = sentence,
                                      .scale = HEATMAP_SCALE_SYMMETRIC};
    for (size_t v = 0; v < sizeof tops / sizeof tops[0]; v++) {
        for (size_t i = 0; i < 64; i++) /* every cell its own colour */
            w[i] = tops[v] * ((float)i - 31.5f) / 31.5f;
        struct image img;
        render(&m, 1, &o, NULL, 0, &img);
        char *svg = render_svg_measured(&m, 1, &o, &img);
        assert_null(strstr(svg, "\xE2\x80\xA6")); /* no tick cut short */
        free(svg);
        image_free(&img);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_colormap_tables),
        cmocka_unit_test(test_bare_is_exact),
        cmocka_unit_test(test_colours_follow_weights),
        cmocka_unit_test(test_scale_uses_max),
        cmocka_unit_test(test_scale_per_tile),
        cmocka_unit_test(test_measure_is_the_drawn_size),
        cmocka_unit_test(test_tick_texts_keep_their_forms),
        cmocka_unit_test(test_labels_in_margins),
        cmocka_unit_test(test_gray_is_gray),
        cmocka_unit_test(test_text_chunks),
        cmocka_unit_test(test_grid_layout),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_max_pixels),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_font_errors),
        cmocka_unit_test(test_awkward_tokens),
        cmocka_unit_test(test_many_tokens),
        cmocka_unit_test(test_png_writer),
        cmocka_unit_test(test_diverging_table),
        cmocka_unit_test(test_symmetric_colours),
        cmocka_unit_test(test_symmetric_all_zero),
        cmocka_unit_test(test_signed_refusals),
        cmocka_unit_test(test_symmetric_ticks),
        cmocka_unit_test(test_symmetric_svg_matches_png),
        cmocka_unit_test(test_not_allowed_each),
        cmocka_unit_test(test_symmetric_svg_bound),
    };
    return cmocka_run_group_tests_name("heatmap", tests, setup, teardown);
}
