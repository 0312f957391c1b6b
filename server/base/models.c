/*
 * models.c - the server's loaded checkpoints: loading them all or none,
 * finding one by name, describing them (GET /models) and counting their
 * requests (/metrics).
 */
#include "models.h"
#include "family.h"
#include "fail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, continued from h: a fingerprint, not a checksum. */
static uint64_t fnv_more(uint64_t h, const void *bytes, size_t len)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* What tells two checkpoints apart for a cached GET answer: the sizes,
 * the tokenizer's case, every token, and of each safetensors file its
 * header and 64 bytes of every MiB of the data (touching one page in 256
 * of the mapping). */
static uint64_t fingerprint(const struct model *m)
{
    const struct xf_model *b = &m->xf;
    const size_t sizes[] = {b->layers,          b->heads,
                            b->hidden,          b->intermediate,
                            b->vocab_size,      b->max_positions,
                            b->type_vocab_size, shards_bytes(&m->shards),
                            m->do_lower_case};
    uint64_t h = fnv_more(0xcbf29ce484222325ull, sizes, sizeof sizes);
    for (uint32_t id = 0; id < tok_vocab_size(&m->tokenizer); id++) {
        const char *t = tok_token_text(&m->tokenizer, id);
        h = fnv_more(h, t, strlen(t) + 1);
    }
    for (size_t s = 0; s < m->shards.count; s++) {
        const unsigned char *map = m->shards.shard[s].map;
        const size_t bytes = m->shards.shard[s].bytes;
        const size_t head = bytes < 65536 ? bytes : 65536;
        h = fnv_more(h, map, head);
        for (size_t at = head; at + 64 <= bytes; at += (size_t)1 << 20)
            h = fnv_more(h, map + at, 64);
    }
    return h;
}

bool models_load(struct models *set, const struct options_list *specs,
                 char *err, size_t err_len)
{
    const size_t count = specs->count;
    if (count > MODELS_MAX)
        return model_fail(err, err_len, "more than %d models", MODELS_MAX);
    for (size_t i = 0; i < count; i++) {
        const char *spec = specs->item[i];
        const char *eq = strchr(spec, '=');
        if (!eq) {
            models_free(set);
            return model_fail(err, err_len,
                              "--model \"%.200s\" must be NAME=DIR, e.g. "
                              "bert=/models/bert-base-uncased",
                              spec);
        }
        char name[MODEL_NAME_MAX + 2];
        const size_t len = (size_t)(eq - spec);
        snprintf(name, sizeof name, "%.*s",
                 (int)(len < sizeof name - 1 ? len : sizeof name - 1), spec);
        if (len < sizeof name - 1 && models_find(set, name, len)) {
            models_free(set);
            return model_fail(err, err_len,
                              "model '%s' is given twice; each name must "
                              "be unique",
                              name);
        }
        struct model *m = NULL;
        if (len >= sizeof name - 1 ||
            !model_load(name, eq + 1, &m, err, err_len)) {
            if (len >= sizeof name - 1)
                model_fail(err, err_len,
                           "model name '%.*s...' is longer than %d "
                           "characters",
                           32, spec, MODEL_NAME_MAX);
            models_free(set);
            return false;
        }
        struct models_entry *e = &set->entry[set->count++];
        e->model = m;
        e->fingerprint = fingerprint(m);
        e->loaded = time(NULL);
        atomic_init(&e->requests, 0);
        atomic_init(&e->flops, 0);
    }
    return true;
}

void models_free(struct models *set)
{
    for (size_t i = 0; i < set->count; i++)
        model_free(set->entry[i].model);
    set->count = 0;
}

struct models_entry *models_find(struct models *set, const char *name,
                                 size_t len)
{
    for (size_t i = 0; set && i < set->count; i++) {
        const char *have = set->entry[i].model->name;
        if (strlen(have) == len && !memcmp(have, name, len))
            return &set->entry[i];
    }
    return NULL;
}

void models_names(const struct models *set, char *out, size_t out_len)
{
    size_t used = 0;
    out[0] = '\0';
    if (!set || !set->count) {
        snprintf(out, out_len, "none is loaded");
        return;
    }
    for (size_t i = 0; i < set->count && used < out_len; i++) {
        const int n = snprintf(out + used, out_len - used, "%s\"%s\"",
                               i ? ", " : "", set->entry[i].model->name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* "name", or null. */
static bool json_name_or_null(struct buf *b, const char *name)
{
    return name ? buf_printf(b, "\"%s\"", name) : buf_append_str(b, "null");
}

/* A float32 factor, or null for 0 (none). */
static bool number_or_null(struct buf *b, float v)
{
    return v > 0.0f ? buf_printf(b, "%.9g", (double)v)
                    : buf_append_str(b, "null");
}

/* Each layer's attention: sliding (with its window) or global, and its
 * rotary base and scaling. */
static bool layers_part(struct buf *b, const struct model *m)
{
    const struct xf_model *x = &m->xf;
    bool ok = buf_append_str(b, ",\"layer_attention\":[");
    for (size_t l = 0; ok && l < x->layers; l++) {
        const size_t k = x->layer_kind ? x->layer_kind[l] : 0;
        const struct xf_layer_kind *lk = &x->kind[k];
        ok = buf_printf(b, "%s{\"type\":\"%s\",\"window\":", l ? "," : "",
                        lk->window ? "sliding" : "global");
        ok = ok && (lk->window ? buf_printf(b, "%zu", lk->window)
                               : buf_append_str(b, "null"));
        if (ok && x->arch.positions == XF_POS_ROTARY) {
            ok = buf_printf(
                b, ",\"rope_theta\":%.17g,\"rope_scaling\":", lk->rope.base);
            ok = ok && json_name_or_null(b, m->extra.rope_scaling[k]);
        }
        ok = ok && buf_append_str(b, "}");
    }
    return ok && buf_append_str(b, "]");
}

/* The chat templates: where they come from, and each one's name and
 * whether it renders (why not, when it does not); null without any. */
static bool chat_part(struct buf *b, const struct model *m)
{
    const struct chat_templates *c = &m->chat;
    if (!c->count)
        return buf_append_str(b, ",\"chat_template\":null");
    bool ok = buf_printf(b,
                         ",\"chat_template\":{\"source\":\"%s\","
                         "\"templates\":[",
                         c->source);
    for (size_t i = 0; ok && i < c->count; i++) {
        const struct chat_template *t = &c->t[i];
        ok = buf_printf(b, "%s{\"name\":", i ? "," : "") &&
             buf_append_json_string(b, t->name) &&
             buf_printf(b, ",\"renders\":%s,\"error\":",
                        t->compiled ? "true" : "false") &&
             (t->compiled ? buf_append_str(b, "null")
                          : buf_append_json_string(b, t->error)) &&
             buf_append_str(b, "}");
    }
    return ok && buf_append_str(b, "]}");
}

/* What /models shows of a decoder: its family, attention layout, rotary
 * positions, window, head, the width its matrices are held at and its
 * tokenizer. An encoder's entry stays as it was. */
static bool decoder_part(struct buf *b, const struct model *m)
{
    const struct xf_model *x = &m->xf;
    if (!m->family->decoder)
        return true;
    bool ok = buf_printf(b,
                         ",\"family\":\"%s\",\"kv_heads\":%zu,"
                         "\"head_dim\":%zu,\"positions\":\"%s\"",
                         m->family->model_type, x->kv_heads, x->head_dim,
                         xf_positions_name(x->arch.positions));
    const struct xf_layer_kind *first = &x->kind[0];
    if (ok && x->arch.positions == XF_POS_ROTARY) {
        ok = buf_printf(
            b, ",\"rope_theta\":%.17g,\"rope_scaling\":", first->rope.base);
        ok = ok && json_name_or_null(b, m->extra.rope_scaling[0]);
        // the values of each head it turns: all, or a partial rotary's
        ok =
            ok && buf_printf(b, ",\"rotary_dims\":%zu",
                             first->rope.dims ? first->rope.dims : x->head_dim);
        // longrope's switch to its long factors
        ok = ok && buf_append_str(b, ",\"longrope_after\":");
        ok = ok && (first->long_after ? buf_printf(b, "%zu", first->long_after)
                                      : buf_append_str(b, "null"));
    }
    ok = ok && buf_printf(b, ",\"parallel_residual\":%s",
                          x->arch.parallel ? "true" : "false");
    const size_t window = model_widest_window(m);
    ok = ok && buf_printf(b, ",\"sliding_window\":");
    ok = ok &&
         (window ? buf_printf(b, "%zu", window) : buf_append_str(b, "null"));
    ok = ok && layers_part(b, m);
    ok = ok && buf_append_str(b, ",\"attn_logit_softcapping\":") &&
         number_or_null(b, x->attn_softcap);
    ok = ok && buf_append_str(b, ",\"final_logit_softcapping\":") &&
         number_or_null(b, x->final_softcap);
    ok = ok && buf_append_str(b, ",\"eos_token_ids\":[");
    for (size_t i = 0; ok && i < m->extra.n_eos; i++)
        ok = buf_printf(b, "%s%u", i ? "," : "", m->extra.eos[i]);
    ok = ok && buf_append_str(b, "]");
    ok = ok && chat_part(b, m);
    return ok && buf_printf(b,
                            ",\"tied_embeddings\":%s,\"dtype\":\"%s\","
                            "\"tokenizer\":\"%s\"",
                            m->extra.tied ? "true" : "false",
                            attn_dtype_name((int)x->word_emb.dtype),
                            tok_name(&m->tokenizer));
}

/* Where the model came from: its container, a GGUF file's type, its
 * files and their bytes, and how many of their tensors are of each type. */
static bool source_part(struct buf *b, const struct model *m)
{
    const struct shards *s = &m->shards;
    bool ok = buf_printf(b, ",\"source\":{\"container\":\"%s\",\"file_type\":",
                         m->source.container);
    ok = ok && json_name_or_null(b, m->source.file_type[0] ? m->source.file_type
                                                           : NULL);
    ok = ok && buf_printf(b,
                          ",\"files\":%zu,\"file_bytes\":%zu,"
                          "\"tensor_types\":{",
                          s->count, shards_bytes(s));
    // each type once, in the order the files first show it
    size_t listed = 0;
    for (size_t f = 0; ok && f < s->count; f++)
        for (size_t i = 0; ok && i < s->shard[f].count; i++) {
            const char *type = s->shard[f].tensors[i].type;
            bool seen = false;
            for (size_t g = 0; g <= f && !seen; g++)
                for (size_t j = 0; j < (g < f ? s->shard[g].count : i) && !seen;
                     j++)
                    seen = !strcmp(s->shard[g].tensors[j].type, type);
            if (seen)
                continue;
            size_t count = 0;
            for (size_t g = f; g < s->count; g++)
                for (size_t j = 0; j < s->shard[g].count; j++)
                    count += !strcmp(s->shard[g].tensors[j].type, type);
            ok =
                buf_printf(b, "%s\"%s\":%zu", listed++ ? "," : "", type, count);
        }
    return ok && buf_append_str(b, "}}");
}

char *models_document(const struct models *set, size_t *len)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    bool ok = buf_append_str(&b, "{\"models\":[");
    for (size_t i = 0; ok && set && i < set->count; i++) {
        const struct model *m = set->entry[i].model;
        const struct xf_model *x = &m->xf;
        ok = buf_printf(
            &b,
            "%s{\"name\":\"%s\",\"layers\":%zu,\"heads\":%zu,\"hidden\":%zu,"
            "\"intermediate\":%zu,\"vocab_size\":%zu,\"max_positions\":%zu,"
            "\"type_vocab_size\":%zu,\"activation\":\"%s\",\"lowercase\":%s,"
            "\"weight_bytes\":%zu",
            i ? "," : "", m->name, x->layers, x->heads, x->hidden,
            x->intermediate, x->vocab_size, x->max_positions,
            x->type_vocab_size, xf_act_name(x->arch.act),
            m->do_lower_case ? "true" : "false", m->weight_bytes);
        ok = ok && source_part(&b, m) && decoder_part(&b, m) &&
             buf_append_str(&b, "}");
    }
    ok = ok && buf_append_str(&b, "]}\n");
    if (!ok) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, len);
}

void models_count(struct models_entry *e, double flops)
{
    atomic_fetch_add(&e->requests, 1);
    atomic_fetch_add(&e->flops, (uint_fast64_t)flops);
}

bool models_metrics(struct models *set, struct buf *out)
{
    if (!set || !set->count)
        return true;
    bool ok = buf_append_str(
        out, "# HELP attnd_model_requests_total Requests computed on a "
             "loaded model, by model.\n"
             "# TYPE attnd_model_requests_total counter\n");
    for (size_t i = 0; ok && i < set->count; i++)
        ok = buf_printf(
            out, "attnd_model_requests_total{model=\"%s\"} %llu\n",
            set->entry[i].model->name,
            (unsigned long long)atomic_load(&set->entry[i].requests));
    ok = ok &&
         buf_append_str(out, "# HELP attnd_model_flops_total Floating-point "
                             "operations of the encoder, by model.\n"
                             "# TYPE attnd_model_flops_total counter\n");
    for (size_t i = 0; ok && i < set->count; i++)
        ok = buf_printf(out, "attnd_model_flops_total{model=\"%s\"} %llu\n",
                        set->entry[i].model->name,
                        (unsigned long long)atomic_load(&set->entry[i].flops));
    return ok;
}
