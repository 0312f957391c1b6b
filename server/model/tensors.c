/*
 * tensors.c - a family's tensors into the model's slots (tensors.h).
 */
/* madvise() and MADV_DONTNEED */
#define _DEFAULT_SOURCE

#include "tensors.h"
#include "fail.h"
#include "family.h"
#include "gguf_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian, used in place");

void model_tensors_put(struct model_tensors *list, struct xf_matrix *matrix,
                       const float **vector, size_t rows, size_t cols,
                       const char *what, const char *fmt, ...)
{
    struct model_tensor *t = list->at && list->count < list->room
                                 ? &list->at[list->count]
                                 : &list->spare;
    list->count++;
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->rows = rows;
    t->cols = cols;
    t->what = what;
    t->matrix = matrix;
    t->vector = vector;
}

struct model_tensor *model_tensors_last(struct model_tensors *list)
{
    return list->at && list->count && list->count <= list->room
               ? &list->at[list->count - 1]
               : &list->spare;
}

void model_tensor_slice(struct model_tensor *t, bool in_out, size_t out0,
                        size_t outs)
{
    t->in_out = in_out;
    t->out0 = out0;
    t->outs = outs;
    t->block = t->stride = 0;
}

void model_tensor_strided(struct model_tensor *t, size_t out0, size_t block,
                          size_t stride, size_t outs)
{
    // the family's arithmetic, from sizes config.json gave: blocks that
    // fit in the tensor's outputs, which find_tensor() then checks
    assert(block > 0 && stride >= block && outs % block == 0 && outs > 0);
    t->in_out = false;
    t->out0 = out0;
    t->outs = outs;
    t->block = block;
    t->stride = stride;
}

bool model_llama_namespace(const char *rest)
{
    if (!strncmp(rest, "layers.", 7) && strstr(rest, ".self_attn.rotary_emb."))
        return false;
    return !strncmp(rest, "embed_tokens.", 13) ||
           !strncmp(rest, "layers.", 7) || !strncmp(rest, "norm.", 5);
}

void model_llama_projections(struct model *m, struct model_tensors *w, size_t l)
{
    const struct xf_model *b = &m->xf;
    struct xf_layer *y = &m->layers[l];
    const size_t H = b->hidden, IW = b->intermediate;
    const size_t hd = b->heads * b->head_dim, gd = b->kv_heads * b->head_dim;
#define WANT(slot, rows, cols, what, sub)                                      \
    MODEL_TENSOR(w, slot, rows, cols, what, "layers.%zu." sub, l)
    WANT(&y->q_w, hd, H, "heads x head_dim x hidden_size",
         "self_attn.q_proj.weight");
    WANT(&y->k_w, gd, H, "kv_heads x head_dim x hidden_size",
         "self_attn.k_proj.weight");
    WANT(&y->v_w, gd, H, "kv_heads x head_dim x hidden_size",
         "self_attn.v_proj.weight");
    WANT(&y->o_w, H, hd, "hidden_size x heads x head_dim",
         "self_attn.o_proj.weight");
    if (b->arch.qkv_bias) {
        WANT(&y->q_b, hd, 0, "heads x head_dim", "self_attn.q_proj.bias");
        WANT(&y->k_b, gd, 0, "kv_heads x head_dim", "self_attn.k_proj.bias");
        WANT(&y->v_b, gd, 0, "kv_heads x head_dim", "self_attn.v_proj.bias");
    }
    if (b->arch.out_bias)
        WANT(&y->o_b, H, 0, "hidden_size", "self_attn.o_proj.bias");
    WANT(&y->gate_w, IW, H, "intermediate_size x hidden_size",
         "mlp.gate_proj.weight");
    WANT(&y->up_w, IW, H, "intermediate_size x hidden_size",
         "mlp.up_proj.weight");
    WANT(&y->down_w, H, IW, "hidden_size x intermediate_size",
         "mlp.down_proj.weight");
    if (b->arch.ffn_bias) {
        WANT(&y->gate_b, IW, 0, "intermediate_size", "mlp.gate_proj.bias");
        WANT(&y->up_b, IW, 0, "intermediate_size", "mlp.up_proj.bias");
        WANT(&y->down_b, H, 0, "hidden_size", "mlp.down_proj.bias");
    }
#undef WANT
}

void model_tie_head(struct model *m)
{
    if (m->extra.tied)
        m->xf.lm_head = m->xf.word_emb;
}

/* One named tensor, found. */
struct found {
    const struct shard_tensor *t;
    size_t shard;
    bool in_place; /* read where it is, at its width */
};

struct taker {
    struct model *m;
    const struct shards *s;
    const struct model_files *files;
};

static bool fail_tensor(const struct taker *tk, size_t shard,
                        const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool fail_tensor(const struct taker *tk, size_t shard,
                        const char *tensor, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return model_files_fail(tk->files, tk->s->shard[shard].file,
                            "tensor '%s': %s", tensor, what);
}

/* The outputs a slot takes: rows of a [out][in] matrix or vector, columns
 * of an [in][out] one. */
static size_t outputs_of(const struct model_tensor *w)
{
    return w->in_out ? w->cols : w->rows;
}

static size_t slot_outputs(const struct model_tensor *w)
{
    return w->outs ? w->outs : outputs_of(w);
}

/* Elements of what the slot holds. */
static size_t slot_elements(const struct model_tensor *w)
{
    const size_t in = w->cols ? (w->in_out ? w->rows : w->cols) : 1;
    return slot_outputs(w) * in;
}

/* The name a GGUF file gives the tensor the family calls hf, from the
 * family's table ("%zu" standing for a layer's number), into out; false
 * when the table has none. */
static bool name_in(const struct gguf_name *names, const char *hf, char *out,
                    size_t out_len)
{
    for (size_t i = 0; names && names[i].hf; i++) {
        const char *pat = names[i].hf, *mark = strstr(pat, "%zu");
        const size_t head = mark ? (size_t)(mark - pat) : strlen(pat);
        if (strncmp(hf, pat, head))
            continue;
        if (!mark) {
            if (hf[head])
                continue;
            snprintf(out, out_len, "%s", names[i].gguf);
            return true;
        }
        const char *digits = hf + head, *end = digits;
        while (*end >= '0' && *end <= '9')
            end++;
        if (end == digits || (end - digits > 1 && *digits == '0') ||
            strcmp(end, mark + 3))
            continue;
        const char *gm = strstr(names[i].gguf, "%zu");
        snprintf(out, out_len, "%.*s%.*s%s", (int)(gm - names[i].gguf),
                 names[i].gguf, (int)(end - digits), digits, gm + 3);
        return true;
    }
    return false;
}

static bool gguf_name(const struct family_gguf *g, const char *hf, char *out,
                      size_t out_len)
{
    return name_in(g->overrides, hf, out, out_len) ||
           name_in(g->names, hf, out, out_len);
}

/* The names of the types a container's tensors may have. */
static const char *types_read(const struct shards *s)
{
    return s->gguf ? "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, "
                     "Q5_K or Q6_K"
                   : "F32, F16 or BF16";
}

static bool find_tensor(const struct taker *tk, const char *prefix,
                        struct model_tensor *w, struct found *f)
{
    char full[160], old[160];
    const struct family *fam = tk->m->family;
    if (tk->s->gguf) {
        // llama.cpp's names, and every matrix [out][in] (its converter
        // turns GPT-2's Conv1D weights round)
        if (!gguf_name(fam->gguf, w->name, full, sizeof full))
            return fail_tensor(tk, 0, w->name,
                               "the %s's GGUF row has no name for it",
                               fam->network);
        if (w->in_out) {
            const size_t rows = w->rows;
            w->rows = w->cols;
            w->cols = rows;
            w->in_out = false;
        }
        if (fam->gguf->norms_folded)
            w->add = 0.0f;
    } else {
        snprintf(full, sizeof full, "%s%s", w->bare ? "" : prefix, w->name);
    }
    f->t = shards_find(tk->s, full, &f->shard);
    if (!tk->s->gguf && fam->legacy_name &&
        fam->legacy_name(full, old, sizeof old)) {
        size_t old_shard;
        const struct shard_tensor *t_old = shards_find(tk->s, old, &old_shard);
        if (f->t && t_old)
            return fail_tensor(tk, f->shard, full,
                               "present under its legacy name '%s' too", old);
        if (!f->t) {
            f->t = t_old;
            f->shard = old_shard;
        }
    }
    if (!f->t)
        return fail_tensor(tk, 0, full, "missing");
    const struct shard_tensor *t = f->t;
    if (t->dtype < 0)
        return fail_tensor(tk, f->shard, t->name,
                           "dtype %s is not supported (%s)", t->type,
                           types_read(tk->s));
    const size_t want_dims = w->cols ? 2 : 1;
    if (t->ndim != want_dims || t->shape[0] != w->rows ||
        (w->cols && t->shape[1] != w->cols)) {
        char got[160] = "[";
        for (size_t d = 0; d < t->ndim; d++) {
            const size_t at = strlen(got);
            snprintf(got + at, sizeof got - at, "%s%llu", d ? ", " : "",
                     (unsigned long long)t->shape[d]);
        }
        const size_t at = strlen(got);
        snprintf(got + at, sizeof got - at, "]");
        const char *says = tk->s->gguf ? "the metadata" : "config.json";
        if (w->cols)
            return fail_tensor(tk, f->shard, t->name,
                               "shape %s, but %s gives [%zu, %zu] (%s)", got,
                               says, w->rows, w->cols, w->what);
        return fail_tensor(tk, f->shard, t->name,
                           "shape %s, but %s gives [%zu] (%s)", got, says,
                           w->rows, w->what);
    }
    const attn_dtype dtype = (attn_dtype)t->dtype;
    const size_t in = w->cols ? w->cols : 1;
    if (in % attn_dtype_block(dtype))
        return fail_tensor(tk, f->shard, t->name,
                           "rows of %zu values are not whole %s blocks of "
                           "%zu",
                           in, t->type, attn_dtype_block(dtype));
    // the outputs a slot takes lie within the tensor's (the family's
    // arithmetic, on sizes the shape check above has held it to)
    if (w->stride)
        assert(w->out0 + (w->outs / w->block - 1) * w->stride + w->block <=
               outputs_of(w));
    else
        assert(w->out0 + slot_outputs(w) <= outputs_of(w));
    // a matrix is read at its own width, as stored when the core reads it
    // so; a vector, small, as float32; blocks at a stride are copied
    // together. A 16-bit or float32 matrix must lie at a multiple of its
    // width; quantized blocks are read at any address.
    const size_t align =
        attn_dtype_block(dtype) > 1 ? 1 : attn_dtype_bytes(dtype, 1);
    f->in_place = (dtype == ATTN_F32 || w->matrix) && !w->in_out &&
                  !w->stride && t->offset % align == 0 && w->add == 0.0f;
    return true;
}

/* A tensor of the files that no named tensor took: fine outside the
 * network's namespace, an error inside it. Every tensor of a GGUF file is
 * the network's but for those the loader reads itself (taken). */
static bool check_unused(const struct taker *tk, const char *prefix,
                         bool *const *used)
{
    const size_t pl = strlen(prefix);
    for (size_t s = 0; s < tk->s->count; s++) {
        const struct shard *sh = &tk->s->shard[s];
        for (size_t i = 0; i < sh->count; i++) {
            const char *name = sh->tensors[i].name;
            if (used[s][i] || strncmp(name, prefix, pl) != 0)
                continue;
            if (tk->s->gguf ? !gguf_loader_tensor(tk->m->family->gguf, name)
                            : tk->m->family->in_network(name + pl))
                return fail_tensor(tk, s, name,
                                   "not part of a %s of %zu layers as %s "
                                   "describes",
                                   tk->m->family->network, tk->m->xf.layers,
                                   tk->s->gguf ? "its metadata"
                                               : "config.json");
        }
    }
    return true;
}

/* Whether element e of a 16-bit array is Inf or NaN: its exponent bits
 * all set. */
static bool half_nonfinite(const unsigned char *src, attn_dtype dtype, size_t e)
{
    uint16_t h;
    memcpy(&h, src + 2 * e, 2);
    const uint16_t exp = dtype == ATTN_F16 ? 0x7c00 : 0x7f80;
    return (h & exp) == exp;
}

/* The first element of held[count] that is not finite, or count. A
 * quantized matrix is widened a block at a time to be checked. */
static size_t first_nonfinite(struct xf_matrix held, size_t count)
{
    if (held.dtype == ATTN_F32) {
        const float *v = held.data;
        for (size_t e = 0; e < count; e++)
            if (!isfinite(v[e]))
                return e;
        return count;
    }
    const size_t block = attn_dtype_block(held.dtype);
    if (block > 1) {
        float values[256];
        assert(block <= sizeof values / sizeof values[0]);
        for (size_t e = 0; e < count; e += block) {
            attn_widen((const char *)held.data +
                           attn_dtype_bytes(held.dtype, e),
                       held.dtype, block, values);
            for (size_t j = 0; j < block; j++)
                if (!isfinite(values[j]))
                    return e + j;
        }
        return count;
    }
    for (size_t e = 0; e < count; e++)
        if (half_nonfinite(held.data, held.dtype, e))
            return e;
    return count;
}

/* Copy the slot's part of a stored tensor into dst, as the core reads it:
 * [out][in] at the stored width, or widened to float32 (widen); blocks at
 * a stride one after another. */
static void copy_slot(const struct model_tensor *w,
                      const struct shard_tensor *t, const unsigned char *src,
                      bool widen, void *dst)
{
    const attn_dtype dtype = (attn_dtype)t->dtype;
    const size_t outs = slot_outputs(w);
    const size_t in = w->cols ? (w->in_out ? w->rows : w->cols) : 1;
    // bytes of n of the stored values, and of n as copied
    const size_t row = attn_dtype_bytes(dtype, in);
    const size_t out_row = widen ? in * sizeof(float) : row;
    unsigned char *d = dst;
    if (w->stride) { /* blocks of block rows, stride rows apart */
        const size_t blocks = outs / w->block;
        for (size_t b = 0; b < blocks; b++) {
            const unsigned char *from = src + (w->out0 + b * w->stride) * row;
            unsigned char *to = d + b * w->block * out_row;
            if (widen)
                attn_widen(from, dtype, w->block * in, (float *)(void *)to);
            else
                memcpy(to, from, w->block * row);
        }
        return;
    }
    if (!w->in_out) { /* rows [out0, out0 + outs), contiguous */
        const unsigned char *from = src + w->out0 * row;
        if (widen)
            attn_widen(from, dtype, outs * in, dst);
        else
            memcpy(dst, from, outs * row);
        return;
    }
    // stored [in][out] (a safetensors file's 16-bit or float32 values):
    // element (i, o) to (o, i)
    const size_t es = attn_dtype_bytes(dtype, 1);
    const size_t out_es = widen ? sizeof(float) : es;
    for (size_t o = 0; o < outs; o++)
        for (size_t i = 0; i < in; i++) {
            const unsigned char *e = src + (i * w->cols + w->out0 + o) * es;
            if (widen)
                attn_widen(e, dtype, 1,
                           (float *)(void *)(d + (o * in + i) * out_es));
            else
                memcpy(d + (o * in + i) * out_es, e, es);
        }
}

/* Point every named slot at its data, copying what must be; check every
 * value is finite. */
static bool take_all(const struct taker *tk, const struct model_tensor *w,
                     const struct found *f, size_t n)
{
    struct model *m = tk->m;
    size_t converted = 0; /* bytes, each copy on a 4-byte boundary */
    for (size_t i = 0; i < n; i++)
        if (!f[i].in_place) {
            const size_t bytes =
                w[i].matrix ? attn_dtype_bytes((attn_dtype)f[i].t->dtype,
                                               slot_elements(&w[i]))
                            : slot_elements(&w[i]) * sizeof(float);
            converted += (bytes + 3) & ~(size_t)3;
        }
    if (converted) {
        m->converted = malloc(converted);
        if (!m->converted)
            return model_fail(tk->files->err, tk->files->err_len,
                              "model '%s': out of memory for %zu bytes of "
                              "converted tensors",
                              m->name, converted);
        m->converted_bytes = converted;
    }
    unsigned char *next = m->converted;
    for (size_t i = 0; i < n; i++) {
        const struct shard_tensor *t = f[i].t;
        const unsigned char *src =
            (const unsigned char *)tk->s->shard[f[i].shard].map + t->offset;
        const size_t count = slot_elements(&w[i]);
        struct xf_matrix held = {.data = src, .dtype = (attn_dtype)t->dtype};
        const size_t in = w[i].cols ? (w[i].in_out ? w[i].rows : w[i].cols) : 1;
        if (f[i].in_place) {
            held.data = src + attn_dtype_bytes(held.dtype, w[i].out0 * in);
        } else {
            const bool widen = !w[i].matrix; /* a vector, or misaligned */
            copy_slot(&w[i], t, src, widen || held.dtype == ATTN_F32, next);
            if (widen)
                held.dtype = ATTN_F32;
            // in float32, as (1 + w.float()) makes it
            if (!w[i].matrix && w[i].add != 0.0f)
                for (size_t e = 0; e < count; e++)
                    ((float *)(void *)next)[e] += w[i].add;
            held.data = next;
            next += (attn_dtype_bytes(held.dtype, count) + 3) & ~(size_t)3;
        }
        m->weight_bytes += attn_dtype_bytes(held.dtype, count);
        const size_t bad = first_nonfinite(held, count);
        if (bad < count) {
            float v;
            const size_t block = attn_dtype_block(held.dtype);
            float values[256];
            attn_widen((const char *)held.data +
                           attn_dtype_bytes(held.dtype, bad / block * block),
                       held.dtype, block, values);
            v = values[bad % block];
            return fail_tensor(tk, f[i].shard, t->name, "element %zu is %s",
                               bad, isnan(v) ? "NaN" : "Inf");
        }
        if (w[i].matrix)
            *w[i].matrix = held;
        else
            *w[i].vector = held.data;
    }
    return true;
}

/* The pages of tensors read only through copies are not needed again:
 * let the kernel drop them from the process's resident set. */
static void drop_copied(const struct taker *tk, const struct found *f, size_t n)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < n; i++) {
        bool copied_only = !f[i].in_place;
        for (size_t j = 0; j < n && copied_only; j++)
            copied_only = f[j].t != f[i].t || !f[j].in_place;
        if (!copied_only)
            continue;
        const uintptr_t start =
            (uintptr_t)tk->s->shard[f[i].shard].map + f[i].t->offset;
        const uintptr_t from = (start + page - 1) & ~(uintptr_t)(page - 1);
        const uintptr_t to = (start + f[i].t->bytes) & ~(uintptr_t)(page - 1);
        if (to > from)
            madvise((void *)from, to - from, MADV_DONTNEED); /* advice */
    }
}

bool tensors_take(struct model *m, const struct shards *s,
                  const struct model_files *files)
{
    const struct taker tk = {.m = m, .s = s, .files = files};
    const char *prefix = s->gguf ? "" : m->family->prefix(s);
    // counted, then named into room for as many
    struct model_tensors list = {0};
    m->family->name_tensors(m, &list);
    const size_t n = list.count;
    struct model_tensor *w = calloc(n ? n : 1, sizeof *w);
    struct found *f = calloc(n, sizeof *f);
    bool **used = calloc(s->count, sizeof *used);
    bool ok = w && f && used;
    for (size_t i = 0; ok && i < s->count; i++) {
        const size_t count = s->shard[i].count;
        used[i] = calloc(count ? count : 1, sizeof **used);
        ok = used[i] != NULL;
    }
    if (!ok)
        model_fail(files->err, files->err_len, "model '%s': out of memory",
                   m->name);
    if (ok) {
        list = (struct model_tensors){.at = w, .room = n};
        m->family->name_tensors(m, &list);
        assert(list.count == n); /* the same config, the same names */
        for (size_t i = 0; i < n && ok; i++) {
            ok = find_tensor(&tk, prefix, &w[i], &f[i]);
            if (ok)
                used[f[i].shard][f[i].t - s->shard[f[i].shard].tensors] = true;
        }
    }
    ok = ok && check_unused(&tk, prefix, used);
    ok = ok && take_all(&tk, w, f, n);
    if (ok)
        drop_copied(&tk, f, n);
    for (size_t i = 0; used && i < s->count; i++)
        free(used[i]);
    free(used);
    free(w);
    free(f);
    return ok;
}

bool tensors_layers(struct model *m, const struct model_files *files)
{
    m->layers = calloc(m->xf.layers, sizeof *m->layers);
    if (!m->layers)
        return model_fail(files->err, files->err_len,
                          "model '%s': out of memory", m->name);
    m->xf.layer = m->layers;
    return true;
}
