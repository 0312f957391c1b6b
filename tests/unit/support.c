/*
 * support.c - a deliberately naive float64 attention: one loop per formula
 * of docs/math.md, no blocking, no BLAS. The tests hold the core's
 * BLAS kernels to it.
 */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *dalloc(size_t n)
{
    double *a = calloc(n ? n : 1, sizeof *a);
    if (!a)
        abort();
    return a;
}

void ref_out_alloc(const struct attn_config *c, struct ref_out *out)
{
    const size_t b = c->batch, n = c->n_query, m = c->n_keys, h = c->heads,
                 g = c->kv_heads;
    out->weights = dalloc(b * h * n * m);
    out->weights_raw = dalloc(b * h * n * m);
    out->scores = dalloc(b * h * n * m);
    out->q = dalloc(b * n * h * c->d_k);
    out->k = dalloc(b * m * g * c->d_k);
    out->v = dalloc(b * m * g * c->d_v);
    out->heads_out = dalloc(b * n * h * c->d_v);
    out->output = dalloc(b * n * c->d_out);
    out->fully_masked = calloc(b * n, 1);
}

void ref_out_free(struct ref_out *out)
{
    free(out->weights);
    free(out->weights_raw);
    free(out->scores);
    free(out->q);
    free(out->k);
    free(out->v);
    free(out->heads_out);
    free(out->output);
    free(out->fully_masked);
    memset(out, 0, sizeof *out);
}

/* y[r][o] = sum_i x[r][i] * w[o][i] + bias[o] */
static void ref_linear(const double *x, size_t rows, size_t in, const float *w,
                       const float *bias, size_t outs, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < outs; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (size_t i = 0; i < in; i++)
                acc += x[r * in + i] * (double)w[o * in + i];
            y[r * outs + o] = acc;
        }
}

static void ref_sinusoidal(double *x, size_t n, size_t d)
{
    for (size_t pos = 0; pos < n; pos++)
        for (size_t c = 0; c < d; c++) {
            const double angle =
                (double)pos / pow(10000.0, (double)(c - c % 2) / (double)d);
            x[pos * d + c] += c % 2 ? cos(angle) : sin(angle);
        }
}

/* Rotary positions: pair i of each head's first dims values is (2i,
 * 2i + 1), or (i, i + dims/2) as transformers' rotate_half pairs them,
 * turned by pos times base^(-2i/dims) or the config's own frequency of
 * pair i, cos and sin times the factor. */
static void ref_rope(const struct attn_config *c, double *x, size_t n,
                     size_t heads)
{
    const size_t dh = c->d_k, dims = c->rope.dims ? c->rope.dims : dh;
    const bool half = c->rope.pairing == ATTN_ROPE_HALF;
    const double base = c->rope.base ? c->rope.base : 10000.0;
    const double f = c->rope.factor ? c->rope.factor : 1.0;
    for (size_t pos = 0; pos < n; pos++)
        for (size_t a = 0; a < heads; a++)
            for (size_t i = 0; i < dims / 2; i++) {
                double *head = x + pos * heads * dh + a * dh;
                double *p0 = half ? head + i : head + 2 * i;
                double *p1 = half ? head + i + dims / 2 : head + 2 * i + 1;
                const double freq =
                    c->rope.inv_freq
                        ? c->rope.inv_freq[i]
                        : pow(base, -2.0 * (double)i / (double)dims);
                const double t = (double)pos * freq;
                const double a0 = *p0, a1 = *p1;
                *p0 = f * (a0 * cos(t) - a1 * sin(t));
                *p1 = f * (a0 * sin(t) + a1 * cos(t));
            }
}

/* Each head's values x / sqrt(mean(x^2) + eps) * w. */
static void ref_head_norm(double *x, size_t n, size_t heads, size_t dh,
                          const float *w, double eps)
{
    for (size_t r = 0; r < n * heads; r++) {
        double *h = x + r * dh, sq = 0.0;
        for (size_t e = 0; e < dh; e++)
            sq += h[e] * h[e];
        const double rms = sqrt(sq / (double)dh + eps);
        for (size_t e = 0; e < dh; e++)
            h[e] = h[e] / rms * w[e];
    }
}

/* Where pair (i, j) of head a of sequence b sits in a mask. */
static size_t mask_index(const struct attn_config *c, size_t b, size_t a,
                         size_t i, size_t j)
{
    const size_t n = c->n_query, m = c->n_ctx;
    const size_t matrix = c->mask_per_head  ? b * c->heads + a
                          : c->mask_batched ? b
                                            : 0;
    return (matrix * n + i) * m + j;
}

/* Keys past the context's (bias_k, zero) are never masked. */
static bool allowed(const struct attn_config *c, size_t b, size_t a, size_t i,
                    size_t j)
{
    const size_t m = c->n_ctx;
    if (j >= m)
        return true;
    if (c->causal && j > i)
        return false;
    if (c->window && j + c->window <= i)
        return false;
    if (c->mask && !c->mask[mask_index(c, b, a, i, j)])
        return false;
    if (c->mask_bias && !(c->mask_bias[mask_index(c, b, a, i, j)] > -1e30f))
        return false;
    if (c->key_padding &&
        c->key_padding[(c->key_padding_batched ? b * m : 0) + j])
        return false;
    return true;
}

void ref_forward(const struct attn_config *c, const struct attn_params *p,
                 const float *x, const float *context, struct ref_out *out)
{
    /* M: context rows; MK: keys, the context's and the appended ones */
    const size_t B = c->batch, N = c->n_query, M = c->n_ctx, MK = c->n_keys,
                 H = c->heads, G = c->kv_heads, dm = c->d_model, dc = c->d_ctx,
                 dk = c->d_k, dv = c->d_v, dout = c->d_out;
    const bool basic = c->mode == ATTN_MODE_BASIC;
    const double scale = c->has_scale ? c->scale
                         : basic      ? 1.0
                                      : 1.0 / sqrt((double)dk);
    const uint64_t drop_key = attn_stream_key(c->seed, "dropout", 7);
    double *xb = dalloc(N * dm), *cb = dalloc(M * dc);
    double *q = dalloc(N * H * dk), *k = dalloc(MK * G * dk),
           *v = dalloc(MK * G * dv);
    double *heads = dalloc(N * H * dv), *row = dalloc(MK);

    for (size_t b = 0; b < B; b++) {
        for (size_t e = 0; e < N * dm; e++)
            xb[e] = x[b * N * dm + e];
        const float *cs = context ? context + b * M * dc : x + b * N * dm;
        for (size_t e = 0; e < M * dc; e++)
            cb[e] = cs[e];
        if (c->positional == ATTN_POS_SINUSOIDAL) {
            ref_sinusoidal(xb, N, dm);
            ref_sinusoidal(cb, M, dc);
        }
        if (basic) {
            memcpy(q, xb, N * dm * sizeof *q);
            memcpy(k, cb, M * dc * sizeof *k);
            memcpy(v, cb, M * dc * sizeof *v);
        } else {
            ref_linear(xb, N, dm, p->wq, p->bq, H * dk, q);
            ref_linear(cb, M, dc, p->wk, p->bk, G * dk, k);
            ref_linear(cb, M, dc, p->wv, p->bv, G * dv, v);
            if (c->qk_norm) {
                ref_head_norm(q, N, H, dk, p->q_norm, c->qk_norm_eps);
                ref_head_norm(k, M, G, dk, p->k_norm, c->qk_norm_eps);
            }
            if (c->qk_norm_whole) { /* one row of every head at once */
                ref_head_norm(q, N, 1, H * dk, p->q_norm, c->qk_norm_eps);
                ref_head_norm(k, M, 1, G * dk, p->k_norm, c->qk_norm_eps);
            }
            if (c->positional == ATTN_POS_ROPE) {
                ref_rope(c, q, N, H);
                ref_rope(c, k, M, G);
            }
            /* bias_k and bias_v as they are, then zeros (dalloc's) */
            for (size_t e = 0; c->bias_kv && e < G * dk; e++)
                k[M * G * dk + e] = p->bias_k[e];
            for (size_t e = 0; c->bias_kv && e < G * dv; e++)
                v[M * G * dv + e] = p->bias_v[e];
        }
        memcpy(out->q + b * N * H * dk, q, N * H * dk * sizeof *q);
        memcpy(out->k + b * MK * G * dk, k, MK * G * dk * sizeof *k);
        memcpy(out->v + b * MK * G * dv, v, MK * G * dv * sizeof *v);

        for (size_t a = 0; a < H; a++) {
            const size_t g = a / (H / G);
            for (size_t i = 0; i < N; i++) {
                double mx = -INFINITY;
                for (size_t j = 0; j < MK; j++) {
                    double s = 0.0;
                    for (size_t e = 0; e < dk; e++)
                        s += q[i * H * dk + a * dk + e] *
                             k[j * G * dk + g * dk + e];
                    s *= scale;
                    if (c->softcap > 0.0f)
                        s = c->softcap * tanh(s / c->softcap);
                    out->scores[((b * H + a) * N + i) * MK + j] = s;
                    if (c->mask_bias && j < M)
                        s += c->mask_bias[mask_index(c, b, a, i, j)];
                    row[j] = allowed(c, b, a, i, j) ? s : -INFINITY;
                    if (row[j] > mx)
                        mx = row[j];
                }
                double sum = 0.0;
                for (size_t j = 0; j < MK; j++) {
                    row[j] = mx == -INFINITY ? 0.0 : exp(row[j] - mx);
                    sum += row[j];
                }
                if (mx == -INFINITY)
                    out->fully_masked[b * N + i] = 1;
                for (size_t j = 0; j < MK; j++) {
                    double w = sum > 0 ? row[j] / sum : 0.0;
                    const uint64_t idx = ((b * H + a) * N + i) * MK + j;
                    out->weights_raw[idx] = w;
                    if (c->dropout > 0.0f) {
                        const double u =
                            (double)(attn_stream_draw(drop_key, idx) >> 11) *
                            0x1.0p-53;
                        w = u >= c->dropout ? w / (1.0 - c->dropout) : 0.0;
                    }
                    row[j] = w;
                    out->weights[idx] = w;
                }
                for (size_t e = 0; e < dv; e++) {
                    double acc = 0.0;
                    for (size_t j = 0; j < MK; j++)
                        acc += row[j] * v[j * G * dv + g * dv + e];
                    heads[i * H * dv + a * dv + e] = acc;
                }
            }
        }
        memcpy(out->heads_out + b * N * H * dv, heads,
               N * H * dv * sizeof *heads);

        double *o = out->output + b * N * dout;
        if (!basic && !c->no_out_proj)
            ref_linear(heads, N, H * dv, p->wo, p->bo, dout, o);
        else
            memcpy(o, heads, N * dout * sizeof *o);
        for (size_t i = 0; i < N; i++)
            for (size_t e = 0; e < dout; e++) {
                if (c->residual == ATTN_RESIDUAL_VALUE) {
                    const size_t a = e / dv, g = a / (H / G);
                    o[i * dout + e] += v[i * G * dv + g * dv + e % dv];
                } else if (c->residual == ATTN_RESIDUAL_INPUT) {
                    o[i * dout + e] += xb[i * dm + e];
                }
            }
    }
    free(xb);
    free(cb);
    free(q);
    free(k);
    free(v);
    free(heads);
    free(row);
}

double max_abs_diff(const float *got, const double *want, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        if (!(d <= worst))
            worst = d; /* NaN propagates as the worst */
    }
    return worst;
}

double max_tol_ratio(const float *got, const double *want, size_t n,
                     double atol, double rtol)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double r =
            fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(r <= worst))
            worst = r;
    }
    return worst;
}

void fill_normal(float *a, size_t n, uint64_t seed, float stddev)
{
    const uint64_t key = attn_stream_key(seed, "test", 4);
    for (size_t i = 0; i < n; i += 2) {
        const double u1 =
            1.0 - (double)(attn_stream_draw(key, i) >> 11) * 0x1.0p-53;
        const double u2 =
            (double)(attn_stream_draw(key, i + 1) >> 11) * 0x1.0p-53;
        const double r = sqrt(-2.0 * log(u1)) * stddev;
        a[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n)
            a[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
}

struct xf_arch test_bert_arch(xf_act act)
{
    return (struct xf_arch){.norm = XF_NORM_LAYER,
                            .norm_place = XF_NORM_AFTER,
                            .ffn = XF_FFN_PLAIN,
                            .act = act,
                            .positions = XF_POS_LEARNED,
                            .token_types = true,
                            .embed_norm = true,
                            .qkv_bias = true,
                            .out_bias = true,
                            .ffn_bias = true};
}

struct xf_matrix test_f32(const float *data)
{
    return (struct xf_matrix){.data = data, .dtype = ATTN_F32};
}

const float *test_values(struct xf_matrix w)
{
    if (w.dtype != ATTN_F32)
        abort(); /* the references read float32 models only */
    return w.data;
}

attn_status test_xf_forward(const struct xf_model *m, const struct xf_run *run,
                            const atomic_bool *cancel, struct xf_result *out,
                            struct attn_error *err)
{
    struct xf_plan plan;
    const attn_status st = xf_plan(m, run, &plan, err);
    if (st) {
        memset(out, 0, sizeof *out);
        return st;
    }
    return xf_forward(&plan, cancel, out, err);
}

size_t test_xf_bytes(const struct xf_model *m, const struct xf_run *run)
{
    struct xf_plan plan;
    return xf_plan(m, run, &plan, NULL) ? SIZE_MAX : xf_plan_bytes(&plan);
}

double test_xf_flops(const struct xf_model *m, const struct xf_run *run)
{
    struct xf_plan plan;
    return xf_plan(m, run, &plan, NULL) ? 0.0 : xf_plan_flops(&plan);
}
