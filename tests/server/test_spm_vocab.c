/*
 * test_spm_vocab.c - the core's SentencePiece tokenizer (src/spm.h) with
 * real vocabularies gives llama.cpp's ids, with and without the BOS: Llama
 * 2's (32,000 tokens, the one llama.cpp tests its own tokenizer with),
 * and Phi-3's (67 special tokens, the whitespace after them stripped by
 * llama.cpp's rule for its name) and Baichuan's (64,000 tokens, Chinese)
 * when their files are there too: tests/models/gguf/vocab/
 * ggml-vocab-<name>.gguf, each test skipped, saying so, when its file is
 * absent. The texts and ids are tests/golden/spm/<name>.json: the texts
 * of llama.cpp's own tokenizer test and more (runs of spaces, tabs and
 * newlines, digits, accented Latin, Cyrillic, CJK, emoji, code, special
 * tokens typed in the text, spaces at either end, random strings),
 * written by tests/unit/spm_goldens.py with llama-tokenize. A vocabulary
 * is read here with the GGUF reader (server/model/gguf.h) into a struct
 * spm_spec as llama.cpp reads it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "model/gguf.h"
#include "spm.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctype.h>

static const char *golden_dir(void)
{
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    return dir ? dir : "tests/golden";
}

/* A vocabulary read from a GGUF file, and what holds its arrays. */
struct vocab {
    struct spm_spec spec;
    struct spm_string *tokens;
    float *scores;
    int32_t *types;
    uint8_t *strip;
};

/* The array key of count 4-byte little-endian elements of type want, as
 * host-order values in a new block. */
static void *array4(const struct gguf_file *g, const char *key, gguf_type want,
                    uint64_t count)
{
    gguf_type type;
    uint64_t n;
    const uint8_t *elems;
    char err[256];
    if (!gguf_get_array(g, key, &type, &n, &elems, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(type, want);
    assert_int_equal(n, count);
    uint32_t *out = malloc(count * 4);
    assert_non_null(out);
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *e = elems + 4 * i;
        out[i] = (uint32_t)e[0] | (uint32_t)e[1] << 8 | (uint32_t)e[2] << 16 |
                 (uint32_t)e[3] << 24;
    }
    return out;
}

/* An optional token id, else llama.cpp's default for "llama". */
static int64_t id_or(const struct gguf_file *g, const char *key, int64_t dflt)
{
    uint32_t v;
    char err[256];
    if (!gguf_find(g, key))
        return dflt;
    if (!gguf_get_u32(g, key, &v, err, sizeof err))
        fail_msg("%s", err);
    return v;
}

static bool flag_or(const struct gguf_file *g, const char *key, bool dflt)
{
    bool v;
    char err[256];
    if (!gguf_find(g, key))
        return dflt;
    if (!gguf_get_bool(g, key, &v, err, sizeof err))
        fail_msg("%s", err);
    return v;
}

/* The id of the token spelt text, or -1. */
static int64_t find_token(const struct vocab *v, const char *text)
{
    const size_t len = strlen(text);
    for (size_t i = 0; i < v->spec.n_tokens; i++)
        if (v->tokens[i].len == len &&
            memcmp(v->tokens[i].text, text, len) == 0)
            return (int64_t)i;
    return -1;
}

/* The stripping llama.cpp gives special tokens by general.name (enum
 * spm_strip). */
static void name_strip(const struct gguf_file *g, struct vocab *v)
{
    const char *name = "";
    size_t len = 0;
    char err[256], lower[256];
    if (gguf_find(g, "general.name") &&
        !gguf_get_string(g, "general.name", &name, &len, err, sizeof err))
        fail_msg("%s", err);
    if (len >= sizeof lower)
        len = sizeof lower - 1;
    for (size_t i = 0; i < len; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    lower[len] = 0;
    const size_t n = v->spec.n_tokens;
    v->strip = calloc(n, 1);
    assert_non_null(v->strip);
    if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
        for (size_t i = 0; i < n; i++)
            if (v->types[i] == SPM_TOKEN_CONTROL ||
                v->types[i] == SPM_TOKEN_USER_DEFINED ||
                v->types[i] == SPM_TOKEN_UNKNOWN)
                v->strip[i] |= SPM_STRIP_RIGHT;
        const int64_t eos = find_token(v, "</s>");
        if (eos >= 0)
            v->strip[eos] |= SPM_STRIP_RIGHT;
        static const char *keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t k = 0; k < 3; k++) {
            const int64_t id = find_token(v, keep[k]);
            if (id >= 0)
                v->strip[id] &= (uint8_t)~SPM_STRIP_RIGHT;
        }
    } else if (strstr(lower, "modern-bert")) {
        const int64_t mask = find_token(v, "[MASK]");
        if (mask >= 0)
            v->strip[mask] |= SPM_STRIP_LEFT;
    }
    v->spec.strip = v->strip;
}

/* tokenizer.ggml.* of g into v, with llama.cpp's defaults for what is
 * missing (BOS 1, EOS 2, unk 0, add_bos, add_space_prefix). */
static void vocab_read(const struct gguf_file *g, struct vocab *v)
{
    const char *model;
    size_t model_len;
    char err[256];
    if (!gguf_get_string(g, "tokenizer.ggml.model", &model, &model_len, err,
                         sizeof err))
        fail_msg("%s", err);
    assert_true(model_len == 5 && memcmp(model, "llama", 5) == 0);
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    assert_non_null(tokens);
    assert_int_equal(tokens->type, GGUF_TYPE_ARRAY);
    assert_int_equal(tokens->elem_type, GGUF_TYPE_STRING);
    const uint64_t n = tokens->count;
    v->tokens = calloc(n, sizeof *v->tokens);
    assert_non_null(v->tokens);
    for (uint64_t i = 0; i < n; i++)
        v->tokens[i].text = gguf_array_string(g, tokens, i, &v->tokens[i].len);
    v->scores = array4(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, n);
    v->types = array4(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, n);
    v->spec = (struct spm_spec){
        .tokens = v->tokens,
        .n_tokens = n,
        .scores = v->scores,
        .types = v->types,
        .unk_id = id_or(g, "tokenizer.ggml.unknown_token_id", 0),
        .bos_id = id_or(g, "tokenizer.ggml.bos_token_id", 1),
        .eos_id = id_or(g, "tokenizer.ggml.eos_token_id", 2),
        .add_bos = flag_or(g, "tokenizer.ggml.add_bos_token", true),
        .add_eos = flag_or(g, "tokenizer.ggml.add_eos_token", false),
        .add_space_prefix = flag_or(g, "tokenizer.ggml.add_space_prefix", true),
    };
    name_strip(g, v);
}

static void vocab_free(struct vocab *v)
{
    free(v->tokens);
    free(v->scores);
    free(v->types);
    free(v->strip);
}

static void format_ids(const uint32_t *ids, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && o + 16 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%u", i ? " " : "",
                              (unsigned)ids[i]);
}

static bool check(const struct tokenizer *t, const char *text, bool no_special,
                  const cJSON *want)
{
    const struct tok_options opts = {.no_special = no_special};
    struct tok_encoding enc;
    struct attn_error err = {0};
    if (tok_encode(t, text, strlen(text), NULL, 0, &opts, &enc, &err) !=
        ATTN_OK) {
        print_error("'%s' refused: %s\n", text, err.message);
        return false;
    }
    const size_t n = (size_t)cJSON_GetArraySize(want);
    bool same = enc.count == n;
    for (size_t i = 0; same && i < n; i++)
        same =
            enc.ids[i] == (uint32_t)cJSON_GetArrayItem(want, (int)i)->valueint;
    if (!same) {
        char got[2048], exp[2048];
        uint32_t *w = calloc(n + 1, sizeof *w);
        assert_non_null(w);
        for (size_t i = 0; i < n; i++)
            w[i] = (uint32_t)cJSON_GetArrayItem(want, (int)i)->valueint;
        format_ids(enc.ids, enc.count, got, sizeof got);
        format_ids(w, n, exp, sizeof exp);
        free(w);
        print_error("'%s'%s\n  got       %s\n  llama.cpp %s\n", text,
                    no_special ? " (no BOS)" : "", got, exp);
    }
    tok_encoding_free(&enc);
    return same;
}

/* The vocabulary name's golden, tests/golden/spm/<name>.json, against
 * tests/models/gguf/vocab/ggml-vocab-<name>.gguf; skipped without it. */
static void check_vocab(const char *name, size_t n_tokens)
{
    char vocab_path[1024], golden_path[1024];
    snprintf(vocab_path, sizeof vocab_path,
             "tests/models/gguf/vocab/ggml-vocab-%s.gguf", name);
    snprintf(golden_path, sizeof golden_path, "%s/spm/%s.json", golden_dir(),
             name);
    if (access(vocab_path, R_OK) != 0) {
        printf("    skipped: %s is absent\n", vocab_path);
        skip();
    }
    size_t len;
    char *bytes = test_read_file(vocab_path, &len);
    struct gguf_file g;
    char gerr[256];
    if (!gguf_parse((const uint8_t *)bytes, len, &g, gerr, sizeof gerr))
        fail_msg("%s: %s", vocab_path, gerr);
    struct vocab v;
    vocab_read(&g, &v);
    assert_int_equal(v.spec.n_tokens, n_tokens);
    struct tokenizer t;
    struct attn_error err = {0};
    if (spm_tokenizer_new(&v.spec, &t, &err) != ATTN_OK)
        fail_msg("%s: %s", vocab_path, err.message);

    // the tokens every one of them has, as the interface shows them
    assert_string_equal(tok_token_text(&t, 1), "<s>");
    assert_true(tok_token_special(&t, 1));
    const int64_t e2 = tok_token_id(&t, "<0xE2>", 6);
    assert_true(e2 >= 0);
    char out[8];
    assert_int_equal(tok_token_bytes(&t, (uint32_t)e2, out, sizeof out), 1);
    assert_int_equal((unsigned char)out[0], 0xE2);

    cJSON *doc = test_read_json(golden_path);
    const cJSON *cases = cJSON_GetObjectItem(doc, "cases");
    assert_true(cJSON_GetArraySize(cases) >= 100);
    size_t bad = 0, count = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(c, "text"));
        assert_non_null(text);
        bad += !check(&t, text, false, cJSON_GetObjectItem(c, "ids"));
        bad += !check(&t, text, true, cJSON_GetObjectItem(c, "ids_no_special"));
        count++;
    }
    cJSON_Delete(doc);
    tok_free(&t);
    vocab_free(&v);
    gguf_free(&g);
    free(bytes);
    if (bad)
        fail_msg("%s: %zu of %zu encodings differ from llama.cpp's", name, bad,
                 2 * count);
    printf("    %s: %zu texts, with and without the BOS, as llama.cpp\n", name,
           count);
}

static void test_llama_spm(void **state)
{
    (void)state;
    check_vocab("llama-spm", 32000);
}

static void test_phi_3(void **state)
{
    (void)state;
    check_vocab("phi-3", 32064);
}

static void test_baichuan(void **state)
{
    (void)state;
    check_vocab("baichuan", 64000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_phi_3),
        cmocka_unit_test(test_baichuan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
