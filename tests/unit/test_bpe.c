/*
 * test_bpe.c - the core's BPE tokenizer (src/bpe.h) on small vocabularies
 * made here: the three pre-tokenizer scanners against the regexes they
 * stand for, case by case; merging by rank, leftmost first; ignore_merges;
 * SentencePiece's normalizer, byte fallback and unk; added tokens with
 * lstrip and rstrip; readable token texts; NFC; what is refused; and a
 * 1 MiB text that is one pre-token, which must merge in well under a
 * second (the time is printed). The real tokenizer files are held to the
 * library's ids by tests/server/test_tokenizer_json.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bpe.h"
#include "bpe_internal.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------- helpers */

/* The pre-tokens of text, joined with '|'. */
static void pretokens(enum bpe_pattern p, const char *text, char *out,
                      size_t out_len)
{
    const size_t n = strlen(text);
    size_t o = 0;
    for (size_t at = 0; at < n;) {
        const size_t end = bpe_pretok_end(p, text, n, at);
        assert_true(end > at && end <= n);
        if (at)
            out[o++] = '|';
        assert_true(o + (end - at) + 2 < out_len);
        memcpy(out + o, text + at, end - at);
        o += end - at;
        at = end;
    }
    out[o] = 0;
}

static void expect_split(enum bpe_pattern p, const char *text, const char *want)
{
    char got[512];
    pretokens(p, text, got, sizeof got);
    if (strcmp(got, want) != 0)
        fail_msg("pattern %d on '%s':\n  got  '%s'\n  want '%s'", (int)p, text,
                 got, want);
}

/* GPT-2's byte character of b, as UTF-8, into out; its length. */
static size_t byte_char_utf8(unsigned b, char *out)
{
    unsigned n = 0, cp = b;
    const int printable =
        (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
        for (unsigned c = 0; c < b; c++)
            n += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) ||
                   c >= 0xAE);
        cp = 0x100 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* A vocabulary being made: strings by id, and merges. */
struct made {
    struct bpe_string vocab[600];
    char store[600][64];
    size_t n_vocab;
    struct bpe_merge merges[300];
    size_t n_merges;
    struct bpe_added_token added[8];
    size_t n_added;
};

static uint32_t add_token(struct made *m, const char *s)
{
    const size_t id = m->n_vocab++;
    assert_true(id < 600 && strlen(s) < 64);
    memcpy(m->store[id], s, strlen(s) + 1);
    m->vocab[id] = (struct bpe_string){m->store[id], strlen(s)};
    return (uint32_t)id;
}

static int64_t find(const struct made *m, const char *s)
{
    for (size_t i = 0; i < m->n_vocab; i++)
        if (strcmp(m->store[i], s) == 0)
            return (int64_t)i;
    return -1;
}

/* The merge "a b", adding a+b to the vocabulary. */
static void add_merge(struct made *m, const char *a, const char *b)
{
    char ab[64];
    snprintf(ab, sizeof ab, "%s%s", a, b);
    if (find(m, ab) < 0)
        add_token(m, ab);
    struct bpe_merge *g = &m->merges[m->n_merges++];
    g->a = m->vocab[find(m, a)];
    g->b = m->vocab[find(m, b)];
}

/* The 256 byte characters, ids 0-255 in byte order. */
static void byte_alphabet(struct made *m)
{
    for (unsigned b = 0; b < 256; b++) {
        char c[3] = {0};
        byte_char_utf8(b, c);
        add_token(m, c);
    }
}

static struct bpe_spec spec_of(const struct made *m)
{
    return (struct bpe_spec){.vocab = m->vocab,
                             .n_vocab = m->n_vocab,
                             .merges = m->merges,
                             .n_merges = m->n_merges,
                             .added = m->added,
                             .n_added = m->n_added,
                             .unk_id = -1,
                             .bos_id = -1};
}

static void build(const struct bpe_spec *spec, struct tokenizer *t)
{
    struct attn_error err = {0};
    if (bpe_tokenizer_new(spec, t, &err))
        fail_msg("refused: %s: %s", err.field, err.message);
}

/* The encoding of text as readable token texts joined with '|'. */
static void encode_texts(const struct tokenizer *t, const char *text,
                         size_t len, char *out, size_t out_len)
{
    struct tok_encoding enc;
    struct attn_error err = {0};
    if (tok_encode(t, text, len, NULL, 0, NULL, &enc, &err))
        fail_msg("'%s': %s", text, err.message);
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < enc.count; i++) {
        const int k = snprintf(out + o, out_len - o, "%s%s", i ? "|" : "",
                               tok_token_text(t, enc.ids[i]));
        assert_true(k >= 0 && (size_t)k < out_len - o);
        o += (size_t)k;
    }
    tok_encoding_free(&enc);
}

static void expect_texts(const struct tokenizer *t, const char *text,
                         const char *want)
{
    char got[1024];
    encode_texts(t, text, strlen(text), got, sizeof got);
    if (strcmp(got, want) != 0)
        fail_msg("'%s':\n  got  '%s'\n  want '%s'", text, got, want);
}

/* --------------------------------------------------- pre-tokenizers */

static void test_gpt2_pattern(void **state)
{
    (void)state;
    const enum bpe_pattern p = BPE_PATTERN_GPT2;
    expect_split(p, "Hello world", "Hello| world");
    expect_split(p, "I'm they're we'll", "I|'m| they|'re| we|'ll");
    // case-sensitive: 'T is not a contraction here
    expect_split(p, "DON'T", "DON|'|T");
    expect_split(p, "x 2024!? ok", "x| 2024|!?| ok");
    // \s+(?!\S): a run keeps its last space for the word after it
    expect_split(p, "a   b", "a|  | b");
    expect_split(p, "a\n\nb", "a|\n|\n|b");
    expect_split(p, "a \n b", "a| \n| b");
    expect_split(p, "end  ", "end|  ");
    expect_split(p, " 'x", " '|x");
    expect_split(p, "\tx", "\t|x");
    expect_split(p, "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd",
                 "caf\xc3\xa9| \xe4\xbd\xa0\xe5\xa5\xbd");
}

static void test_llama3_pattern(void **state)
{
    (void)state;
    const enum bpe_pattern p = BPE_PATTERN_LLAMA3;
    expect_split(p, "Hello world", "Hello| world");
    expect_split(p, "DON'T I'M", "DON|'T| I|'M");
    expect_split(p, "2024 1234567", "202|4| |123|456|7");
    // one character that is not a letter, number or newline leads a word
    expect_split(p, "(hello) \tword", "(hello|)| |\tword");
    expect_split(p, "a\n\n  b", "a|\n\n| | b");
    expect_split(p, "x  \n  y", "x|  \n| | y");
    expect_split(p, "!!!\n\nok", "!!!\n\n|ok");
    expect_split(p, " ...", " ...");
    expect_split(p, "a   ", "a|   ");
    expect_split(p, "'hello", "'hello");
    expect_split(BPE_PATTERN_QWEN2, "2024 x", "2|0|2|4| x");
}

/* o200k's words by case; each expectation is the library's split. */
static void test_o200k_pattern(void **state)
{
    (void)state;
    const enum bpe_pattern p = BPE_PATTERN_O200K;
    // an uppercase run may start a word, and a contraction ends one
    expect_split(p, "Hello World's CamelCase iPhone",
                 "Hello| World's| Camel|Case| i|Phone");
    expect_split(p, "HELLO'S don't DON'T", "HELLO'S| don't| DON'T");
    expect_split(p, "'s 'LL x'Re", "'s| '|LL| x'Re");
    // titlecase (Dž), modifier (ʰ) and other letters (中文)
    expect_split(p,
                 "\xc7\x85ungla \xca\xb0"
                 "a \xe4\xb8\xad\xe6\x96\x87"
                 "abc",
                 "\xc7\x85ungla| \xca\xb0"
                 "a| \xe4\xb8\xad\xe6\x96\x87"
                 "abc");
    // marks belong to words, also after a space
    expect_split(p, "cafe\xcc\x81 \xcc\x81x", "cafe\xcc\x81| \xcc\x81x");
    expect_split(p,
                 "\xc3\xa9\xcc\x81"
                 "A\xcc\x81"
                 "b",
                 "\xc3\xa9\xcc\x81|A\xcc\x81"
                 "b");
    // punctuation takes the newlines and slashes after it
    expect_split(p, "path/to\n/x !!/\n\n", "path|/to|\n|/x| !!/\n\n");
    expect_split(p, "12345 \xc2\xbd\xc2\xb2", "123|45| |\xc2\xbd\xc2\xb2");
    expect_split(p, "a  b\n\n c", "a| | b|\n\n| c");
    expect_split(p, "x \t\n y", "x| \t\n| y");
}

/* The pieces a split makes of text, joined with '|'. */
static void expect_pieces(const struct bpe_split *sp, const char *text,
                          const char *want)
{
    char got[256];
    size_t o = 0, at = 0, start, end;
    const size_t n = strlen(text);
    while (bpe_split_next(sp, text, n, &at, &start, &end)) {
        assert_true(end > start && start >= o / 2);
        const int k = snprintf(got + o, sizeof got - o, "%s%.*s", o ? "|" : "",
                               (int)(end - start), text + start);
        assert_true(k > 0 && (size_t)k < sizeof got - o);
        o += (size_t)k;
    }
    got[o] = 0;
    if (strcmp(got, want) != 0)
        fail_msg("behavior %d, invert %d, on '%s':\n  got  '%s'\n  want '%s'",
                 (int)sp->behavior, (int)sp->invert, text, got, want);
}

/* Split's behaviors on a literal, inverted and not: the library's pieces
 * of its documentation's example. */
static void test_split_behaviors(void **state)
{
    (void)state;
    const char *text = "the-final--countdown-";
    const struct {
        enum bpe_split_behavior behavior;
        const char *plain, *inverted;
    } cases[] = {
        {BPE_SPLIT_REMOVED, "the|final|countdown", "-|-|-|-"},
        {BPE_SPLIT_ISOLATED, "the|-|final|-|-|countdown|-",
         "the|-|final|-|-|countdown|-"},
        {BPE_SPLIT_MERGED_WITH_PREVIOUS, "the-|final-|-|countdown-",
         "the|-final|-|-countdown|-"},
        {BPE_SPLIT_MERGED_WITH_NEXT, "the|-final|-|-countdown|-",
         "the-|final-|-|countdown-"},
        {BPE_SPLIT_CONTIGUOUS, "the|-|final|--|countdown|-",
         "the|-|final|--|countdown|-"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct bpe_split sp = {.literal = {"-", 1},
                               .behavior = cases[i].behavior};
        expect_pieces(&sp, text, cases[i].plain);
        sp.invert = true;
        expect_pieces(&sp, text, cases[i].inverted);
    }
    // an empty literal matches nowhere; a regex's matches cover the text
    struct bpe_split none = {.literal = {"", 0}};
    expect_pieces(&none, "a b", "a b");
    struct bpe_split words = {.pattern = BPE_PATTERN_GPT2,
                              .behavior = BPE_SPLIT_CONTIGUOUS};
    expect_pieces(&words, "a b", "a b");
    words.behavior = BPE_SPLIT_REMOVED;
    expect_pieces(&words, "a b", "");
    words.invert = true;
    expect_pieces(&words, "a b", "a| b");
}

/* ----------------------------------------------------------- merging */

static void test_merge_order(void **state)
{
    (void)state;
    struct made *m = calloc(1, sizeof *m);
    byte_alphabet(m);
    add_merge(m, "b", "c");  // rank 0
    add_merge(m, "a", "b");  // rank 1
    add_merge(m, "a", "bc"); // rank 2
    add_merge(m, "a", "a");  // rank 3
    struct bpe_spec spec = spec_of(m);
    spec.byte_level = true;
    spec.pattern = BPE_PATTERN_GPT2;
    struct tokenizer t;
    build(&spec, &t);
    expect_texts(&t, "abc", "abc"); // b c first, then a bc
    expect_texts(&t, "ab", "ab");
    // equal ranks: the leftmost pair first
    expect_texts(&t, "aaa", "aa|a");
    expect_texts(&t, "aaaaa", "aa|aa|a");
    expect_texts(&t, "x abc", "x| |abc");
    tok_free(&t);
    // ignore_merges: a pre-token in the vocabulary is one token even when
    // the merges would not make it
    const uint32_t whole = add_token(m, "ca");
    spec = spec_of(m);
    spec.byte_level = true;
    spec.pattern = BPE_PATTERN_GPT2;
    build(&spec, &t);
    expect_texts(&t, "ca", "c|a");
    tok_free(&t);
    spec.ignore_merges = true;
    build(&spec, &t);
    expect_texts(&t, "ca", "ca");
    assert_int_equal(tok_token_id(&t, "ca", 2), whole);
    tok_free(&t);
    free(m);
}

/* A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 <0xNN>, then
 * letters and merges, as Llama 2's file lays them out. */
static void sentencepiece_vocab(struct made *m, bool fallback_bytes)
{
    add_token(m, "<unk>");
    add_token(m, "<s>");
    add_token(m, "</s>");
    for (unsigned b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        add_token(m, fallback_bytes ? name : name + 1);
    }
    const char *letters[] = {
        "\xe2\x96\x81", "h", "i", "e", "l", "o", "w", "r", "d"};
    for (size_t i = 0; i < sizeof letters / sizeof *letters; i++)
        add_token(m, letters[i]);
    add_merge(m, "\xe2\x96\x81", "h");
    add_merge(m, "\xe2\x96\x81h", "i");
    add_merge(m, "l", "l");
    add_merge(m, "e", "ll");
    add_merge(m, "\xe2\x96\x81h", "ell");
    add_merge(m, "\xe2\x96\x81hell", "o");
    m->added[0] = (struct bpe_added_token){{"<s>", 3}, 1,     true, false,
                                           false,      false, false};
    m->n_added = 1;
}

static void test_sentencepiece(void **state)
{
    (void)state;
    struct made *m = calloc(1, sizeof *m);
    sentencepiece_vocab(m, true);
    struct bpe_spec spec = spec_of(m);
    spec.normalizer = BPE_NORM_SENTENCEPIECE;
    spec.byte_fallback = true;
    spec.unk_id = 0;
    spec.bos_id = 1;
    struct tokenizer t;
    build(&spec, &t);
    expect_texts(&t, "", "<s>"); // Prepend leaves an empty text empty
    expect_texts(&t, "hello hi", "<s>| hello| hi");
    // runs of spaces are U+2581 tokens; a tab falls back to its byte,
    // which reads as the tab it is (a byte of a broken character would
    // read <0xNN>, below)
    expect_texts(&t, "hi  \thi", "<s>| hi| | |\t|h|i");
    // each piece between added tokens gets its own U+2581
    expect_texts(&t, "hi<s>hi", "<s>| hi|<s>| hi");
    // a character outside the vocabulary: its UTF-8 bytes
    expect_texts(&t, "\xc3\xa9", "<s>| |<0xC3>|<0xA9>");
    struct tok_encoding enc;
    // without the special tokens, no BOS: the <s> typed in stays
    assert_int_equal(tok_encode(&t, "hi<s>", 5, NULL, 0,
                                &(struct tok_options){.no_special = true}, &enc,
                                NULL),
                     0);
    assert_int_equal(enc.count, 2);
    assert_int_equal(enc.added[0] + enc.added[1], 0);
    assert_int_equal(enc.ids[1], 1);
    tok_encoding_free(&enc);
    assert_int_equal(tok_encode(&t, "hi<s>", 5, NULL, 0, NULL, &enc, NULL), 0);
    assert_int_equal(enc.count, 3);
    assert_int_equal(enc.added[0], 1); // the BOS the tokenizer added
    assert_int_equal(enc.added[2], 0); // the <s> typed in the text
    assert_int_equal(enc.ids[2], 1);
    tok_encoding_free(&enc);
    tok_free(&t);
    // without <0xNN> tokens: unknown characters are <unk>, fused or not
    struct made *u = calloc(1, sizeof *u);
    sentencepiece_vocab(u, false);
    spec = spec_of(u);
    spec.normalizer = BPE_NORM_SENTENCEPIECE;
    spec.byte_fallback = true;
    spec.unk_id = 0;
    build(&spec, &t);
    expect_texts(&t, "hi\xc3\xa9\xc3\xa9", " hi|<unk>|<unk>");
    tok_free(&t);
    spec.fuse_unk = true;
    build(&spec, &t);
    expect_texts(&t, "hi\xc3\xa9\xc3\xa9", " hi|<unk>");
    tok_free(&t);
    // no unk: the library drops the character, and what is left merges
    spec.unk_id = -1;
    build(&spec, &t);
    expect_texts(&t, "h\xc3\xa9i", " hi");
    tok_free(&t);
    free(u);
    free(m);
}

static void test_added_tokens(void **state)
{
    (void)state;
    struct made *m = calloc(1, sizeof *m);
    byte_alphabet(m);
    add_merge(m, "x", "y");
    const uint32_t mask = 300;
    m->added[0] = (struct bpe_added_token){{"<mask>", 6}, mask, true, false,
                                           true,          true, false};
    m->added[1] = (struct bpe_added_token){{"<m>", 3}, mask + 1, false, false,
                                           false,      false,    false};
    m->n_added = 2;
    struct bpe_spec spec = spec_of(m);
    // ids from the vocabulary's end to 299 are gaps: no text, special
    spec.byte_level = true;
    spec.pattern = BPE_PATTERN_GPT2;
    struct tokenizer t;
    build(&spec, &t);
    assert_int_equal(tok_vocab_size(&t), mask + 2);
    assert_string_equal(tok_token_text(&t, mask - 1), "");
    assert_true(tok_token_special(&t, mask - 1));
    tok_free(&t);
    m->added[0].id = (uint32_t)m->n_vocab;
    m->added[1].id = (uint32_t)m->n_vocab + 1;
    build(&spec, &t);
    // lstrip and rstrip take the whitespace around <mask>; the longest
    // match wins over <m>
    expect_texts(&t, "xy  <mask>  xy<m>", "xy|<mask>|xy|<m>");
    expect_texts(&t, "<mask", "<|m|a|s|k");
    assert_int_equal(tok_vocab_size(&t), m->n_vocab + 2);
    assert_int_equal(tok_token_id(&t, "<mask>", 6), m->n_vocab);
    tok_free(&t);
    free(m);
}

/* ------------------------------------------------------ token texts */

static void test_readable_texts(void **state)
{
    (void)state;
    struct made *m = calloc(1, sizeof *m);
    byte_alphabet(m);
    // "é" is C3 A9: the byte characters Ã and ©
    add_merge(m, "\xc3\x83", "\xc2\xa9");
    // half of 你 (E4 BD A0): ä and ½
    add_merge(m, "\xc3\xa4", "\xc2\xbd");
    add_merge(m, "\xc4\xa0", "\xc3\xa4\xc2\xbd"); // a space and that half
    struct bpe_spec spec = spec_of(m);
    spec.byte_level = true;
    spec.pattern = BPE_PATTERN_GPT2;
    struct tokenizer t;
    build(&spec, &t);
    assert_string_equal(tok_token_text(&t, ' '), " ");    // Ġ
    assert_string_equal(tok_token_text(&t, '\n'), "\n");  // Ċ
    assert_string_equal(tok_token_text(&t, 0), "<0x00>"); // Ā
    assert_string_equal(tok_token_text(&t, 0xE4), "<0xE4>");
    assert_string_equal(tok_token_text(&t, 256), "\xc3\xa9"); // é
    assert_string_equal(tok_token_text(&t, 257), "<0xE4><0xBD>");
    assert_string_equal(tok_token_text(&t, 258), " <0xE4><0xBD>");
    size_t len;
    const char *bytes = bpe_token_bytes(&t, 258, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(bytes, " \xe4\xbd", 3);
    expect_texts(&t, " \xe4\xbd\xa0", " <0xE4><0xBD>|<0xA0>");
    tok_free(&t);
    free(m);
}

/* -------------------------------------------------------------- NFC */

static void expect_nfc(const char *in, const char *want)
{
    char out[64], tmp[64];
    uint32_t scratch[64];
    struct bpe_norm_step nfc[BPE_MAX_NORM_STEPS];
    const size_t steps = bpe_norm_shorthand(BPE_NORM_NFC, nfc);
    const size_t n =
        bpe_norm_apply(nfc, steps, in, strlen(in), scratch, out, tmp);
    out[n] = 0;
    if (strcmp(out, want) != 0)
        fail_msg("NFC of '%s' is '%s', not '%s'", in, out, want);
}

static void test_nfc(void **state)
{
    (void)state;
    expect_nfc("cafe\xcc\x81", "caf\xc3\xa9"); // e + acute
    expect_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"); // jamo
    expect_nfc("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"); // excluded
    expect_nfc("\xe2\x84\xab", "\xc3\x85");                 // Angstrom
    // cedilla (202) sorts before acute (230), then both compose
    expect_nfc("e\xcc\x81\xcc\xa7", "\xc8\xa9\xcc\x81");
    expect_nfc("plain ascii", "plain ascii");
    uint32_t d[UNICODE_DECOMP_MAX];
    assert_int_equal(unicode_decompose(0x1E69, d),
                     3); // ṩ: s, dot below, dot above
    assert_int_equal(d[0], 's');
    assert_int_equal(unicode_compose('e', 0x301), 0xE9);
    assert_int_equal(unicode_compose(0x1100, 0x1161), 0xAC00);
    assert_int_equal(unicode_compose('a', 'b'), 0);
    assert_int_equal(unicode_bpe_class(0x3000), UNICODE_BPE_SPACE);
    assert_int_equal(unicode_bpe_class(0x0660), UNICODE_BPE_NUMBER);
    assert_int_equal(unicode_bpe_class(0x00AA), UNICODE_BPE_LETTER);
    assert_int_equal(unicode_bpe_class(0x200B), UNICODE_BPE_OTHER);
}

/* ------------------------------------------------ normalizer steps */

static void expect_norm(const struct bpe_norm_step *steps, size_t n,
                        const char *in, const char *want)
{
    char out[256], tmp[256];
    uint32_t scratch[256];
    const size_t len = strlen(in);
    assert_true(bpe_norm_bound(steps, n, len) < sizeof out);
    assert_true(bpe_norm_scratch(steps, n, len) <= 256);
    const size_t k = bpe_norm_apply(steps, n, in, len, scratch, out, tmp);
    assert_true(k <= bpe_norm_bound(steps, n, len));
    out[k] = 0;
    if (strcmp(out, want) != 0)
        fail_msg("normalizing '%s' gives '%s', not '%s'", in, out, want);
}

static void test_norm_steps(void **state)
{
    (void)state;
    const struct bpe_norm_step meta = {.kind = BPE_NORM_STEP_REPLACE,
                                       .pattern = {" ", 1},
                                       .content = {"\xe2\x96\x81", 3}};
    // Gemma's: spaces become U+2581, nothing is prepended
    expect_norm(&meta, 1, "Hello  world ",
                "Hello\xe2\x96\x81\xe2\x96\x81world"
                "\xe2\x96\x81");
    expect_norm(&meta, 1, "", "");
    // leftmost first, not overlapping; a longer pattern, and deleting
    const struct bpe_norm_step aa = {.kind = BPE_NORM_STEP_REPLACE,
                                     .pattern = {"aa", 2},
                                     .content = {"b", 1}};
    expect_norm(&aa, 1, "aaaaa a", "bba a");
    const struct bpe_norm_step drop = {.kind = BPE_NORM_STEP_REPLACE,
                                       .pattern = {"\xe2\x80\x8b", 3},
                                       .content = {"", 0}};
    expect_norm(&drop, 1,
                "a\xe2\x80\x8b"
                "b",
                "ab");
    // a sequence: NFC, then prepend, then replace, in that order
    const struct bpe_norm_step seq[] = {
        {.kind = BPE_NORM_STEP_NFC},
        {.kind = BPE_NORM_STEP_PREPEND, .content = {"\xe2\x96\x81", 3}},
        meta};
    expect_norm(seq, 3, "cafe\xcc\x81 x",
                "\xe2\x96\x81"
                "caf\xc3\xa9\xe2\x96\x81x");
    expect_norm(seq, 3, "", "");
    // the shorthand is the same steps
    struct bpe_norm_step sp[BPE_MAX_NORM_STEPS];
    const size_t n = bpe_norm_shorthand(BPE_NORM_SENTENCEPIECE, sp);
    expect_norm(sp, n, "a b",
                "\xe2\x96\x81"
                "a\xe2\x96\x81"
                "b");
}

/* Gemma's pipeline on a small vocabulary: spaces replaced by U+2581 and
 * nothing prepended, split on " " (which no longer occurs), byte
 * fallback; and the ids that no token has, as cl100k leaves. */
static void test_steps_and_gaps(void **state)
{
    (void)state;
    struct made *m = calloc(1, sizeof *m);
    sentencepiece_vocab(m, true);
    struct bpe_spec spec = spec_of(m);
    const struct bpe_norm_step steps[] = {{.kind = BPE_NORM_STEP_REPLACE,
                                           .pattern = {" ", 1},
                                           .content = {"\xe2\x96\x81", 3}}};
    const struct bpe_split split = {.literal = {" ", 1},
                                    .behavior = BPE_SPLIT_MERGED_WITH_PREVIOUS};
    spec.norm_steps = steps;
    spec.n_norm_steps = 1;
    spec.splits = &split;
    spec.n_splits = 1;
    spec.byte_fallback = true;
    spec.unk_id = 0;
    struct tokenizer t;
    build(&spec, &t);
    // no U+2581 before the first word, one before the second; one
    // pre-token, since the split's " " is gone once normalized
    expect_texts(&t, "hello hello", "h|ell|o| hello");
    expect_texts(&t, "hi\x02", "h|i|\x02"); // <0x02> reads as its byte
    tok_free(&t);
    // a gap in the vocabulary and one before an added token
    m->vocab[5] = (struct bpe_string){NULL, 0};
    const size_t top = m->n_vocab + 3;
    struct bpe_added_token end = {
        {"<end>", 5}, (uint32_t)top - 1, true, false, false, false, false};
    spec.added = &end;
    spec.n_added = 1;
    build(&spec, &t);
    assert_int_equal(tok_vocab_size(&t), top);
    for (size_t id = 0; id < top; id++) {
        const bool gap = id == 5 || (id >= m->n_vocab && id + 1 < top);
        if (gap) {
            assert_string_equal(tok_token_text(&t, (uint32_t)id), "");
            assert_true(tok_token_special(&t, (uint32_t)id));
            assert_int_equal(tok_token_bytes(&t, (uint32_t)id, NULL, 0), 0);
        }
    }
    assert_int_equal(tok_token_id(&t, "", 0), -1);
    assert_true(tok_token_special(&t, (uint32_t)top - 1));
    expect_texts(&t, "hello<end>", "h|ell|o|<end>");
    expect_texts(&t, "hi\x02", "h|i|<unk>"); // <0x02> is now a gap
    tok_free(&t);
    // both a shorthand and steps, or a normalizer that grows too much
    struct attn_error err;
    spec.normalizer = BPE_NORM_NFC;
    assert_int_equal(bpe_tokenizer_new(&spec, &t, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "norm_steps");
    spec.normalizer = BPE_NORM_NONE;
    static const char wide[100] = {0};
    const struct bpe_norm_step grow = {.kind = BPE_NORM_STEP_REPLACE,
                                       .pattern = {"a", 1},
                                       .content = {wide, sizeof wide}};
    spec.norm_steps = &grow;
    assert_int_equal(bpe_tokenizer_new(&spec, &t, &err), ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "norm_steps");
    spec.norm_steps = steps;
    spec.pattern = BPE_PATTERN_GPT2;
    assert_int_equal(bpe_tokenizer_new(&spec, &t, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "splits");
    free(m);
}

/* ------------------------------------------------------------ refusals */

static void test_refusals(void **state)
{
    (void)state;
    struct made *m = calloc(1, sizeof *m);
    byte_alphabet(m);
    add_merge(m, "a", "b");
    struct bpe_spec spec = spec_of(m);
    spec.byte_level = true;
    struct tokenizer t;
    struct attn_error err;
    // a merge whose token is not in the vocabulary
    struct bpe_merge bad[1] = {{{"a", 1}, {"zz", 2}}};
    spec.merges = bad;
    spec.n_merges = 1;
    assert_int_equal(bpe_tokenizer_new(&spec, &t, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "merges");
    assert_non_null(strstr(err.message, "'zz'"));
    spec = spec_of(m);
    spec.byte_level = true;
    spec.n_vocab = BPE_MAX_VOCAB + 1;
    assert_int_equal(bpe_tokenizer_new(&spec, &t, &err), ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "vocab");
    spec.n_vocab = m->n_vocab;
    spec.bos_id = (int64_t)m->n_vocab;
    assert_int_equal(bpe_tokenizer_new(&spec, &t, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "bos_id");
    spec.bos_id = -1;
    // an added token whose id the vocabulary gives to another token
    struct bpe_added_token a = {{"<x>", 3}, 5,     true, false,
                                false,      false, false};
    spec.added = &a;
    spec.n_added = 1;
    assert_int_equal(bpe_tokenizer_new(&spec, &t, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "added_tokens");
    spec.n_added = 0;
    build(&spec, &t);
    struct tok_encoding enc;
    assert_int_equal(tok_encode(&t, "ok\xc0\x80", 4, NULL, 0, NULL, &enc, &err),
                     ATTN_E_INPUT);
    assert_string_equal(err.field, "sentence");
    assert_int_equal(err.index[0], 2);
    assert_int_equal(tok_encode(&t, "a", 1, "b", 1, NULL, &enc, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "sentence_b");
    assert_int_equal(tok_encode(&t, "x y z", 5, NULL, 0,
                                &(struct tok_options){.max_tokens = 2}, &enc,
                                &err),
                     ATTN_E_TOO_BIG);
    assert_null(enc.ids);
    tok_free(&t);
    free(m);
}

/* ------------------------------------------------- a long pre-token */

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1 MiB of one letter is one pre-token (byte-level) or one piece
 * (SentencePiece); with merges a+a, aa+aa, ... it becomes 2^20 / 2^k
 * tokens of the longest run. A quadratic merge would take minutes. */
static void test_long_pretoken(void **state)
{
    (void)state;
    const size_t n = (size_t)1 << 20;
    char *text = malloc(n);
    assert_non_null(text);
    memset(text, 'a', n);
    for (int sp = 0; sp < 2; sp++) {
        struct made *m = calloc(1, sizeof *m);
        char run[64] = "a", twice[128];
        if (sp) {
            add_token(m, "\xe2\x96\x81");
            add_token(m, "a");
        } else {
            byte_alphabet(m);
        }
        for (int k = 0; k < 5; k++) { // up to 32 letters a token
            add_merge(m, run, run);
            const int w = snprintf(twice, sizeof twice, "%s%s", run, run);
            assert_true(w > 0 && w < (int)sizeof run);
            memcpy(run, twice, (size_t)w + 1);
        }
        struct bpe_spec spec = spec_of(m);
        spec.byte_level = !sp;
        spec.pattern = sp ? BPE_PATTERN_NONE : BPE_PATTERN_GPT2;
        spec.normalizer = sp ? BPE_NORM_SENTENCEPIECE : BPE_NORM_NONE;
        struct tokenizer t;
        build(&spec, &t);
        struct tok_encoding enc;
        const double t0 = seconds();
        assert_int_equal(tok_encode(&t, text, n, NULL, 0, NULL, &enc, NULL), 0);
        const double took = seconds() - t0;
        print_message("1 MiB of 'a' as one %s: %zu tokens in %.3f s\n",
                      sp ? "SentencePiece piece" : "byte-level pre-token",
                      enc.count, took);
        assert_int_equal(enc.count, n / 32 + (size_t)sp);
        assert_true(took < 5.0);
        tok_encoding_free(&enc);
        tok_free(&t);
        free(m);
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_pattern),
        cmocka_unit_test(test_llama3_pattern),
        cmocka_unit_test(test_o200k_pattern),
        cmocka_unit_test(test_split_behaviors),
        cmocka_unit_test(test_norm_steps),
        cmocka_unit_test(test_steps_and_gaps),
        cmocka_unit_test(test_merge_order),
        cmocka_unit_test(test_sentencepiece),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_readable_texts),
        cmocka_unit_test(test_nfc),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_long_pretoken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
