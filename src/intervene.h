/*
 * intervene.h - a run's edits (transformer.h's struct xf_edit): checking
 * them against the model and the run, and applying those of one layer
 * and site to the rows the pass holds there. Internal to the core.
 */
#ifndef ATTN_INTERVENE_H
#define ATTN_INTERVENE_H

#include "transformer.h"

/* Check run's edits against m and the run's sizes: each site and op
 * known and allowed together, each layer, head, position and sequence in
 * range, a source wherever one is read; after a cache, ZERO and MEAN of
 * XF_SITE_Z only. Fails naming "edits" with the edit's index. */
attn_status intervene_check(const struct xf_model *m, const struct xf_run *run,
                            size_t batch, struct attn_error *err);

/* Does run hold an edit of layer l at site? */
bool intervene_any(const struct xf_run *run, size_t l, xf_site site);

/*
 * Each head's mean over n rows of z: means [heads D] = (1/n) sum_i
 * z[i], summed in double. z: [n][heads D].
 */
void intervene_means(const float *z, size_t n, size_t hd, float *means);

/*
 * Apply run's edits of layer l at site to rows [batch][n][width] (width:
 * heads x head_dim at XF_SITE_Z, else hidden), in their order. Row i of
 * a sequence is position pos0 + i. MEAN edits read means [batch][heads
 * D]: each sequence's head means, taken before any edit of the layer.
 * base: NULL, or [batch][n][width] rows the site's values were added to
 * (the feed-forward's residual sum): a SET row is then base + source.
 */
void intervene_apply(const struct xf_run *run, size_t l, xf_site site,
                     float *rows, const float *base, size_t n, size_t width,
                     size_t head_dim, size_t pos0, const float *means);

#endif
