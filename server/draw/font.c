/*
 * font.c - the label font: file bytes shared read-only, FreeType objects
 * per render, glyph runs laid out along a baseline and blended into an
 * image.
 */
#include "errbuf.h"
#include "font.h"

#include "heatmap.h" /* heatmap_font_init, heatmap_font_free */

#include <ft2build.h>
#include FT_FREETYPE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ATTND_FONT
#define ATTND_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#endif

/* DejaVu Sans is 740 KB; anything far larger is not the file we want. */
#define FONT_MAX_FILE_BYTES (64L << 20)

/* cos 45 degrees in 16.16 */
#define FONT_COS45 ((FT_Fixed)46341)

/* The loaded file; owned here, immutable between init and free. */
static unsigned char *font_file;
static size_t font_file_len;

struct font {
    FT_Library lib;
    FT_Face face;
    unsigned px;
    int ascent, descent, cap_height;
    FT_UInt ellipsis; /* glyph of U+2026, or of '.' */
};

/* A line of glyphs, positions along the baseline in 26.6 pixels. */
struct font_run {
    size_t n;
    FT_UInt glyph[FONT_MAX_GLYPHS];
    FT_Pos x[FONT_MAX_GLYPHS];       /* pen position before the glyph */
    FT_Pos advance[FONT_MAX_GLYPHS]; /* pen movement after it */
    size_t end[FONT_MAX_GLYPHS];     /* the text's bytes up to its end */
    bool cut;                        /* the last glyph is the ellipsis */
    FT_Pos width;
};

/* FreeType's own out-of-memory is ours too; every other error is the
 * font's. */
static draw_status font_ft_status(FT_Error e)
{
    return e == FT_Err_Out_Of_Memory ? DRAW_E_NOMEM : DRAW_E_FONT;
}

/* Read all of path into *data (malloc'd, the caller frees it) and *len. */
static draw_status font_read_file(const char *path, unsigned char **data,
                                  size_t *len, char *err, size_t err_len)
{
    *data = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return errbuf_fail(err, err_len, DRAW_E_FONT, "font %s: %s", path,
                           strerror(errno));
    draw_status st = DRAW_OK;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0)
        size = ftell(fp);
    if (size <= 0 || size > FONT_MAX_FILE_BYTES || fseek(fp, 0, SEEK_SET)) {
        st = errbuf_fail(err, err_len, DRAW_E_FONT,
                         "font %s: not a regular file of 1 byte to %ld MiB",
                         path, FONT_MAX_FILE_BYTES >> 20);
        goto out;
    }
    *data = malloc((size_t)size);
    if (!*data) {
        st = errbuf_fail(err, err_len, DRAW_E_NOMEM, "font %s: out of memory",
                         path);
        goto out;
    }
    if (fread(*data, 1, (size_t)size, fp) != (size_t)size) {
        st = errbuf_fail(err, err_len, DRAW_E_FONT, "font %s: read failed",
                         path);
        free(*data);
        *data = NULL;
        goto out;
    }
    *len = (size_t)size;
out:
    fclose(fp);
    return st;
}

draw_status heatmap_font_init(const char *path, char *err, size_t err_len)
{
    if (!path)
        path = ATTND_FONT;
    size_t len = 0;
    unsigned char *data = NULL;
    const draw_status st = font_read_file(path, &data, &len, err, err_len);
    if (st != DRAW_OK)
        return st;

    /* Open it once now so a bad file fails here, not in every render. */
    FT_Library lib = NULL;
    FT_Face face = NULL;
    FT_Error e = FT_Init_FreeType(&lib);
    if (!e)
        e = FT_New_Memory_Face(lib, data, (FT_Long)len, 0, &face);
    const bool ok = !e && FT_IS_SCALABLE(face) && face->charmap &&
                    face->charmap->encoding == FT_ENCODING_UNICODE;
    if (lib)
        FT_Done_FreeType(lib); /* also frees face */
    if (!ok) {
        free(data);
        if (e)
            return errbuf_fail(err, err_len, font_ft_status(e),
                               "font %s: FreeType error 0x%02x", path,
                               (unsigned)e);
        return errbuf_fail(err, err_len, DRAW_E_FONT,
                           "font %s: not a scalable font with a Unicode "
                           "charmap",
                           path);
    }
    free(font_file);
    font_file = data;
    font_file_len = len;
    return DRAW_OK;
}

void heatmap_font_free(void)
{
    free(font_file);
    font_file = NULL;
    font_file_len = 0;
}

draw_status font_open(unsigned px, struct font **out, char *err, size_t err_len)
{
    *out = NULL;
    if (!font_file)
        return errbuf_fail(err, err_len, DRAW_E_FONT,
                           "label font not loaded (heatmap_font_init was not "
                           "called or failed)");
    if (px < FONT_MIN_PX || px > FONT_MAX_PX)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "font: size %u px, expected %u to %u", px,
                           FONT_MIN_PX, FONT_MAX_PX);
    struct font *f = calloc(1, sizeof *f);
    if (!f)
        return errbuf_fail(err, err_len, DRAW_E_NOMEM, "font: out of memory");
    FT_Error e = FT_Init_FreeType(&f->lib);
    if (!e)
        e = FT_New_Memory_Face(f->lib, font_file, (FT_Long)font_file_len, 0,
                               &f->face);
    if (e) {
        font_close(f);
        return errbuf_fail(err, err_len, font_ft_status(e),
                           "font: FreeType error 0x%02x", (unsigned)e);
    }
    f->ellipsis = FT_Get_Char_Index(f->face, 0x2026);
    if (!f->ellipsis)
        f->ellipsis = FT_Get_Char_Index(f->face, '.');
    if (!font_set_size(f, px)) { /* px is in range: FreeType refused it */
        font_close(f);
        return errbuf_fail(err, err_len, DRAW_E_FONT,
                           "font: FreeType refused size %u px", px);
    }
    *out = f;
    return DRAW_OK;
}

void font_close(struct font *f)
{
    if (!f)
        return;
    if (f->lib)
        FT_Done_FreeType(f->lib); /* frees the face too */
    free(f);
}

bool font_set_size(struct font *f, unsigned px)
{
    if (px < FONT_MIN_PX || px > FONT_MAX_PX)
        return false;
    if (f->px == px)
        return true;
    FT_Set_Transform(f->face, NULL, NULL);
    if (FT_Set_Pixel_Sizes(f->face, 0, px))
        return false;
    f->px = px;
    const FT_Size_Metrics *m = &f->face->size->metrics;
    f->ascent = (int)((m->ascender + 63) >> 6);
    f->descent = (int)((-m->descender + 63) >> 6);
    f->cap_height = (int)(px * 73 / 100); /* DejaVu's, if "H" fails */
    FT_UInt h = FT_Get_Char_Index(f->face, 'H');
    if (h && !FT_Load_Glyph(f->face, h, FT_LOAD_TARGET_LIGHT))
        f->cap_height = (int)((f->face->glyph->metrics.horiBearingY + 32) >> 6);
    return true;
}

int font_ascent(const struct font *f)
{
    return f->ascent;
}

int font_descent(const struct font *f)
{
    return f->descent < 0 ? 0 : f->descent;
}

int font_cap_height(const struct font *f)
{
    return f->cap_height;
}

/* Horizontal text is hinted (light: vertical snapping only, whole-pixel
 * advances) for crisp labels; turned text gets no hinting, since hints
 * fit the pixel grid only before the turn. */
static FT_Int32 font_load_flags(enum font_angle angle)
{
    return angle == FONT_HORIZONTAL ? FT_LOAD_TARGET_LIGHT : FT_LOAD_NO_HINTING;
}

/*
 * Decode one code point of s (at most end - s bytes, end > s) into *cp and
 * return its length. Malformed input reads as U+FFFD and consumes one
 * byte, so every input makes progress.
 */
static size_t font_utf8_next(const unsigned char *s, const unsigned char *end,
                             uint32_t *cp)
{
    const unsigned c = s[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        n = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        *cp = 0xFFFD;
        return 1;
    }
    if ((size_t)(end - s) < n)
        goto bad;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            goto bad;
        v = v << 6 | (s[i] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        goto bad;
    *cp = v;
    return n;
bad:
    *cp = 0xFFFD;
    return 1;
}

/* Advance of glyph g in 26.6 under flags, with the face untransformed. */
static FT_Pos font_advance(struct font *f, FT_UInt g, FT_Int32 flags)
{
    if (FT_Load_Glyph(f->face, g, flags))
        return 0;
    return f->face->glyph->advance.x;
}

/*
 * Lay utf8 out along the baseline: glyphs and pen positions, cut with an
 * ellipsis when wider than max_width (> 0) or longer than the caps.
 */
static void font_layout(struct font *f, const char *utf8, int max_width,
                        enum font_angle angle, struct font_run *run)
{
    const FT_Int32 flags = font_load_flags(angle);
    const FT_Pos limit = max_width > 0 ? (FT_Pos)max_width * 64 : 0;
    const bool kern = FT_HAS_KERNING(f->face);
    const unsigned char *s = (const unsigned char *)(utf8 ? utf8 : "");
    const unsigned char *end =
        s + strnlen((const char *)s, FONT_MAX_TEXT_BYTES);
    bool spaces[FONT_MAX_GLYPHS];
    FT_Pos pen = 0;
    FT_UInt prev = 0;

    const unsigned char *const start = s;
    FT_Set_Transform(f->face, NULL, NULL);
    run->n = 0;
    run->cut = false;
    /* One place stays free for the ellipsis; past the limit the text will
     * be cut anyway, so the rest is not looked at. */
    while (s < end && run->n < FONT_MAX_GLYPHS - 1 &&
           (limit == 0 || pen <= limit)) {
        uint32_t cp;
        s += font_utf8_next(s, end, &cp);
        const FT_UInt g = FT_Get_Char_Index(f->face, cp); /* 0: .notdef */
        if (kern && prev && g) {
            FT_Vector k;
            if (!FT_Get_Kerning(f->face, prev, g,
                                angle == FONT_HORIZONTAL ? FT_KERNING_DEFAULT
                                                         : FT_KERNING_UNFITTED,
                                &k))
                pen += k.x;
        }
        spaces[run->n] = cp == ' ';
        run->glyph[run->n] = g;
        run->x[run->n] = pen;
        run->advance[run->n] = font_advance(f, g, flags);
        run->end[run->n] = (size_t)(s - start);
        pen += run->advance[run->n];
        run->n++;
        prev = g;
    }
    run->width = pen;
    const bool cut = s < end || *end != '\0';
    if (!cut && (limit == 0 || pen <= limit))
        return;

    /* Keep the longest prefix that leaves room for the ellipsis, without
     * trailing spaces before it. */
    const FT_Pos dots = font_advance(f, f->ellipsis, flags);
    size_t keep = run->n;
    while (keep > 0 && limit > 0 &&
           run->x[keep - 1] + run->advance[keep - 1] + dots > limit)
        keep--;
    while (keep > 0 && spaces[keep - 1])
        keep--;
    const FT_Pos at = keep > 0 ? run->x[keep - 1] + run->advance[keep - 1] : 0;
    run->glyph[keep] = f->ellipsis;
    run->x[keep] = at;
    run->advance[keep] = dots;
    run->end[keep] = keep > 0 ? run->end[keep - 1] : 0;
    run->cut = true;
    run->n = keep + 1;
    run->width = at + dots;
}

int font_text_width(struct font *f, const char *utf8, int max_width,
                    enum font_angle angle)
{
    struct font_run run;
    font_layout(f, utf8, max_width, angle, &run);
    return (int)((run.width + 63) >> 6);
}

size_t font_text_cut(struct font *f, const char *utf8, int max_width,
                     enum font_angle angle, bool *ellipsis)
{
    struct font_run run;
    font_layout(f, utf8, max_width, angle, &run);
    *ellipsis = run.cut;
    const size_t glyphs = run.cut ? run.n - 1 : run.n;
    return glyphs ? run.end[glyphs - 1] : 0;
}

unsigned font_px(const struct font *f)
{
    return f->px;
}

/* Blend a channel: out = dst + (src - dst) * a / 255, rounded. */
static unsigned char font_mix(unsigned dst, unsigned src, unsigned a)
{
    return (unsigned char)((dst * (255 - a) + src * a + 127) / 255);
}

/* Blend an anti-aliased glyph bitmap with its top-left corner at (x0, y0). */
static void font_blit(struct font_canvas *c, const FT_Bitmap *bm, int x0,
                      int y0, const unsigned char rgb[3])
{
    if (bm->pixel_mode != FT_PIXEL_MODE_GRAY || bm->pitch < 0 ||
        bm->num_grays != 256)
        return;
    const int rows = (int)bm->rows, cols = (int)bm->width;
    const unsigned ch = c->channels;
    for (int r = 0; r < rows; r++) {
        const int y = y0 + r;
        if (y < 0 || y >= c->height)
            continue;
        const unsigned char *src = bm->buffer + (size_t)r * (size_t)bm->pitch;
        unsigned char *line = c->pixels + (size_t)y * (size_t)c->width * ch;
        for (int col = 0; col < cols; col++) {
            const int x = x0 + col;
            const unsigned a = src[col];
            if (a == 0 || x < 0 || x >= c->width)
                continue;
            unsigned char *d = line + (size_t)x * ch;
            if (ch == 4 && d[3] < 255) {
                /* non-premultiplied "over": the colour weights by alpha */
                const unsigned da = d[3] * (255 - a) / 255;
                const unsigned oa = a + da;
                for (int k = 0; k < 3; k++)
                    d[k] =
                        (unsigned char)((rgb[k] * a + d[k] * da + oa / 2) / oa);
                d[3] = (unsigned char)oa;
            } else {
                for (int k = 0; k < 3; k++)
                    d[k] = font_mix(d[k], rgb[k], a);
            }
        }
    }
}

void font_draw(struct font *f, struct font_canvas *c, int x, int y,
               const char *utf8, int max_width, enum font_angle angle,
               const unsigned char rgb[3])
{
    if (c->channels != 3 && c->channels != 4)
        return;
    struct font_run run;
    font_layout(f, utf8, max_width, angle, &run);
    const FT_Int32 flags = font_load_flags(angle) | FT_LOAD_RENDER;
    FT_Matrix turn = {FONT_COS45, -FONT_COS45, FONT_COS45, FONT_COS45};
    for (size_t i = 0; i < run.n; i++) {
        if (angle == FONT_DIAGONAL) {
            /* the pen moves along (cos, sin) of the turn, y up */
            FT_Vector pen = {FT_MulFix(run.x[i], FONT_COS45),
                             FT_MulFix(run.x[i], FONT_COS45)};
            FT_Set_Transform(f->face, &turn, &pen);
        } else {
            FT_Vector pen = {run.x[i], 0};
            FT_Set_Transform(f->face, NULL, &pen);
        }
        if (FT_Load_Glyph(f->face, run.glyph[i], flags))
            continue;
        const FT_GlyphSlot g = f->face->glyph;
        font_blit(c, &g->bitmap, x + g->bitmap_left, y - g->bitmap_top, rgb);
    }
    FT_Set_Transform(f->face, NULL, NULL);
}
