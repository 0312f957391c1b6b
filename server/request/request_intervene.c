/*
 * request_intervene.c - "ablate", "dla_target" and "dla_position" of a
 * request on a model, read once its input is encoded: positions are the
 * input's, heads and layers the model's (request_intervene.h).
 */
#include "request_intervene.h"
#include "buf.h"
#include "jsonin.h"
#include "models.h"
#include "request_fields.h"
#include "request_steps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void request_interventions_free(struct request_interventions *iv)
{
    free(iv->ablate);
    free(iv->positions);
    free(iv->edits);
    xf_dla_free(&iv->dla_result);
    memset(iv, 0, sizeof *iv);
}

/* ------------------------------------------------------------ a token */

bool request_read_token(const cJSON *v, const struct jpath *at,
                        const struct model *m, uint32_t *id, struct problem *pb)
{
    if (cJSON_IsNumber(v)) {
        size_t got;
        if (!jsonin_size(v, at, 0, m->xf.vocab_size - 1, &got, pb))
            return false;
        *id = (uint32_t)got;
        return true;
    }
    if (!cJSON_IsString(v))
        return problem_set(pb, 422, at->pointer,
                           "%s is %s; expected a token's text or its id",
                           at->name, jsonin_kind(v));
    // a few tokens are enough to say what the text gave
    enum { SHOWN = 8 };
    const struct tok_options opts = {.max_tokens = 64, .no_special = true};
    struct tok_encoding enc;
    struct attn_error err;
    size_t len;
    const char *text = jsonin_text(v, &len);
    char shown_text[256];
    jsonin_show_text(text, len, shown_text, sizeof shown_text);
    const attn_status st =
        tok_encode(&m->tokenizer, text, len, NULL, 0, &opts, &enc, &err);
    if (st == ATTN_E_TOO_BIG)
        return problem_set(pb, 422, at->pointer,
                           "%s (%s) is many tokens of the model \"%s\", "
                           "not one",
                           at->name, shown_text, m->name);
    if (st == ATTN_E_NOMEM)
        return problem_set(pb, 503, at->pointer, "out of memory");
    if (st != ATTN_OK)
        return problem_set(pb, 422, at->pointer, "%s: %s", at->name,
                           err.message);
    if (enc.count == 1) {
        *id = enc.ids[0];
        tok_encoding_free(&enc);
        return true;
    }
    char shown[400] = "";
    size_t used = 0;
    for (size_t i = 0; i < enc.count && i < SHOWN && used < sizeof shown; i++) {
        const char *t = tok_token_text(&m->tokenizer, enc.ids[i]);
        const int w = snprintf(shown + used, sizeof shown - used, "%s\"%.24s\"",
                               i ? ", " : "", t ? t : "?");
        used += w > 0 ? (size_t)w : 0;
    }
    const size_t count = enc.count;
    tok_encoding_free(&enc);
    if (!count)
        return problem_set(pb, 422, at->pointer,
                           "%s (%s) gives no token of the model \"%s\"; "
                           "expected exactly one",
                           at->name, shown_text, m->name);
    return problem_set(pb, 422, at->pointer,
                       "%s (%s) is %zu tokens of the model \"%s\" "
                       "(%s%s), not one: name a single token, by its text or "
                       "its id",
                       at->name, shown_text, count, m->name, shown,
                       count > SHOWN ? ", ..." : "");
}

/* ------------------------------------------------------------ ablate */

static bool read_item_keys(const cJSON *item, const struct jpath *at,
                           struct problem *pb)
{
    static const char *const keys[] = {"layer", "head", "mode", "positions"};
    const cJSON *k;
    cJSON_ArrayForEach(k, item)
    {
        bool known = false;
        for (size_t i = 0; i < 4; i++)
            known = known || !strcmp(k->string, keys[i]);
        if (!known) {
            struct jpath sub;
            jpath_key(&sub, at, k->string);
            return problem_set(pb, 422, sub.pointer,
                               "unknown key \"%.40s\" in %s (an ablation "
                               "takes layer, head, mode and positions)",
                               k->string, at->name);
        }
    }
    return true;
}

/* One item's layer, head and mode. */
static bool read_item(const cJSON *item, const struct jpath *at,
                      const struct model *m, struct request_ablation *a,
                      struct problem *pb)
{
    if (!cJSON_IsObject(item))
        return problem_set(pb, 422, at->pointer,
                           "%s is %s; expected an object such as "
                           "{\"layer\": 0, \"head\": 1, \"mode\": \"zero\"}",
                           at->name, jsonin_kind(item));
    if (!read_item_keys(item, at, pb))
        return false;
    struct jpath sub;
    jpath_key(&sub, at, "layer");
    const cJSON *layer = cJSON_GetObjectItemCaseSensitive(item, "layer");
    if (!layer)
        return problem_set(pb, 422, sub.pointer,
                           "%s is missing: the layer whose heads are ablated, "
                           "0 to %zu",
                           sub.name, m->xf.layers - 1);
    if (!jsonin_size(layer, &sub, 0, SIZE_MAX - 1, &a->layer, pb))
        return false;
    if (a->layer >= m->xf.layers)
        return problem_set(pb, 422, sub.pointer,
                           "%s (%zu) is out of range: the model \"%s\" has %zu "
                           "layers, 0 to %zu",
                           sub.name, a->layer, m->name, m->xf.layers,
                           m->xf.layers - 1);
    jpath_key(&sub, at, "head");
    const cJSON *head = cJSON_GetObjectItemCaseSensitive(item, "head");
    a->head = XF_ALL;
    if (head) {
        if (!jsonin_size(head, &sub, 0, SIZE_MAX - 1, &a->head, pb))
            return false;
        if (a->head >= m->xf.heads)
            return problem_set(pb, 422, sub.pointer,
                               "%s (%zu) is out of range: the model \"%s\" has "
                               "%zu heads a layer, 0 to %zu (query heads%s)",
                               sub.name, a->head, m->name, m->xf.heads,
                               m->xf.heads - 1,
                               m->xf.kv_heads < m->xf.heads
                                   ? ", which share its key and value heads"
                                   : "");
    }
    jpath_key(&sub, at, "mode");
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(item, "mode");
    static const char *const modes[] = {"zero", "mean"};
    int which = 0;
    if (mode && !jsonin_enum(mode, &sub, modes, 2, &which, pb))
        return false;
    a->mean = which == 1;
    return true;
}

/* One item's positions, appended to iv->positions (room for n more). */
static bool read_positions(const cJSON *v, const struct jpath *at, size_t n,
                           struct request_interventions *iv,
                           struct request_ablation *a, struct problem *pb)
{
    a->first = 0;
    a->count = 0;
    if (!v)
        return true;
    struct jpath sub;
    jpath_key(&sub, at, "positions");
    if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v))
        return problem_set(pb, 422, sub.pointer,
                           "%s is %s; expected a nonempty array of positions, "
                           "0 to %zu (leave it out for every position)",
                           sub.name,
                           cJSON_IsArray(v) ? "empty" : jsonin_kind(v), n - 1);
    if ((size_t)cJSON_GetArraySize(v) > n)
        return problem_set(pb, 422, sub.pointer,
                           "%s has %d positions; the input has %zu tokens",
                           sub.name, cJSON_GetArraySize(v), n);
    a->first = 0;
    for (size_t k = 0; k < (size_t)(a - iv->ablate); k++)
        a->first += iv->ablate[k].count;
    size_t j = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, v)
    {
        struct jpath at_j;
        jpath_index(&at_j, &sub, j);
        size_t pos;
        if (!jsonin_size(p, &at_j, 0, SIZE_MAX - 1, &pos, pb))
            return false;
        if (pos >= n)
            return problem_set(pb, 422, at_j.pointer,
                               "%s (%zu) is out of range: the input has %zu "
                               "tokens, 0 to %zu",
                               at_j.name, pos, n, n - 1);
        iv->positions[a->first + j++] = pos;
    }
    a->count = j;
    return true;
}

/* The items as edits: one per position named, or one for every position;
 * the core takes a run's edits of a layer in this order. */
static void make_edits(struct request_interventions *iv)
{
    size_t e = 0;
    for (size_t k = 0; k < iv->n_ablate; k++) {
        const struct request_ablation *a = &iv->ablate[k];
        const struct xf_edit edit = {.site = XF_SITE_Z,
                                     .op =
                                         a->mean ? XF_EDIT_MEAN : XF_EDIT_ZERO,
                                     .layer = a->layer,
                                     .head = a->head,
                                     .position = XF_ALL};
        if (!a->count)
            iv->edits[e++] = edit;
        for (size_t j = 0; j < a->count; j++) {
            iv->edits[e] = edit;
            iv->edits[e++].position = iv->positions[a->first + j];
        }
    }
    iv->n_edits = e;
}

static bool read_ablate(struct request *req, const cJSON *v,
                        const struct model *m, struct problem *pb)
{
    struct request_interventions *iv = &req->model.iv;
    struct jpath at;
    jpath_root(&at, "ablate");
    if (!cJSON_IsArray(v))
        return problem_set(pb, 422, at.pointer,
                           "ablate is %s; expected an array such as "
                           "[{\"layer\": 0, \"head\": 1, \"mode\": \"zero\"}]",
                           jsonin_kind(v));
    const size_t items = (size_t)cJSON_GetArraySize(v);
    const size_t n = req->model.run.n;
    if (items > REQUEST_MAX_ABLATE)
        return problem_set(pb, 422, at.pointer,
                           "ablate has %zu items, more than %d", items,
                           REQUEST_MAX_ABLATE);
    if (!items)
        return true;
    // an edit per position named, at most n an item: counted before the
    // positions are read, so that nothing is allocated past the cap
    size_t named = 0, edits = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(item, "positions");
        const size_t c = cJSON_IsArray(p) ? (size_t)cJSON_GetArraySize(p) : 0;
        named += c < n ? c : n;
        edits += c ? (c < n ? c : n) : 1;
    }
    if (edits > XF_MAX_EDITS)
        return problem_set(pb, 422, at.pointer,
                           "ablate names %zu head positions, more than the %d "
                           "one pass takes: fewer positions (leave positions "
                           "out for every one)",
                           edits, XF_MAX_EDITS);
    const size_t bytes = items * sizeof *iv->ablate +
                         named * sizeof *iv->positions +
                         edits * sizeof *iv->edits;
    if (!request_reserve(req, bytes, "ablate", pb))
        return false;
    iv->ablate = calloc(items, sizeof *iv->ablate);
    iv->positions = malloc((named ? named : 1) * sizeof *iv->positions);
    iv->edits = malloc(edits * sizeof *iv->edits);
    if (!iv->ablate || !iv->positions || !iv->edits)
        return problem_set(pb, 503, at.pointer, "out of memory");
    size_t k = 0;
    cJSON_ArrayForEach(item, v)
    {
        struct jpath sub;
        jpath_index(&sub, &at, k);
        struct request_ablation *a = &iv->ablate[k++];
        iv->n_ablate = k;
        if (!read_item(item, &sub, m, a, pb) ||
            !read_positions(cJSON_GetObjectItemCaseSensitive(item, "positions"),
                            &sub, n, iv, a, pb))
            return false;
    }
    make_edits(iv);
    req->model.run.edits = iv->edits;
    req->model.run.n_edits = iv->n_edits;
    return true;
}

/* ---------------------------------------------------------------- dla */

static bool read_dla(struct request *req, const cJSON *root,
                     const struct model *m, struct problem *pb)
{
    struct request_interventions *iv = &req->model.iv;
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(root, "dla_target");
    const cJSON *position =
        cJSON_GetObjectItemCaseSensitive(root, "dla_position");
    if (!iv->dla) {
        if (target || position)
            return problem_set(pb, 422,
                               target ? "/dla_target" : "/dla_position",
                               "%s is for direct logit attribution: add "
                               "\"dla\" to return, or leave it out",
                               target ? "dla_target" : "dla_position");
        return true;
    }
    struct jpath at;
    jpath_root(&at, "dla_target");
    if (!target)
        return problem_set(pb, 422, at.pointer,
                           "\"dla\" in return needs dla_target: a token (its "
                           "text or id) whose logit is attributed, or two, "
                           "[correct, incorrect], for their difference");
    if (cJSON_IsArray(target)) {
        const int count = cJSON_GetArraySize(target);
        if (count != 1 && count != 2)
            return problem_set(pb, 422, at.pointer,
                               "dla_target has %d tokens; expected one, or two "
                               "whose logit difference is attributed",
                               count);
        for (int i = 0; i < count; i++) {
            struct jpath sub;
            jpath_index(&sub, &at, (size_t)i);
            if (!request_read_token(cJSON_GetArrayItem(target, i), &sub, m,
                                    &iv->dla_target[i], pb))
                return false;
        }
        iv->n_dla_target = (size_t)count;
    } else {
        if (!request_read_token(target, &at, m, &iv->dla_target[0], pb))
            return false;
        iv->n_dla_target = 1;
    }
    const size_t n = req->model.run.n;
    iv->dla_position = n - 1;
    if (position) {
        jpath_root(&at, "dla_position");
        if (!jsonin_size(position, &at, 0, SIZE_MAX - 1, &iv->dla_position, pb))
            return false;
        if (iv->dla_position >= n)
            return problem_set(pb, 422, at.pointer,
                               "dla_position (%zu) is out of range: the input "
                               "has %zu tokens, 0 to %zu",
                               iv->dla_position, n, n - 1);
    }
    req->model.run.capture_position = iv->dla_position;
    return true;
}

bool request_read_interventions(struct request *req, const cJSON *root,
                                const struct model *m, struct problem *pb)
{
    const cJSON *ablate = cJSON_GetObjectItemCaseSensitive(root, "ablate");
    req->model.iv.dla = (req->model.run.want & XF_WANT_ACTIVATIONS) != 0;
    return (!ablate || read_ablate(req, ablate, m, pb)) &&
           read_dla(req, root, m, pb);
}

/* ------------------------------------------------------------- the echo */

bool request_echo_ablate(struct buf *out, const struct request *req)
{
    const struct request_interventions *iv = &req->model.iv;
    bool ok = buf_append_str(out, "[");
    for (size_t k = 0; ok && k < iv->n_ablate; k++) {
        const struct request_ablation *a = &iv->ablate[k];
        ok = buf_printf(out, "%s{\"layer\":%zu,\"head\":", k ? "," : "",
                        a->layer) &&
             (a->head == XF_ALL ? buf_append_str(out, "\"all\"")
                                : buf_printf(out, "%zu", a->head)) &&
             buf_printf(out, ",\"mode\":\"%s\",\"positions\":",
                        a->mean ? "mean" : "zero");
        if (!a->count) {
            ok = ok && buf_append_str(out, "\"all\"}");
            continue;
        }
        for (size_t j = 0; ok && j < a->count; j++)
            ok = buf_printf(out, "%s%zu", j ? "," : "[",
                            iv->positions[a->first + j]);
        ok = ok && buf_append_str(out, "]}");
    }
    return ok && buf_append_str(out, "]");
}
