/*
 * gguf_tokenizer.c - a GGUF file's tokenizer and chat templates
 * (gguf_tokenizer.h).
 */
#include "gguf_tokenizer.h"
#include "bpe.h"
#include "fail.h"
#include "spm.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's token types (tokenizer.ggml.token_type). */
enum { TYPE_NORMAL = 1, TYPE_UNKNOWN = 2, TYPE_CONTROL = 3, TYPE_USER = 4 };

/* Texts llama.cpp treats as control tokens whatever type the file gives
 * them, so that a text holding one is split at it: ends of turns and of
 * generations (ends, which also end a generation), and fill-in-the-middle
 * markers (marks). */
#define FW_BAR "\xef\xbd\x9c"  /* U+FF5C, DeepSeek's bar */
#define SP_MARK "\xe2\x96\x81" /* U+2581, SentencePiece's space */
static const char *const ends[] = {"<|eot_id|>",
                                   "<|im_end|>",
                                   "<|end|>",
                                   "<|return|>",
                                   "<|call|>",
                                   "<|flush|>",
                                   "<|calls|>",
                                   "<end_of_turn>",
                                   "<|endoftext|>",
                                   "</s>",
                                   "<|eom_id|>",
                                   "<EOT>",
                                   "_<EOT>",
                                   "[EOT]",
                                   "[EOS]",
                                   "<|end_of_text|>",
                                   "<end_of_utterance>",
                                   "<eos>",
                                   "<turn|>",
                                   "<|tool_response>",
                                   "<" FW_BAR "end" SP_MARK "of" SP_MARK
                                   "sentence" FW_BAR ">",
                                   "[e~[",
                                   "<|fim_pad|>",
                                   "<fim-pad>",
                                   "<fim_pad>",
                                   "<PAD>",
                                   "[PAD]",
                                   "<|fim_repo|>",
                                   "<|repo_name|>",
                                   "<fim-repo>",
                                   "<REPO>",
                                   "<reponame>",
                                   "<|file_sep|>"};
static const char *const marks[] = {
    "<|fim_prefix|>",  "<fim-prefix>",
    "<fim_prefix>",    "<" FW_BAR "fim" SP_MARK "begin" FW_BAR ">",
    "<PRE>",           SP_MARK "<PRE>",
    "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>",  "<fim-suffix>",
    "<fim_suffix>",    "<" FW_BAR "fim" SP_MARK "hole" FW_BAR ">",
    "<SUF>",           SP_MARK "<SUF>",
    "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>",  "<fim-middle>",
    "<fim_middle>",    "<" FW_BAR "fim" SP_MARK "end" FW_BAR ">",
    "<MID>",           SP_MARK "<MID>",
    "<|code_middle|>", "<|middle|>"};
#undef FW_BAR
#undef SP_MARK

static bool listed(const char *const *list, size_t n, const char *text,
                   size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && !memcmp(list[i], text, len))
            return true;
    return false;
}

/* Whether text[0..len) ends a generation (ends), or is any control text. */
static bool ends_generation(const char *text, size_t len)
{
    return listed(ends, sizeof ends / sizeof *ends, text, len);
}

static bool control_looking(const char *text, size_t len)
{
    return ends_generation(text, len) ||
           listed(marks, sizeof marks / sizeof *marks, text, len);
}

/* A pre-tokenizer attnd reads: the names llama.cpp gives it, and what it
 * is. */
struct pre {
    const char *name;
    enum bpe_pattern pattern;
    bool ignore_merges; /* a pre-token in the vocabulary is one token */
    bool add_bos;       /* llama.cpp's default without add_bos_token */
    bool digits_first;  /* each number character split off alone first,
                           then pattern on the rest (SmolLM's) */
};

static const struct pre pres[] = {
    {"llama-bpe", BPE_PATTERN_LLAMA3, true, true, false},
    {"llama3", BPE_PATTERN_LLAMA3, true, true, false},
    {"llama-v3", BPE_PATTERN_LLAMA3, true, true, false},
    {"dbrx", BPE_PATTERN_LLAMA3, false, false, false},
    {"smaug-bpe", BPE_PATTERN_LLAMA3, false, false, false},
    {"qwen2", BPE_PATTERN_QWEN2, false, false, false},
    {"deepseek-r1-qwen", BPE_PATTERN_QWEN2, false, false, false},
    {"smollm", BPE_PATTERN_GPT2, false, false, true},
    {"gpt-2", BPE_PATTERN_GPT2, false, false, false},
    {"phi-2", BPE_PATTERN_GPT2, false, false, false},
};

/* Every name of pres, for a message. */
static void pre_names(char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof pres / sizeof pres[0] && at < len; i++) {
        const int n =
            snprintf(out + at, len - at, "%s%s", i ? ", " : "", pres[i].name);
        at += n > 0 ? (size_t)n : 0;
    }
}

/* A STRING array key, or false with the line in err. */
static bool string_array(const struct gguf_file *g, const char *key,
                         const struct gguf_kv **kv, char *err, size_t err_len)
{
    gguf_type type;
    uint64_t count;
    const uint8_t *elems;
    if (!gguf_get_array(g, key, &type, &count, &elems, err, err_len))
        return false;
    if (type != GGUF_TYPE_STRING)
        return model_fail(err, err_len,
                          "key '%s' is an array of %s, not of "
                          "STRING",
                          key, gguf_type_name(type));
    *kv = gguf_find(g, key);
    return true;
}

/* A bool key, or dflt when the file has none. */
static bool flag(const struct gguf_file *g, const char *key, bool dflt,
                 bool *out, char *err, size_t err_len)
{
    *out = dflt;
    return !gguf_find(g, key) || gguf_get_bool(g, key, out, err, err_len);
}

/* A token id key below n, or -1 when the file has none. */
static bool id_key(const struct gguf_file *g, const char *key, size_t n,
                   int64_t *out, char *err, size_t err_len)
{
    uint32_t id;
    *out = -1;
    if (!gguf_find(g, key))
        return true;
    if (!gguf_get_u32(g, key, &id, err, err_len))
        return false;
    if (id >= n)
        return model_fail(err, err_len,
                          "key '%s' is %u; the vocabulary has "
                          "%zu tokens",
                          key, id, n);
    *out = id;
    return true;
}

/* The types of the n tokens (NORMAL when the file gives none). */
static bool token_types(const struct gguf_file *g, size_t n, int32_t *types,
                        char *err, size_t err_len)
{
    static const char key[] = "tokenizer.ggml.token_type";
    for (size_t i = 0; i < n; i++)
        types[i] = TYPE_NORMAL;
    if (!gguf_find(g, key))
        return true;
    gguf_type type;
    uint64_t count;
    const uint8_t *elems;
    if (!gguf_get_array(g, key, &type, &count, &elems, err, err_len))
        return false;
    if (type != GGUF_TYPE_INT32 || count != n)
        return model_fail(err, err_len,
                          "key '%s' is %llu values of %s; %zu INT32 (one a "
                          "token) expected",
                          key, (unsigned long long)count, gguf_type_name(type),
                          n);
    memcpy(types, elems, n * sizeof *types);
    return true;
}

/* The byte-level BPE tokenizer of a "gpt2" model. */
static bool open_bpe(const struct gguf_file *g, size_t vocab_size,
                     struct tokenizer *out, char *err, size_t err_len)
{
    const char *pre_name = "";
    size_t pre_len = 0;
    if (!gguf_get_string(g, "tokenizer.ggml.pre", &pre_name, &pre_len, err,
                         err_len))
        return false;
    const struct pre *pre = NULL;
    for (size_t i = 0; i < sizeof pres / sizeof pres[0] && !pre; i++)
        if (strlen(pres[i].name) == pre_len &&
            !memcmp(pres[i].name, pre_name, pre_len))
            pre = &pres[i];
    if (!pre) {
        char known[200];
        pre_names(known, sizeof known);
        return model_fail(err, err_len,
                          "tokenizer.ggml.pre '%.*s' is not supported (%s)",
                          (int)(pre_len < 64 ? pre_len : 64), pre_name, known);
    }
    const struct gguf_kv *tokens, *merges;
    if (!string_array(g, "tokenizer.ggml.tokens", &tokens, err, err_len) ||
        !string_array(g, "tokenizer.ggml.merges", &merges, err, err_len))
        return false;
    const size_t n = tokens->count;
    if (n == 0 || n > BPE_MAX_VOCAB || n > vocab_size)
        return model_fail(
            err, err_len,
            "tokenizer.ggml.tokens has %zu tokens; 1 to %zu "
            "(the model's rows) are allowed",
            n, vocab_size < BPE_MAX_VOCAB ? vocab_size : BPE_MAX_VOCAB);
    if (merges->count > BPE_MAX_MERGES)
        return model_fail(err, err_len,
                          "tokenizer.ggml.merges has %llu merges; at most %zu "
                          "are allowed",
                          (unsigned long long)merges->count, BPE_MAX_MERGES);
    bool add_bos, add_eos;
    int64_t bos, unk;
    if (!flag(g, "tokenizer.ggml.add_bos_token", pre->add_bos, &add_bos, err,
              err_len) ||
        !flag(g, "tokenizer.ggml.add_eos_token", false, &add_eos, err,
              err_len) ||
        !id_key(g, "tokenizer.ggml.bos_token_id", n, &bos, err, err_len) ||
        !id_key(g, "tokenizer.ggml.unknown_token_id", n, &unk, err, err_len))
        return false;
    if (add_eos)
        return model_fail(err, err_len,
                          "tokenizer.ggml.add_eos_token is true, which is not "
                          "supported for a gpt2 tokenizer");
    if (add_bos && bos < 0)
        return model_fail(err, err_len,
                          "tokenizer.ggml.add_bos_token is true but the file "
                          "has no tokenizer.ggml.bos_token_id");
    struct bpe_string *vocab = calloc(n, sizeof *vocab);
    struct bpe_merge *rules =
        calloc(merges->count ? merges->count : 1, sizeof *rules);
    struct bpe_added_token *added = calloc(n, sizeof *added);
    int32_t *types = calloc(n, sizeof *types);
    bool ok = vocab && rules && added && types;
    if (!ok)
        model_fail(err, err_len, "out of memory");
    ok = ok && token_types(g, n, types, err, err_len);
    size_t n_added = 0;
    for (size_t i = 0; ok && i < n; i++) {
        vocab[i].text = gguf_array_string(g, tokens, i, &vocab[i].len);
        if (types[i] == TYPE_CONTROL || types[i] == TYPE_USER ||
            types[i] == TYPE_UNKNOWN ||
            control_looking(vocab[i].text, vocab[i].len))
            added[n_added++] = (struct bpe_added_token){
                .content = vocab[i],
                .id = (uint32_t)i,
                .special = types[i] != TYPE_USER ||
                           control_looking(vocab[i].text, vocab[i].len)};
    }
    for (size_t i = 0; ok && i < merges->count; i++) {
        size_t len;
        const char *rule = gguf_array_string(g, merges, i, &len);
        // the pair splits at its first space after the first byte, as
        // llama.cpp splits it
        const char *space = len > 1 ? memchr(rule + 1, ' ', len - 1) : NULL;
        if (!space) {
            ok = model_fail(err, err_len,
                            "tokenizer.ggml.merges[%zu] '%.*s' is not two "
                            "tokens and a space",
                            i, (int)(len < 64 ? len : 64), rule);
            break;
        }
        rules[i].a = (struct bpe_string){rule, (size_t)(space - rule)};
        rules[i].b =
            (struct bpe_string){space + 1, len - (size_t)(space - rule) - 1};
    }
    const struct bpe_split digits_then[] = {
        {.pattern = BPE_PATTERN_DIGIT, .behavior = BPE_SPLIT_ISOLATED},
        {.pattern = pre->pattern, .behavior = BPE_SPLIT_ISOLATED},
    };
    if (ok) {
        const struct bpe_spec spec = {
            .vocab = vocab,
            .n_vocab = n,
            .merges = rules,
            .n_merges = merges->count,
            .added = added,
            .n_added = n_added,
            .byte_level = true,
            .pattern = pre->digits_first ? BPE_PATTERN_NONE : pre->pattern,
            .splits = pre->digits_first ? digits_then : NULL,
            .n_splits = pre->digits_first ? 2 : 0,
            .ignore_merges = pre->ignore_merges,
            .unk_id = unk,
            .bos_id = add_bos ? bos : -1};
        struct attn_error aerr = {0};
        if (bpe_tokenizer_new(&spec, out, &aerr))
            ok = model_fail(err, err_len, "the tokenizer: %s", aerr.message);
    }
    free(vocab);
    free(rules);
    free(added);
    free(types);
    return ok;
}

/* An id key, or dflt (when below n) without one: llama.cpp's defaults
 * for a "llama" vocabulary. */
static bool id_or(const struct gguf_file *g, const char *key, size_t n,
                  int64_t dflt, int64_t *out, char *err, size_t err_len)
{
    if (!id_key(g, key, n, out, err, err_len))
        return false;
    if (!gguf_find(g, key))
        *out = dflt < (int64_t)n ? dflt : -1;
    return true;
}

/* The id of the token text among n, or -1. */
static int64_t token_of(const struct spm_string *texts, size_t n,
                        const char *text)
{
    const size_t len = strlen(text);
    for (size_t i = 0; i < n; i++)
        if (texts[i].len == len && !memcmp(texts[i].text, text, len))
            return (int64_t)i;
    return -1;
}

/* The whitespace llama.cpp strips beside special tokens, which it decides
 * by the model's general.name: a Phi-3's special tokens and </s> strip
 * what follows them (but <unk>, <s> and <|endoftext|>), a ModernBERT's
 * [MASK] what precedes it. strip is [n] zeroed. */
static void strip_by_name(const struct gguf_file *g,
                          const struct spm_string *texts, const int32_t *types,
                          size_t n, uint8_t *strip)
{
    const char *name = "";
    size_t len = 0;
    char why[200], lower[256];
    if (gguf_find(g, "general.name") &&
        !gguf_get_string(g, "general.name", &name, &len, why, sizeof why))
        return;
    len = len < sizeof lower ? len : sizeof lower - 1;
    for (size_t i = 0; i < len; i++)
        lower[i] =
            name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] + 32) : name[i];
    lower[len] = '\0';
    if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
        for (size_t i = 0; i < n; i++)
            if (types[i] == SPM_TOKEN_CONTROL ||
                types[i] == SPM_TOKEN_USER_DEFINED ||
                types[i] == SPM_TOKEN_UNKNOWN)
                strip[i] |= SPM_STRIP_RIGHT;
        const int64_t eos = token_of(texts, n, "</s>");
        if (eos >= 0)
            strip[eos] |= SPM_STRIP_RIGHT;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++) {
            const int64_t id = token_of(texts, n, keep[k]);
            if (id >= 0)
                strip[id] &= (uint8_t)~SPM_STRIP_RIGHT;
        }
    } else if (strstr(lower, "modern-bert")) {
        const int64_t mask = token_of(texts, n, "[MASK]");
        if (mask >= 0)
            strip[mask] |= SPM_STRIP_LEFT;
    }
}

/* The SentencePiece tokenizer of a "llama" model: tokens, scores and
 * types (spm.h). */
static bool open_spm(const struct gguf_file *g, size_t vocab_size,
                     struct tokenizer *out, char *err, size_t err_len)
{
    const struct gguf_kv *tokens;
    if (!string_array(g, "tokenizer.ggml.tokens", &tokens, err, err_len))
        return false;
    const size_t n = tokens->count;
    if (n == 0 || n > SPM_MAX_VOCAB || n > vocab_size)
        return model_fail(
            err, err_len,
            "tokenizer.ggml.tokens has %zu tokens; 1 to %zu "
            "(the model's rows) are allowed",
            n, vocab_size < SPM_MAX_VOCAB ? vocab_size : SPM_MAX_VOCAB);
    static const char scores_key[] = "tokenizer.ggml.scores";
    const uint8_t *scores = NULL;
    if (gguf_find(g, scores_key)) {
        gguf_type type;
        uint64_t count;
        if (!gguf_get_array(g, scores_key, &type, &count, &scores, err,
                            err_len))
            return false;
        if (type != GGUF_TYPE_FLOAT32 || count != n)
            return model_fail(err, err_len,
                              "key '%s' is %llu values of %s; %zu FLOAT32 "
                              "(one a token) expected",
                              scores_key, (unsigned long long)count,
                              gguf_type_name(type), n);
    }
    struct spm_spec spec = {.n_tokens = n};
    if (!id_or(g, "tokenizer.ggml.unknown_token_id", n, 0, &spec.unk_id, err,
               err_len) ||
        !id_or(g, "tokenizer.ggml.bos_token_id", n, 1, &spec.bos_id, err,
               err_len) ||
        !id_or(g, "tokenizer.ggml.eos_token_id", n, 2, &spec.eos_id, err,
               err_len) ||
        !flag(g, "tokenizer.ggml.add_bos_token", true, &spec.add_bos, err,
              err_len) ||
        !flag(g, "tokenizer.ggml.add_eos_token", false, &spec.add_eos, err,
              err_len) ||
        !flag(g, "tokenizer.ggml.add_space_prefix", true,
              &spec.add_space_prefix, err, err_len))
        return false;
    struct spm_string *texts = calloc(n, sizeof *texts);
    float *score = scores ? malloc(n * sizeof *score) : NULL;
    int32_t *types = calloc(n, sizeof *types);
    uint8_t *strip = calloc(n, 1);
    bool ok = texts && types && strip && (score || !scores);
    if (!ok)
        model_fail(err, err_len, "out of memory");
    ok = ok && token_types(g, n, types, err, err_len);
    for (size_t i = 0; ok && i < n; i++) {
        texts[i].text = gguf_array_string(g, tokens, i, &texts[i].len);
        if (control_looking(texts[i].text, texts[i].len))
            types[i] = SPM_TOKEN_CONTROL;
    }
    if (ok && scores)
        memcpy(score, scores, n * sizeof *score);
    if (ok) {
        strip_by_name(g, texts, types, n, strip);
        spec.tokens = texts;
        spec.scores = score;
        spec.types = types;
        spec.strip = strip;
        struct attn_error aerr = {0};
        if (spm_tokenizer_new(&spec, out, &aerr))
            ok = model_fail(err, err_len, "the tokenizer: %s", aerr.message);
    }
    free(texts);
    free(score);
    free(types);
    free(strip);
    return ok;
}

bool gguf_tokenizer_open(const struct gguf_file *g, size_t vocab_size,
                         struct tokenizer *out, char *err, size_t err_len)
{
    const char *model;
    size_t len;
    if (!gguf_get_string(g, "tokenizer.ggml.model", &model, &len, err, err_len))
        return false;
    if (len == 4 && !memcmp(model, "gpt2", 4))
        return open_bpe(g, vocab_size, out, err, err_len);
    if (len == 5 && !memcmp(model, "llama", 5))
        return open_spm(g, vocab_size, out, err, err_len);
    return model_fail(err, err_len,
                      "tokenizer.ggml.model '%.*s' is not supported (gpt2, "
                      "llama)",
                      (int)(len < 64 ? len : 64), model);
}

size_t gguf_end_ids(const struct gguf_file *g, size_t vocab_size, unsigned *ids,
                    size_t max)
{
    static const char *const keys[] = {"tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.eot_token_id",
                                       "tokenizer.ggml.eom_token_id"};
    size_t n = 0;
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    const size_t count = tokens && tokens->type == GGUF_TYPE_ARRAY &&
                                 tokens->elem_type == GGUF_TYPE_STRING
                             ? (size_t)tokens->count
                             : 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] + count; i++) {
        int64_t id = -1;
        char why[200];
        if (i < sizeof keys / sizeof keys[0]) {
            if (!id_key(g, keys[i], vocab_size, &id, why, sizeof why))
                id = -1;
        } else {
            size_t len;
            const char *text = gguf_array_string(g, tokens, i - 3, &len);
            id = ends_generation(text, len) ? (int64_t)(i - 3) : -1;
        }
        bool seen = id < 0 || (size_t)id >= vocab_size;
        for (size_t k = 0; k < n && !seen; k++)
            seen = ids[k] == (unsigned)id;
        if (!seen && n < max)
            ids[n++] = (unsigned)id;
    }
    return n;
}

/* ------------------------------------------------------ chat templates */

/* The special tokens map a template reads, from the ids the file gives. */
static cJSON *specials_of(const struct gguf_file *g, const struct tokenizer *t)
{
    static const char *const keys[][2] = {
        {"bos_token", "tokenizer.ggml.bos_token_id"},
        {"eos_token", "tokenizer.ggml.eos_token_id"},
        {"unk_token", "tokenizer.ggml.unknown_token_id"},
        {"pad_token", "tokenizer.ggml.padding_token_id"},
    };
    cJSON *map = cJSON_CreateObject();
    for (size_t i = 0; map && i < sizeof keys / sizeof keys[0]; i++) {
        char why[200], text[256];
        int64_t id;
        if (!id_key(g, keys[i][1], tok_vocab_size(t), &id, why, sizeof why) ||
            id < 0)
            continue;
        const size_t n = tok_token_bytes(t, (uint32_t)id, text, sizeof text);
        if (n >= sizeof text)
            continue;
        text[n] = '\0';
        if (!cJSON_AddStringToObject(map, keys[i][0], text)) {
            cJSON_Delete(map);
            return NULL;
        }
    }
    return map;
}

bool gguf_chat_templates(const struct gguf_file *g, const struct tokenizer *t,
                         struct chat_templates *out, char *err, size_t err_len)
{
    static const char prefix[] = "tokenizer.chat_template";
    const size_t pl = sizeof prefix - 1;
    memset(out, 0, sizeof *out);
    out->specials = specials_of(g, t);
    if (!out->specials)
        return model_fail(err, err_len, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct gguf_kv *kv = &g->kvs[i];
        if (strncmp(kv->key, prefix, pl) ||
            (kv->key[pl] && kv->key[pl] != '.') || kv->type != GGUF_TYPE_STRING)
            continue;
        const char *name = kv->key[pl] ? kv->key + pl + 1 : "default";
        out->source = prefix;
        if (!chat_templates_add(out, name, kv->str, (size_t)kv->str_len)) {
            chat_templates_free(out);
            return model_fail(err, err_len,
                              "more than %d chat templates, or a name over %d "
                              "bytes ('%.80s')",
                              CHAT_MAX_TEMPLATES, CHAT_NAME_MAX, kv->key);
        }
    }
    return true;
}
