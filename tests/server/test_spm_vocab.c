/*
 * test_spm_vocab.c - GGUF SentencePiece vocabularies, read as a model's
 * tokenizer is (server/model/gguf_tokenizer.c into src/spm.h), give
 * llama.cpp's ids, with and without the BOS: Llama 2's (32,000 tokens,
 * the one llama.cpp tests its own tokenizer with) and Phi-3's (67 special
 * tokens, the whitespace after them stripped by llama.cpp's rule for its
 * name), tests/models/gguf/vocab/ggml-vocab-<name>.gguf. The texts and
 * ids are tests/golden/spm/<name>.json (runs of spaces, tabs and
 * newlines, digits, accented Latin, Cyrillic, CJK, emoji, code, special
 * tokens typed in the text, spaces at either end, random strings),
 * written by tests/unit/spm_goldens.py with llama-tokenize.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *golden_dir(void)
{
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    return dir ? dir : "tests/golden";
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
 * tests/models/gguf/vocab/ggml-vocab-<name>.gguf. */
static void check_vocab(const char *name, size_t n_tokens)
{
    char vocab_path[1024], golden_path[1024];
    snprintf(vocab_path, sizeof vocab_path,
             "tests/models/gguf/vocab/ggml-vocab-%s.gguf", name);
    snprintf(golden_path, sizeof golden_path, "%s/spm/%s.json", golden_dir(),
             name);
    size_t len;
    char *bytes = test_read_file(vocab_path, &len);
    struct gguf_file g;
    char gerr[256];
    if (!gguf_parse((const uint8_t *)bytes, len, &g, gerr, sizeof gerr))
        fail_msg("%s: %s", vocab_path, gerr);
    // read as a model's is (server/model/gguf_tokenizer.c)
    struct tokenizer t;
    if (!gguf_tokenizer_open(&g, n_tokens, &t, gerr, sizeof gerr))
        fail_msg("%s: %s", vocab_path, gerr);
    assert_string_equal(tok_name(&t), "spm");
    assert_int_equal(tok_vocab_size(&t), n_tokens);

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_phi_3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
