/*
 * bpe.h - byte-pair encoding as the tokenizers library applies it to the
 * decoder models' tokenizer.json files: GPT-2, Llama 3 and Qwen2/Qwen3
 * (byte-level) and Llama 2 and Mistral (SentencePiece-style, with byte
 * fallback). The second kind behind the tokenizer interface (tokenizer.h).
 *
 * The core knows no file format: a loader (server/model/tokenizer_json.c)
 * reads the files into a struct bpe_spec of plain strings and options,
 * and bpe_tokenizer_new() builds the tokenizer from it. What each option
 * means, and which of the library's settings map onto it, is in
 * docs/tokenizers.md. Errors follow attention.h.
 *
 * Encoding a text runs as the library does: the added tokens are found in
 * the raw text first (leftmost, longest); every piece between them is
 * normalized, split into pre-tokens by the model's pattern and merged by
 * rank within each pre-token; the post-processor's BOS goes first.
 */
#ifndef ATTN_BPE_H
#define ATTN_BPE_H

#include "attention.h"
#include "tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Caps on what a spec may hold, checked before anything is allocated.
 * The largest real tokenizers are far inside them (Qwen2: 151,665 ids,
 * 151,387 merges, tokens of at most 256 bytes; Llama 3: 256 added). */
#define BPE_MAX_VOCAB ((size_t)1 << 20)    /* ids, added ones included */
#define BPE_MAX_MERGES ((size_t)1 << 21)   /* merge rules */
#define BPE_MAX_ADDED ((size_t)1 << 16)    /* added tokens */
#define BPE_MAX_TOKEN_BYTES ((size_t)1024) /* one token, as the file has it */
#define BPE_MAX_INPUT_BYTES ((size_t)64 << 20) /* one text to encode */

/* A string by length; it need not be NUL-terminated. */
struct bpe_string {
    const char *text;
    size_t len;
};

/* One merge rule: the pair a b, as tokens of the vocabulary. */
struct bpe_merge {
    struct bpe_string a, b;
};

/* One of tokenizer.json's added_tokens, its flags as the file has them. */
struct bpe_added_token {
    struct bpe_string content; /* nonempty */
    uint32_t id;
    bool special;     /* kept for readers; matching does not depend on it */
    bool single_word; /* must be false: refused (docs/tokenizers.md) */
    bool lstrip;      /* the whitespace before it belongs to it */
    bool rstrip;      /* the whitespace after it belongs to it */
    bool normalized;  /* matched in the normalized text, not the raw one */
};

/* How the text between added tokens is normalized. */
enum bpe_normalizer {
    BPE_NORM_NONE = 0,
    BPE_NORM_NFC,           /* Unicode NFC (Qwen2) */
    BPE_NORM_SENTENCEPIECE, /* prepend U+2581 to a nonempty piece, then
                               replace each " " with U+2581 (Llama 2) */
};

/* How a normalized piece is split into pre-tokens: the known regexes of
 * the library's Split / ByteLevel pre-tokenizers, each a hand-written
 * scanner (bpe_pretok.c). NONE: the piece is one pre-token. */
enum bpe_pattern {
    BPE_PATTERN_NONE = 0,
    BPE_PATTERN_GPT2,   /* ByteLevel's own, use_regex true */
    BPE_PATTERN_LLAMA3, /* Llama 3's Split: digits in threes */
    BPE_PATTERN_QWEN2,  /* Qwen2's Split: one digit per token */
};

struct bpe_spec {
    /* The model's vocabulary: vocab[i] is the token of id i, as the file
     * spells it (byte-level tokens in bytes_to_unicode's characters). */
    const struct bpe_string *vocab;
    size_t n_vocab;
    const struct bpe_merge *merges; /* [n_merges] by rank, first is best */
    size_t n_merges;
    /* Ids at or past n_vocab must each be an added token, with no gaps. */
    const struct bpe_added_token *added;
    size_t n_added;
    bool byte_level; /* GPT-2's bytes_to_unicode alphabet */
    enum bpe_normalizer normalizer;
    enum bpe_pattern pattern;
    bool byte_fallback; /* an unknown character becomes its <0xNN> tokens */
    bool ignore_merges; /* a pre-token in the vocabulary is one token */
    bool fuse_unk;      /* consecutive unknown characters give one unk */
    int64_t unk_id;     /* the unk token's id, or -1: none (unknown
                           characters are then dropped, as the library does) */
    int64_t bos_id;     /* the id the post-processor puts first, or -1 */
};

/*
 * The tokenizer interface over a BPE tokenizer built from spec, whose
 * strings are copied. Fails with ATTN_E_INVALID naming the field ("vocab",
 * "merges", "added_tokens", "unk_id", "bos_id", ...) and the value at
 * fault, ATTN_E_TOO_BIG past a cap, ATTN_E_NOMEM.
 *
 * Encoding (tok_encode): the ids of a, with the BOS first (marked added)
 * when spec->bos_id is set; every type id is 0. A second text is refused
 * (ATTN_E_INVALID naming "sentence_b"): decoders take one. Invalid UTF-8
 * is ATTN_E_INPUT naming "sentence"; more than max_tokens tokens, the BOS
 * included, or more than BPE_MAX_INPUT_BYTES, is ATTN_E_TOO_BIG.
 *
 * Token texts (tok_token_text) are readable: byte-level tokens as the
 * bytes they stand for, U+2581 as a space, and each byte that is not part
 * of a whole UTF-8 character (or is NUL) as "<0xNN>".
 *
 * On success the caller owns *out; release it with tok_free().
 */
attn_status bpe_tokenizer_new(const struct bpe_spec *spec,
                              struct tokenizer *out, struct attn_error *err);

/* The bytes token id stands for in the normalized text (byte-level tokens
 * decoded, added tokens their content), into *len; NULL when t is not a
 * BPE tokenizer or id is out of range. Lives as long as t. */
const char *bpe_token_bytes(const struct tokenizer *t, uint32_t id,
                            size_t *len);

#endif
