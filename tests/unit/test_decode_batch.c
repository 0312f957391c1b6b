/*
 * test_decode_batch.c - several sequences decoded in one step
 * (transformer.h's struct xf_seq) give each sequence exactly what it gets
 * alone, and the products that keep to that (row_product.h).
 *
 * Every comparison here is of bits: a sequence's logits, its rows of
 * weights and mean weights, and its cache after a batched step equal
 * those of the same token run alone after the same cache, whatever the
 * other sequences are, when they join or leave, and on one thread or two.
 * The products of rows that are each their own token are held to the
 * same bits in every build and for every row beside any others, and to a
 * float64 product within the bound row_product.h implies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "random_model.h"
#include "row_product.h"
#include "support.h"
#include "transformer.h"
#include "vecmath.h"
#include "widen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------- the products */

/* n bytes of random data, deterministic in seed. */
static void fill_bytes(uint8_t *b, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        b[i] = (uint8_t)(seed >> 56);
    }
}

/* A matrix [out][in] of dtype from random values: float32 as drawn,
 * 16-bit ones from random bits of moderate exponent, Q8_0 blocks with a
 * fixed scale. Returns the stored bytes (the caller's to free). */
static void *random_matrix(attn_dtype dtype, size_t out, size_t in,
                           uint64_t seed)
{
    const size_t count = out * in;
    if (dtype == ATTN_F32) {
        float *w = malloc(count * sizeof *w);
        fill_normal(w, count, seed, 1.0f);
        return w;
    }
    if (dtype == ATTN_Q8_0) {
        const size_t blocks = count / 32;
        uint8_t *w = malloc(blocks * 34);
        fill_bytes(w, blocks * 34, seed);
        for (size_t b = 0; b < blocks; b++) {
            w[b * 34] = 0x00; /* the scale, a half: 0.0625 */
            w[b * 34 + 1] = 0x2c;
        }
        return w;
    }
    uint16_t *w = malloc(count * sizeof *w);
    fill_bytes((uint8_t *)w, count * sizeof *w, seed);
    for (size_t i = 0; i < count; i++)
        // sign and a few mantissa bits kept, the exponent near 1
        w[i] = dtype == ATTN_BF16 ? (uint16_t)((w[i] & 0x807f) | 0x3f00)
                                  : (uint16_t)((w[i] & 0x83ff) | 0x3800);
    return w;
}

/* Each of rows rows of x (in values, in apart) through W [out][in] alone,
 * in the build isa: row r's outputs at y + r * out. */
static void each_row_alone(enum vec_isa isa, const float *x, size_t rows,
                           size_t in, const void *w, attn_dtype dtype,
                           size_t out, float *y, float *panel)
{
    for (size_t r = 0; r < rows; r++) {
        const struct widen_product one = {.x = x + r * in,
                                          .ldx = in,
                                          .rows = 1,
                                          .in = in,
                                          .w = w,
                                          .dtype = dtype,
                                          .ldw = in,
                                          .out = out,
                                          .y = y + r * out,
                                          .ldy = out};
        row_product_isa(isa, &one, 0.0f, panel);
    }
}

/* Each row of x through W, alone (rows 1) and beside the others (rows
 * all, alone marked; and two at a time), in each build the CPU runs,
 * with beta 0 and 1:
 * every output the same bits; and within the rounding bound of the
 * float64 product: (in / 16 + 40) 2^-24 sum |x w| for the order
 * row_product.h gives. */
static void test_rows_alone_same_bits(void **state)
{
    (void)state;
    static const attn_dtype dtypes[] = {ATTN_F32, ATTN_BF16, ATTN_F16,
                                        ATTN_Q8_0};
    static const size_t ins[] = {64, 96, 37, 256};
    enum { OUT = 13, ROWS = 11 };
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
        for (size_t k = 0; k < sizeof ins / sizeof *ins; k++) {
            const attn_dtype dtype = dtypes[d];
            const size_t in = ins[k];
            if (in % attn_dtype_block(dtype))
                continue;
            void *w = random_matrix(dtype, OUT, in, 7 + d * 10 + k);
            float *wf = malloc(OUT * in * sizeof *wf);
            attn_widen(w, dtype, OUT * in, wf);
            float x[ROWS * 256];
            fill_normal(x, ROWS * in, 100 + k, 1.0f);
            float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
            float alone[ROWS][OUT], together[ROWS][OUT], plain[ROWS][OUT];
            for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
                if (!vec_isa_available((enum vec_isa)isa))
                    continue;
                each_row_alone((enum vec_isa)isa, x, ROWS, in, w, dtype, OUT,
                               &alone[0][0], panel);
                // every build gives the plain build's bits
                if (isa == VEC_ISA_PLAIN)
                    memcpy(plain, alone, sizeof plain);
                assert_memory_equal(alone, plain, sizeof plain);
                // the rows together, their outputs cut in two calls
                memset(together, 0, sizeof together);
                for (size_t o0 = 0; o0 < OUT; o0 += 8) {
                    const size_t outs = OUT - o0 < 8 ? OUT - o0 : 8;
                    const struct widen_product all = {
                        .x = x,
                        .ldx = in,
                        .rows = ROWS,
                        .in = in,
                        .w = (const char *)w + attn_dtype_bytes(dtype, o0 * in),
                        .dtype = dtype,
                        .ldw = in,
                        .out = outs,
                        .y = &together[0][o0],
                        .ldy = OUT,
                        .alone = true};
                    row_product_isa((enum vec_isa)isa, &all, 1.0f, panel);
                }
                assert_memory_equal(alone, together, sizeof alone);
                // two rows at a time (two sequences' step)
                memset(together, 0, sizeof together);
                for (size_t r = 0; r + 2 <= ROWS; r += 2) {
                    const struct widen_product two = {.x = x + r * in,
                                                      .ldx = in,
                                                      .rows = 2,
                                                      .in = in,
                                                      .w = w,
                                                      .dtype = dtype,
                                                      .ldw = in,
                                                      .out = OUT,
                                                      .y = together[r],
                                                      .ldy = OUT,
                                                      .alone = true};
                    row_product_isa((enum vec_isa)isa, &two, 0.0f, panel);
                }
                assert_memory_equal(alone, together,
                                    (ROWS - ROWS % 2) * sizeof *alone);
                // a float32 or bfloat16 W needs no panel; without one, a
                // bfloat16 W's rows of x are split in each kernel call
                // rather than once
                if (dtype == ATTN_F32 || dtype == ATTN_BF16) {
                    const struct widen_product all = {.x = x,
                                                      .ldx = in,
                                                      .rows = ROWS,
                                                      .in = in,
                                                      .w = w,
                                                      .dtype = dtype,
                                                      .ldw = in,
                                                      .out = OUT,
                                                      .y = &together[0][0],
                                                      .ldy = OUT,
                                                      .alone = true};
                    row_product_isa((enum vec_isa)isa, &all, 0.0f, NULL);
                    assert_memory_equal(alone, together, sizeof alone);
                }
            }
            // within the bound of the float64 product
            for (size_t r = 0; r < ROWS; r++)
                for (size_t o = 0; o < OUT; o++) {
                    double dot = 0.0, mag = 0.0;
                    for (size_t i = 0; i < in; i++) {
                        const double t = (double)x[r * in + i] * wf[o * in + i];
                        dot += t;
                        mag += fabs(t);
                    }
                    const double bound =
                        ((double)in / 16 + 40) * ldexp(1.0, -24) * mag;
                    if (fabs(plain[r][o] - dot) > bound)
                        fail_msg("%s in %zu row %zu out %zu: %.9g, "
                                 "float64 %.9g (bound %.3g)",
                                 attn_dtype_name(dtype), in, r, o, plain[r][o],
                                 dot, bound);
                }
            free(panel);
            free(wf);
            free(w);
        }
}

/* x . w in the order row_product.h gives, one value at a time: lane
 * sums of whole blocks (float32: sixteen values, value k into lane
 * k % 16; bfloat16: thirty-two, value k into lane (k % 32) / 2, the even
 * one first), each product fused with its addition; the lanes added
 * pairwise; the rest fused one by one. */
static float documented_dot(const float *x, const float *w, size_t n, bool bf16)
{
    const size_t block = bf16 ? 32 : 16;
    const size_t whole = n / block * block;
    float lane[16] = {0};
    for (size_t k = 0; k < whole; k++) {
        const size_t l = bf16 ? (k % 32) / 2 : k % 16;
        lane[l] = fmaf(x[k], w[k], lane[l]);
    }
    for (size_t width = 8; width >= 1; width /= 2)
        for (size_t l = 0; l < width; l++)
            lane[l] += lane[l + width];
    float sum = lane[0];
    for (size_t k = whole; k < n; k++)
        sum = fmaf(x[k], w[k], sum);
    return sum;
}

/* Every build's outputs are the documented order's bits, alone and five
 * rows together: a product rounded before its addition, or lanes added
 * in another order, differs in the last places. */
static void test_rows_documented_order(void **state)
{
    (void)state;
    static const attn_dtype dtypes[] = {ATTN_F32, ATTN_BF16};
    static const size_t ins[] = {16, 37, 96, 101, 300};
    enum { OUT = 9, ROWS = 5 };
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    for (size_t d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof ins / sizeof *ins; k++) {
            const size_t in = ins[k];
            void *w = random_matrix(dtypes[d], OUT, in, 31 + d * 10 + k);
            float *wf = malloc(OUT * in * sizeof *wf);
            attn_widen(w, dtypes[d], OUT * in, wf);
            float x[ROWS * 300], alone[ROWS][OUT], together[ROWS][OUT];
            fill_normal(x, ROWS * in, 200 + k, 1.0f);
            for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
                if (!vec_isa_available((enum vec_isa)isa))
                    continue;
                each_row_alone((enum vec_isa)isa, x, ROWS, in, w, dtypes[d],
                               OUT, &alone[0][0], panel);
                const struct widen_product all = {.x = x,
                                                  .ldx = in,
                                                  .rows = ROWS,
                                                  .in = in,
                                                  .w = w,
                                                  .dtype = dtypes[d],
                                                  .ldw = in,
                                                  .out = OUT,
                                                  .y = &together[0][0],
                                                  .ldy = OUT,
                                                  .alone = true};
                row_product_isa((enum vec_isa)isa, &all, 0.0f, panel);
                for (size_t r = 0; r < ROWS; r++)
                    for (size_t o = 0; o < OUT; o++) {
                        const float want =
                            documented_dot(x + r * in, wf + o * in, in,
                                           dtypes[d] == ATTN_BF16);
                        if (memcmp(&want, &alone[r][o], sizeof want) ||
                            memcmp(&want, &together[r][o], sizeof want))
                            fail_msg("%s build %d in %zu row %zu out %zu: "
                                     "alone %.9g, together %.9g, documented "
                                     "%.9g",
                                     attn_dtype_name(dtypes[d]), isa, in, r, o,
                                     alone[r][o], together[r][o], want);
                    }
            }
            free(wf);
            free(w);
        }
    free(panel);
}

/* W wherever it lies against the 64-byte lines, as a checkpoint's
 * tensors do (a float32 one off by whole words, a bfloat16 one by half
 * words too): one row of x alone and two together give, in each build,
 * the bits of the plain build over W on a line. Each copy of W ends
 * where its allocation does, so that a sanitizer build sees any read
 * past the last row; rows of 1000 and 1000 bfloat16 values are not a
 * whole number of lines long, so their rows start at other offsets. */
static void test_rows_any_alignment(void **state)
{
    (void)state;
    static const attn_dtype dtypes[] = {ATTN_F32, ATTN_BF16};
    static const size_t ins[] = {96, 160, 1000, 2080};
    enum { OUT = 5, ROWS = 2, MAX_IN = 2080 };
    static float x[ROWS * MAX_IN];
    fill_normal(x, ROWS * MAX_IN, 11, 1.0f);
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    for (size_t d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof ins / sizeof *ins; k++) {
            const attn_dtype dtype = dtypes[d];
            const size_t in = ins[k], bytes = attn_dtype_bytes(dtype, OUT * in);
            void *w = random_matrix(dtype, OUT, in, 50 + d * 10 + k);
            float want[ROWS][OUT], got[ROWS][OUT];
            each_row_alone(VEC_ISA_PLAIN, x, ROWS, in, w, dtype, OUT,
                           &want[0][0], panel);
            const size_t step = attn_dtype_bytes(dtype, 1);
            for (size_t off = 0; off < 64; off += step) {
                void *block = NULL;
                assert_int_equal(posix_memalign(&block, 64, off + bytes), 0);
                char *at = (char *)block + off;
                memcpy(at, w, bytes);
                for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
                    if (!vec_isa_available((enum vec_isa)isa))
                        continue;
                    memset(got, 0, sizeof got);
                    each_row_alone((enum vec_isa)isa, x, ROWS, in, at, dtype,
                                   OUT, &got[0][0], panel);
                    if (memcmp(got, want, sizeof got))
                        fail_msg("%s in %zu, W %zu bytes off a line, isa %d: "
                                 "not the bits of W on a line",
                                 attn_dtype_name(dtype), in, off, isa);
                    memset(got, 0, sizeof got);
                    const struct widen_product two = {.x = x,
                                                      .ldx = in,
                                                      .rows = ROWS,
                                                      .in = in,
                                                      .w = at,
                                                      .dtype = dtype,
                                                      .ldw = in,
                                                      .out = OUT,
                                                      .y = got[0],
                                                      .ldy = OUT,
                                                      .alone = true};
                    row_product_isa((enum vec_isa)isa, &two, 0.0f, panel);
                    if (memcmp(got, want, sizeof got))
                        fail_msg("%s in %zu, W %zu bytes off a line, isa %d, "
                                 "two rows: not the bits of W on a line",
                                 attn_dtype_name(dtype), in, off, isa);
                }
                free(block);
            }
            free(w);
        }
    free(panel);
}

/* beta 1 adds into y, and beta 2 doubles it first. */
static void test_rows_beta(void **state)
{
    (void)state;
    enum { IN = 48, OUT = 5, ROWS = 3 };
    float w[OUT * IN], x[ROWS * IN], y0[ROWS * OUT], y[ROWS * OUT],
        dots[ROWS * OUT];
    fill_normal(w, OUT * IN, 1, 1.0f);
    fill_normal(x, ROWS * IN, 2, 1.0f);
    fill_normal(y0, ROWS * OUT, 3, 1.0f);
    struct widen_product p = {.x = x,
                              .ldx = IN,
                              .rows = ROWS,
                              .in = IN,
                              .w = w,
                              .dtype = ATTN_F32,
                              .ldw = IN,
                              .out = OUT,
                              .y = dots,
                              .ldy = OUT,
                              .alone = true};
    widen_product(&p, 0.0f, NULL);
    for (int beta = 1; beta <= 2; beta++) {
        memcpy(y, y0, sizeof y);
        p.y = y;
        widen_product(&p, (float)beta, NULL);
        for (size_t i = 0; i < ROWS * OUT; i++)
            assert_true(y[i] == (float)beta * y0[i] + dots[i]);
    }
}

/* ------------------------------------------------------ the stack */

enum { L = 2, HEADS = 4, D = 8, H = 32, J = 48, V = 40 };
enum { SEQS = 5, STEPS = 6, CAP = 24 };

/* What a sequence keeps of each token, as a case says. */
struct keeps {
    unsigned want; /* 0, XF_WANT_WEIGHTS, XF_WANT_MEAN_WEIGHTS or both */
    size_t layer;
    bool ablate; /* head 1 of layer 1 zeroed, head 2 of layer 0 meaned */
};

static const struct keeps keeps_of[SEQS] = {
    {0, XF_ALL_LAYERS, false},
    {XF_WANT_WEIGHTS, XF_ALL_LAYERS, false},
    {XF_WANT_MEAN_WEIGHTS, 1, true},
    {XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS, 0, false},
    {XF_WANT_MEAN_WEIGHTS, XF_ALL_LAYERS, false},
};

static const struct xf_edit ablations[2] = {{.site = XF_SITE_Z,
                                             .op = XF_EDIT_ZERO,
                                             .layer = 1,
                                             .head = 1,
                                             .position = XF_ALL},
                                            {.site = XF_SITE_Z,
                                             .op = XF_EDIT_MEAN,
                                             .layer = 0,
                                             .head = 2,
                                             .position = XF_ALL}};

/* One sequence's record: the logits of each step (and, where a case
 * records it, after its prompt too: STEPS + 1 of them), the rows of
 * weights kept with them, the tokens, and (where a case records it) its
 * cache at the end. What a case does not record stays 0. */
struct record {
    float logits[STEPS + 1][V];
    float weights[STEPS + 1][L * HEADS * CAP];
    float mean[STEPS + 1][L * CAP];
    uint32_t ids[CAP];
    size_t n;
    float k[L * CAP * HEADS * D], v[L * CAP * HEADS * D];
};

typedef void alone_fn(const struct xf_model *m, size_t b, struct record *rec,
                      unsigned threads);
typedef void together_fn(const struct xf_model *m, struct record *recs,
                         unsigned threads);

static size_t prompt_of(size_t b)
{
    return 1 + (b * 3) % 6;
}

/* A sequence's prompt into a fresh cache: its logits choose the first
 * token. */
static void start(const struct xf_model *m, size_t b, struct xf_cache *c,
                  struct record *rec, unsigned threads)
{
    assert_int_equal(xf_cache_init(m, CAP, c, NULL), ATTN_OK);
    rec->n = prompt_of(b);
    for (size_t i = 0; i < rec->n; i++)
        rec->ids[i] = (uint32_t)((b * 7 + i * 3 + 1) % V);
    const struct keeps *k = &keeps_of[b];
    const struct xf_run run = {.ids = rec->ids,
                               .n = rec->n,
                               .want = XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .threads = threads,
                               .cache = c,
                               .edits = k->ablate ? ablations : NULL,
                               .n_edits = k->ablate ? 2 : 0};
    struct xf_result r;
    assert_int_equal(test_xf_forward(m, &run, NULL, &r, NULL), ATTN_OK);
    size_t best = 0;
    for (size_t v = 1; v < V; v++)
        best = r.logits[v] > r.logits[best] ? v : best;
    rec->ids[rec->n++] = (uint32_t)best;
    xf_result_free(&r);
}

/* The greedy next token after logits. */
static uint32_t greedy(const float *logits)
{
    size_t best = 0;
    for (size_t v = 1; v < V; v++)
        best = logits[v] > logits[best] ? v : best;
    return (uint32_t)best;
}

/* Sequence b alone: STEPS tokens, each run after its cache. */
static void alone(const struct xf_model *m, size_t b, struct record *rec,
                  unsigned threads)
{
    struct xf_cache c;
    start(m, b, &c, rec, threads);
    const struct keeps *k = &keeps_of[b];
    for (size_t t = 0; t < STEPS; t++) {
        const struct xf_run run = {.ids = &rec->ids[rec->n - 1],
                                   .n = 1,
                                   .want = XF_WANT_LOGITS | k->want,
                                   .layer = k->layer,
                                   .threads = threads,
                                   .cache = &c,
                                   .edits = k->ablate ? ablations : NULL,
                                   .n_edits = k->ablate ? 2 : 0};
        struct xf_result r;
        assert_int_equal(test_xf_forward(m, &run, NULL, &r, NULL), ATTN_OK);
        memcpy(rec->logits[t], r.logits, sizeof rec->logits[t]);
        const size_t lw = k->layer == XF_ALL_LAYERS ? L : 1;
        if (r.weights)
            memcpy(rec->weights[t], r.weights,
                   lw * HEADS * r.keys * sizeof(float));
        if (r.mean_weights)
            memcpy(rec->mean[t], r.mean_weights, lw * r.keys * sizeof(float));
        rec->ids[rec->n++] = greedy(r.logits);
        xf_result_free(&r);
    }
    xf_cache_free(&c);
}

/* One step of the sequences seqs[0 .. n), their tokens in ids; the
 * logits of each into logits[i]. */
static void tokens_step(const struct xf_model *m, const struct xf_seq *seqs,
                        size_t n, const uint32_t *ids, unsigned threads,
                        float (*logits[])[V])
{
    const struct xf_run run = {.ids = ids,
                               .n = 1,
                               .want = XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .threads = threads,
                               .batch = n,
                               .seqs = seqs};
    struct xf_result r;
    assert_int_equal(test_xf_forward(m, &run, NULL, &r, NULL), ATTN_OK);
    for (size_t i = 0; i < n; i++)
        memcpy(logits[i], r.logits + i * V, sizeof *logits[i]);
    xf_result_free(&r);
}

/* Every sequence together: sequence b joins at step b % 3 (its prompt
 * run then) and the batch's members change every step; the records as
 * alone() makes them. */
static void together(const struct xf_model *m, struct record *recs,
                     unsigned threads)
{
    struct xf_cache caches[SEQS];
    size_t done[SEQS] = {0};
    bool started[SEQS] = {false};
    for (size_t step = 0;; step++) {
        struct xf_seq seqs[SEQS];
        uint32_t ids[SEQS];
        float(*out[SEQS])[V];
        size_t who[SEQS], n = 0;
        for (size_t b = 0; b < SEQS; b++) {
            if (!started[b] && step >= b % 3) {
                start(m, b, &caches[b], &recs[b], threads);
                started[b] = true;
            }
            if (!started[b] || done[b] == STEPS)
                continue;
            const struct keeps *k = &keeps_of[b];
            const size_t t = done[b];
            seqs[n] = (struct xf_seq){
                .cache = &caches[b],
                .edits = k->ablate ? ablations : NULL,
                .n_edits = k->ablate ? 2 : 0,
                .layer = k->layer,
                .weights =
                    k->want & XF_WANT_WEIGHTS ? recs[b].weights[t] : NULL,
                .mean_weights =
                    k->want & XF_WANT_MEAN_WEIGHTS ? recs[b].mean[t] : NULL};
            ids[n] = recs[b].ids[recs[b].n - 1];
            out[n] = &recs[b].logits[t];
            who[n++] = b;
        }
        if (n == 0)
            break;
        tokens_step(m, seqs, n, ids, threads, out);
        for (size_t i = 0; i < n; i++) {
            struct record *rec = &recs[who[i]];
            rec->ids[rec->n++] = greedy(rec->logits[done[who[i]]]);
            done[who[i]]++;
        }
    }
    for (size_t b = 0; b < SEQS; b++)
        xf_cache_free(&caches[b]);
}

/* The model of case k: LLaMA with grouped KV heads; with a window, q/k
 * norms and bfloat16 weights; GPT-2's learned positions; Gemma's score
 * and logit caps with an embedding scale. */
static void model_of(int k, struct test_model *o, uint16_t **store,
                     struct xf_layer **half)
{
    struct xf_arch a = k == 2 ? random_gpt2_arch() : random_llama_arch();
    a.qk_norm = k == 1;
    test_model_make(o, &a, L, HEADS, k == 0 ? 2 : 4, D, H, J, 50 + k);
    o->m.lm_head = o->m.word_emb;
    o->m.kind[0].window = k == 1 ? 4 : 0;
    if (k == 3) {
        o->m.attn_softcap = 5.0f;
        o->m.final_softcap = 3.0f;
        o->m.embed_scale = 2.0f;
    }
    *store = NULL;
    *half = NULL;
    if (k != 1)
        return;
    test_model_bf16(o, store, half);
}

/* Every sequence together (all_together()) as alone (each_alone(), one
 * at a time, on the other count of threads), for the four models of
 * model_of() and on one thread or two: every record the same bits. */
static void check_together_as_alone(alone_fn *each_alone,
                                    together_fn *all_together)
{
    for (int k = 0; k < 4; k++) {
        struct test_model o;
        uint16_t *store;
        struct xf_layer *half;
        model_of(k, &o, &store, &half);
        static struct record want[SEQS], got[SEQS];
        for (unsigned threads = 1; threads <= 2; threads++) {
            memset(want, 0, sizeof want);
            memset(got, 0, sizeof got);
            for (size_t b = 0; b < SEQS; b++)
                each_alone(&o.m, b, &want[b], 3 - threads);
            all_together(&o.m, got, threads);
            for (size_t b = 0; b < SEQS; b++) {
                assert_int_equal(got[b].n, want[b].n);
                assert_memory_equal(got[b].ids, want[b].ids,
                                    want[b].n * sizeof(uint32_t));
                if (memcmp(got[b].logits, want[b].logits,
                           sizeof want[b].logits))
                    fail_msg("case %d, sequence %zu: the logits differ", k, b);
                assert_memory_equal(got[b].weights, want[b].weights,
                                    sizeof want[b].weights);
                assert_memory_equal(got[b].mean, want[b].mean,
                                    sizeof want[b].mean);
                assert_memory_equal(got[b].k, want[b].k, sizeof want[b].k);
                assert_memory_equal(got[b].v, want[b].v, sizeof want[b].v);
            }
        }
        free(half);
        free(store);
        test_model_free(&o);
    }
}

static void test_batch_same_bits_as_alone(void **state)
{
    (void)state;
    check_together_as_alone(alone, together);
}

/* The ablations reach the batched sequence that asks for them and no
 * other: its logits differ from an unablated run's, its neighbours' are
 * as alone (above). */
static void test_batch_edits_are_each_sequences(void **state)
{
    (void)state;
    struct test_model o;
    uint16_t *store;
    struct xf_layer *half;
    model_of(0, &o, &store, &half);
    struct xf_cache c[2];
    uint32_t prompt[3] = {5, 9, 11};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(xf_cache_init(&o.m, 8, &c[i], NULL), ATTN_OK);
        const struct xf_run run = {.ids = prompt,
                                   .n = 3,
                                   .want = XF_WANT_LOGITS,
                                   .cache = &c[i],
                                   .edits = i ? ablations : NULL,
                                   .n_edits = i ? 2 : 0};
        struct xf_result r;
        assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
        xf_result_free(&r);
    }
    const struct xf_seq seqs[2] = {{.cache = &c[0], .layer = XF_ALL_LAYERS},
                                   {.cache = &c[1],
                                    .edits = ablations,
                                    .n_edits = 2,
                                    .layer = XF_ALL_LAYERS}};
    const uint32_t ids[2] = {7, 7};
    const struct xf_run run = {
        .ids = ids, .n = 1, .want = XF_WANT_LOGITS, .batch = 2, .seqs = seqs};
    struct xf_result r;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
    assert_int_equal(c[0].len, 4);
    assert_int_equal(c[1].len, 4);
    double diff = 0.0;
    for (size_t v = 0; v < V; v++)
        diff = fmax(diff, fabs(r.logits[v] - r.logits[V + v]));
    assert_true(diff > 1e-3);
    xf_result_free(&r);
    xf_cache_free(&c[0]);
    xf_cache_free(&c[1]);
    test_model_free(&o);
}

/* -------------------------------------- several tokens of a sequence */

/* What sequence b keeps of its last token each step (no edits: a
 * sequence that brings several tokens has none). */
static const struct keeps kept_of[4] = {
    {0, XF_ALL_LAYERS, false},
    {XF_WANT_WEIGHTS, XF_ALL_LAYERS, false},
    {XF_WANT_MEAN_WEIGHTS, 1, false},
    {XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS, 0, false},
};

/* Sequence b's prompt: 1 to 8 tokens. */
static size_t tokens_prompt(size_t b)
{
    return 1 + (b * 5) % 8;
}

/* Sequence b of a step: its cache, tokens and what it keeps of its last
 * one into rec's row `at`. */
static struct xf_seq tokens_seq(size_t b, struct xf_cache *c, size_t tokens,
                                struct record *rec, size_t at)
{
    const struct keeps *k = &kept_of[b % 4];
    return (struct xf_seq){
        .cache = c,
        .tokens = tokens,
        .layer = k->layer,
        .weights = k->want & XF_WANT_WEIGHTS ? rec->weights[at] : NULL,
        .mean_weights = k->want & XF_WANT_MEAN_WEIGHTS ? rec->mean[at] : NULL};
}

/* The cache's keys and values (len positions of each layer) into rec. */
static void keep_cache(const struct xf_cache *c, struct record *rec)
{
    memset(rec->k, 0, sizeof rec->k);
    memset(rec->v, 0, sizeof rec->v);
    for (size_t l = 0; l < L; l++) {
        memcpy(rec->k + l * CAP * c->row, c->k + l * c->capacity * c->row,
               c->len * c->row * sizeof(float));
        memcpy(rec->v + l * CAP * c->row, c->v + l * c->capacity * c->row,
               c->len * c->row * sizeof(float));
    }
}

/* Sequence b alone, every token a step of its own from an empty cache:
 * its prompt, then STEPS greedy tokens. */
static void tokens_alone(const struct xf_model *m, size_t b, struct record *rec,
                         unsigned threads)
{
    struct xf_cache c;
    assert_int_equal(xf_cache_init(m, CAP, &c, NULL), ATTN_OK);
    rec->n = tokens_prompt(b);
    for (size_t i = 0; i < rec->n; i++)
        rec->ids[i] = (uint32_t)((b * 11 + i * 5 + 2) % V);
    for (size_t i = 0; i < rec->n; i++) {
        // only the prompt's last token keeps its rows
        const bool last = i + 1 == rec->n;
        struct xf_seq seq = tokens_seq(b, &c, 1, rec, 0);
        if (!last)
            seq.weights = seq.mean_weights = NULL;
        float(*out[1])[V] = {&rec->logits[0]};
        tokens_step(m, &seq, 1, &rec->ids[i], threads, out);
    }
    for (size_t t = 0; t < STEPS; t++) {
        rec->ids[rec->n] = greedy(rec->logits[t]);
        rec->n++;
        const struct xf_seq seq = tokens_seq(b, &c, 1, rec, t + 1);
        float(*out[1])[V] = {&rec->logits[t + 1]};
        tokens_step(m, &seq, 1, &rec->ids[rec->n - 1], threads, out);
    }
    rec->ids[rec->n++] = greedy(rec->logits[STEPS]);
    keep_cache(&c, rec);
    xf_cache_free(&c);
}

/* Every sequence together: sequence b joins at step b % 3 with its
 * prompt as the tokens of one step, or (odd b) of steps of three tokens
 * at most, beside sequences bringing their prompts and sequences taking
 * their next token. */
static void tokens_together(const struct xf_model *m, struct record *recs,
                            unsigned threads)
{
    struct xf_cache caches[SEQS];
    size_t done[SEQS] = {0}; /* logits made: the prompt's, each token's */
    for (size_t b = 0; b < SEQS; b++) {
        assert_int_equal(xf_cache_init(m, CAP, &caches[b], NULL), ATTN_OK);
        recs[b].n = tokens_prompt(b);
        for (size_t i = 0; i < recs[b].n; i++)
            recs[b].ids[i] = (uint32_t)((b * 11 + i * 5 + 2) % V);
    }
    for (size_t step = 0;; step++) {
        struct xf_seq seqs[SEQS];
        uint32_t ids[SEQS * CAP];
        float(*out[SEQS])[V];
        static float scrap[V]; /* a prompt's logits before its end */
        size_t who[SEQS], n = 0, rows = 0;
        for (size_t b = 0; b < SEQS; b++) {
            if (step < b % 3 || done[b] == STEPS + 1)
                continue;
            struct record *rec = &recs[b];
            const size_t t = done[b];
            if (t > 0 && caches[b].len == rec->n)
                rec->ids[rec->n++] = greedy(rec->logits[t - 1]);
            const size_t pending = rec->n - caches[b].len;
            const size_t tokens = b % 2 && pending > 3 ? 3 : pending;
            memcpy(ids + rows, rec->ids + caches[b].len, tokens * sizeof *ids);
            rows += tokens;
            seqs[n] = tokens_seq(b, &caches[b], tokens, rec, t);
            if (tokens < pending)
                seqs[n].weights = seqs[n].mean_weights = NULL;
            out[n] = tokens < pending ? &scrap : &rec->logits[t];
            who[n++] = b;
        }
        if (n == 0)
            break;
        tokens_step(m, seqs, n, ids, threads, out);
        for (size_t i = 0; i < n; i++)
            if (caches[who[i]].len == recs[who[i]].n)
                done[who[i]]++;
    }
    for (size_t b = 0; b < SEQS; b++) {
        recs[b].ids[recs[b].n++] = greedy(recs[b].logits[STEPS]);
        keep_cache(&caches[b], &recs[b]);
        xf_cache_free(&caches[b]);
    }
}

/* A prompt brought to a step as its tokens is the bits of the same
 * tokens one a step, alone: every logit, the kept rows of weights and
 * mean weights, the tokens chosen, the cache. */
static void test_batch_tokens_as_steps(void **state)
{
    (void)state;
    check_together_as_alone(tokens_alone, tokens_together);
}

/* A prompt's rows in a step need no more memory than the prompt's own
 * pass, which a generation reserves before it joins (server/decoding.c),
 * nor more work: on one thread or two, for every length a test model
 * holds, and for the four model cases. */
static void test_batch_tokens_within_pass(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        struct test_model o;
        uint16_t *store;
        struct xf_layer *half;
        model_of(k, &o, &store, &half);
        uint32_t ids[CAP];
        for (size_t i = 0; i < CAP; i++)
            ids[i] = (uint32_t)(i * 7 % V);
        struct xf_cache c;
        assert_int_equal(xf_cache_init(&o.m, CAP, &c, NULL), ATTN_OK);
        for (unsigned threads = 1; threads <= 2; threads++)
            for (size_t n = 1; n <= CAP; n++) {
                const struct xf_run pass = {.ids = ids,
                                            .n = n,
                                            .want = XF_WANT_LOGITS,
                                            .layer = XF_ALL_LAYERS,
                                            .threads = threads,
                                            .cache = &c};
                const struct xf_seq seq = {
                    .cache = &c, .tokens = n, .layer = XF_ALL_LAYERS};
                const struct xf_run step = {.ids = ids,
                                            .n = 1,
                                            .want = XF_WANT_LOGITS,
                                            .layer = XF_ALL_LAYERS,
                                            .threads = threads,
                                            .batch = 1,
                                            .seqs = &seq};
                const size_t pass_bytes = test_xf_bytes(&o.m, &pass),
                             step_bytes = test_xf_bytes(&o.m, &step);
                assert_true(pass_bytes != SIZE_MAX && step_bytes != SIZE_MAX);
                if (step_bytes > pass_bytes)
                    fail_msg("case %d, %zu tokens on %u threads: a step's "
                             "%zu bytes, the pass's %zu",
                             k, n, threads, step_bytes, pass_bytes);
                const double pass_flops = test_xf_flops(&o.m, &pass),
                             step_flops = test_xf_flops(&o.m, &step);
                assert_true(step_flops > 0 && step_flops <= pass_flops);
            }
        xf_cache_free(&c);
        free(half);
        free(store);
        test_model_free(&o);
    }
}

/* A longrope kind turns a sequence past long_after by its long rotary
 * and a shorter one by its short rotary, in the same step as alone: a
 * sequence decoding past long_after beside a prompt and a short
 * sequence's token, each the bits of its own step alone. */
static void test_batch_longrope_each_its_own(void **state)
{
    (void)state;
    static const double short_freq[2] = {1.0, 0.05}, long_freq[2] = {0.6, 0.01};
    struct test_model o;
    const struct xf_arch a = random_llama_arch();
    test_model_make(&o, &a, L, HEADS, 2, D, H, J, 71);
    o.m.lm_head = o.m.word_emb;
    o.m.kind[0].rope = (struct attn_rotary){.base = 500.0,
                                            .pairing = ATTN_ROPE_HALF,
                                            .dims = 4,
                                            .inv_freq = short_freq,
                                            .factor = 1.2f};
    o.m.kind[0].long_rope = o.m.kind[0].rope;
    o.m.kind[0].long_rope.inv_freq = long_freq;
    o.m.kind[0].long_after = 9;
    // A: 12 positions (past long_after, its prompt's pass turned them by
    // the long rotary); C: 3 positions; B: a prompt of 3 into an empty
    // cache; each twice, for alone and together
    uint32_t ids[12];
    for (size_t i = 0; i < 12; i++)
        ids[i] = (uint32_t)(i * 7 % V);
    struct xf_cache c[2][3];
    const size_t started[3] = {12, 0, 3};
    for (int w = 0; w < 2; w++)
        for (int q = 0; q < 3; q++) {
            assert_int_equal(xf_cache_init(&o.m, 20, &c[w][q], NULL), ATTN_OK);
            if (!started[q])
                continue;
            const struct xf_run pass = {.ids = ids,
                                        .n = started[q],
                                        .want = XF_WANT_LOGITS,
                                        .layer = XF_ALL_LAYERS,
                                        .cache = &c[w][q]};
            struct xf_result r;
            assert_int_equal(test_xf_forward(&o.m, &pass, NULL, &r, NULL),
                             ATTN_OK);
            xf_result_free(&r);
        }
    const uint32_t step_ids[5] = {5, 3, 1, 4, 9}; /* A's, B's 3, C's */
    const size_t tokens[3] = {1, 3, 1}, first[3] = {0, 1, 4};
    float alone[3][V];
    for (int q = 0; q < 3; q++) {
        const struct xf_seq seq = {
            .cache = &c[0][q], .tokens = tokens[q], .layer = XF_ALL_LAYERS};
        float(*out[1])[V] = {&alone[q]};
        tokens_step(&o.m, &seq, 1, step_ids + first[q], 1, out);
    }
    float together[3][V];
    struct xf_seq seqs[3];
    float(*out[3])[V];
    for (int q = 0; q < 3; q++) {
        seqs[q] = (struct xf_seq){
            .cache = &c[1][q], .tokens = tokens[q], .layer = XF_ALL_LAYERS};
        out[q] = &together[q];
    }
    tokens_step(&o.m, seqs, 3, step_ids, 2, out);
    for (int q = 0; q < 3; q++) {
        if (memcmp(alone[q], together[q], sizeof alone[q]))
            fail_msg("sequence %d beside the others differs from alone", q);
        assert_int_equal(c[1][q].len, c[0][q].len);
        const size_t row = c[0][q].row, len = c[0][q].len;
        for (size_t l = 0; l < L; l++) {
            assert_memory_equal(c[1][q].k + l * 20 * row,
                                c[0][q].k + l * 20 * row,
                                len * row * sizeof(float));
            assert_memory_equal(c[1][q].v + l * 20 * row,
                                c[0][q].v + l * 20 * row,
                                len * row * sizeof(float));
        }
    }
    for (int w = 0; w < 2; w++)
        for (int q = 0; q < 3; q++)
            xf_cache_free(&c[w][q]);
    test_model_free(&o);
}

/* How many tokens of a prompt a step takes as fast as its own pass:
 * xf_step_tokens() follows the layers' weights, 16-bit, float32, and
 * fewer as soon as one of their matrices is block-quantized; the output
 * head does not count. */
static void test_batch_step_tokens_follow_weights(void **state)
{
    (void)state;
    struct test_model o;
    uint16_t *store;
    struct xf_layer *half;
    model_of(0, &o, &store, &half);
    assert_int_equal(xf_step_tokens(&o.m), XF_STEP_TOKENS_F32);
    test_model_free(&o);
    model_of(1, &o, &store, &half); /* bfloat16 */
    assert_int_equal(xf_step_tokens(&o.m), XF_STEP_TOKENS_HALF);
    free(half);
    free(store);
    test_model_free(&o);
    model_of(0, &o, &store, &half);
    void *q8 = random_matrix(ATTN_Q8_0, H, J, 5); /* down's [H][J] */
    const struct xf_matrix kept = o.layers[1].down_w;
    o.layers[1].down_w = (struct xf_matrix){.data = q8, .dtype = ATTN_Q8_0};
    assert_int_equal(xf_step_tokens(&o.m), XF_STEP_TOKENS_QUANT);
    o.layers[1].down_w = kept;
    // the output head meets one row a sequence either way: not counted
    const struct xf_matrix head = o.m.lm_head;
    o.m.lm_head = (struct xf_matrix){.data = q8, .dtype = ATTN_Q8_0};
    assert_int_equal(xf_step_tokens(&o.m), XF_STEP_TOKENS_F32);
    o.m.lm_head = head;
    assert_int_equal(xf_step_tokens(&o.m), XF_STEP_TOKENS_F32);
    free(q8);
    test_model_free(&o);
}

/* A planned step run again (xf_forward_again()) refuses sequences that
 * bring other tokens than it was planned for, the caches untouched. */
static void test_batch_again_same_tokens(void **state)
{
    (void)state;
    struct test_model o;
    uint16_t *store;
    struct xf_layer *half;
    model_of(0, &o, &store, &half);
    struct xf_cache a, b;
    assert_int_equal(xf_cache_init(&o.m, 16, &a, NULL), ATTN_OK);
    assert_int_equal(xf_cache_init(&o.m, 16, &b, NULL), ATTN_OK);
    struct xf_seq seqs[2] = {{.cache = &a, .tokens = 2, .layer = XF_ALL_LAYERS},
                             {.cache = &b, .layer = XF_ALL_LAYERS}};
    const uint32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const struct xf_run run = {.ids = ids,
                               .n = 1,
                               .want = XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .batch = 2,
                               .seqs = seqs};
    struct xf_plan plan;
    struct xf_result r = {0};
    struct attn_error err;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_OK);
    seqs[1].tokens = 0; /* 1: fewer rows than planned */
    seqs[0].tokens = 1;
    assert_int_equal(xf_forward_again(&plan, NULL, &r, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "seqs");
    seqs[0].tokens = 2;
    seqs[1].tokens = 2; /* more */
    assert_int_equal(xf_forward_again(&plan, NULL, &r, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "seqs");
    assert_int_equal(a.len, 0);
    assert_int_equal(b.len, 0);
    seqs[1].tokens = 1;
    assert_int_equal(xf_forward_again(&plan, NULL, &r, &err), ATTN_OK);
    assert_int_equal(a.len, 2);
    assert_int_equal(b.len, 1);
    xf_result_free(&r);
    xf_cache_free(&a);
    xf_cache_free(&b);
    test_model_free(&o);
}

/* What a batched step refuses, each naming the field and the sequence,
 * with every cache left as it was. */
static void test_batch_refusals(void **state)
{
    (void)state;
    struct test_model o;
    uint16_t *store;
    struct xf_layer *half;
    model_of(0, &o, &store, &half);
    struct xf_cache full, empty, fine;
    assert_int_equal(xf_cache_init(&o.m, 2, &full, NULL), ATTN_OK);
    assert_int_equal(xf_cache_init(&o.m, 4, &empty, NULL), ATTN_OK);
    assert_int_equal(xf_cache_init(&o.m, 4, &fine, NULL), ATTN_OK);
    full.len = 2;
    fine.len = 1;
    uint32_t ids[2] = {1, 2};
    struct xf_seq seqs[2] = {{.cache = &fine, .layer = XF_ALL_LAYERS},
                             {.cache = &full, .layer = XF_ALL_LAYERS}};
    struct xf_run run = {
        .ids = ids, .n = 1, .want = XF_WANT_LOGITS, .batch = 2, .seqs = seqs};
    struct xf_result r;
    struct attn_error err;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "seqs");
    assert_non_null(strstr(err.message, "seqs[1]"));
    // more tokens than the cache has room for
    seqs[1].cache = &empty;
    seqs[1].tokens = 5;
    uint32_t five[6] = {1, 2, 3, 4, 5, 6};
    run.ids = five;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "seqs");
    assert_non_null(strstr(err.message, "seqs[1]"));
    assert_non_null(strstr(err.message, "5 tokens"));
    // edits with several tokens, or before a prompt has started the cache
    seqs[1].tokens = 2;
    seqs[1].edits = ablations;
    seqs[1].n_edits = 1;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "seqs[1]"));
    assert_non_null(strstr(err.message, "edits"));
    seqs[1].tokens = 1;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "edits"));
    // after a started cache, still one token a step
    empty.len = 1;
    seqs[1].tokens = 2;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "one token a step"));
    assert_int_equal(empty.len, 1);
    empty.len = 0;
    seqs[1].tokens = 1;
    seqs[1].edits = NULL;
    seqs[1].n_edits = 0;
    // a token past the vocabulary among a sequence's several
    seqs[1].tokens = 3;
    five[3] = V;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "ids");
    assert_non_null(strstr(err.message, "ids[3]"));
    five[3] = 4;
    seqs[1].tokens = 0;
    run.ids = ids;
    assert_int_equal(empty.len, 0);
    seqs[1].cache = &fine; /* seqs[0]'s */
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "own"));
    xf_cache_free(&full);
    assert_int_equal(xf_cache_init(&o.m, 4, &full, NULL), ATTN_OK);
    full.len = 1;
    seqs[1].cache = &full;
    seqs[1].layer = L;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "layer"));
    seqs[1].layer = XF_ALL_LAYERS;
    ids[1] = V;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "ids");
    ids[1] = 2;
    run.want = XF_WANT_LOGITS | XF_WANT_HIDDEN;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    run.want = XF_WANT_LOGITS;
    const struct xf_edit resid = {.site = XF_SITE_RESID_PRE,
                                  .op = XF_EDIT_ZERO,
                                  .head = XF_ALL,
                                  .position = XF_ALL};
    seqs[0].edits = &resid;
    seqs[0].n_edits = 1;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "edits");
    assert_int_equal(fine.len, 1);
    xf_cache_free(&full);
    xf_cache_free(&empty);
    xf_cache_free(&fine);
    test_model_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_alone_same_bits),
        cmocka_unit_test(test_rows_documented_order),
        cmocka_unit_test(test_rows_any_alignment),
        cmocka_unit_test(test_rows_beta),
        cmocka_unit_test(test_batch_same_bits_as_alone),
        cmocka_unit_test(test_batch_edits_are_each_sequences),
        cmocka_unit_test(test_batch_tokens_as_steps),
        cmocka_unit_test(test_batch_tokens_within_pass),
        cmocka_unit_test(test_batch_longrope_each_its_own),
        cmocka_unit_test(test_batch_again_same_tokens),
        cmocka_unit_test(test_batch_step_tokens_follow_weights),
        cmocka_unit_test(test_batch_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
