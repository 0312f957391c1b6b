/*
 * test_spm.c - the core's SentencePiece tokenizer (src/spm.h) against
 * llama.cpp's own ids on small vocabularies made for it: byte fallback,
 * merges by score and their ties, the space prefix on and off, runs of
 * spaces, tabs and newlines, control and user-defined tokens typed in the
 * text (longest first, equal lengths by id, the space prefix after each),
 * Phi-3's and ModernBERT's stripping, one-byte fallback tokens, UNUSED and
 * empty tokens, the BOS and EOS. The goldens, vocabularies included, are
 * in tests/golden/spm/ (a JSON file each), written by
 * tests/unit/spm_goldens.py with llama.cpp's llama-tokenize. Then, written
 * here: the unk token where llama.cpp has no answer, max_tokens, invalid
 * UTF-8, every refusal, readable texts and decoded bytes, and 1 MiB texts
 * that must encode in a fraction of a second (the time is printed; a
 * quadratic merge would take minutes). Real vocabularies (Llama 2's,
 * Phi-3's, Baichuan's) are held to llama.cpp's ids by
 * tests/server/test_spm_vocab.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "spm.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *golden_dir(void)
{
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    return dir ? dir : "tests/golden";
}

/* ------------------------------------------------------------- goldens */

static unsigned hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return (unsigned)(c - '0');
    assert_true(c >= 'a' && c <= 'f');
    return (unsigned)(c - 'a' + 10);
}

/* A golden string: a JSON string, or {"hex": "..."} for bytes that are
 * not UTF-8 (or hold a NUL). Into a new block; its length in *len. */
static char *golden_bytes(const cJSON *v, size_t *len)
{
    const char *s = cJSON_GetStringValue(v);
    if (s) {
        *len = strlen(s);
        char *out = malloc(*len + 1);
        assert_non_null(out);
        memcpy(out, s, *len + 1);
        return out;
    }
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(v, "hex"));
    assert_non_null(hex);
    const size_t n = strlen(hex) / 2;
    char *out = malloc(n + 1);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(hex_digit(hex[2 * i]) << 4 | hex_digit(hex[2 * i + 1]));
    *len = n;
    return out;
}

/* A vocabulary read from its golden, and what holds its strings. */
struct golden_vocab {
    struct spm_spec spec;
    struct spm_string *tokens;
    char **texts;
    float *scores;
    int32_t *types;
    uint8_t *strip;
};

static bool json_bool(const cJSON *doc, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(doc, key);
    assert_true(cJSON_IsBool(v));
    return cJSON_IsTrue(v);
}

static void golden_vocab_read(const cJSON *doc, struct golden_vocab *g)
{
    const cJSON *tokens = cJSON_GetObjectItem(doc, "tokens");
    const cJSON *scores = cJSON_GetObjectItem(doc, "scores");
    const cJSON *types = cJSON_GetObjectItem(doc, "types");
    const cJSON *strip = cJSON_GetObjectItem(doc, "strip");
    const size_t n = (size_t)cJSON_GetArraySize(tokens);
    assert_true(n > 0);
    assert_int_equal(cJSON_GetArraySize(scores), n);
    assert_int_equal(cJSON_GetArraySize(types), n);
    assert_int_equal(cJSON_GetArraySize(strip), n);
    memset(g, 0, sizeof *g);
    g->tokens = calloc(n, sizeof *g->tokens);
    g->texts = calloc(n, sizeof *g->texts);
    g->scores = calloc(n, sizeof *g->scores);
    g->types = calloc(n, sizeof *g->types);
    g->strip = calloc(n, sizeof *g->strip);
    assert_true(g->tokens && g->texts && g->scores && g->types && g->strip);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        g->texts[i] = golden_bytes(cJSON_GetArrayItem(tokens, (int)i), &len);
        g->tokens[i] = (struct spm_string){g->texts[i], len};
        g->scores[i] = (float)cJSON_GetArrayItem(scores, (int)i)->valuedouble;
        g->types[i] = (int32_t)cJSON_GetArrayItem(types, (int)i)->valueint;
        g->strip[i] = (uint8_t)cJSON_GetArrayItem(strip, (int)i)->valueint;
    }
    g->spec = (struct spm_spec){
        .tokens = g->tokens,
        .n_tokens = n,
        .scores = g->scores,
        .types = g->types,
        .strip = g->strip,
        .unk_id = cJSON_GetObjectItem(doc, "unk_id")->valueint,
        .bos_id = cJSON_GetObjectItem(doc, "bos_id")->valueint,
        .eos_id = cJSON_GetObjectItem(doc, "eos_id")->valueint,
        .add_bos = json_bool(doc, "add_bos"),
        .add_eos = json_bool(doc, "add_eos"),
        .add_space_prefix = json_bool(doc, "add_space_prefix"),
    };
}

static void golden_vocab_free(struct golden_vocab *g)
{
    for (size_t i = 0; i < g->spec.n_tokens; i++)
        free(g->texts[i]);
    free(g->texts);
    free(g->tokens);
    free(g->scores);
    free(g->types);
    free(g->strip);
}

/* ids joined for a message. */
static void format_ids(const uint32_t *ids, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && o + 16 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%u", i ? " " : "",
                              (unsigned)ids[i]);
}

/* t encodes text[0..len) to want (a JSON array of ids), the added tokens
 * marked as the spec says; false with a message printed when not. */
static bool check_ids(const struct tokenizer *t, const struct spm_spec *spec,
                      const char *text, size_t len, bool no_special,
                      const cJSON *want, const char *where)
{
    const struct tok_options opts = {.no_special = no_special};
    struct tok_encoding enc;
    struct attn_error err = {0};
    const attn_status st = tok_encode(t, text, len, NULL, 0, &opts, &enc, &err);
    if (st != ATTN_OK) {
        print_error("%s: '%.*s' refused: %s\n", where, (int)len, text,
                    err.message);
        return false;
    }
    const size_t n = (size_t)cJSON_GetArraySize(want);
    bool same = enc.count == n;
    for (size_t i = 0; same && i < n; i++)
        same =
            enc.ids[i] == (uint32_t)cJSON_GetArrayItem(want, (int)i)->valueint;
    if (!same) {
        char got[1024], exp[1024];
        format_ids(enc.ids, enc.count, got, sizeof got);
        uint32_t w[256];
        for (size_t i = 0; i < n && i < 256; i++)
            w[i] = (uint32_t)cJSON_GetArrayItem(want, (int)i)->valueint;
        format_ids(w, n < 256 ? n : 256, exp, sizeof exp);
        print_error("%s%s: '%.*s'\n  got      %s\n  llama.cpp %s\n", where,
                    no_special ? " (no special)" : "", (int)len, text, got,
                    exp);
    }
    for (size_t i = 0; same && i < enc.count; i++) {
        const bool bos = !no_special && spec->add_bos && i == 0;
        const bool eos = !no_special && spec->add_eos && i == enc.count - 1;
        assert_int_equal(enc.added[i], bos || eos);
        assert_int_equal(enc.type_ids[i], 0);
    }
    tok_encoding_free(&enc);
    return same;
}

static void check_golden(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/spm/%s.json", golden_dir(), name);
    cJSON *doc = test_read_json(path);
    struct golden_vocab g;
    golden_vocab_read(doc, &g);
    struct tokenizer t;
    struct attn_error err = {0};
    if (spm_tokenizer_new(&g.spec, &t, &err) != ATTN_OK)
        fail_msg("%s: %s", name, err.message);
    const cJSON *cases = cJSON_GetObjectItem(doc, "cases");
    assert_true(cJSON_GetArraySize(cases) > 0);
    size_t bad = 0, count = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        const cJSON *text = cJSON_GetObjectItem(c, "text");
        size_t len;
        char *s = golden_bytes(text ? text : c, &len);
        bad += !check_ids(&t, &g.spec, s, len, false,
                          cJSON_GetObjectItem(c, "ids"), name);
        bad += !check_ids(&t, &g.spec, s, len, true,
                          cJSON_GetObjectItem(c, "ids_no_special"), name);
        count++;
        free(s);
    }
    tok_free(&t);
    golden_vocab_free(&g);
    cJSON_Delete(doc);
    if (bad)
        fail_msg("%s: %zu of %zu encodings differ from llama.cpp's", name, bad,
                 2 * count);
}

static void test_golden_basic(void **state)
{
    (void)state;
    check_golden("basic");
}

static void test_golden_no_prefix(void **state)
{
    (void)state;
    check_golden("no_prefix");
}

static void test_golden_eos(void **state)
{
    (void)state;
    check_golden("eos");
}

static void test_golden_special(void **state)
{
    (void)state;
    check_golden("special");
}

static void test_golden_phi3_strip(void **state)
{
    (void)state;
    check_golden("phi3_strip");
}

static void test_golden_mask_lstrip(void **state)
{
    (void)state;
    check_golden("mask_lstrip");
}

static void test_golden_raw_bytes(void **state)
{
    (void)state;
    check_golden("raw_bytes");
}

static void test_golden_odd_tokens(void **state)
{
    (void)state;
    check_golden("odd_tokens");
}

/* The EOS without the BOS: llama.cpp's llama_tokenize(add_special = true)
 * gives "hello world" in the basic vocabulary as 291 297 2 (its
 * llama-tokenize tool asks for the EOS only with the BOS, so the goldens
 * cannot show it). */
static void test_eos_without_bos(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/spm/basic.json", golden_dir());
    cJSON *doc = test_read_json(path);
    struct golden_vocab g;
    golden_vocab_read(doc, &g);
    g.spec.add_bos = false;
    g.spec.add_eos = true;
    struct tokenizer t;
    struct attn_error err = {0};
    if (spm_tokenizer_new(&g.spec, &t, &err) != ATTN_OK)
        fail_msg("%s", err.message);
    struct tok_encoding enc;
    assert_int_equal(
        tok_encode(&t, "hello world", 11, NULL, 0, NULL, &enc, &err), ATTN_OK);
    assert_int_equal(enc.count, 3);
    assert_int_equal(enc.ids[0], 291);
    assert_int_equal(enc.ids[1], 297);
    assert_int_equal(enc.ids[2], 2);
    assert_int_equal(enc.added[0], 0);
    assert_int_equal(enc.added[2], 1);
    tok_encoding_free(&enc);
    tok_free(&t);
    golden_vocab_free(&g);
    cJSON_Delete(doc);
}

/* ---------------------------------------------------- made here */

/* A vocabulary being made: token texts by id. */
struct made {
    char store[600][32];
    struct spm_string tokens[600];
    float scores[600];
    int32_t types[600];
    size_t n;
};

static uint32_t add(struct made *m, const char *s, float score, int type)
{
    assert_true(m->n < 600);
    snprintf(m->store[m->n], sizeof m->store[m->n], "%s", s);
    m->tokens[m->n] = (struct spm_string){m->store[m->n], strlen(s)};
    m->scores[m->n] = score;
    m->types[m->n] = type;
    return (uint32_t)m->n++;
}

/* <unk> <s> </s>, the byte tokens when bytes, U+2581 and a b c, "ab". */
static void make_small(struct made *m, bool bytes)
{
    memset(m, 0, sizeof *m);
    add(m, "<unk>", 0, SPM_TOKEN_UNKNOWN);
    add(m, "<s>", 0, SPM_TOKEN_CONTROL);
    add(m, "</s>", 0, SPM_TOKEN_CONTROL);
    for (unsigned b = 0; bytes && b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        add(m, name, 0, SPM_TOKEN_BYTE);
    }
    add(m, "\xe2\x96\x81", -1, SPM_TOKEN_NORMAL);
    add(m, "a", -2, SPM_TOKEN_NORMAL);
    add(m, "b", -3, SPM_TOKEN_NORMAL);
    add(m, "c", -4, SPM_TOKEN_NORMAL);
    add(m, "ab", -5, SPM_TOKEN_NORMAL);
}

static struct spm_spec spec_of(struct made *m)
{
    return (struct spm_spec){.tokens = m->tokens,
                             .n_tokens = m->n,
                             .scores = m->scores,
                             .types = m->types,
                             .unk_id = 0,
                             .bos_id = 1,
                             .eos_id = 2,
                             .add_bos = true,
                             .add_space_prefix = true};
}

static void build(const struct spm_spec *spec, struct tokenizer *t)
{
    struct attn_error err = {0};
    if (spm_tokenizer_new(spec, t, &err) != ATTN_OK)
        fail_msg("refused: %s", err.message);
}

/* text's ids, as a string "1 259 ..."; status into *st. */
static attn_status encode_str(const struct tokenizer *t, const char *text,
                              size_t len, const struct tok_options *opts,
                              char *out, size_t cap, struct attn_error *err)
{
    struct tok_encoding enc;
    const attn_status st = tok_encode(t, text, len, NULL, 0, opts, &enc, err);
    out[0] = 0;
    if (st == ATTN_OK) {
        format_ids(enc.ids, enc.count, out, cap);
        tok_encoding_free(&enc);
    }
    return st;
}

static void expect_ids(const struct tokenizer *t, const char *text,
                       const char *want)
{
    char got[512];
    struct attn_error err = {0};
    assert_int_equal(
        encode_str(t, text, strlen(text), NULL, got, sizeof got, &err),
        ATTN_OK);
    if (strcmp(got, want) != 0)
        fail_msg("'%s':\n  got  %s\n  want %s", text, got, want);
}

/* Without byte tokens, a character that no token spells is the unk
 * token (llama.cpp stops with an exception there); without an unk
 * either, the text is refused. */
static void test_unknown(void **state)
{
    (void)state;
    struct made m;
    make_small(&m, false);
    struct spm_spec spec = spec_of(&m);
    struct tokenizer t;
    build(&spec, &t);
    // ids: <unk> 0, <s> 1, </s> 2, U+2581 3, a 4, b 5, c 6, ab 7
    expect_ids(&t, "ab", "1 3 7");
    expect_ids(&t,
               "a\xc3\xa9"
               "b",
               "1 3 4 0 5"); // one unk for é's bytes
    expect_ids(&t, "\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99", "1 3 0 0");
    tok_free(&t);

    spec.unk_id = -1;
    build(&spec, &t);
    char got[64];
    struct attn_error err = {0};
    assert_int_equal(
        encode_str(&t, "a\xc3\xa9", 3, NULL, got, sizeof got, &err),
        ATTN_E_INPUT);
    assert_string_equal(err.field, "sentence");
    assert_non_null(strstr(err.message, "U+00E9"));
    tok_free(&t);
}

/* max_tokens counts the BOS and EOS; no_special leaves them out. */
static void test_max_tokens(void **state)
{
    (void)state;
    struct made m;
    make_small(&m, true);
    struct spm_spec spec = spec_of(&m);
    spec.add_eos = true;
    struct tokenizer t;
    build(&spec, &t);
    char got[128];
    struct attn_error err = {0};
    // "a b c" is BOS, ▁ a ▁ b ▁ c, EOS: 8 tokens
    struct tok_options opts = {.max_tokens = 8};
    assert_int_equal(encode_str(&t, "a b c", 5, &opts, got, sizeof got, &err),
                     ATTN_OK);
    assert_string_equal(got, "1 259 260 259 261 259 262 2");
    opts.max_tokens = 7;
    assert_int_equal(encode_str(&t, "a b c", 5, &opts, got, sizeof got, &err),
                     ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "sentence");
    opts = (struct tok_options){.max_tokens = 6, .no_special = true};
    assert_int_equal(encode_str(&t, "a b c", 5, &opts, got, sizeof got, &err),
                     ATTN_OK);
    assert_string_equal(got, "259 260 259 261 259 262");
    opts.max_tokens = 5;
    assert_int_equal(encode_str(&t, "a b c", 5, &opts, got, sizeof got, &err),
                     ATTN_E_TOO_BIG);
    // a cap reached inside a run of byte tokens
    opts = (struct tok_options){.max_tokens = 3};
    assert_int_equal(
        encode_str(&t, "\xf0\x9f\xa6\x99", 4, &opts, got, sizeof got, &err),
        ATTN_E_TOO_BIG);
    tok_free(&t);
}

/* Invalid UTF-8, a second text, too long a text. */
static void test_bad_input(void **state)
{
    (void)state;
    struct made m;
    make_small(&m, true);
    const struct spm_spec spec = spec_of(&m);
    struct tokenizer t;
    build(&spec, &t);
    struct tok_encoding enc;
    struct attn_error err = {0};
    static const char *bad[] = {"a\xff",     "\xc3",
                                "a\xe2\x96", "\xed\xa0\x80",
                                "\xc0\xaf",  "\xf8\x88\x80\x80\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(
            tok_encode(&t, bad[i], strlen(bad[i]), NULL, 0, NULL, &enc, &err),
            ATTN_E_INPUT);
        assert_string_equal(err.field, "sentence");
        assert_null(enc.ids);
    }
    assert_int_equal(tok_encode(&t, "a", 1, "b", 1, NULL, &enc, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "sentence_b");
    // refused on its length before a byte is read
    assert_int_equal(
        tok_encode(&t, "a", SPM_MAX_INPUT_BYTES + 1, NULL, 0, NULL, &enc, &err),
        ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "sentence");
    assert_int_equal(tok_encode_bytes(&t, SPM_MAX_INPUT_BYTES + 1, 0),
                     SIZE_MAX);
    // the bound grows with the text
    const size_t small = tok_encode_bytes(&t, 10, 0);
    assert_true(small > 0 && small < tok_encode_bytes(&t, 1000, 0));
    // NULL is the empty text: the BOS alone
    assert_int_equal(tok_encode(&t, NULL, 0, NULL, 0, NULL, &enc, &err),
                     ATTN_OK);
    assert_int_equal(enc.count, 1);
    assert_int_equal(enc.ids[0], 1);
    assert_int_equal(enc.added[0], 1);
    tok_encoding_free(&enc);
    tok_free(&t);
}

static void expect_refused(const struct spm_spec *spec, attn_status want,
                           const char *field, const char *in_message)
{
    struct tokenizer t;
    struct attn_error err = {0};
    const attn_status st = spm_tokenizer_new(spec, &t, &err);
    if (st != want)
        fail_msg("wanted status %d for %s, got %d (%s)", (int)want, field,
                 (int)st, err.message);
    assert_string_equal(err.field, field);
    if (!strstr(err.message, in_message))
        fail_msg("'%s' does not say '%s'", err.message, in_message);
    assert_null(t.ops);
}

static void test_refusals(void **state)
{
    (void)state;
    struct made m;
    make_small(&m, true);
    struct spm_spec spec = spec_of(&m);

    struct spm_spec s = spec;
    s.n_tokens = 0;
    expect_refused(&s, ATTN_E_INVALID, "tokens", "no tokens");
    s = spec;
    s.n_tokens = SPM_MAX_VOCAB + 1; // refused before the tokens are read
    expect_refused(&s, ATTN_E_TOO_BIG, "tokens", "1048577");

    static char long_token[SPM_MAX_TOKEN_BYTES + 1];
    memset(long_token, 'a', sizeof long_token);
    struct made m2 = m;
    m2.tokens[5] = (struct spm_string){long_token, sizeof long_token};
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_TOO_BIG, "tokens", "tokens[5] has 1025 bytes");
    m2 = m;
    m2.tokens[5] = (struct spm_string){NULL, 3};
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_INVALID, "tokens", "tokens[5]");
    m2 = m;
    m2.tokens[263] = m2.tokens[259]; // U+2581 twice
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_INVALID, "tokens", "repeats tokens[259]");
    m2 = m;
    m2.tokens[5] = (struct spm_string){"", 0}; // reads [EMPTY_5] ...
    m2.types[5] = SPM_TOKEN_NORMAL;
    snprintf(m2.store[6], sizeof m2.store[6], "[EMPTY_5]"); // as does 6
    m2.tokens[6] = (struct spm_string){m2.store[6], 9};
    m2.types[6] = SPM_TOKEN_NORMAL;
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_INVALID, "tokens", "tokens[6] ('[EMPTY_5]')");

    m2 = m;
    m2.types[4] = 7;
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_INVALID, "types", "types[4] is 7");
    m2 = m;
    m2.types[4] = -1;
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_INVALID, "types", "types[4] is -1");
    m2 = m;
    m2.types[260] = SPM_TOKEN_BYTE; // "a"
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_INVALID, "types", "tokens[260] ('a')");
    m2 = m;
    m2.scores[7] = NAN;
    s = spec_of(&m2);
    expect_refused(&s, ATTN_E_INVALID, "scores", "scores[7] is NaN");

    s = spec;
    s.unk_id = (int64_t)m.n;
    expect_refused(&s, ATTN_E_INVALID, "unk_id", "264");
    s = spec;
    s.bos_id = -2;
    expect_refused(&s, ATTN_E_INVALID, "bos_id", "-2");
    s = spec;
    s.eos_id = 1000;
    expect_refused(&s, ATTN_E_INVALID, "eos_id", "1000");
    s = spec;
    s.bos_id = -1;
    expect_refused(&s, ATTN_E_INVALID, "bos_id", "add_bos");
    s = spec;
    s.add_eos = true;
    s.eos_id = -1;
    expect_refused(&s, ATTN_E_INVALID, "eos_id", "add_eos");

    // scores and types may be left out: every token normal, of score 0
    s = spec;
    s.scores = NULL;
    s.types = NULL;
    struct tokenizer t;
    build(&s, &t);
    // "<s>" is then no special token, and its characters no tokens
    expect_ids(&t, "<s>", "1 259 63 118 65");
    tok_free(&t);
}

/* Readable texts, decoded bytes, special flags and lookup by text. */
static void test_token_texts(void **state)
{
    (void)state;
    struct made m;
    make_small(&m, true);
    const uint32_t hello = add(&m, "\xe2\x96\x81hi\xe2\x96\x81", -9, 1);
    const uint32_t user = add(&m, "<u>\xe2\x96\x81", 0, SPM_TOKEN_USER_DEFINED);
    const uint32_t unused = add(&m, "<unused0>", 0, SPM_TOKEN_UNUSED);
    const uint32_t undef = add(&m, "zz", 0, SPM_TOKEN_UNDEFINED);
    const uint32_t empty = add(&m, "", 0, SPM_TOKEN_NORMAL);
    const uint32_t broken = add(&m, "x\xe2\x96", 0, SPM_TOKEN_NORMAL);
    const struct spm_spec spec = spec_of(&m);
    struct tokenizer t;
    build(&spec, &t);
    assert_string_equal(tok_name(&t), "spm");
    assert_int_equal(tok_vocab_size(&t), m.n);
    assert_string_equal(tok_token_text(&t, 0), "<unk>");
    assert_string_equal(tok_token_text(&t, 1), "<s>");
    assert_string_equal(tok_token_text(&t, 3 + 'A'), "A");
    assert_string_equal(tok_token_text(&t, 3 + '\n'), "\n");
    assert_string_equal(tok_token_text(&t, 3 + 0), "<0x00>");
    assert_string_equal(tok_token_text(&t, 3 + 0xE2), "<0xE2>");
    assert_string_equal(tok_token_text(&t, hello), " hi ");
    assert_string_equal(tok_token_text(&t, user), "<u>\xe2\x96\x81");
    char empty_text[32];
    snprintf(empty_text, sizeof empty_text, "[EMPTY_%u]", (unsigned)empty);
    assert_string_equal(tok_token_text(&t, empty), empty_text);
    assert_string_equal(tok_token_text(&t, broken), "x<0xE2><0x96>");
    assert_null(tok_token_text(&t, (uint32_t)m.n));

    char out[32];
    assert_int_equal(tok_token_bytes(&t, hello, out, sizeof out), 4);
    assert_memory_equal(out, " hi ", 4);
    assert_int_equal(tok_token_bytes(&t, 3 + 0xE2, out, sizeof out), 1);
    assert_int_equal((unsigned char)out[0], 0xE2);
    assert_int_equal(tok_token_bytes(&t, 1, out, sizeof out), 3);
    assert_memory_equal(out, "<s>", 3);
    assert_int_equal(tok_token_bytes(&t, user, out, sizeof out), 6);
    assert_memory_equal(out, "<u>\xe2\x96\x81", 6);
    assert_int_equal(tok_token_bytes(&t, unused, out, sizeof out), 0);
    assert_int_equal(tok_token_bytes(&t, undef, out, sizeof out), 0);
    // the length whatever the room
    assert_int_equal(tok_token_bytes(&t, hello, out, 2), 4);
    assert_memory_equal(out, " h", 2);
    assert_int_equal(tok_token_bytes(&t, hello, NULL, 0), 4);
    assert_int_equal(tok_token_bytes(&t, 0, NULL, 0), 5);

    assert_true(tok_token_special(&t, 0));
    assert_true(tok_token_special(&t, 1));
    assert_true(tok_token_special(&t, 2));
    assert_false(tok_token_special(&t, 3 + 'A'));
    assert_false(tok_token_special(&t, hello));
    assert_false(tok_token_special(&t, user));
    assert_true(tok_token_special(&t, unused));
    assert_true(tok_token_special(&t, undef));
    assert_false(tok_token_special(&t, (uint32_t)m.n));

    assert_int_equal(tok_token_id(&t, " hi ", 4), hello);
    assert_int_equal(tok_token_id(&t, "<s>", 3), 1);
    assert_int_equal(tok_token_id(&t, "a", 1), 260); // not <0x61>'s "a"
    assert_int_equal(tok_token_id(&t, "A", 1), 3 + 'A');
    assert_int_equal(tok_token_id(&t, "<0xE2>", 6), 3 + 0xE2);
    assert_int_equal(tok_token_id(&t, " ", 1), 259);
    assert_int_equal(tok_token_id(&t, "nope", 4), -1);
    tok_free(&t);
}

/* A 1 MiB text of one character merged down pair by pair, one of nested
 * special tokens, and one of both: each in a fraction of a second. */
static void test_long_text(void **state)
{
    (void)state;
    struct made m;
    make_small(&m, true);
    add(&m, "aa", -6, SPM_TOKEN_NORMAL);
    add(&m, "aaaa", -7, SPM_TOKEN_NORMAL);
    add(&m, "aaaaaaaa", -8, SPM_TOKEN_NORMAL);
    add(&m,
        "\xe2\x96\x81"
        "a",
        -9, SPM_TOKEN_NORMAL);
    char name[32];
    for (int k = 1; k <= 24; k++) {
        // <<<...: specials that are prefixes of one another
        memset(name, '<', (size_t)k);
        name[k] = 0;
        add(&m, name, 0, k % 2 ? SPM_TOKEN_CONTROL : SPM_TOKEN_USER_DEFINED);
    }
    const struct spm_spec spec = spec_of(&m);
    struct tokenizer t;
    build(&spec, &t);
    const size_t n = (size_t)1 << 20;
    char *text = malloc(n);
    assert_non_null(text);
    for (int run = 0; run < 3; run++) {
        if (run == 0)
            memset(text, 'a', n);
        else if (run == 1)
            memset(text, '<', n);
        else
            for (size_t i = 0; i < n; i++)
                text[i] = "a<< b<<<a"[i % 9];
        struct tok_encoding enc;
        struct attn_error err = {0};
        const clock_t t0 = clock();
        assert_int_equal(tok_encode(&t, text, n, NULL, 0, NULL, &enc, &err),
                         ATTN_OK);
        const double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        printf("    1 MiB text %d: %zu tokens in %.3f s\n", run, enc.count,
               secs);
        assert_true(secs < 5.0); // quadratic would be minutes
        if (run == 1)            // 24 '<' at a time, the longest first
            assert_int_equal(enc.count, 1 + n / 24 + 1);
        tok_encoding_free(&enc);
    }
    free(text);
    tok_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_basic),
        cmocka_unit_test(test_golden_no_prefix),
        cmocka_unit_test(test_golden_eos),
        cmocka_unit_test(test_golden_special),
        cmocka_unit_test(test_golden_phi3_strip),
        cmocka_unit_test(test_golden_mask_lstrip),
        cmocka_unit_test(test_golden_raw_bytes),
        cmocka_unit_test(test_golden_odd_tokens),
        cmocka_unit_test(test_eos_without_bos),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_max_tokens),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_token_texts),
        cmocka_unit_test(test_long_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
