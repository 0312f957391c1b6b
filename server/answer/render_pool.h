/*
 * render_pool.h - what pooling does to an answer's image, decided from the
 * request alone: the block size and reduction, the blocks' labels, mask
 * and note, and the text chunks that say so. Shared by the random
 * weights' images (render.c) and a model's (render_model.c).
 */
#ifndef ATTND_RENDER_POOL_H
#define ATTND_RENDER_POOL_H

#include "heatmap.h"
#include "request.h"

#include <stdbool.h>
#include <stddef.h>

/* Owns every pointer; render_pool_free() releases them. */
struct render_pool {
    enum heatmap_pool kind;          /* HEATMAP_POOL_NONE when k is 1 */
    size_t k;                        /* tokens a block side; 1: not pooled */
    size_t n, m;                     /* the matrix's rows and columns */
    size_t rows, cols;               /* blocks down and across */
    char **row_labels, **col_labels; /* [rows], [cols] when pooled */
    unsigned char *mask; /* [rows][cols] blocks no query may attend */
    float *values;       /* [panels][rows][cols] once filled */
    char note[128];      /* drawn under the title when pooled */
    char kind_text[8], size_text[24]; /* attnd:pool, attnd:pool_size */
};

/* The block size and reduction for an n x m matrix (request.h's
 * request_pool), the note and the texts. Allocates nothing. */
void render_pool_plan(struct render_pool *rp, const struct request_png *o,
                      size_t n, size_t m);

/* The blocks' labels from the tokens' (NULL: positions), and with
 * not_allowed ([n][m], may be NULL) the blocks' mask. False when out of
 * memory. Nothing to do when not pooled. */
bool render_pool_make(struct render_pool *rp, const char *const *row_labels,
                      const char *const *col_labels,
                      const unsigned char *not_allowed);

/* Room for panels pooled matrices; false when out of memory. */
bool render_pool_alloc(struct render_pool *rp, size_t panels);

/* The automatic cell of a pooled image: blocks keep room for labels. */
unsigned render_pool_cell(const struct render_pool *rp);

/* At most the bytes render_pool_make() and render_pool_alloc() take. */
size_t render_pool_bytes(const struct render_pool *rp, size_t panels);

void render_pool_free(struct render_pool *rp);

#endif
