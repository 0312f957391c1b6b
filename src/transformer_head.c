/*
 * transformer_head.c - a decoder's output head: logits and the logit
 * lens (transformer_head.h).
 */
#include "sampling.h"
#include "softmax.h"
#include "transformer_head.h"
#include "transformer_units.h"
#include "widen.h"

#include <math.h>
#include <string.h>

/* What the units of one product through the head share. */
struct head_pass {
    const struct xf_model *m;
    const float *x; /* [rows][H] */
    size_t rows;
    float *y; /* [rows][vocab] */
    float *panels;
    struct xf_products how;
};

/* Columns [u * LOGIT_TILE, ...) of the product: a tile of the
 * vocabulary, lm_head's rows, read once for every row of x. */
enum { LOGIT_TILE = 4096 };
static void logit_unit(void *arg, size_t u, unsigned member)
{
    const struct head_pass *hp = arg;
    const struct xf_model *m = hp->m;
    const size_t H = m->hidden, V = m->vocab_size, c0 = u * LOGIT_TILE;
    const size_t width = V - c0 < LOGIT_TILE ? V - c0 : LOGIT_TILE;
    const struct widen_product pr = {.x = hp->x,
                                     .ldx = H,
                                     .rows = hp->rows,
                                     .in = H,
                                     .w = xf_matrix_rows(m->lm_head, c0, H),
                                     .dtype = m->lm_head.dtype,
                                     .ldw = H,
                                     .out = width,
                                     .y = hp->y + c0,
                                     .ldy = V,
                                     .alone = hp->how.alone,
                                     .bf16_dots = hp->how.bf16_dots};
    widen_product(&pr, 0.0f, widen_panel(hp->panels, member));
    if (m->final_softcap > 0.0f)
        for (size_t r = 0; r < hp->rows; r++)
            softmax_softcap(hp->y + r * V + c0, width, m->final_softcap);
}

double head_capped(const struct xf_model *m, double logit)
{
    if (m->final_softcap <= 0.0f)
        return logit;
    return tanh(logit / m->final_softcap) * m->final_softcap;
}

void head_logits(struct pool_team *team, const struct xf_model *m,
                 const float *x, size_t rows, float *y, float *panels,
                 struct xf_products how)
{
    struct head_pass hp = {.m = m,
                           .x = x,
                           .rows = rows,
                           .y = y,
                           .panels = panels,
                           .how = how};
    pool_phase(team, logit_unit, &hp,
               (m->vocab_size + LOGIT_TILE - 1) / LOGIT_TILE);
}

size_t head_lens_floats(const struct xf_model *m, size_t n)
{
    const size_t rows = n < HEAD_LENS_ROWS ? n : HEAD_LENS_ROWS;
    return rows * (m->hidden + m->vocab_size);
}

void head_lens(struct pool_team *team, const struct xf_model *m, const float *h,
               size_t n, bool final, size_t k, struct xf_candidate *out,
               float *scratch, float *panels)
{
    const size_t H = m->hidden, V = m->vocab_size;
    const size_t most = n < HEAD_LENS_ROWS ? n : HEAD_LENS_ROWS;
    float *normed = scratch, *logits = scratch + most * H;
    for (size_t r0 = 0; r0 < n; r0 += HEAD_LENS_ROWS) {
        const size_t rows = n - r0 < HEAD_LENS_ROWS ? n - r0 : HEAD_LENS_ROWS;
        const float *x = h + r0 * H;
        // a layer's output as the head reads the last one: after the
        // final norm (the last layer's has had it)
        if (!final && m->arch.final_norm) {
            xf_norm_rows(m, x, rows, m->final_norm_w, m->final_norm_b, normed);
            x = normed;
        }
        head_logits(team, m, x, rows, logits, panels,
                    (struct xf_products){0});
        for (size_t r = 0; r < rows; r++) {
            struct xf_candidate *top = out + (r0 + r) * k;
            // fewer only when logits are not finite, which a pass refuses
            for (size_t got = xf_top_tokens(logits + r * V, V, k, top); got < k;
                 got++)
                top[got] = (struct xf_candidate){0, 0.0f};
        }
    }
}
