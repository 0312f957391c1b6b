/*
 * response.c - the JSON body of an attention answer as a list of pieces:
 * short texts (tokens, config, warnings) assembled up front, and float
 * arrays formatted on demand, a few kilobytes at a time.
 */
#include "response.h"
#include "buf.h"
#include "family.h"
#include "jsonnum.h"
#include "models.h"
#include "request_fields.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIECES 64
#define STAGE_BYTES 65536
#define TEXT_CAP ((size_t)64 << 20)

/* A piece of the body: text[begin, end) of the stream's text buffer, or a
 * float array of the given shape. */
struct piece {
    size_t begin, end;
    const float *values;
    size_t dims[4];
    int ndim;
};

struct response_stream {
    const struct request *req;     /* borrowed */
    const struct attn_result *res; /* borrowed: the random weights' */
    const struct xf_result *xf;    /* borrowed: a model's */
    struct buf text;
    struct piece pieces[MAX_PIECES];
    size_t n_pieces;
    /* where reading stands: in an array, at its flat index element, which
     * is at[k] in dimension k */
    size_t piece, element, text_at;
    size_t at[4];
    size_t stage_len, stage_at;
    char stage[STAGE_BYTES + 64]; /* last: left as it is allocated */
};

/* ---------------------------------------------------------- assembly */

static bool add_text_piece(struct response_stream *s, size_t begin)
{
    if (s->n_pieces == MAX_PIECES)
        return false;
    s->pieces[s->n_pieces++] =
        (struct piece){.begin = begin, .end = s->text.len};
    return true;
}

/* Everything appended to s->text since the last piece becomes a piece. */
static bool flush_text(struct response_stream *s, size_t *mark)
{
    if (s->text.len == *mark)
        return true;
    const bool ok = add_text_piece(s, *mark);
    *mark = s->text.len;
    return ok;
}

static bool add_array(struct response_stream *s, size_t *mark, const char *name,
                      const float *values, int ndim, const size_t *dims)
{
    struct buf *t = &s->text;
    if (!buf_append_member(t, name) || !flush_text(s, mark) ||
        s->n_pieces == MAX_PIECES)
        return false;
    struct piece p = {.values = values, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        p.dims[i] = dims[i];
    s->pieces[s->n_pieces++] = p;
    return true;
}

/* An array with an optional leading batch dimension. */
static bool add_batched(struct response_stream *s, size_t *mark,
                        const char *name, const float *values, size_t d0,
                        size_t d1, size_t d2)
{
    const bool batched = s->req->input.batched;
    size_t dims[4] = {s->res->batch, d0, d1, d2};
    const int inner = d2 ? 3 : 2;
    return batched ? add_array(s, mark, name, values, inner + 1, dims)
                   : add_array(s, mark, name, values, inner, dims + 1);
}

static bool add_tokens(struct buf *t, const char *name,
                       const struct request_input *in)
{
    if (!buf_append(t, "\"", 1) || !buf_append_str(t, name) ||
        !buf_append_str(t, "\":"))
        return false;
    if (!in->from_text)
        return buf_append_str(t, "null");
    return buf_append_json_strings(t, (const char *const *)in->tokens.text,
                                   in->tokens.count);
}

/* The parameters used, by module: {"q_proj": {"weight": ..., "bias": ...}},
 * and a tensor that is no module's (bias_k, bias_v) by its own name. */
static bool add_params(struct response_stream *s, size_t *mark)
{
    struct attn_params *p = (struct attn_params *)&s->req->params;
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n =
        attn_params_layout(&s->req->cfg, ATTN_LAYOUT_ALL_BIASES, tensors);
    if (!buf_append_str(&s->text, ",\"params\":{"))
        return false;
    const char *open = NULL; /* the module whose object is open */
    bool any = false;        /* a member of "params" was written */
    for (size_t i = 0; i < n; i++) {
        const struct attn_param_tensor *t = &tensors[i];
        const float *values = *attn_params_slot(p, t->slot);
        if (!values)
            continue;
        const bool own = !strcmp(t->name, t->module); /* no module's */
        const bool same = !own && open && !strcmp(open, t->module);
        const char *sep = open ? "}," : any ? "," : "";
        if (own) {
            if (!buf_printf(&s->text, "%s\"%s\":", sep, t->name))
                return false;
            open = NULL;
        } else if (!same) {
            if (!buf_printf(&s->text, "%s\"%s\":{\"%s\":", sep, t->module,
                            t->is_weight ? "weight" : "bias"))
                return false;
            open = t->module;
        } else if (!buf_printf(&s->text,
                               ",\"%s\":", t->is_weight ? "weight" : "bias")) {
            return false;
        }
        any = true;
        if (!flush_text(s, mark) || s->n_pieces == MAX_PIECES)
            return false;
        s->pieces[s->n_pieces++] =
            (struct piece){.values = values,
                           .ndim = t->is_weight ? 2 : 1,
                           .dims = {t->rows, t->is_weight ? t->cols : 0}};
    }
    return buf_append_str(&s->text, open ? "}}" : "}");
}

char *response_warnings_json(const struct request *req,
                             const struct attn_result *res)
{
    struct buf t;
    buf_init(&t, 1 << 20);
    bool ok = buf_append_str(&t, "[");
    if (ok && res->n_fully_masked) {
        ok =
            buf_printf(&t,
                       "{\"code\":\"fully_masked_rows\",\"message\":\"%zu "
                       "query row%s can attend to no key; %s weights and "
                       "head outputs are 0\",\"rows\":[",
                       res->n_fully_masked, res->n_fully_masked == 1 ? "" : "s",
                       res->n_fully_masked == 1 ? "its" : "their");
        size_t listed = 0;
        for (size_t i = 0; ok && i < res->batch * res->n_query; i++) {
            if (!res->fully_masked[i])
                continue;
            ok = req->input.batched
                     ? buf_printf(&t, "%s[%zu,%zu]", listed ? "," : "",
                                  i / res->n_query, i % res->n_query)
                     : buf_printf(&t, "%s%zu", listed ? "," : "",
                                  i % res->n_query);
            listed++;
        }
        ok = ok && buf_append_str(&t, "]}");
    }
    ok = ok && buf_append_str(&t, "]");
    if (!ok) {
        buf_free(&t);
        return NULL;
    }
    return buf_take(&t, NULL);
}

/* Text of one lens entry besides its token's text: {"token_id":, at most
 * 10 digits, ,"text":, the quotes, ,"p":, a number, }, and a comma. */
#define LENS_ENTRY_BYTES (13 + 10 + 9 + 5 + JSONNUM_MAX + 2)

size_t response_lens_bytes(const struct request *req)
{
    const struct model *m = req->model.entry->model;
    const double entries = (double)m->xf.layers * (double)req->model.run.n *
                           (double)req->logit_lens_k;
    // a token's byte is at most 6 bytes of JSON (\u00XX); brackets
    const double per = LENS_ENTRY_BYTES + 6.0 * (double)m->longest_text + 2;
    const double bytes = entries * per + 64;
    return bytes < (double)TEXT_CAP ? (size_t)bytes : SIZE_MAX;
}

size_t response_text_cap(void)
{
    return TEXT_CAP;
}

/* Whether the request asks for a measure (xf_bit with a model, attn_bit
 * without), and the sizes of its heads, rows, keys and top keys. */
struct measured {
    double heads, rows, keys;
    size_t top_k;
};

static bool measured(const struct request *req, unsigned xf_bit,
                     unsigned attn_bit, struct measured *m)
{
    if (req->kind == REQUEST_MODEL) {
        const struct xf_model *b = &req->model.entry->model->xf;
        const struct xf_run *run = &req->model.run;
        m->heads = (double)b->layers * (double)b->heads;
        m->rows = (run->layer == XF_ALL_LAYERS ? m->heads : (double)b->heads) *
                  (double)run->n;
        m->keys = (double)run->n;
        m->top_k = run->top_k;
        return (run->want & xf_bit) != 0;
    }
    m->heads = (double)req->cfg.batch * (double)req->cfg.heads;
    m->rows = m->heads * (double)req->cfg.n_query;
    m->keys = (double)req->cfg.n_keys;
    m->top_k = req->cfg.top_k;
    return (req->cfg.want & attn_bit) != 0;
}

size_t response_sparse_bytes(const struct request *req)
{
    struct measured m;
    if (!measured(req, XF_WANT_TOP_K, ATTN_WANT_TOP_K, &m))
        return 0;
    // a row's top keys: a key's digits and a weight in [0, 1] (at most 9
    // significant digits, plain down to 1e-5: "0.000012345679", 14), each
    // with a comma, and a row's brackets twice (keys, weights)
    double digits = 1;
    for (double top = m.keys; top >= 10; top /= 10)
        digits++;
    const double bytes =
        m.rows * ((double)m.top_k * (14 + 1 + digits + 1) + 6) + 64;
    return bytes < (double)TEXT_CAP ? (size_t)bytes : SIZE_MAX;
}

size_t response_stats_bytes(const struct request *req)
{
    struct measured m;
    if (!measured(req, XF_WANT_HEAD_STATS, ATTN_WANT_HEAD_STATS, &m))
        return 0;
    // each measure a number a head, and what each key receives
    const double bytes =
        m.heads * (ATTN_HEAD_STATS + m.keys) * (JSONNUM_MAX + 1) + 256;
    return bytes < (double)TEXT_CAP ? (size_t)bytes : SIZE_MAX;
}

bool response_measures_fit(const struct request *req, struct problem *pb)
{
    const size_t sparse = response_sparse_bytes(req),
                 stats = response_stats_bytes(req);
    if (sparse == SIZE_MAX)
        return problem_set(
            pb, 422, "/sparse_k",
            "sparse_weights of sparse_k (%zu) keys a row would be "
            "more than %zu MiB of JSON: a smaller sparse_k, one "
            "layer, or a shorter input",
            req->kind == REQUEST_MODEL ? req->model.run.top_k : req->cfg.top_k,
            (size_t)TEXT_CAP >> 20);
    if (stats == SIZE_MAX || sparse + stats > TEXT_CAP)
        return problem_set(pb, 422, "/return",
                           "head_stats%s would be more than %zu MiB of JSON "
                           "(what each key receives, for every head): a "
                           "shorter input",
                           sparse ? " with sparse_weights" : "",
                           (size_t)TEXT_CAP >> 20);
    return true;
}

/* The logit lens, [layers][n][k] of {"token_id", "text", "p"}: a
 * token beyond the tokenizer's (a padding row of the output head) has
 * text null. */
static bool add_lens(struct response_stream *s, const struct xf_result *r)
{
    const struct model *m = s->req->model.entry->model;
    const int precision = (int)s->req->precision;
    struct buf *t = &s->text;
    const size_t n = r->n, k = r->lens_k;
    bool ok = buf_append_member(t, "logit_lens") && buf_append_str(t, "[");
    for (size_t l = 0; ok && l < r->layers; l++) {
        ok = buf_append_str(t, l ? ",[" : "[");
        for (size_t i = 0; ok && i < n; i++) {
            ok = buf_append_str(t, i ? ",[" : "[");
            for (size_t j = 0; ok && j < k; j++) {
                const struct xf_candidate *c = &r->lens[(l * n + i) * k + j];
                const char *text = tok_token_text(&m->tokenizer, c->id);
                char p[JSONNUM_MAX];
                const size_t plen = jsonnum_format(c->score, precision, p);
                ok = buf_printf(t, "%s{\"token_id\":%u,\"text\":", j ? "," : "",
                                (unsigned)c->id) &&
                     (text ? buf_append_json_string(t, text)
                           : buf_append_str(t, "null")) &&
                     buf_append_str(t, ",\"p\":") && buf_append(t, p, plen) &&
                     buf_append_str(t, "}");
            }
            ok = ok && buf_append_str(t, "]");
        }
        ok = ok && buf_append_str(t, "]");
    }
    return ok && buf_append_str(t, "]");
}

/* A number as the answer's others are (float32's shortest, or precision
 * digits; null when not finite). */
static bool add_measure(struct buf *t, double x, int precision, bool comma);

/* Each row's top keys, {"k", "keys": [..][N][<= k], "weights": [..][N][<=
 * k]}, [..] as the heads' groups are (a model's layers, or a batch's
 * sequences, written only when `outer`), the strongest first. */
struct sparse_rows {
    const uint32_t *keys, *count;
    const float *weights;
    size_t groups, heads, n, k;
    bool outer;
};

static bool add_sparse(struct response_stream *s, const struct sparse_rows *sp)
{
    const int precision = (int)s->req->precision;
    struct buf *t = &s->text;
    bool ok = buf_append_member(t, "sparse_weights") &&
              buf_printf(t, "{\"k\":%zu", sp->k);
    for (int part = 0; ok && part < 2; part++) {
        ok = buf_append_str(t, part ? ",\"weights\":" : ",\"keys\":") &&
             (!sp->outer || buf_append_str(t, "["));
        for (size_t g = 0; ok && g < sp->groups; g++) {
            ok = buf_append_str(t, g ? ",[" : "[");
            for (size_t a = 0; ok && a < sp->heads; a++) {
                ok = buf_append_str(t, a ? ",[" : "[");
                for (size_t i = 0; ok && i < sp->n; i++) {
                    const size_t row = (g * sp->heads + a) * sp->n + i;
                    ok = buf_append_str(t, i ? ",[" : "[");
                    for (uint32_t e = 0; ok && e < sp->count[row]; e++) {
                        const size_t at = row * sp->k + e;
                        ok = part
                                 ? add_measure(t, sp->weights[at], precision, e)
                                 : buf_printf(t, "%s%u", e ? "," : "",
                                              (unsigned)sp->keys[at]);
                    }
                    ok = ok && buf_append_str(t, "]");
                }
                ok = ok && buf_append_str(t, "]");
            }
            ok = ok && buf_append_str(t, "]");
        }
        ok = ok && (!sp->outer || buf_append_str(t, "]"));
    }
    return ok && buf_append_str(t, "}");
}

/* The induction probe: whether the tokenizer's own tokens (a BOS, a
 * [CLS]) come before its tokens, where they repeat, and every head's
 * score, {"kind", "bos", "start", "length", "induction":
 * [layers][heads]}. */
static bool add_induction(struct response_stream *s, const struct xf_result *r)
{
    const struct xf_run *run = &s->req->model.run;
    struct buf *t = &s->text;
    bool ok = buf_append_member(t, "probe") &&
              buf_printf(t,
                         "{\"kind\":\"induction\",\"bos\":%s,\"start\":%zu,"
                         "\"length\":%zu,\"induction\":[",
                         run->repeat_start ? "true" : "false",
                         run->repeat_start, run->repeat_period);
    for (size_t l = 0; ok && l < r->layers; l++) {
        ok = buf_append_str(t, l ? ",[" : "[");
        for (size_t a = 0; ok && a < r->heads; a++)
            ok = add_measure(t, r->measures.induction[l * r->heads + a],
                             (int)s->req->precision, a);
        ok = ok && buf_append_str(t, "]");
    }
    return ok && buf_append_str(t, "]}");
}

static bool add_measure(struct buf *t, double x, int precision, bool comma)
{
    char v[JSONNUM_MAX];
    const size_t len = jsonnum_format((float)x, precision, v);
    return (!comma || buf_append_str(t, ",")) && buf_append(t, v, len);
}

/* The head measures of groups of heads (a model's layers, or a batch's
 * sequences; the outer dimension written only when `outer`):
 * {"entropy": [groups][heads], ..., "key_received": [groups][heads][keys]}. */
struct head_measures {
    const double *stats, *received; /* [groups][heads][ATTN_HEAD_STATS],
                                       [groups][heads][keys] */
    size_t groups, heads, keys;
    bool outer;
};

static bool add_head_stats(struct response_stream *s,
                           const struct head_measures *hm)
{
    const int precision = (int)s->req->precision;
    struct buf *t = &s->text;
    const char *open = hm->outer ? "[" : "";
    const char *close = hm->outer ? "]" : "";
    bool ok = buf_append_member(t, "head_stats") && buf_append_str(t, "{");
    for (int k = 0; ok && k < ATTN_HEAD_STATS; k++) {
        ok = buf_printf(t, "%s\"%s\":%s", k ? "," : "", attn_head_stat_name(k),
                        open);
        for (size_t l = 0; ok && l < hm->groups; l++) {
            ok = buf_append_str(t, l ? ",[" : "[");
            for (size_t a = 0; ok && a < hm->heads; a++)
                ok = add_measure(
                    t, hm->stats[(l * hm->heads + a) * ATTN_HEAD_STATS + k],
                    precision, a);
            ok = ok && buf_append_str(t, "]");
        }
        ok = ok && buf_append_str(t, close);
    }
    // and what each key receives
    ok = ok && buf_printf(t, ",\"key_received\":%s", open);
    for (size_t l = 0; ok && l < hm->groups; l++) {
        ok = buf_append_str(t, l ? ",[" : "[");
        for (size_t a = 0; ok && a < hm->heads; a++) {
            ok = buf_append_str(t, a ? ",[" : "[");
            const double *row = hm->received + (l * hm->heads + a) * hm->keys;
            for (size_t j = 0; ok && j < hm->keys; j++)
                ok = add_measure(t, row[j], precision, j);
            ok = ok && buf_append_str(t, "]");
        }
        ok = ok && buf_append_str(t, "]");
    }
    return ok && buf_append_str(t, close) && buf_append_str(t, "}");
}

/* n numbers as a JSON array, or as rows of `row` numbers each (an array
 * of arrays, however many rows) when nested. */
static bool add_numbers(struct buf *t, const double *x, size_t n, size_t row,
                        bool nested, int precision)
{
    bool ok = buf_append_str(t, nested ? "[[" : "[");
    for (size_t i = 0; ok && i < n; i++) {
        if (i && nested && i % row == 0)
            ok = buf_append_str(t, "],[");
        else if (i)
            ok = buf_append_str(t, ",");
        ok = ok && add_measure(t, x[i], precision, false);
    }
    return ok && buf_append_str(t, nested ? "]]" : "]");
}

/* Direct logit attribution: {"target", "target_text", "position", "heads"
 * [layers] [heads], "mlp" [layers], "attn_bias" [layers] (a model with output
 * biases), "embed", "bias", "total", "logit", "before_softcap"}. */
static bool add_dla(struct response_stream *s)
{
    const struct request_interventions *iv = &s->req->model.iv;
    const struct xf_dla *d = &iv->dla_result;
    const int precision = (int)s->req->precision;
    struct buf *t = &s->text;
    bool ok = buf_append_member(t, "dla") &&
              buf_printf(t, "{\"target\":[%u", (unsigned)iv->dla_target[0]) &&
              (iv->n_dla_target < 2 ||
               buf_printf(t, ",%u", (unsigned)iv->dla_target[1])) &&
              buf_append_str(t, "],\"target_text\":[");
    const struct model *m = s->req->model.entry->model;
    for (size_t i = 0; ok && i < iv->n_dla_target; i++) {
        const char *text = tok_token_text(&m->tokenizer, iv->dla_target[i]);
        ok = (!i || buf_append_str(t, ",")) &&
             (text ? buf_append_json_string(t, text)
                   : buf_append_str(t, "null"));
    }
    ok = ok &&
         buf_printf(t, "],\"position\":%zu,\"heads\":", iv->dla_position) &&
         add_numbers(t, d->heads_part, d->layers * d->heads, d->heads, true,
                     precision) &&
         buf_append_str(t, ",\"mlp\":") &&
         add_numbers(t, d->mlp, d->layers, d->layers, false, precision);
    if (ok && d->attn_bias)
        ok = buf_append_str(t, ",\"attn_bias\":") &&
             add_numbers(t, d->attn_bias, d->layers, d->layers, false,
                         precision);
    const struct {
        const char *name;
        double value;
    } scalars[] = {{"embed", d->embed},
                   {"bias", d->bias},
                   {"total", d->total},
                   {"logit", d->logit}};
    for (size_t i = 0; ok && i < 4; i++)
        ok = buf_printf(t, ",\"%s\":", scalars[i].name) &&
             add_measure(t, scalars[i].value, precision, false);
    // the parts are of the logits before a final soft-cap, which is not
    // linear: say which cap they come before
    const float cap = m->xf.final_softcap;
    ok = ok && buf_append_str(t, ",\"before_softcap\":") &&
         (cap > 0.0f ? buf_printf(t, "%.9g", (double)cap)
                     : buf_append_str(t, "null"));
    return ok && buf_append_str(t, "}");
}

/* A model's answer: its wordpieces and their types, the config, then
 * the arrays asked for. */
static bool assemble_model(struct response_stream *s)
{
    const struct request *req = s->req;
    const struct xf_result *r = s->xf;
    const struct tok_encoding *enc = &req->model.enc;
    const struct model *m = req->model.entry->model;
    struct buf *t = &s->text;
    size_t mark = 0;
    bool ok = buf_append_str(t, "{\"model\":") &&
              buf_append_json_string(t, m->name) &&
              buf_append_str(t, ",\"tokens\":[");
    // a generated token may be a row of the head no text has (a padding
    // row): null
    for (size_t i = 0; ok && i < enc->count; i++) {
        const char *text = tok_token_text(&m->tokenizer, enc->ids[i]);
        ok = (!i || buf_append_str(t, ",")) &&
             (text ? buf_append_json_string(t, text)
                   : buf_append_str(t, "null"));
    }
    // an encoder's token types; a decoder's ids, and the tokens its
    // tokenizer added itself (a BOS)
    const bool types = m->xf.arch.token_types;
    ok = ok && buf_append_str(t, types ? "],\"token_type_ids\":["
                                       : "],\"token_ids\":[");
    for (size_t i = 0; ok && i < enc->count; i++)
        ok = buf_printf(t, "%s%u", i ? "," : "",
                        types ? (unsigned)enc->type_ids[i] : enc->ids[i]);
    if (!types) {
        ok = ok && buf_append_str(t, "],\"added\":[");
        for (size_t i = 0; ok && i < enc->count; i++)
            ok = buf_printf(t, "%s%s", i ? "," : "",
                            enc->added[i] ? "true" : "false");
    }
    ok =
        ok && buf_append_str(t, "],\"config\":") && request_fields_echo(t, req);
    if (!ok)
        return false;
    /* Lw: the layers whose weights are returned */
    const size_t n = r->n, lw = r->weight_layers;
    const bool all = req->model.run.layer == XF_ALL_LAYERS;
    const size_t weights[4] = {lw, r->heads, n, n};
    const size_t mean[3] = {lw, n, n};
    const size_t hidden[3] = {r->layers + 1, n, r->hidden};
    const size_t square[2] = {n, n};
    if (r->weights && !add_array(s, &mark, "weights", r->weights, all ? 4 : 3,
                                 all ? weights : weights + 1))
        return false;
    if (r->mean_weights && !add_array(s, &mark, "mean_weights", r->mean_weights,
                                      all ? 3 : 2, all ? mean : mean + 1))
        return false;
    if (r->measures.value_weighted &&
        (!add_array(s, &mark, "value_weighted", r->measures.value_weighted,
                    all ? 4 : 3, all ? weights : weights + 1) ||
         !add_array(s, &mark, "value_weighted_sum",
                    r->measures.value_weighted_sum, all ? 3 : 2,
                    all ? mean : mean + 1)))
        return false;
    if (r->hidden_states &&
        !add_array(s, &mark, "hidden_states", r->hidden_states, 3, hidden))
        return false;
    if (r->rollout && !add_array(s, &mark, "rollout", r->rollout, 2, square))
        return false;
    if (r->flow && !add_array(s, &mark, "flow", r->flow, 2, square))
        return false;
    const struct head_measures hm = {.stats = r->measures.head_stats,
                                     .received = r->measures.key_received,
                                     .groups = r->layers,
                                     .heads = r->heads,
                                     .keys = r->n,
                                     .outer = true};
    if (r->measures.head_stats && !add_head_stats(s, &hm))
        return false;
    if (r->measures.induction && !add_induction(s, r))
        return false;
    const struct sparse_rows sp = {.keys = r->measures.top_keys,
                                   .count = r->measures.top_count,
                                   .weights = r->measures.top_weights,
                                   .groups = lw,
                                   .heads = r->heads,
                                   .n = n,
                                   .k = req->model.run.top_k,
                                   .outer = all};
    if (r->measures.top_keys && !add_sparse(s, &sp))
        return false;
    if (r->lens && !add_lens(s, r))
        return false;
    if (req->model.iv.dla_result.heads_part && !add_dla(s))
        return false;
    return buf_append_str(t, "}\n") && flush_text(s, &mark);
}

static bool assemble(struct response_stream *s)
{
    const struct request *req = s->req;
    const struct attn_result *r = s->res;
    const struct attn_config *c = &req->cfg;
    struct buf *t = &s->text;
    size_t mark = 0;
    /* m: keys, the columns of weights; the context has n_ctx rows */
    const size_t h = r->heads, n = r->n_query, m = r->n_keys;
    if (!buf_append_str(t, "{") || !add_tokens(t, "tokens", &req->input) ||
        (c->cross && (!buf_append_str(t, ",") ||
                      !add_tokens(t, "context_tokens", &req->context))) ||
        !buf_append_str(t, ",\"config\":") || !request_fields_echo(t, req))
        return false;
    if (req->extra & REQUEST_WANT_EMBEDDINGS) {
        if (!add_batched(s, &mark, "embeddings", req->input.x, n, c->d_model,
                         0))
            return false;
        if (c->cross && !add_batched(s, &mark, "context_embeddings",
                                     req->context.x, c->n_ctx, c->d_ctx, 0))
            return false;
    }
    const struct {
        const char *name;
        const float *values;
        size_t d0, d1, d2;
    } arrays[] = {
        {"q", r->q, n, h * r->d_k, 0},
        {"k", r->k, m, r->kv_heads * r->d_k, 0},
        {"v", r->v, m, r->kv_heads * r->d_v, 0},
        {"scores", r->scores, h, n, m},
        {"weights", r->weights, h, n, m},
        {"weights_before_dropout", r->weights_raw, h, n, m},
        {"mean_weights", r->mean_weights, n, m, 0},
        {"value_weighted", r->measures.value_weighted, h, n, m},
        {"value_weighted_sum", r->measures.value_weighted_sum, n, m, 0},
        {"heads_output", r->heads_out, n, h * r->d_v, 0},
        {"output", r->output, n, r->d_out, 0},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (arrays[i].values &&
            !add_batched(s, &mark, arrays[i].name, arrays[i].values,
                         arrays[i].d0, arrays[i].d1, arrays[i].d2))
            return false;
    if ((req->extra & REQUEST_WANT_PARAMS) && c->mode == ATTN_MODE_PROJECTED &&
        !add_params(s, &mark))
        return false;
    const struct head_measures hm = {.stats = r->measures.head_stats,
                                     .received = r->measures.key_received,
                                     .groups = r->batch,
                                     .heads = h,
                                     .keys = m,
                                     .outer = req->input.batched};
    if (r->measures.head_stats && !add_head_stats(s, &hm))
        return false;
    const struct sparse_rows sp = {.keys = r->measures.top_keys,
                                   .count = r->measures.top_count,
                                   .weights = r->measures.top_weights,
                                   .groups = r->batch,
                                   .heads = h,
                                   .n = n,
                                   .k = c->top_k,
                                   .outer = req->input.batched};
    if (r->measures.top_keys && !add_sparse(s, &sp))
        return false;
    char *warnings = response_warnings_json(req, r);
    const bool ok = warnings && buf_append_member(t, "warnings") &&
                    buf_append_str(t, warnings) && buf_append_str(t, "}\n");
    free(warnings);
    return ok && flush_text(s, &mark);
}

/* A stream whose text and pieces fill() makes: the one constructor of
 * every kind's. */
static struct response_stream *
stream_new(const struct request *req, const struct attn_result *res,
           const struct xf_result *xf, bool (*fill)(struct response_stream *s))
{
    /* the stage needs no zeroing: what is read of it is written first */
    struct response_stream *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    memset(s, 0, offsetof(struct response_stream, stage));
    s->req = req;
    s->res = res;
    s->xf = xf;
    buf_init(&s->text, TEXT_CAP);
    if (!fill(s)) {
        response_stream_free(s);
        return NULL;
    }
    return s;
}

struct response_stream *response_stream_new(const struct request *req,
                                            const struct attn_result *res)
{
    return stream_new(req, res, NULL, assemble);
}

void response_stream_inline(struct response_stream *s)
{
    struct piece *last = s->n_pieces ? &s->pieces[s->n_pieces - 1] : NULL;
    if (last && !last->values && last->end > last->begin &&
        s->text.data[last->end - 1] == '\n')
        last->end--;
}

struct response_stream *response_stream_new_model(const struct request *req,
                                                  const struct xf_result *res)
{
    return stream_new(req, NULL, res, assemble_model);
}

/* A stream of text bytes of text at most; the config and the rest of
 * every answer a few KB. */
static size_t stream_bytes(size_t text)
{
    return sizeof(struct response_stream) + 2 * (16384 + text);
}

size_t response_stream_bytes(const struct request *req)
{
    /* a token's byte is at most 6 bytes of JSON (\u00XX); a warning row at
     * most two numbers of 20 digits */
    size_t text = 0;
    const struct request_input *ins[2] = {&req->input, &req->context};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < ins[k]->tokens.count; i++)
            text += 6 * strlen(ins[k]->tokens.text[i]) + 3;
    text += req->cfg.batch * req->cfg.n_query * 44;
    // the measures, which their plan holds to the cap
    text += response_sparse_bytes(req) + response_stats_bytes(req);
    return stream_bytes(text);
}

size_t response_stream_bytes_model(const struct request *req)
{
    /* each token's text, escaped, and its type id; or a decoder's id (10
     * digits) and added flag (false), and its family's part of the echo */
    const struct model *m = req->model.entry->model;
    const size_t per_token = m->xf.arch.token_types ? 8 : 8 + 12 + 6;
    size_t text = 0;
    for (size_t i = 0; i < req->model.enc.count; i++)
        text += 6 * (tok_token_text(&m->tokenizer, req->model.enc.ids[i])
                         ? strlen(tok_token_text(&m->tokenizer,
                                                 req->model.enc.ids[i]))
                         : 4) +
                per_token;
    text += 2 * MODEL_NAME_MAX + 6 * sizeof m->name;
    if (m->family->decoder)
        text += 160;
    if (req->model.run.want & XF_WANT_LOGIT_LENS)
        text += response_lens_bytes(req);
    if (req->model.run.want & XF_WANT_INDUCTION)
        text += m->xf.layers * m->xf.heads * (JSONNUM_MAX + 1) + 128;
    // the attribution and the ablation's echo
    if (req->model.run.want & XF_WANT_ACTIVATIONS)
        text += m->xf.layers * (m->xf.heads + 2) * (JSONNUM_MAX + 3) + 256;
    text += req->model.iv.n_ablate * 80 + req->model.iv.n_edits * 12 +
            2 * (6 * m->longest_text + 8);
    // the measures, which their plan holds to the cap
    text += response_sparse_bytes(req) + response_stats_bytes(req);
    return stream_bytes(text);
}

/* ------------------------------------------------------------ reading */

/* An array being read (end_row()'s context). */
struct array_reading {
    struct response_stream *s;
    const struct piece *p;
};

/* After a row's last number (jsonnum_row_end_fn): close each dimension
 * that ends with the row, moving s->at on, then, unless the array ends
 * too, a comma and open them again for the next row. */
static size_t end_row(void *context, char *out)
{
    const struct array_reading *r = context;
    size_t *at = r->s->at;
    const int last = r->p->ndim - 1;
    size_t n = 0;
    at[last] = 0;
    out[n++] = ']';
    int k = last - 1;
    for (; k >= 0 && ++at[k] == r->p->dims[k]; k--) {
        at[k] = 0;
        out[n++] = ']';
    }
    if (k < 0)
        return n;
    out[n++] = ',';
    for (; k < last; k++)
        out[n++] = '[';
    return n;
}
_Static_assert(2 * 4 + 1 <= JSONNUM_ROW_END_MAX,
               "a row's end in four dimensions fits");

/* Format as many of the array's elements into the (empty) stage as fit,
 * brackets and all, in one call: s->at holds the index of the next
 * element in each dimension. */
static void render_array(struct response_stream *s, const struct piece *p)
{
    const int last = p->ndim - 1;
    size_t total = 1;
    for (int k = 0; k <= last; k++)
        total *= p->dims[k];
    char *out = s->stage + s->stage_len;
    size_t n = 0;
    /* each number, and what follows it, within its share of the stage */
    const size_t fit = (STAGE_BYTES - s->stage_len - (size_t)p->ndim) /
                       (JSONNUM_MAX + JSONNUM_ROW_END_MAX);
    if (s->element < total && fit) {
        if (s->element == 0)
            for (int k = 0; k <= last; k++)
                out[n++] = '[';
        const size_t count =
            total - s->element < fit ? total - s->element : fit;
        const size_t row = p->dims[last];
        struct array_reading reading = {.s = s, .p = p};
        const struct jsonnum_rows rows = {.row = row,
                                          .col = s->at[last],
                                          .row_end = end_row,
                                          .context = &reading};
        const size_t col = (s->at[last] + count) % row;
        n += jsonnum_format_rows(p->values + s->element, count,
                                 (int)s->req->precision, &rows, out + n);
        s->element += count;
        s->at[last] = col;
        s->stage_len += n;
    }
    if (s->element == total) {
        s->piece++;
        s->element = 0;
    }
}

size_t response_stream_read(struct response_stream *s, char *out, size_t max)
{
    size_t written = 0;
    while (written < max) {
        if (s->stage_at < s->stage_len) {
            size_t n = s->stage_len - s->stage_at;
            if (n > max - written)
                n = max - written;
            memcpy(out + written, s->stage + s->stage_at, n);
            s->stage_at += n;
            written += n;
            continue;
        }
        if (s->piece == s->n_pieces)
            break;
        const struct piece *p = &s->pieces[s->piece];
        if (!p->values) { /* text goes out straight from the buffer */
            const size_t left = p->end - p->begin - s->text_at;
            size_t n = left < max - written ? left : max - written;
            memcpy(out + written, s->text.data + p->begin + s->text_at, n);
            s->text_at += n;
            written += n;
            if (s->text_at == p->end - p->begin) {
                s->text_at = 0;
                s->piece++;
            }
            continue;
        }
        s->stage_len = s->stage_at = 0;
        render_array(s, p);
    }
    return written;
}

void response_stream_free(struct response_stream *s)
{
    if (!s)
        return;
    buf_free(&s->text);
    free(s);
}
