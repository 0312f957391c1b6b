/*
 * gguf_model.c - a model from GGUF files (gguf_model.h).
 */
#include "gguf_model.h"
#include "config_keys.h"
#include "fail.h"
#include "family.h"
#include "gguf_tokenizer.h"
#include "tensors.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ROPE_FREQS "rope_freqs.weight"

bool gguf_path(const char *path)
{
    const size_t n = strlen(path);
    struct stat st;
    const bool there = stat(path, &st) == 0;
    if (there && S_ISDIR(st.st_mode))
        return false;
    if (n > 5 && !strcmp(path + n - 5, ".gguf"))
        return true;
    // a file of another name (Ollama's blobs have none) by its magic
    if (!there || !S_ISREG(st.st_mode))
        return false;
    char magic[4] = "";
    FILE *f = fopen(path, "rb");
    const bool is =
        f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    if (f)
        fclose(f);
    return is;
}

bool gguf_loader_tensor(const struct family_gguf *g, const char *name)
{
    // rope_freqs is read here; Phi-3's longrope factors by its family's
    // config hook
    return (g->rope_freqs && !strcmp(name, ROPE_FREQS)) ||
           (g->longrope_factors &&
            (!strcmp(name, "rope_factors_long.weight") ||
             !strcmp(name, "rope_factors_short.weight")));
}

const char *gguf_file_type_name(uint32_t file_type)
{
    static const char *const names[] = {
        [0] = "F32",       [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",
        [7] = "Q8_0",      [8] = "Q5_0",    [9] = "Q5_1",    [10] = "Q2_K",
        [11] = "Q3_K_S",   [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S",
        [15] = "Q4_K_M",   [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",
        [19] = "IQ2_XXS",  [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS",
        [23] = "IQ3_XXS",  [24] = "IQ1_S",  [25] = "IQ4_NL", [26] = "IQ3_S",
        [27] = "IQ3_M",    [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS",
        [31] = "IQ1_M",    [32] = "BF16",   [36] = "TQ1_0",  [37] = "TQ2_0",
        [38] = "MXFP4_MOE"};
    return file_type < sizeof names / sizeof names[0] ? names[file_type] : NULL;
}

/* ------------------------------------------------------------ the files */

/* The width the core reads a ggml type at, or -1. */
static int dtype_of(uint32_t type)
{
    switch (type) {
    case GGUF_GGML_F32: return ATTN_F32;
    case GGUF_GGML_F16: return ATTN_F16;
    case GGUF_GGML_BF16: return ATTN_BF16;
    case GGUF_GGML_Q8_0: return ATTN_Q8_0;
    case GGUF_GGML_Q4_0: return ATTN_Q4_0;
    case GGUF_GGML_Q4_1: return ATTN_Q4_1;
    case GGUF_GGML_Q5_0: return ATTN_Q5_0;
    case GGUF_GGML_Q5_1: return ATTN_Q5_1;
    case GGUF_GGML_Q4_K: return ATTN_Q4_K;
    case GGUF_GGML_Q5_K: return ATTN_Q5_K;
    case GGUF_GGML_Q6_K: return ATTN_Q6_K;
    default: return -1;
    }
}

/* Map and read one GGUF file into sh, listing its tensors. */
static bool open_part(struct shard *sh, const char *file,
                      const struct model_files *files)
{
    char why[400];
    if (!shard_map(sh, file, files))
        return false;
    if (!gguf_parse(sh->map, sh->bytes, &sh->gguf, why, sizeof why))
        return model_files_fail(files, file, "%s", why);
    const struct gguf_file *g = &sh->gguf;
    sh->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *sh->tensors);
    if (!sh->tensors)
        return model_files_fail(files, file, "out of memory");
    sh->count = g->n_tensors;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        struct shard_tensor *to = &sh->tensors[i];
        *to = (struct shard_tensor){
            .name = t->name,
            .dtype = dtype_of(t->type),
            .type = gguf_ggml_type_name(t->type),
            .ndim = t->n_dims,
            .offset = (size_t)(t->data - (const uint8_t *)sh->map),
            .bytes = t->bytes};
        for (uint32_t d = 0; d < t->n_dims; d++) /* outermost first */
            to->shape[d] = t->dims[t->n_dims - 1 - d];
    }
    return true;
}

/* A u16 split key of part p, or false with the line in files->err. */
static bool split_key(const struct shard *p, const char *key, uint64_t *out,
                      const struct model_files *files)
{
    const struct gguf_kv *kv = gguf_find(&p->gguf, key);
    if (!kv)
        return model_files_fail(files, p->file, "no key '%s'", key);
    switch (kv->type) {
    case GGUF_TYPE_UINT16:
        *out = (uint64_t)kv->value[0] | (uint64_t)kv->value[1] << 8;
        return true;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32: {
        uint32_t v;
        memcpy(&v, kv->value, 4);
        if (kv->type == GGUF_TYPE_INT32 && v >> 31)
            return model_files_fail(files, p->file, "key '%s' is negative",
                                    key);
        *out = v;
        return true;
    }
    default:
        return model_files_fail(files, p->file,
                                "key '%s' is a %s, not a UINT16", key,
                                gguf_type_name(kv->type));
    }
}

/* The parts of a split: file is NAME-00001-of-0000N.gguf, the first, and
 * its siblings follow, each saying which part it is. */
static bool open_split(struct shards *s, const char *file, size_t stem,
                       unsigned parts, const struct model_files *files)
{
    for (unsigned k = 0; k < parts; k++) {
        char name[sizeof s->shard[0].file];
        snprintf(name, sizeof name, "%.*s-%05u-of-%05u.gguf", (int)stem, file,
                 k + 1, parts);
        struct shard *p = &s->shard[s->count++];
        uint64_t count, no;
        if (!open_part(p, name, files) ||
            !split_key(p, "split.count", &count, files) ||
            !split_key(p, "split.no", &no, files))
            return false;
        if (count != parts || no != k)
            return model_files_fail(files, name,
                                    "split.count %llu and split.no %llu; its "
                                    "name says part %u of %u",
                                    (unsigned long long)count,
                                    (unsigned long long)no, k + 1, parts);
    }
    // every tensor in one part only, as many as the first part says
    size_t total = 0;
    for (size_t k = 0; k < s->count; k++) {
        const struct shard *p = &s->shard[k];
        total += p->count;
        for (size_t i = 0; i < p->count; i++) {
            size_t in;
            const struct shard_tensor *t =
                shards_find(s, p->tensors[i].name, &in);
            if (t != &p->tensors[i])
                return model_files_fail(files, p->file,
                                        "tensor '%s' is in '%s' too",
                                        p->tensors[i].name, s->shard[in].file);
        }
    }
    uint64_t listed;
    if (!gguf_find(&s->shard[0].gguf, "split.tensors.count"))
        return true;
    if (!split_key(&s->shard[0], "split.tensors.count", &listed, files))
        return false;
    if (listed != total)
        return model_files_fail(files, s->shard[0].file,
                                "split.tensors.count is %llu; the parts hold "
                                "%zu tensors",
                                (unsigned long long)listed, total);
    return true;
}

/* file, or every part of the split it is the first of. */
static bool open_files(struct shards *s, const char *file,
                       const struct model_files *files)
{
    memset(s, 0, sizeof *s);
    s->gguf = true;
    const size_t n = strlen(file);
    unsigned first = 0, parts = 0;
    int used = 0;
    // NAME-00001-of-00003.gguf: 20 bytes after the name, the numbers five
    // digits each
    bool split = n > 20 &&
                 sscanf(file + n - 20, "-%5u-of-%5u.gguf%n", &first, &parts,
                        &used) == 2 &&
                 used == 20;
    for (size_t i = 0; split && i < 5; i++)
        split = file[n - 19 + i] >= '0' && file[n - 19 + i] <= '9' &&
                file[n - 10 + i] >= '0' && file[n - 10 + i] <= '9';
    if (split && (first != 1 || parts == 0 || parts > SHARDS_MAX))
        return model_files_fail(files, file,
                                "a split is loaded from its first part "
                                "(-00001-of-N.gguf), N at most %d",
                                SHARDS_MAX);
    if (n >= sizeof s->shard[0].file)
        return model_files_fail(files, file,
                                "the file's name is over %zu "
                                "bytes",
                                sizeof s->shard[0].file - 1);
    s->shard = calloc(split ? parts : 1, sizeof *s->shard);
    if (!s->shard)
        return model_files_fail(files, file, "out of memory");
    if (split)
        return open_split(s, file, n - 20, parts, files);
    s->count = 1;
    return open_part(&s->shard[0], file, files);
}

/* ----------------------------------------------------------- the config */

/* The kv key of the first part as a cJSON value, or NULL (an array, or
 * out of memory: *why says which). */
static cJSON *json_value(const struct gguf_kv *kv, const char **why)
{
    uint64_t u = 0;
    int64_t i = 0;
    const uint8_t *v = kv->value;
    switch (kv->type) {
    case GGUF_TYPE_UINT8: return cJSON_CreateNumber(v[0]);
    case GGUF_TYPE_INT8: return cJSON_CreateNumber((int8_t)v[0]);
    case GGUF_TYPE_UINT16: return cJSON_CreateNumber(v[0] | v[1] << 8);
    case GGUF_TYPE_INT16:
        return cJSON_CreateNumber((int16_t)(v[0] | v[1] << 8));
    case GGUF_TYPE_UINT32: {
        uint32_t x;
        memcpy(&x, v, 4);
        return cJSON_CreateNumber(x);
    }
    case GGUF_TYPE_INT32: {
        int32_t x;
        memcpy(&x, v, 4);
        return cJSON_CreateNumber(x);
    }
    case GGUF_TYPE_UINT64:
        memcpy(&u, v, 8);
        return cJSON_CreateNumber((double)u);
    case GGUF_TYPE_INT64:
        memcpy(&i, v, 8);
        return cJSON_CreateNumber((double)i);
    case GGUF_TYPE_FLOAT32: {
        float x;
        memcpy(&x, v, 4);
        return cJSON_CreateNumber(x);
    }
    case GGUF_TYPE_FLOAT64: {
        double x;
        memcpy(&x, v, 8);
        return cJSON_CreateNumber(x);
    }
    case GGUF_TYPE_BOOL: return cJSON_CreateBool(v[0]);
    case GGUF_TYPE_STRING: {
        char *text = malloc(kv->str_len + 1);
        if (!text)
            return NULL;
        memcpy(text, kv->str, kv->str_len);
        text[kv->str_len] = '\0';
        cJSON *s = cJSON_CreateString(text);
        free(text);
        return s;
    }
    default:
        *why = "an array (a value per layer is not supported)";
        return NULL;
    }
}

/* config[name] = the value of key, when the file has it. */
static bool put_key(cJSON *config, const char *name, const struct gguf_file *g,
                    const char *key, char *err, size_t err_len)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv)
        return true;
    const char *why = NULL;
    cJSON *v = json_value(kv, &why);
    if (!v || !cJSON_AddItemToObject(config, name, v)) {
        cJSON_Delete(v);
        return why ? model_fail(err, err_len, "key '%s' is %s", key, why)
                   : model_fail(err, err_len, "out of memory reading key '%s'",
                                key);
    }
    return true;
}

/* A token id key of the tokenizer, or -1 when absent. */
static int64_t token_key(const struct gguf_file *g, const char *key)
{
    uint32_t id;
    char why[160];
    return gguf_find(g, key) && gguf_get_u32(g, key, &id, why, sizeof why)
               ? (int64_t)id
               : -1;
}

/* The metadata as the family's config.json: its keys under "{arch}.",
 * vocab_size (the tokens when the architecture does not say), whether
 * the output head is the embeddings (no output.weight), the BOS and EOS
 * ids, and a rope scaling the file names. */
static cJSON *config_of(const struct model *m, const struct shards *s,
                        const char *arch, char *err, size_t err_len)
{
    const struct gguf_file *g = &s->shard[0].gguf;
    const struct family_gguf *fg = m->family->gguf;
    cJSON *config = cJSON_CreateObject();
    bool ok = config && cJSON_AddStringToObject(config, "model_type",
                                                m->family->model_type);
    char key[GGUF_MAX_KEY + 1];
    const struct gguf_key *lists[] = {fg->keys, fg->more_keys};
    for (size_t l = 0; l < 2; l++)
        for (const struct gguf_key *k = lists[l]; ok && k && k->config; k++) {
            snprintf(key, sizeof key, "%s.%s", arch, k->gguf);
            ok = put_key(config, k->config, g, key, err, err_len);
        }
    snprintf(key, sizeof key, "%s.vocab_size", arch);
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    if (ok && gguf_find(g, key))
        ok = put_key(config, "vocab_size", g, key, err, err_len);
    else if (ok && tokens && tokens->type == GGUF_TYPE_ARRAY)
        ok = cJSON_AddNumberToObject(config, "vocab_size",
                                     (double)tokens->count) != NULL;
    size_t in;
    ok = ok && cJSON_AddBoolToObject(config, "tie_word_embeddings",
                                     !shards_find(s, "output.weight", &in));
    const int64_t bos = token_key(g, "tokenizer.ggml.bos_token_id");
    if (ok && bos >= 0)
        ok = cJSON_AddNumberToObject(config, "bos_token_id", (double)bos);
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const struct gguf_kv *scaling = gguf_find(g, key);
    if (ok && scaling && scaling->type != GGUF_TYPE_STRING)
        ok = model_fail(err, err_len, "key '%s' is a %s, not a STRING", key,
                        gguf_type_name(scaling->type));
    if (ok && scaling && scaling->type == GGUF_TYPE_STRING &&
        !(scaling->str_len == 4 && !memcmp(scaling->str, "none", 4))) {
        cJSON *r = cJSON_AddObjectToObject(config, "rope_scaling");
        ok = r && put_key(r, "rope_type", g, key, err, err_len);
        snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
        ok = ok && put_key(r, "factor", g, key, err, err_len);
    }
    ok = ok && (!fg->config || fg->config(config, s, arch, err, err_len));
    if (!ok) {
        if (!err[0])
            model_fail(err, err_len, "out of memory");
        cJSON_Delete(config);
        return NULL;
    }
    return config;
}

/* Where a family's message names a config.json key the file gave under
 * another name, that name, for the line: " (the file's KEY)", or "". */
static const char *key_hint(const struct family_gguf *fg, const char *arch,
                            const char *why)
{
    static _Thread_local char hint[GGUF_MAX_KEY + 32];
    const struct gguf_key *lists[] = {fg->keys, fg->more_keys};
    for (size_t l = 0; l < 2; l++)
        for (const struct gguf_key *k = lists[l]; k && k->config; k++) {
            const char *at = strstr(why, k->config);
            const size_t n = strlen(k->config);
            // the whole key, not a part of a longer one
            const bool word =
                at &&
                (at == why ||
                 !(at[-1] == '_' || (at[-1] >= 'a' && at[-1] <= 'z'))) &&
                !(at[n] == '_' || (at[n] >= 'a' && at[n] <= 'z'));
            if (word) {
                snprintf(hint, sizeof hint, " (the file's %s.%s)", arch,
                         k->gguf);
                return hint;
            }
        }
    return "";
}

/* The architectures of families, for a message. */
static void gguf_archs(const struct family_table *t, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < t->count && at < len; i++)
        if (t->row[i]->gguf) {
            const int n = snprintf(out + at, len - at, "%s%s", at ? ", " : "",
                                   t->row[i]->gguf->arch);
            at += n > 0 ? (size_t)n : 0;
        }
}

static bool read_config(struct model *m, const struct family_table *families,
                        const struct model_files *files)
{
    const struct shard *first = &m->shards.shard[0];
    const struct gguf_file *g = &first->gguf;
    char why[400] = "";
    const char *arch;
    size_t arch_len;
    if (!gguf_get_string(g, "general.architecture", &arch, &arch_len, why,
                         sizeof why))
        return model_files_fail(files, first->file, "%s", why);
    m->family = memchr(arch, '\0', arch_len)
                    ? NULL
                    : family_find_gguf(families, arch, arch_len);
    if (!m->family) {
        char known[200];
        gguf_archs(families, known, sizeof known);
        return model_files_fail(files, first->file,
                                "general.architecture '%.*s' is not "
                                "supported (%s)",
                                (int)(arch_len < 64 ? arch_len : 64), arch,
                                known);
    }
    char arch_z[65];
    snprintf(arch_z, sizeof arch_z, "%.*s", (int)arch_len, arch);
    cJSON *config = config_of(m, &m->shards, arch_z, why, sizeof why);
    const bool ok =
        config && m->family->read_config(config, m, why, sizeof why);
    cJSON_Delete(config);
    if (!ok)
        return model_files_fail(files, first->file, "%s%s", why,
                                key_hint(m->family->gguf, arch_z, why));
    // a rotary over part of each head only where the family has one
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_count", arch_z);
    uint32_t dims;
    const struct attn_rotary *rope = &m->xf.kind[0].rope;
    if (m->xf.arch.positions == XF_POS_ROTARY && gguf_find(g, key)) {
        if (!gguf_get_u32(g, key, &dims, why, sizeof why))
            return model_files_fail(files, first->file, "%s", why);
        const size_t turned = rope->dims ? rope->dims : m->xf.head_dim;
        if (dims != turned)
            return model_files_fail(files, first->file,
                                    "key '%s' is %u; the %s turns %zu values "
                                    "of each head",
                                    key, dims, m->family->network, turned);
    }
    if (m->family->gguf->rope_interleaved)
        for (size_t k = 0; k < XF_MAX_LAYER_KINDS; k++) {
            m->xf.kind[k].rope.pairing = ATTN_ROPE_INTERLEAVED;
            m->xf.kind[k].long_rope.pairing = ATTN_ROPE_INTERLEAVED;
        }
    uint32_t file_type;
    if (gguf_find(g, "general.file_type") &&
        gguf_get_u32(g, "general.file_type", &file_type, why, sizeof why)) {
        const char *name = gguf_file_type_name(file_type);
        snprintf(m->source.file_type, sizeof m->source.file_type, "%s",
                 name ? name : "unknown");
    }
    return tensors_layers(m, files);
}

/* llama.cpp's rope_freqs: each rotary pair's frequency divided by its
 * factor (how its converter writes LLaMA 3's scaling). */
static bool take_rope_freqs(struct model *m, const struct model_files *files)
{
    size_t in;
    const struct shard_tensor *t = shards_find(&m->shards, ROPE_FREQS, &in);
    if (!t)
        return true;
    const char *file = m->shards.shard[in].file;
    const struct attn_rotary *rope = &m->xf.kind[0].rope;
    const size_t pairs = (rope->dims ? rope->dims : m->xf.head_dim) / 2;
    if (!m->rope_freq || rope->inv_freq != m->rope_freq || m->xf.kinds > 1)
        return model_files_fail(files, file,
                                "tensor '%s': not supported for this "
                                "architecture",
                                ROPE_FREQS);
    if (t->dtype != ATTN_F32 || t->ndim != 1 || t->shape[0] != pairs)
        return model_files_fail(files, file,
                                "tensor '%s': %s of %llu values; F32 of %zu "
                                "(head_dim / 2) expected",
                                ROPE_FREQS, t->type,
                                (unsigned long long)t->shape[0], pairs);
    const unsigned char *at =
        (const unsigned char *)m->shards.shard[in].map + t->offset;
    for (size_t i = 0; i < pairs; i++) {
        float factor;
        memcpy(&factor, at + 4 * i, 4);
        if (!isfinite(factor) || factor <= 0.0f)
            return model_files_fail(files, file,
                                    "tensor '%s': element %zu is %g; factors "
                                    "are finite and above 0",
                                    ROPE_FREQS, i, (double)factor);
        m->rope_freq[i] /= (double)factor;
    }
    return true;
}

bool gguf_model_load(struct model *m, const struct family_table *families,
                     const struct model_files *files, const char *file)
{
    snprintf(m->source.container, sizeof m->source.container, "gguf");
    if (!open_files(&m->shards, file, files) ||
        !read_config(m, families, files))
        return false;
    const struct shard *first = &m->shards.shard[0];
    char why[400] = "";
    if (!gguf_tokenizer_open(&first->gguf, m->xf.vocab_size, &m->tokenizer, why,
                             sizeof why))
        return model_files_fail(files, first->file, "%s", why);
    m->extra.n_eos = gguf_end_ids(&first->gguf, m->xf.vocab_size, m->extra.eos,
                                  MODEL_MAX_EOS);
    return gguf_chat_templates(&first->gguf, &m->tokenizer, &m->chat, why,
                               sizeof why)
               ? tensors_take(m, &m->shards, files) && take_rope_freqs(m, files)
               : model_files_fail(files, first->file, "%s", why);
}
