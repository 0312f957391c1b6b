/*
 * attribution.c - direct logit attribution (attribution.h).
 */
#include "attribution.h"
#include "error.h"
#include "transformer_units.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The frozen final norm as one linear map on a component c [H]:
 * part(c) = (g . c - centre * mean(c) * sum(g)) / scale, with g = w * u. */
struct frozen_norm {
    double *g;    /* [H] */
    double sum_g; /* sum of g, for LayerNorm's centring */
    double scale; /* rms(r) or std(r) */
    bool centre;  /* LayerNorm */
};

/* With post (NULL: none), the component is c[k] * post[k]: a layer's
 * frozen norm on its attention's output (below). */
static double part_of(const struct frozen_norm *f, const float *c,
                      const double *post, size_t H)
{
    double dot = 0.0, sum = 0.0;
    for (size_t k = 0; k < H; k++) {
        const double ck = post ? c[k] * post[k] : c[k];
        dot += f->g[k] * ck;
        sum += ck;
    }
    if (f->centre)
        dot -= sum / (double)H * f->sum_g;
    return dot / f->scale;
}

void xf_dla_free(struct xf_dla *dla)
{
    if (!dla)
        return;
    free(dla->heads_part);
    free(dla->mlp);
    free(dla->attn_bias);
    memset(dla, 0, sizeof *dla);
}

/* u = lm_head[t0] - lm_head[t1], or lm_head[t0]; row: [H] scratch. */
static void direction(const struct xf_model *m, const uint32_t *target,
                      size_t n_target, float *row, double *u)
{
    const size_t H = m->hidden;
    attn_widen(xf_matrix_rows(m->lm_head, target[0], H), m->lm_head.dtype, H,
               row);
    for (size_t k = 0; k < H; k++)
        u[k] = row[k];
    if (n_target == 2) {
        attn_widen(xf_matrix_rows(m->lm_head, target[1], H), m->lm_head.dtype,
                   H, row);
        for (size_t k = 0; k < H; k++)
            u[k] -= row[k];
    }
}

/* The final norm frozen at r, and the logit of r through it. */
static double freeze(const struct xf_model *m, const float *r, const double *u,
                     struct frozen_norm *f)
{
    const size_t H = m->hidden;
    const bool layer_norm = m->arch.norm == XF_NORM_LAYER;
    double mean = 0.0, sq = 0.0;
    for (size_t k = 0; k < H; k++)
        mean += r[k];
    mean /= (double)H;
    for (size_t k = 0; k < H; k++) {
        const double d = layer_norm ? r[k] - mean : r[k];
        sq += d * d;
    }
    f->centre = layer_norm;
    f->scale = m->arch.final_norm ? sqrt(sq / (double)H + m->norm_eps) : 1.0;
    f->sum_g = 0.0;
    double logit = 0.0;
    for (size_t k = 0; k < H; k++) {
        const double w = m->arch.final_norm ? m->final_norm_w[k] : 1.0;
        f->g[k] = w * u[k];
        f->sum_g += f->g[k];
        const double x = layer_norm ? r[k] - mean : r[k];
        logit += x / f->scale * f->g[k];
    }
    return logit;
}

/* The norm's bias through u. */
static double bias_part(const struct xf_model *m, const double *u)
{
    if (!m->arch.final_norm || !m->final_norm_b)
        return 0.0;
    double sum = 0.0;
    for (size_t k = 0; k < m->hidden; k++)
        sum += (double)m->final_norm_b[k] * u[k];
    return sum;
}

/* Layer l's heads: W_O's slice of head a maps z_a to the stream, so its
 * part is z_a . (W_O^T g)_a, less its mean's share under LayerNorm,
 * z_a . (W_O^T 1)_a / H; with post, W_O's row k is scaled by post[k]
 * first. t, t1: [heads D] scratch; row: [heads D]. */
static void head_parts(const struct xf_model *m, const struct frozen_norm *f,
                       size_t l, const float *z, const double *post, double *t,
                       double *t1, float *row, double *out)
{
    const size_t H = m->hidden, D = m->head_dim, hd = m->heads * D;
    const struct xf_matrix o = m->layer[l].o_w;
    memset(t, 0, hd * sizeof *t);
    memset(t1, 0, hd * sizeof *t1);
    for (size_t k = 0; k < H; k++) {
        attn_widen(xf_matrix_rows(o, k, hd), o.dtype, hd, row);
        const double p = post ? post[k] : 1.0;
        for (size_t j = 0; j < hd; j++) {
            t[j] += f->g[k] * p * row[j];
            t1[j] += p * row[j];
        }
    }
    for (size_t a = 0; a < m->heads; a++) {
        double dot = 0.0, sum = 0.0;
        for (size_t e = a * D; e < (a + 1) * D; e++) {
            dot += t[e] * z[e];
            sum += t1[e] * z[e];
        }
        if (f->centre)
            dot -= sum / (double)H * f->sum_g;
        out[a] = dot / f->scale;
    }
}

/* A norm on layer l's attention output (Gemma 2 and 3, OLMo 2), frozen
 * at the output the pass had, a = z W_O^T + b_O: the stream receives
 * a[k] * post[k], post[k] = w[k] / rms(a), linear in each head's share
 * of a. post, a: [H]; row: [heads D] scratch. */
static void freeze_output_norm(const struct xf_model *m, size_t l,
                               const float *z, double *a, float *row,
                               double *post)
{
    const size_t H = m->hidden, hd = m->heads * m->head_dim;
    const struct xf_layer *y = &m->layer[l];
    double sq = 0.0;
    for (size_t k = 0; k < H; k++) {
        attn_widen(xf_matrix_rows(y->o_w, k, hd), y->o_w.dtype, hd, row);
        double v = y->o_b ? y->o_b[k] : 0.0;
        for (size_t j = 0; j < hd; j++)
            v += (double)row[j] * z[j];
        a[k] = v;
        sq += v * v;
    }
    const double rms = sqrt(sq / (double)H + m->norm_eps);
    for (size_t k = 0; k < H; k++)
        post[k] = y->attn_out_norm_w[k] / rms;
}

attn_status xf_dla(const struct xf_model *m, const struct xf_result *acts,
                   const uint32_t *target, size_t n_target, struct xf_dla *out,
                   struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    const bool out_norms = m->arch.norm_place == XF_NORM_SANDWICH ||
                           m->arch.norm_place == XF_NORM_OUTPUT;
    if (!m->lm_head.data || m->arch.norm_place == XF_NORM_AFTER ||
        (out_norms && m->arch.norm != XF_NORM_RMS))
        return attn_fail(err, ATTN_E_INVALID, "model",
                         "direct logit attribution needs a model with an "
                         "output head whose residual stream no norm "
                         "rewrites (and RMS norms on sublayer outputs)");
    if (!acts->resid || acts->captured != 1 || (n_target != 1 && n_target != 2))
        return attn_fail(err, ATTN_E_INVALID, "acts",
                         "attribution reads one position's activations and "
                         "one or two targets");
    for (size_t i = 0; i < n_target; i++)
        if (target[i] >= m->vocab_size)
            return attn_fail(err, ATTN_E_INVALID, "target",
                             "target %u is not below vocab_size (%zu)",
                             (unsigned)target[i], m->vocab_size);
    const size_t L = m->layers, h = m->heads, H = m->hidden,
                 hd = h * m->head_dim;
    const size_t big = H > hd ? H : hd;
    double *scratch = malloc((4 * H + 2 * hd) * sizeof *scratch);
    float *row = malloc(big * sizeof *row);
    out->heads_part = malloc(L * h * sizeof *out->heads_part);
    out->mlp = malloc(L * sizeof *out->mlp);
    out->attn_bias =
        m->arch.out_bias ? malloc(L * sizeof *out->attn_bias) : NULL;
    if (!scratch || !row || !out->heads_part || !out->mlp ||
        (m->arch.out_bias && !out->attn_bias)) {
        free(scratch);
        free(row);
        xf_dla_free(out);
        return attn_fail(err, ATTN_E_NOMEM, "target",
                         "out of memory for the attribution");
    }
    double *u = scratch, *t = u + 2 * H, *t1 = t + hd;
    double *post = out_norms ? t1 + hd : NULL, *projected = t1 + hd + H;
    struct frozen_norm f = {.g = u + H};
    direction(m, target, n_target, row, u);
    out->layers = L;
    out->heads = h;
    out->logit = freeze(m, acts->resid + L * H, u, &f) + bias_part(m, u);
    out->bias = bias_part(m, u);
    out->embed = part_of(&f, acts->resid, NULL, H);
    double total = out->embed + out->bias;
    for (size_t l = 0; l < L; l++) {
        if (post)
            freeze_output_norm(m, l, acts->z + l * hd, projected, row, post);
        head_parts(m, &f, l, acts->z + l * hd, post, t, t1, row,
                   out->heads_part + l * h);
        for (size_t a = 0; a < h; a++)
            total += out->heads_part[l * h + a];
        if (out->attn_bias) {
            out->attn_bias[l] = part_of(&f, m->layer[l].o_b, post, H);
            total += out->attn_bias[l];
        }
        out->mlp[l] = part_of(&f, acts->mlp_out + l * H, NULL, H);
        total += out->mlp[l];
    }
    out->total = total;
    free(scratch);
    free(row);
    return ATTN_OK;
}
