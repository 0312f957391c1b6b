/*
 * value_weighted.c - value-weighted attention norms (value_weighted.h).
 *
 * alpha_ij is a scalar, so the norm of alpha_ij f_h(x_j) is alpha_ij
 * times the norm of f_h(x_j): one norm per head and key. The sum over
 * heads is not: the norm of sum_h alpha^h_ij f_h(x_j) squared is
 * alpha^T G_j alpha, with G_j [h][h] the Gram matrix of the heads'
 * vectors f_h(x_j). So each key's vectors are formed once, a block of
 * keys at a time, their Gram matrix kept, and the vectors dropped.
 */
#include "value_weighted.h"
#include "checked.h"
#include "error.h"
#include "widen.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The width of f_h(x): the output projection's, which is d_model when the
 * call leaves W_o to its caller (value_wo). */
static size_t out_width(const struct attn_config *c)
{
    return c->no_out_proj && c->value_wo ? c->d_model : c->d_out;
}

/* Keys whose vectors (heads x out_width floats each) are formed at a time:
 * about 1 MiB of them. */
static size_t key_block(const struct attn_config *c)
{
    const size_t per_key = c->heads * out_width(c);
    const size_t rows = ((size_t)1 << 18) / (per_key ? per_key : 1);
    return rows ? rows : 1;
}

/* Whether the heads go through an output projection: without one, f_h
 * places head h's value in its own block, and heads are orthogonal. */
static bool projected_out(const struct attn_config *c,
                          const struct attn_params *p)
{
    return c->mode == ATTN_MODE_PROJECTED && (!c->no_out_proj || c->value_wo) &&
           (p->wo || p->stored_wo.data);
}

size_t value_weighted_bytes(const struct attn_config *c)
{
    const size_t h = c->heads, k = c->n_keys;
    size_t gram, bytes, arrays;
    if (!size_mul3(k, h, h, &gram) || !size_mul(gram, sizeof(float), &bytes) ||
        !size_mul3(c->batch * c->n_query, k, h + 1, &arrays) ||
        !size_mul(arrays, sizeof(float), &arrays) ||
        !size_add_to(&bytes, arrays))
        return SIZE_MAX;
    size_t block;
    if (!size_mul3(key_block(c), h, out_width(c), &block) ||
        !size_add_to(&block, WIDEN_PANEL_FLOATS) ||
        !size_mul(block, sizeof(float), &block) || !size_add_to(&bytes, block))
        return SIZE_MAX;
    return bytes;
}

double value_weighted_flops(const struct attn_config *c)
{
    const double b = (double)c->batch, n = (double)c->n_query,
                 k = (double)c->n_keys, h = (double)c->heads,
                 dv = (double)c->d_v, out = (double)out_width(c);
    // the vectors f_h(x_j), their Gram matrices, and per pair alpha^T G
    // alpha and alpha times a norm
    return 2.0 * b * (k * h * dv * out + k * h * h * out + n * k * h * h) +
           b * n * k * h;
}

/* The Gram matrices G [K][h][h] of one sequence's keys: v [K][g * d_v]. */
static void key_grams(const struct attn_config *c, const struct attn_params *p,
                      const float *v, float *vectors, float *panel, float *gram)
{
    const size_t h = c->heads, g = c->kv_heads, dv = c->d_v, k = c->n_keys;
    const size_t group = h / g, out = out_width(c), ldv = g * dv;
    if (!projected_out(c, p)) {
        // f_h(x_j) is head h's value in its own block: G is diagonal
        memset(gram, 0, k * h * h * sizeof *gram);
        for (size_t j = 0; j < k; j++)
            for (size_t a = 0; a < h; a++) {
                const float *x = v + j * ldv + (a / group) * dv;
                gram[(j * h + a) * h + a] = cblas_sdot((int)dv, x, 1, x, 1);
            }
        return;
    }
    const size_t rows = key_block(c);
    const void *wo =
        p->stored_wo.data ? p->stored_wo.data : (const void *)p->wo;
    for (size_t j0 = 0; j0 < k; j0 += rows) {
        const size_t r = k - j0 < rows ? k - j0 : rows;
        // vectors [r][h][out]: head a's f over the keys, the value of its
        // KV head through W_O's columns of head a
        for (size_t a = 0; a < h; a++) {
            const struct widen_product prod = {
                .x = v + j0 * ldv + (a / group) * dv,
                .ldx = ldv,
                .rows = r,
                .in = dv,
                .w = wo,
                .col0 = a * dv,
                .dtype = p->stored_wo.data ? p->stored_wo.dtype : ATTN_F32,
                .ldw = h * dv,
                .out = out,
                .y = vectors + a * out,
                .ldy = h * out};
            widen_product(&prod, 0.0f, panel);
        }
        // G_j = F_j F_j^T
        for (size_t j = 0; j < r; j++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)h, (int)h,
                        (int)out, 1.0f, vectors + j * h * out, (int)out,
                        vectors + j * h * out, (int)out, 0.0f,
                        gram + (j0 + j) * h * h, (int)h);
    }
}

attn_status value_weighted_of_result(const struct attn_config *c,
                                     const struct attn_params *p,
                                     struct attn_result *r,
                                     struct attn_error *err)
{
    const size_t b = c->batch, h = c->heads, n = c->n_query, k = c->n_keys;
    const size_t nk = n * k;
    r->measures.value_weighted =
        malloc(b * h * nk * sizeof *r->measures.value_weighted);
    r->measures.value_weighted_sum =
        malloc(b * nk * sizeof *r->measures.value_weighted_sum);
    float *gram = malloc(k * h * h * sizeof *gram);
    float *vectors = malloc(key_block(c) * h * out_width(c) * sizeof *vectors);
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    if (!r->measures.value_weighted || !r->measures.value_weighted_sum ||
        !gram || !vectors || !panel) {
        free(gram);
        free(vectors);
        free(panel);
        attn_result_free(r);
        return attn_fail(err, ATTN_E_NOMEM, "return",
                         "out of memory for the value-weighted attention");
    }
    const size_t ldv = c->kv_heads * c->d_v;
    for (size_t s = 0; s < b; s++) {
        key_grams(c, p, r->v + s * k * ldv, vectors, panel, gram);
        const float *w = r->weights + s * h * nk;
        float *vw = r->measures.value_weighted + s * h * nk;
        float *sum = r->measures.value_weighted_sum + s * nk;
        // per head: alpha_ij |f_h(x_j)|
        for (size_t a = 0; a < h; a++)
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < k; j++)
                    vw[(a * n + i) * k + j] = w[(a * n + i) * k + j] *
                                              sqrtf(gram[(j * h + a) * h + a]);
        // over the heads: sqrt(alpha^T G_j alpha), in double
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < k; j++) {
                const float *G = gram + j * h * h;
                double q = 0;
                for (size_t a = 0; a < h; a++) {
                    const double wa = w[(a * n + i) * k + j];
                    if (wa == 0)
                        continue;
                    double row = 0;
                    for (size_t e = 0; e < h; e++)
                        row += (double)G[a * h + e] * w[(e * n + i) * k + j];
                    q += wa * row;
                }
                sum[i * k + j] = (float)sqrt(q > 0 ? q : 0);
            }
    }
    free(gram);
    free(vectors);
    free(panel);
    if (c->want_internal & ATTN_WANT_WEIGHTS) {
        free(r->weights);
        r->weights = NULL;
    }
    if (c->want_internal & ATTN_WANT_V) {
        free(r->v);
        r->v = NULL;
    }
    return ATTN_OK;
}
