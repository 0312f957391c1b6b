/*
 * test_wordpiece.c - the vocabulary and wordpiece_encode() of wordpiece.h
 * against
 * the published cases of transformers' and Google's BERT tokenizer tests, and
 * against tests/models/wordpiece.json, written by tests/models/generate.py
 * from a Python transcription of BertTokenizer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "transformer.h"
#include "wordpiece.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct wordpiece_vocab *vocab_of(const char *const *tokens, size_t count)
{
    struct wordpiece_vocab *v = NULL;
    struct attn_error err = {0};
    const attn_status st = wordpiece_vocab_new(tokens, count, &v, &err);
    if (st)
        fail_msg("wordpiece_vocab_new: %s", err.message);
    return v;
}

/* Encode a (and b) and compare the tokens between [CLS] and the first
 * [SEP] with want[n_want]; ids too when want_ids is not NULL. */
static void expect_pieces(const struct wordpiece_vocab *v, bool lower,
                          const char *a, const char *const *want, size_t n_want,
                          const uint32_t *want_ids)
{
    struct tok_encoding enc;
    struct attn_error err = {0};
    const struct wordpiece_options opts = {.do_lower_case = lower};
    const attn_status st =
        wordpiece_encode(v, &opts, a, strlen(a), NULL, 0, &enc, &err);
    if (st)
        fail_msg("wordpiece_encode: %s", err.message);
    assert_int_equal(enc.count, n_want + 2);
    assert_string_equal(wordpiece_vocab_token(v, enc.ids[0]), "[CLS]");
    assert_string_equal(wordpiece_vocab_token(v, enc.ids[n_want + 1]), "[SEP]");
    for (size_t i = 0; i < n_want; i++) {
        assert_string_equal(wordpiece_vocab_token(v, enc.ids[i + 1]), want[i]);
        if (want_ids)
            assert_int_equal(enc.ids[i + 1], want_ids[i]);
        assert_int_equal(enc.type_ids[i + 1], 0);
    }
    tok_encoding_free(&enc);
    assert_null(enc.ids);
}

/* transformers' test_tokenization_bert.py */
static const char *const hf_vocab[] = {
    "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "want", "##want", "##ed",
    "wa",    "un",    "runn",  "##ing", ",",      "low",  "lowest"};

static void test_hf_full_tokenizer(void **state)
{
    (void)state;
    struct wordpiece_vocab *v = vocab_of(hf_vocab, 15);
    const char *want[] = {"un", "##want", "##ed", ",", "runn", "##ing"};
    const uint32_t ids[] = {9, 6, 7, 12, 10, 11};
    expect_pieces(v, true, "UNwant\u00E9d,running", want, 6, ids);
    // test_clean_text: "Test" lowercases to an unknown word, a soft hyphen
    // alone is nothing
    const char *unk[] = {"[UNK]"};
    expect_pieces(v, true, "Test", unk, 1, NULL);
    expect_pieces(v, true, "\xC2\xAD", NULL, 0, NULL);
    expect_pieces(v, true, "test", unk, 1, NULL);
    wordpiece_vocab_free(v);
}

/* test_wordpiece_tokenizer, the same in transformers and in Google's
 * tokenization_test.py */
static void test_wordpiece_published(void **state)
{
    (void)state;
    const char *tokens[] = {"[UNK]", "[CLS]", "[SEP]", "want", "##want",
                            "##ed",  "wa",    "un",    "runn", "##ing"};
    struct wordpiece_vocab *v = vocab_of(tokens, 10);
    expect_pieces(v, true, "", NULL, 0, NULL);
    const char *a[] = {"un", "##want", "##ed", "runn", "##ing"};
    expect_pieces(v, true, "unwanted running", a, 5, NULL);
    const char *b[] = {"[UNK]", "runn", "##ing"};
    expect_pieces(v, true, "unwantedX running", b, 3, NULL);
    wordpiece_vocab_free(v);
}

/* Google's test_full_tokenizer: its vocabulary has no [PAD] or [MASK]. */
static void test_google_full_tokenizer(void **state)
{
    (void)state;
    const char *tokens[] = {"[UNK]",  "[CLS]", "[SEP]", "want",
                            "##want", "##ed",  "wa",    "un",
                            "runn",   "##ing", ","};
    struct wordpiece_vocab *v = vocab_of(tokens, 11);
    const char *want[] = {"un", "##want", "##ed", ",", "runn", "##ing"};
    const uint32_t ids[] = {7, 4, 5, 10, 8, 9};
    expect_pieces(v, true, "UNwant\u00E9d,running", want, 6, ids);
    // a special token typed in the text stays whole; absent from the
    // vocabulary, it is [UNK]
    const char *mask[] = {"want", "[UNK]", "un"};
    expect_pieces(v, true, "want [MASK] un", mask, 3, NULL);
    wordpiece_vocab_free(v);
}

/* transformers' test_offsets_with_special_characters, with a vocabulary
 * holding the pieces bert-base-cased and -uncased give there. */
static void test_hf_special_characters(void **state)
{
    (void)state;
    const char *tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]",    "[MASK]",
                            "A",     "a",     ",",     "na",       "##ï",
                            "##ve",  "naive", "Allen", "##NL",     "##P",
                            "allen", "##nl",  "##p",   "sentence", "."};
    struct wordpiece_vocab *v = vocab_of(tokens, 20);
    const char *text = "A, na\u00EFve [MASK] AllenNLP sentence.";
    const char *cased[] = {"A",     ",",    "na",  "##ï",      "##ve", "[MASK]",
                           "Allen", "##NL", "##P", "sentence", "."};
    expect_pieces(v, false, text, cased, 11, NULL);
    const char *lower[] = {"a",    ",",   "naive",    "[MASK]", "allen",
                           "##nl", "##p", "sentence", "."};
    expect_pieces(v, true, text, lower, 9, NULL);
    wordpiece_vocab_free(v);
}

static void test_vocab(void **state)
{
    (void)state;
    // a token listed twice takes its last line's id, as load_vocab does
    const char *dup[] = {"[UNK]", "[CLS]", "cat", "[SEP]", "cat"};
    struct wordpiece_vocab *v = vocab_of(dup, 5);
    assert_int_equal(wordpiece_vocab_size(v), 5);
    assert_int_equal(wordpiece_vocab_id(v, "cat", 3), 4);
    assert_int_equal(wordpiece_vocab_id(v, "ca", 2), -1);
    assert_int_equal(wordpiece_vocab_id(v, "cats", 4), -1);
    assert_string_equal(wordpiece_vocab_token(v, 2), "cat");
    assert_null(wordpiece_vocab_token(v, 5));
    wordpiece_vocab_free(v);
    wordpiece_vocab_free(NULL);

    const char *no_unk[] = {"[CLS]", "[SEP]", "cat"};
    struct wordpiece_vocab *bad = NULL;
    struct attn_error err = {0};
    assert_int_equal(wordpiece_vocab_new(no_unk, 3, &bad, &err),
                     ATTN_E_INVALID);
    assert_null(bad);
    assert_string_equal(err.field, "vocab");
    assert_non_null(strstr(err.message, "[UNK]"));
    assert_int_equal(wordpiece_vocab_new(no_unk, 0, &bad, &err),
                     ATTN_E_INVALID);

    // many tokens: the table grows and every one is found
    enum { MANY = 5000 };
    static char text[MANY][8];
    const char *many[MANY];
    for (size_t i = 0; i < MANY; i++) {
        snprintf(text[i], sizeof text[i], "t%zu", i);
        many[i] = text[i];
    }
    snprintf(text[0], sizeof text[0], "[UNK]");
    snprintf(text[1], sizeof text[1], "[CLS]");
    snprintf(text[2], sizeof text[2], "[SEP]");
    v = vocab_of(many, MANY);
    for (size_t i = 0; i < MANY; i++)
        assert_int_equal(wordpiece_vocab_id(v, text[i], strlen(text[i])), i);
    wordpiece_vocab_free(v);
}

static void test_pairs_and_caps(void **state)
{
    (void)state;
    struct wordpiece_vocab *v = vocab_of(hf_vocab, 15);
    const struct wordpiece_options opts = {.do_lower_case = true,
                                           .max_tokens = 8};
    struct tok_encoding enc;
    struct attn_error err = {0};
    // [CLS] want , low [SEP] lowest , [SEP]: 8 tokens, the cap exactly
    assert_int_equal(
        wordpiece_encode(v, &opts, "want, low", 9, "lowest,", 7, &enc, &err),
        ATTN_OK);
    const uint32_t ids[] = {1, 5, 12, 13, 2, 14, 12, 2};
    const uint8_t types[] = {0, 0, 0, 0, 0, 1, 1, 1};
    assert_int_equal(enc.count, 8);
    assert_memory_equal(enc.ids, ids, sizeof ids);
    assert_memory_equal(enc.type_ids, types, sizeof types);
    tok_encoding_free(&enc);

    // one more: B pushed it over, and the message names the limit
    assert_int_equal(wordpiece_encode(v, &opts, "want, low", 9, "lowest, low",
                                      11, &enc, &err),
                     ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "sentence_b");
    assert_non_null(strstr(err.message, "9 tokens"));
    assert_non_null(strstr(err.message, "max_position_embeddings"));
    assert_null(enc.ids);
    // A alone over the cap, by wordpieces and by basic tokens
    assert_int_equal(wordpiece_encode(v, &opts, "unwanted unwanted un", 20,
                                      NULL, 0, &enc, &err),
                     ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "sentence");
    assert_int_equal(wordpiece_encode(v, &opts, "a a a a a a a a a a a", 21,
                                      NULL, 0, &enc, &err),
                     ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "sentence");
    assert_non_null(strstr(err.message, "max_position_embeddings"));

    // invalid UTF-8 names the text it is in
    const struct wordpiece_options open = {.do_lower_case = true};
    assert_int_equal(
        wordpiece_encode(v, &open, "want", 4, "lo\xC3w", 4, &enc, &err),
        ATTN_E_INPUT);
    assert_string_equal(err.field, "sentence_b");
    assert_int_equal(err.index[0], 2);
    assert_int_equal(wordpiece_encode(v, &open, "\xFF", 1, NULL, 0, &enc, &err),
                     ATTN_E_INPUT);
    assert_string_equal(err.field, "sentence");

    // no options: lowercase, no cap
    assert_int_equal(wordpiece_encode(v, NULL, "WANT", 4, NULL, 0, &enc, &err),
                     ATTN_OK);
    assert_int_equal(enc.count, 3);
    assert_int_equal(enc.ids[1], 5);
    tok_encoding_free(&enc);
    // an empty B still gets its [SEP], of type 1
    assert_int_equal(wordpiece_encode(v, &open, "", 0, "", 0, &enc, &err),
                     ATTN_OK);
    assert_int_equal(enc.count, 3);
    assert_int_equal(enc.type_ids[2], 1);
    tok_encoding_free(&enc);

    assert_true(wordpiece_encode_bytes(100, 50) >= 150 * 5);
    assert_int_equal(wordpiece_encode_bytes(SIZE_MAX / 2, 0), SIZE_MAX);
    wordpiece_vocab_free(v);
}

/* ------------------------------------------------- tests/models/ goldens */

static cJSON *load(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    const size_t len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *text = malloc(len);
    assert_int_equal(fread(text, 1, len, fp), len);
    fclose(fp);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(doc);
    return doc;
}

static void test_goldens(void **state)
{
    (void)state;
    cJSON *doc = load("tests/models/wordpiece.json");
    const cJSON *vocabs = cJSON_GetObjectItemCaseSensitive(doc, "vocabs");
    const cJSON *c;
    size_t n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases"))
    {
        const char *vname =
            cJSON_GetObjectItemCaseSensitive(c, "vocab")->valuestring;
        const cJSON *jv = cJSON_GetObjectItemCaseSensitive(vocabs, vname);
        const size_t nv = (size_t)cJSON_GetArraySize(jv);
        const char **tokens = malloc(nv * sizeof *tokens);
        for (size_t i = 0; i < nv; i++)
            tokens[i] = cJSON_GetArrayItem(jv, (int)i)->valuestring;
        struct wordpiece_vocab *v = vocab_of(tokens, nv);
        free(tokens);
        const struct wordpiece_options opts = {
            .do_lower_case = cJSON_IsTrue(
                cJSON_GetObjectItemCaseSensitive(c, "do_lower_case"))};
        const char *a =
            cJSON_GetObjectItemCaseSensitive(c, "sentence")->valuestring;
        const cJSON *jb = cJSON_GetObjectItemCaseSensitive(c, "sentence_b");
        const char *b = cJSON_IsString(jb) ? jb->valuestring : NULL;
        struct tok_encoding enc;
        struct attn_error err = {0};
        if (wordpiece_encode(v, &opts, a, strlen(a), b, b ? strlen(b) : 0, &enc,
                             &err))
            fail_msg("case %zu: %s", n_cases, err.message);
        const cJSON *jt = cJSON_GetObjectItemCaseSensitive(c, "tokens");
        const cJSON *ji = cJSON_GetObjectItemCaseSensitive(c, "ids");
        const cJSON *jy = cJSON_GetObjectItemCaseSensitive(c, "type_ids");
        if (enc.count != (size_t)cJSON_GetArraySize(ji))
            fail_msg("case %zu (%s): %zu tokens, want %d", n_cases, a,
                     enc.count, cJSON_GetArraySize(ji));
        for (size_t i = 0; i < enc.count; i++) {
            const uint32_t want =
                (uint32_t)cJSON_GetArrayItem(ji, (int)i)->valuedouble;
            if (enc.ids[i] != want)
                fail_msg("case %zu (%s): token %zu is %s, want %s", n_cases, a,
                         i, wordpiece_vocab_token(v, enc.ids[i]),
                         cJSON_GetArrayItem(jt, (int)i)->valuestring);
            assert_int_equal(enc.type_ids[i],
                             (int)cJSON_GetArrayItem(jy, (int)i)->valuedouble);
        }
        tok_encoding_free(&enc);
        wordpiece_vocab_free(v);
        n_cases++;
    }
    assert_true(n_cases >= 20);
    cJSON_Delete(doc);
}

/* The tokenizer interface over WordPiece: the same ids as
 * wordpiece_encode(), each token's text and id, and which tokens it
 * added: [CLS] and the [SEP] ending each sentence, not one typed in the
 * text. */
static void test_interface(void **state)
{
    (void)state;
    struct tokenizer t;
    struct attn_error err = {0};
    assert_int_equal(
        wordpiece_tokenizer_new(vocab_of(hf_vocab, 15), true, &t, &err),
        ATTN_OK);
    assert_string_equal(tok_name(&t), "wordpiece");
    assert_int_equal(tok_vocab_size(&t), 15);
    assert_string_equal(tok_token_text(&t, 5), "want");
    assert_int_equal(tok_token_id(&t, "##ing", 5), 11);
    assert_int_equal(tok_token_id(&t, "nope", 4), -1);
    const char *a = "want [SEP] running", *b = "LOW";
    struct tok_encoding enc;
    assert_int_equal(
        tok_encode(&t, a, strlen(a), b, strlen(b), NULL, &enc, &err), ATTN_OK);
    const char *want[] = {"[CLS]", "want",  "[SEP]", "runn",
                          "##ing", "[SEP]", "low",   "[SEP]"};
    const uint8_t added[] = {1, 0, 0, 0, 0, 1, 0, 1};
    const uint8_t types[] = {0, 0, 0, 0, 0, 0, 1, 1};
    assert_int_equal(enc.count, 8);
    for (size_t i = 0; i < 8; i++) {
        assert_string_equal(tok_token_text(&t, enc.ids[i]), want[i]);
        assert_int_equal(enc.added[i], added[i]);
        assert_int_equal(enc.type_ids[i], types[i]);
    }
    assert_true(tok_encode_bytes(&t, strlen(a), strlen(b)) >=
                enc.count * (sizeof(uint32_t) + 2));
    tok_encoding_free(&enc);
    // the cap counts the added tokens
    assert_int_equal(tok_encode(&t, a, strlen(a), NULL, 0,
                                &(struct tok_options){.max_tokens = 5}, &enc,
                                &err),
                     ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "sentence");
    // without the special tokens: A B, B's types 1, nothing marked added
    assert_int_equal(tok_encode(&t, a, strlen(a), b, strlen(b),
                                &(struct tok_options){.no_special = true}, &enc,
                                &err),
                     ATTN_OK);
    assert_int_equal(enc.count, 5);
    const char *plain[] = {"want", "[SEP]", "runn", "##ing", "low"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(tok_token_text(&t, enc.ids[i]), plain[i]);
        assert_int_equal(enc.added[i], 0);
        assert_int_equal(enc.type_ids[i], i == 4);
    }
    tok_encoding_free(&enc);
    tok_free(&t);
    tok_free(&t); /* a zeroed tokenizer is a no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_full_tokenizer),
        cmocka_unit_test(test_wordpiece_published),
        cmocka_unit_test(test_google_full_tokenizer),
        cmocka_unit_test(test_hf_special_characters),
        cmocka_unit_test(test_vocab),
        cmocka_unit_test(test_pairs_and_caps),
        cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_interface),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
