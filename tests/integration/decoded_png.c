/*
 * decoded_png.c - a PNG answer decoded with libpng (decoded_png.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decoded_png.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct png_source {
    const unsigned char *data;
    size_t len, at;
};

static void read_from_memory(png_structp png, png_bytep out, png_size_t n)
{
    struct png_source *src = png_get_io_ptr(png);
    if (src->at + n > src->len)
        png_error(png, "truncated");
    memcpy(out, src->data + src->at, n);
    src->at += n;
}

/* The pixels and chunks of a PNG that decoded_png_read() checked; the
 * row pointers for the caller to free. The pixels live in img as soon as
 * they are allocated, so that decoded_png_read() frees them when libpng
 * jumps back to it. */
static png_bytep *decode(png_structp png, png_infop info,
                         struct png_source *src, struct decoded_png *img)
{
    png_set_read_fn(png, src, read_from_memory);
    png_read_info(png, info);
    img->color_type = png_get_color_type(png, info);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_palette_to_rgb(png);
    png_set_gray_to_rgb(png);
    png_read_update_info(png, info);
    img->width = png_get_image_width(png, info);
    img->height = png_get_image_height(png, info);
    assert_int_equal(png_get_rowbytes(png, info), (size_t)img->width * 3);
    img->rgb = malloc((size_t)img->width * img->height * 3);
    png_bytep *rows = malloc(img->height * sizeof *rows);
    assert_true(img->rgb && rows);
    for (unsigned y = 0; y < img->height; y++)
        rows[y] = img->rgb + (size_t)y * img->width * 3;
    png_read_image(png, rows);
    png_read_end(png, info);
    png_textp text;
    int n = 0;
    png_get_text(png, info, &text, &n);
    for (int i = 0; i < n && img->n_texts < DECODED_PNG_TEXTS; i++) {
        snprintf(img->keys[img->n_texts], sizeof img->keys[0], "%s",
                 text[i].key);
        img->texts[img->n_texts++] = strdup(text[i].text);
    }
    return rows;
}

void decoded_png_read(const struct reply *r, struct decoded_png *img)
{
    memset(img, 0, sizeof *img);
    assert_true(r->len > 8 && !png_sig_cmp((png_const_bytep)r->body, 0, 8));
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    struct png_source src = {(const unsigned char *)r->body, r->len, 0};
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        decoded_png_free(img);
        fail_msg("libpng could not decode the image");
    }
    png_bytep *rows = decode(png, info, &src, img);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
}

const char *decoded_png_text(const struct decoded_png *img, const char *key)
{
    for (int i = 0; i < img->n_texts; i++)
        if (!strcmp(img->keys[i], key))
            return img->texts[i];
    return NULL;
}

void decoded_png_free(struct decoded_png *img)
{
    free(img->rgb);
    for (int i = 0; i < img->n_texts; i++)
        free(img->texts[i]);
    memset(img, 0, sizeof *img);
}
