/*
 * model_load.c - a checkpoint folder into a struct model (model.h), the
 * same way for every family.
 *
 * The order: config.json, whose model_type picks the family's row
 * (family.h), which reads the rest of it; the family's tokenizer files;
 * the safetensors files, one or the shards of an index (shards.h); then
 * every tensor the family names into its slot (tensors.h). Every failure
 * frees everything and reports one line.
 */
#include "config_keys.h"
#include "model.h"
#include "fail.h"
#include "gguf_model.h"
#include "family.h"
#include "model_files.h"
#include "shards.h"
#include "tensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian, used in place");

#define MAX_JSON_BYTES ((size_t)1 << 20)

/* ------------------------------------------------------------ the model */

static bool name_ok(const char *name, char *err, size_t err_len)
{
    const size_t n = strlen(name);
    bool ok = n >= 1 && n <= MODEL_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        const char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    }
    if (!ok)
        return model_fail(err, err_len,
                          "model name '%.80s': 1 to %d characters of "
                          "A-Z a-z 0-9 . _ -",
                          name, MODEL_NAME_MAX);
    return true;
}

void model_free(struct model *m)
{
    if (!m)
        return;
    shards_free(&m->shards);
    free(m->converted);
    free(m->layers);
    free(m->rope_freq);
    free(m->layer_kind);
    tok_free(&m->tokenizer);
    chat_templates_free(&m->chat);
    free(m);
}

/* config.json: its model_type picks the family, which reads the rest. */
/* generation_config.json, when there is one: its eos_token_id, which
 * generate() uses in place of config.json's (Llama 3.1 lists three). */
static bool read_generation_config(struct model *m,
                                   const struct model_files *files)
{
    char *text;
    size_t len;
    if (!model_files_read(files, "generation_config.json", MAX_JSON_BYTES, true,
                          &text, &len))
        return false;
    if (!text)
        return true;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    char why[400] = "";
    bool ok = doc && cJSON_IsObject(doc);
    if (!ok)
        snprintf(why, sizeof why, "not a JSON object");
    unsigned eos[MODEL_MAX_EOS];
    size_t n = 0;
    ok = ok && config_ids(doc, "eos_token_id", m->xf.vocab_size, MODEL_MAX_EOS,
                          eos, &n, why, sizeof why);
    cJSON_Delete(doc);
    if (!ok)
        return model_files_fail(files, "generation_config.json", "%s", why);
    if (n) {
        memcpy(m->extra.eos, eos, n * sizeof *eos);
        m->extra.n_eos = n;
    }
    return true;
}

static bool read_config(struct model *m, const struct family_table *table,
                        const struct model_files *files)
{
    char *text;
    size_t len;
    if (!model_files_read(files, "config.json", MAX_JSON_BYTES, false, &text,
                          &len))
        return false;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    char why[400] = "";
    bool ok = doc != NULL;
    if (!ok)
        snprintf(why, sizeof why, "not valid JSON");
    else if (!cJSON_IsObject(doc))
        ok = model_fail(why, sizeof why, "not a JSON object");
    // a config.json without model_type is BERT's, as attnd first read it
    const cJSON *type =
        ok ? cJSON_GetObjectItemCaseSensitive(doc, "model_type") : NULL;
    const char *name = "bert";
    if (ok && type && !cJSON_IsNull(type)) {
        if (!cJSON_IsString(type))
            ok = model_fail(why, sizeof why, "model_type is not a string");
        else
            name = type->valuestring;
    }
    if (ok) {
        m->family = family_find(table, name, strlen(name));
        if (!m->family) {
            char known[200];
            family_names(table, known, sizeof known);
            ok = model_fail(why, sizeof why,
                            "model_type '%.64s' is not supported (%s)", name,
                            known);
        }
    }
    ok = ok && m->family->read_config(doc, m, why, sizeof why);
    ok = ok && config_ids(doc, "eos_token_id", m->xf.vocab_size, MODEL_MAX_EOS,
                          m->extra.eos, &m->extra.n_eos, why, sizeof why);
    cJSON_Delete(doc);
    if (!ok)
        return model_files_fail(files, "config.json", "%s", why);
    return read_generation_config(m, files) && tensors_layers(m, files);
}

/* A Hugging Face folder: config.json, the tokenizer's files, the chat
 * templates and the safetensors. */
static bool load_folder(struct model *m, const struct family_table *families,
                        const struct model_files *files)
{
    snprintf(m->source.container, sizeof m->source.container, "safetensors");
    return read_config(m, families, files) &&
           m->family->open_tokenizer(m, files) &&
           chat_templates_open(&m->chat, files) &&
           shards_open(&m->shards, files) && tensors_take(m, &m->shards, files);
}

bool model_load(const char *name, const char *dir, struct model **out,
                char *err, size_t err_len)
{
    return model_load_in(&family_table, name, dir, out, err, err_len);
}

bool model_load_in(const struct family_table *families, const char *name,
                   const char *dir, struct model **out, char *err,
                   size_t err_len)
{
    *out = NULL;
    if (!name_ok(name, err, err_len))
        return false;
    struct model *m = calloc(1, sizeof *m);
    if (!m)
        return model_fail(err, err_len, "model '%s': out of memory", name);
    snprintf(m->name, sizeof m->name, "%s", name);
    // a GGUF file is read from its folder, by its name
    char folder[MODEL_PATH_BYTES];
    const char *file = NULL;
    if (gguf_path(dir)) {
        const char *slash = strrchr(dir, '/');
        file = slash ? slash + 1 : dir;
        snprintf(folder, sizeof folder, "%.*s",
                 slash ? (int)(slash - dir) + (slash == dir) : 1,
                 slash ? dir : ".");
    }
    const struct model_files files = {.name = name,
                                      .dir = file ? folder : dir,
                                      .err = err,
                                      .err_len = err_len};
    bool ok = file ? gguf_model_load(m, families, &files, file)
                   : load_folder(m, families, &files);
    if (ok && m->family->after_tensors)
        m->family->after_tensors(m);
    for (size_t id = 0; ok && id < tok_vocab_size(&m->tokenizer); id++) {
        const char *text = tok_token_text(&m->tokenizer, (uint32_t)id);
        const size_t len = text ? strlen(text) : 0;
        m->longest_text = len > m->longest_text ? len : m->longest_text;
    }
    if (ok) {
        struct attn_error aerr = {0};
        if (xf_model_check(&m->xf, &aerr))
            ok = model_fail(err, err_len, "model '%s': %s%s: %s", name, dir,
                            file ? "" : "/config.json", aerr.message);
    }
    if (!ok) {
        model_free(m);
        return false;
    }
    *out = m;
    return true;
}

size_t model_window(const struct model *m, size_t layer)
{
    const struct xf_model *x = &m->xf;
    const size_t at = layer == XF_ALL_LAYERS ? 0 : layer;
    const size_t window = x->kind[x->layer_kind ? x->layer_kind[at] : 0].window;
    for (size_t l = 0; layer == XF_ALL_LAYERS && l < x->layers; l++)
        if (x->kind[x->layer_kind ? x->layer_kind[l] : 0].window != window)
            return 0;
    return window;
}

size_t model_widest_window(const struct model *m)
{
    const struct xf_model *x = &m->xf;
    size_t window = 0;
    for (size_t k = 0; k < (x->kinds ? x->kinds : 1); k++)
        window = x->kind[k].window > window ? x->kind[k].window : window;
    return window;
}
