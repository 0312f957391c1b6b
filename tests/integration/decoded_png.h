/*
 * decoded_png.h - a PNG answer decoded with libpng, for the integration
 * tests that look at images: 8-bit RGB pixels and every text chunk.
 */
#ifndef ATTND_TEST_DECODED_PNG_H
#define ATTND_TEST_DECODED_PNG_H

#include "harness.h"

enum { DECODED_PNG_TEXTS = 32 };

struct decoded_png {
    unsigned width, height;
    int color_type;     /* as stored, before the conversion to RGB */
    unsigned char *rgb; /* [height][width][3] */
    char keys[DECODED_PNG_TEXTS][80];
    char *texts[DECODED_PNG_TEXTS];
    int n_texts;
};

/* Decode r's body into img; the test fails when it is not a PNG. */
void decoded_png_read(const struct reply *r, struct decoded_png *img);

/* The text of chunk key, or NULL. */
const char *decoded_png_text(const struct decoded_png *img, const char *key);

void decoded_png_free(struct decoded_png *img);

#endif
