/*
 * widen.h - products through weight matrices held at their stored width:
 * streamed in place where the CPU allows, else float32 ones as they are
 * and 16-bit ones widened a panel at a time into the caller's per-thread
 * scratch, so that no whole matrix is ever copied to float32 and each
 * panel is read by the product while it is in cache. Internal to the
 * core.
 */
#ifndef ATTN_WIDEN_H
#define ATTN_WIDEN_H

#include "attention.h"

#include <stdbool.h>
#include <stddef.h>

/* Floats of one panel: 2 MiB, a few of which stay in a shared cache. */
enum { WIDEN_PANEL_FLOATS = 1 << 19 };

/* The hint with which the products of rows that are each a token of
 * their own fetch W ahead of their reads (__builtin_prefetch's locality):
 * 2, prefetcht1, into the core's second cache, where the line waits for
 * its turn without pushing x or the lines being read out of the first.
 * Eight rows of x through a Llama-3.2-1B-shaped layer's bfloat16
 * matrices on a Zen 4 core, against prefetcht0: 30-36 -> 39-41 G
 * multiply-adds a second on each of two cores at once; one row a core,
 * against prefetchnta: 5.4-7.1 -> 8.0-10.6 (docs/benchmarks.md). */
enum { WIDEN_FETCH_HINT = 2 };

/* How far ahead of its reads a product of one or two rows of x (a token
 * alone, or two sequences' step), which reads W front to back one output
 * at a time, fetches W (WIDEN_FETCH_HINT): one row of W ahead, or this
 * many bytes when a row is shorter (a 2048-wide bfloat16 W's is 4 KiB).
 * One row of x through an 8192 x 2048 bfloat16 W on one core
 * (bench_quant): 16.0-17.1 GB/s fetched a row (4 KiB) ahead as before,
 * 20.4-22.4 so. */
enum { WIDEN_ONE_OUTPUT_AHEAD = 6 << 10 };

/* But when the row of x the kernel reads is this long or longer, only
 * WIDEN_ONE_OUTPUT_AHEAD: x and the window of W fetched ahead then share
 * the core's first cache (48 KiB where measured), and a whole row of W
 * ahead pushes x out of it. A 2048 x 8192 bfloat16 W (the down
 * projection of a Llama-3.2-1B-shaped decoder, 16 KiB rows, 32 KiB of x
 * as floats) on one core: 24 -> 32 GB/s; a whole decoding step on one
 * thread 1.7-3 % faster (docs/benchmarks.md). */
enum { WIDEN_X_CROWDS_BYTES = 32 << 10 };

/* A float32 W, though, only this far: its kernel takes twice the bytes a
 * multiply-add of a 16-bit one, and fetched a row (8 KiB of a 2048-wide
 * W) or 6 KiB ahead it waited longer than fetched not at all. One row of
 * x through a Llama-3.2-1B-shaped F32 GGUF on one Zen 4 core: 240-247 ms
 * a token as before, 204 fetching nothing, 186-191 anywhere from 512
 * bytes to 4 KiB ahead, 200-237 from 5 KiB on; on two cores 153-167 ->
 * 141-150 (docs/benchmarks.md). A bfloat16 W there wants 6 KiB or more:
 * 102-104 ms, 120-138 from 1 to 4 KiB. */
enum { WIDEN_F32_AHEAD = 2 << 10 };

/* That distance for W's rows of row_bytes, values of value_bytes each,
 * and x's rows of x_bytes. */
static inline size_t widen_one_output_ahead(size_t value_bytes,
                                            size_t row_bytes, size_t x_bytes)
{
    if (value_bytes >= 4)
        return WIDEN_F32_AHEAD;
    if (x_bytes >= WIDEN_X_CROWDS_BYTES || row_bytes <= WIDEN_ONE_OUTPUT_AHEAD)
        return WIDEN_ONE_OUTPUT_AHEAD;
    return row_bytes;
}

/* The panel of member member of a team, in a block of one per member;
 * NULL without one (every matrix float32). */
static inline float *widen_panel(float *panels, unsigned member)
{
    return panels ? panels + (size_t)member * WIDEN_PANEL_FLOATS : NULL;
}

/* A product's operands: x [rows][in] (rows ldx apart), W [out][in] of
 * dtype (rows ldw apart, in elements), y [rows][out] (rows ldy apart).
 * W's columns may start at col0 of each row of w: a slice of a
 * block-quantized matrix (a head's columns) need not start or end at a
 * block, so w points at the row's start and col0 says where the slice
 * begins. ldw, and with col0 0 also in, are whole blocks. */
struct widen_product {
    const float *x;
    size_t ldx, rows, in;
    const void *w;
    attn_dtype dtype;
    size_t ldw, out;
    float *y;
    size_t ldy;
    size_t col0;
    /* each row of x is a token of its own (one token of each of several
     * sequences decoded together): every row's outputs are then the
     * bits that row would get alone (row_product.h) */
    bool alone;
    /* a bfloat16 W may meet x rounded to bfloat16 through the CPU's
     * bfloat16 dot products (bf16_dots.h), where it has them: faster,
     * and less precise */
    bool bf16_dots;
    /* NULL, or what is done to each output once its sum is whole (an
     * activation): finish(block, ldy, rows, cols, finish_arg) over
     * blocks of y that together cover it once. A streamed product
     * calls it on each block as it completes, while the block is in
     * cache; the other ways call it on all of y at the end. */
    void (*finish)(float *block, size_t ldy, size_t rows, size_t cols,
                   const void *arg);
    const void *finish_arg;
    /* x, or y, packed as the streamed product packs its rows
     * (stream_product.h): by blocks of STREAM_ROWS rows, ldx (ldy) floats
     * from one block to the next, and within a block each column's rows
     * side by side, row r's value of column k at [k][r]. A product one
     * layer writes and the next reads then skips the transposes to rows
     * and back. Only for a product that streams (widen_product_streams());
     * a packed y's finish gets blocks the other way round, rows (ldy)
     * of one output's values of STREAM_ROWS rows. */
    bool x_packed, y_packed;
    /* With beta 0, NULL or a bias: bias[o] + the sum is each output's
     * value, the bits of a y that held the bias added to with beta 1. A
     * streamed product adds it with the first sums it puts into y; the
     * other ways copy it into each row of y first. */
    const float *bias;
};

/* Will widen_product(p, beta, panel) stream W in place, with a panel
 * (stream_product.h)? Then x and y may be packed. */
bool widen_product_streams(const struct widen_product *p, float beta,
                           bool panel);

/*
 * y = beta y + x W^T. One row of x, or rows marked alone, go to
 * row_product() (row_product.h): each row's outputs are the same bits
 * whether it is alone or not. Rows of a bfloat16 W marked bf16_dots go
 * to bf16_dots_product() where the CPU has the instruction. Otherwise a
 * block-quantized W goes to
 * quant_product() (quant_product.h) when the slice is whole blocks and
 * beta is 0 or 1, else a panel of widened rows at a time through the
 * product. With a panel and beta 0 or 1, two rows or more through a
 * float32 or bfloat16 W on a CPU with AVX-512 stream W in place
 * (stream_product.h, x's rows packed in the panel). Otherwise a float32
 * W goes to one cblas_sgemm, and a 16-bit one by blocks of W's rows and,
 * within them, of its columns, each widened into panel
 * (WIDEN_PANEL_FLOATS floats) and added in. The blocks follow from the
 * sizes alone, so the bits do not depend on the thread. They do depend on
 * the way taken: rows that are each their own token go another way than
 * a prompt's rows and may differ in the last place.
 */
void widen_product(const struct widen_product *p, float beta, float *panel);

/* dtype's ggml type (quant.h), or 0 for a width that is not quantized. */
int widen_quant_type(attn_dtype dtype);

#endif
