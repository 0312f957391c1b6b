/*
 * patching.h - activation patching (Meng et al. 2022, "Locating and
 * Editing Factual Associations in GPT"; Wang et al. 2022, "Interpretability
 * in the Wild") and the metrics it is measured by, in the core.
 *
 * Two inputs of the same length, clean and corrupted, each run once with
 * its activations kept (transformer.h's XF_WANT_ACTIVATIONS). A patched
 * run is the base run (corrupted to denoise, clean to noise) with one
 * activation replaced by the other run's. It starts at the patched layer
 * from the base run's residual stream there, which is what the layers
 * below would give again, and every patched run of one layer goes through
 * the layers above it together, as one batch of sequences
 * (xf_run.batch): each product reads the weights once for all of them.
 *
 * Errors follow attention.h.
 */
#ifndef ATTN_PATCHING_H
#define ATTN_PATCHING_H

#include "transformer.h"

/* What one patched run replaces, TransformerLens's patching module's
 * names. */
typedef enum xf_patch_over {
    XF_PATCH_HEADS = 0,       /* a head's values at every position:
                                 [layers][heads] runs */
    XF_PATCH_HEADS_POSITIONS, /* a head's values at one position:
                                 [layers][heads][n] */
    XF_PATCH_RESIDUAL,        /* the residual stream entering a layer at
                                 one position: [layers][n] */
    XF_PATCH_LAYERS           /* a layer's attention output, then its
                                 feed-forward's, at one position:
                                 [2][layers][n] */
} xf_patch_over;

/* "heads", "heads_positions", "residual", "layers"; NULL past them. */
const char *xf_patch_over_name(int over);

typedef enum xf_metric_kind {
    XF_METRIC_LOGIT_DIFF = 0, /* logit[correct] - logit[incorrect] */
    XF_METRIC_LOGPROB         /* log softmax(logits)[correct] */
} xf_metric_kind;

/* A measure of a run's next-token scores at its last position: a logit
 * difference in double from the final hidden state and two rows of
 * lm_head; a log-probability from the logits, the sum in double. */
struct xf_metric {
    xf_metric_kind kind;
    uint32_t correct, incorrect; /* token ids, below vocab_size */
};

struct xf_patch {
    const uint32_t *clean, *corrupted; /* [n] ids each */
    size_t n;
    xf_patch_over over;
    bool noise; /* false: denoise (base corrupted, source clean) */
    struct xf_metric metric;
    unsigned threads;  /* as xf_run.threads */
    size_t batch_rows; /* rows a batch of patched runs holds at most (its
                          sequences times n; at least one sequence) */
    /* NULL, or called after each batch with the runs done and their
     * count, on the calling thread */
    void (*progress)(void *ctx, size_t done, size_t of);
    void *progress_ctx;
};

/* The patched runs of a patch, and those of one layer. */
size_t xf_patch_runs(const struct xf_model *m, const struct xf_patch *p);
size_t xf_patch_layer_runs(const struct xf_model *m, const struct xf_patch *p);

/* Sequences in a batch of p (at least 1, at most XF_MAX_BATCH). */
size_t xf_patch_batch(const struct xf_patch *p);

/*
 * Check p against m (a pre-norm model with an output head, ids below
 * vocab_size, the metric's tokens too) and count what it costs: *bytes
 * the most it holds at once (both runs' activations, a batch's plan),
 * *flops its work. Fails naming "model", "clean", "corrupted", "over",
 * "metric" or "ids".
 */
attn_status xf_patch_cost(const struct xf_model *m, const struct xf_patch *p,
                          size_t *bytes, double *flops, struct attn_error *err);

/* patched [runs]: each patched run's metric, in the layout of p->over
 * above; clean and corrupted: the unpatched runs'. */
struct xf_patch_result {
    size_t runs;
    double clean, corrupted;
    double *patched;
};

/*
 * Run every patched run of p. cancel as xf_forward()'s. On success the
 * caller owns *out; release it with xf_patch_result_free().
 */
attn_status xf_patch_run(const struct xf_model *m, const struct xf_patch *p,
                         const atomic_bool *cancel, struct xf_patch_result *out,
                         struct attn_error *err);
void xf_patch_result_free(struct xf_patch_result *r);

/*
 * The normalised effect of patched run i: (patched - corrupted) /
 * (clean - corrupted), 0 when patching restores nothing, 1 when it
 * restores the clean run. false, and *effect untouched, when clean and
 * corrupted have the same metric (no effect can be measured).
 */
bool xf_patch_effect(const struct xf_patch_result *r, size_t i, double *effect);

#endif
