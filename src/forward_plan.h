/*
 * forward_plan.h - how attn_forward() cuts and lays out a pass, from its
 * resolved config alone: the units of each phase, the team, the one
 * workspace block and the result's arrays. Planning is apart from running
 * (forward.c), so that the config's checks (config.c) and the memory
 * estimates ask the plan without running anything. Internal to the core.
 */
#ifndef ATTN_FORWARD_PLAN_H
#define ATTN_FORWARD_PLAN_H

#include "attention.h"
#include "softmax.h"

#include <stdbool.h>
#include <stddef.h>

enum {
    QUERY_BLOCK = 256, /* most query rows in one unit */
    KV_CHUNK = 256,    /* most context rows in one unit of the key phase */
    MIN_UNIT_ROWS = 64,
    KEY_BLOCK = 512
};

/* Scratch of one thread; pointers its config does not need stay NULL. */
struct scratch {
    float *q;     /* [query_rows][h*d_k] when q is not returned */
    float *heads; /* [query_rows][h*d_v] when heads are not returned */
    float *tile;  /* [query_rows][tile_ld] */
    struct softmax_online *online; /* [query_rows] */
    float *out;   /* [query_rows][d_out] when head outputs are projected
                     in place (key-outer) */
    float *panel; /* [forward_panel_floats()]: with stored_matrices the
                     16-bit weights widened a panel at a time; the rows a
                     streamed product packs (stream_product.h); NULL
                     where neither applies */
    float *kt;    /* [d_k][HEAD_KEY_COLS] where head_scores() takes its
                     kernel: a block of keys transposed; else NULL */
};

/* Which way a pass goes and how it is cut, from the config alone. */
struct paths {
    size_t query_rows;    /* rows of a query unit */
    size_t kv_rows;       /* context rows of a key unit */
    bool full_path;       /* weights or scores held whole */
    bool need_pv;         /* weights times V: head outputs or the output */
    bool key_outer;       /* keys outside queries, one key block held */
    bool heads_in_output; /* key-outer head outputs summed in place */
};

/* The paths of a resolved config. */
struct paths forward_paths(const struct attn_config *c);

/* The members of a call's team: cfg->threads, but no more than the units
 * of its largest phase. */
unsigned forward_team(const struct attn_config *c, const struct paths *p);

/* Does attn_forward(cfg) run on a team of more than one, and so on
 * cfg->pool or, when that is busy, a pool of its own (whose bytes
 * attn_forward_bytes() counts)? */
bool attn_forward_needs_pool(const struct attn_config *cfg);

/* The parts of a call's one workspace block: shared ones, then one set of
 * per-thread ones (those after SCRATCH). */
enum {
    X_PE,
    C_PE,
    K,
    V,
    Q_SEQ,
    HEADS_SEQ,
    ONLINE_SEQ,
    SCRATCH,
    Q,
    HEADS,
    TILE,
    ONLINE,
    OUT,
    PANEL,
    KT,
    N_PARTS
};

struct workspace_plan {
    size_t count[N_PARTS], elem[N_PARTS], offset[N_PARTS];
    size_t tile_ld;
    size_t bytes;
    bool overflow;
};

/* What a call of resolved config c with its paths and a team of threads
 * holds besides its result: every part's size and its place in the block
 * (the first thread's, for a per-thread part). */
void forward_workspace(const struct attn_config *c, const struct paths *p,
                       unsigned threads, struct workspace_plan *w);

/* Floats of each thread's panel (struct scratch) in a projected pass of
 * resolved config c: what widen_product() needs of it for c's
 * matrices. */
size_t forward_panel_floats(const struct attn_config *c);

/* The arrays a result may hold, with their sizes; slots point into res. */
struct result_part {
    unsigned bit;
    float **slot;
    size_t count;
    bool zeroed;
};
enum { N_RESULT_PARTS = 9 };

/* Floating-point operations of the pass itself, without the measures
 * computed after it: what sizes its units. */
double forward_pass_flops(const struct attn_config *c);

void forward_result_parts(const struct attn_config *c, struct attn_result *res,
                          struct result_part parts[N_RESULT_PARTS]);

/* What a projected q or k of heads heads gets before its scores, at
 * positions r0 on: the norm of each head (c->qk_norm, with norm [d_k]) or
 * of the whole row (c->qk_norm_whole, with norm [heads * d_k]), then the
 * rotation (ATTN_POS_ROPE). x: [rows][heads * d_k]. The one statement
 * of it, which the transformer's token-by-token pass shares. */
void attn_place_heads(const struct attn_config *c, float *x, size_t rows,
                      size_t heads, const float *norm, size_t r0);

/* An array of a result that the pass writes whole; release it with
 * free(). NULL when memory runs out. */
void *forward_result_alloc(size_t bytes);

/* Does the pass write its weights into cfg->weights_into, the caller's,
 * rather than an array of its own? When they are returned (not only
 * read for another array) and the caller gave one. */
bool forward_weights_lent(const struct attn_config *cfg);

#endif
