/*
 * fuzz_bpe.c - libFuzzer target for the BPE tokenizer (src/bpe.h): the
 * input's first byte picks one of seven small tokenizers (byte-level with
 * GPT-2's, Llama 3's or Qwen2's pattern, with or without NFC, or with
 * each number character split off first and then GPT-2's pattern, as
 * SmolLM's; or SentencePiece-style with byte fallback and a BOS) and a
 * cap on the tokens; the rest is the sentence.
 *
 * Checks beyond the sanitizers: a refusal is ATTN_E_INPUT naming
 * "sentence" exactly when the sentence is not UTF-8, or ATTN_E_TOO_BIG
 * only under a cap; an encoding stays within the cap, has every id below
 * the vocabulary's size, marks only the BOS added, and has type ids 0;
 * every token has a readable text; and for the byte-level tokenizers
 * without a normalizer, the tokens' bytes put together are the sentence
 * (unless an added token took the whitespace around it).
 */
#include "bpe.h"
#include "bpe_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { KINDS = 7 };

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_bpe: %s\n", what);
    abort();
}

/* GPT-2's byte character of b, as UTF-8, into out; its length. */
static size_t byte_char(unsigned b, char *out)
{
    unsigned cp = b, n = 0;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
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

static char store[400][16];
static struct bpe_string vocab[400];
static struct bpe_merge merges[32];
static struct tokenizer kinds[KINDS];
static bool built;

static uint32_t token(size_t *n, const char *s)
{
    snprintf(store[*n], sizeof store[*n], "%s", s);
    vocab[*n] = (struct bpe_string){store[*n], strlen(store[*n])};
    return (uint32_t)(*n)++;
}

/* Merges of pairs of the vocabulary's tokens, each pair's join added. */
static size_t merge_list(size_t *n, const char *const (*pairs)[2], size_t count)
{
    for (size_t i = 0; i < count; i++) {
        char ab[16];
        snprintf(ab, sizeof ab, "%s%s", pairs[i][0], pairs[i][1]);
        token(n, ab);
        merges[i].a = (struct bpe_string){pairs[i][0], strlen(pairs[i][0])};
        merges[i].b = (struct bpe_string){pairs[i][1], strlen(pairs[i][1])};
    }
    return count;
}

static void build_all(void)
{
    static const char *const byte_pairs[][2] = {{"\xc4\xa0", "t"},
                                                {"h", "e"},
                                                {"\xc4\xa0t", "he"},
                                                {"i", "n"},
                                                {"\xc4\xa0", "\xc4\xa0"},
                                                {"e", "r"},
                                                {"\xc3\x83", "\xc2\xa9"},
                                                {"'", "s"},
                                                {"1", "2"},
                                                {"12", "3"},
                                                {"\xc4\x8a", "\xc4\x8a"}};
    static const char *const sp_pairs[][2] = {{"\xe2\x96\x81", "t"},
                                              {"h", "e"},
                                              {"\xe2\x96\x81t", "he"},
                                              {"\xe2\x96\x81", "\xe2\x96\x81"},
                                              {"e", "r"}};
    static const struct bpe_added_token byte_added[] = {
        {{"<|endoftext|>", 13}, 267, true, false, false, false, false},
        {{"<m>", 3}, 268, false, false, true, true, false},
        {{"caf\xc3\xa9", 5}, 269, false, false, false, false, true}};
    static const struct bpe_added_token sp_added[] = {
        {{"<s>", 3}, 1, true, false, false, false, false}};
    size_t n = 0;
    for (unsigned b = 0; b < 256; b++) {
        char c[3] = {0};
        byte_char(b, c);
        token(&n, c);
    }
    const size_t n_merges = merge_list(&n, byte_pairs, 11);
    const enum bpe_pattern patterns[] = {BPE_PATTERN_GPT2, BPE_PATTERN_LLAMA3,
                                         BPE_PATTERN_QWEN2};
    struct attn_error err;
    for (size_t k = 0; k < 5; k++) {
        const struct bpe_spec spec = {.vocab = vocab,
                                      .n_vocab = n,
                                      .merges = merges,
                                      .n_merges = n_merges,
                                      .added = byte_added,
                                      .n_added = 3,
                                      .byte_level = true,
                                      .normalizer =
                                          k >= 3 ? BPE_NORM_NFC : BPE_NORM_NONE,
                                      .pattern = patterns[k % 3],
                                      .ignore_merges = k == 1,
                                      .unk_id = -1,
                                      .bos_id = k == 2 ? 267 : -1};
        if (bpe_tokenizer_new(&spec, &kinds[k], &err))
            fail(err.message);
    }
    // as SmolLM's: each number character alone, then GPT-2's pattern
    const struct bpe_split digits_then[] = {
        {.pattern = BPE_PATTERN_DIGIT, .behavior = BPE_SPLIT_ISOLATED},
        {.pattern = BPE_PATTERN_GPT2, .behavior = BPE_SPLIT_ISOLATED},
    };
    const struct bpe_spec digits = {.vocab = vocab,
                                    .n_vocab = n,
                                    .merges = merges,
                                    .n_merges = n_merges,
                                    .added = byte_added,
                                    .n_added = 3,
                                    .byte_level = true,
                                    .splits = digits_then,
                                    .n_splits = 2,
                                    .unk_id = -1,
                                    .bos_id = -1};
    if (bpe_tokenizer_new(&digits, &kinds[6], &err))
        fail(err.message);
    n = 0;
    token(&n, "<unk>");
    token(&n, "<s>");
    token(&n, "</s>");
    for (unsigned b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        token(&n, name);
    }
    const char *letters[] = {"\xe2\x96\x81", "t", "h", "e", "r", "a"};
    for (size_t i = 0; i < 6; i++)
        token(&n, letters[i]);
    const size_t sp_merges = merge_list(&n, sp_pairs, 5);
    const struct bpe_spec sp = {.vocab = vocab,
                                .n_vocab = n,
                                .merges = merges,
                                .n_merges = sp_merges,
                                .added = sp_added,
                                .n_added = 1,
                                .normalizer = BPE_NORM_SENTENCEPIECE,
                                .byte_fallback = true,
                                .fuse_unk = true,
                                .unk_id = 0,
                                .bos_id = 1};
    if (bpe_tokenizer_new(&sp, &kinds[5], &err))
        fail(err.message);
    built = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (!built)
        build_all();
    const unsigned kind = data[0] % KINDS;
    const size_t cap = (data[0] / KINDS) % 8 == 0 ? 0 : (data[0] / KINDS) * 3;
    const struct tokenizer *t = &kinds[kind];
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    const bool utf8 = bpe_utf8_valid(text, len) == len;
    if (tok_encode_bytes(t, len, 0) == SIZE_MAX)
        fail("no bound for a short sentence");
    struct tok_encoding enc;
    struct attn_error err = {0};
    const attn_status st =
        tok_encode(t, text, len, NULL, 0,
                   &(struct tok_options){.max_tokens = cap}, &enc, &err);
    if (st != ATTN_OK) {
        if (enc.ids || strcmp(err.field, "sentence") != 0)
            fail("a refusal that leaves ids or names another field");
        if (st == ATTN_E_INPUT ? utf8 : (st != ATTN_E_TOO_BIG || !cap || !utf8))
            fail("an unexpected refusal");
        return 0;
    }
    if (!utf8)
        fail("invalid UTF-8 accepted");
    if (cap && enc.count > cap)
        fail("more tokens than the cap");
    const bool bos = kind == 2 || kind == 5;
    const size_t nv = tok_vocab_size(t);
    char *joined = malloc(len * 2 + 16);
    size_t at = 0;
    for (size_t i = 0; i < enc.count; i++) {
        if (enc.ids[i] >= nv)
            fail("an id outside the vocabulary");
        if (enc.type_ids[i] != 0)
            fail("a type id that is not 0");
        if (enc.added[i] != (bos && i == 0))
            fail("a token marked added that the tokenizer did not add");
        if (!tok_token_text(t, enc.ids[i]))
            fail("a token without a text");
        size_t n;
        const char *b = bpe_token_bytes(t, enc.ids[i], &n);
        if (!b)
            fail("a token without bytes");
        if (!(bos && i == 0) && at + n <= len * 2 + 16) {
            memcpy(joined + at, b, n);
            at += n;
        }
    }
    // byte-level, no normalizer: the tokens spell the sentence again (but
    // for the whitespace <m>'s lstrip and rstrip take)
    bool strips = false;
    for (size_t i = 0; i + 3 <= len && !strips; i++)
        strips = memcmp(text + i, "<m>", 3) == 0;
    if ((kind < 3 || kind == 6) && !strips &&
        (at != len || memcmp(joined, text, len) != 0))
        fail("the tokens' bytes are not the sentence");
    free(joined);
    tok_encoding_free(&enc);
    return 0;
}
