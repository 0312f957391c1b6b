/*
 * request_intervene.h - what a request on a model asks of interventions:
 * "ablate" (heads whose values are replaced, and how) and direct logit
 * attribution's "dla_target" and "dla_position"; and a token named by its
 * text or its id, which they and POST /patch's metrics take.
 */
#ifndef ATTND_REQUEST_INTERVENE_H
#define ATTND_REQUEST_INTERVENE_H

#include "attribution.h"
#include "problem.h"
#include "transformer.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct model;
struct request;
struct buf;
struct jpath;

/* The most items "ablate" takes; with their positions they make at most
 * XF_MAX_EDITS edits. */
#define REQUEST_MAX_ABLATE 4096

/* One item of "ablate", its defaults filled, as the answer echoes it. */
struct request_ablation {
    size_t layer;
    size_t head; /* XF_ALL: every head of the layer */
    bool mean;   /* mode "mean", else "zero" */
    size_t first, count; /* its positions: positions[first, first + count);
                            count 0: every position */
};

struct request_interventions {
    struct request_ablation *ablate; /* owned, [n_ablate] */
    size_t n_ablate;
    size_t *positions; /* owned: every item's positions, one after another */
    struct xf_edit *edits; /* owned: the ablation as the core's edits */
    size_t n_edits;
    bool dla;                /* "dla" in "return" */
    uint32_t dla_target[2];  /* the logit, or the pair whose difference */
    size_t n_dla_target;     /* 0 (no dla), 1 or 2 */
    size_t dla_position;     /* the position attributed */
    struct xf_dla dla_result; /* owned: after the pass */
};

void request_interventions_free(struct request_interventions *iv);

/*
 * Read "ablate", "dla_target" and "dla_position" of root for the model m,
 * whose input has n tokens, into req->model.iv and its run (edits; with
 * dla, the activations at the position). Memory is reserved on req's
 * hold first. Fails naming the field: "ablate[k].layer" with the model's
 * count, "ablate[k].head", "ablate[k].positions[j]" with the input's.
 */
bool request_read_interventions(struct request *req, const cJSON *root,
                                const struct model *m, struct problem *pb);

/*
 * A token named by v: a token id below the model's vocabulary, or a text
 * that the model's tokenizer makes exactly one token of (without the
 * tokens it adds). Otherwise a 422 at `at` naming the tokens the text
 * gave.
 */
bool request_read_token(const cJSON *v, const struct jpath *at,
                        const struct model *m, uint32_t *id,
                        struct problem *pb);

/* The config echo of "ablate": the items as applied, defaults filled. */
bool request_echo_ablate(struct buf *out, const struct request *req);

#endif
