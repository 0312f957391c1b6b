/*
 * bpe.h - byte-pair encoding as the tokenizers library applies it to the
 * decoder models' tokenizer.json files: GPT-2, Llama 3, Qwen2/Qwen3,
 * cl100k (which OLMo-2's derives from) and o200k (byte-level), and Llama 2,
 * Mistral, Phi-3 and Gemma (SentencePiece-style, with byte fallback). The
 * second kind behind the tokenizer interface (tokenizer.h).
 *
 * The core knows no file format: a loader (server/model/tokenizer_json.c)
 * reads the files into a struct bpe_spec of plain strings and options,
 * and bpe_tokenizer_new() builds the tokenizer from it. What each option
 * means, and which of the library's settings map onto it, is in
 * docs/tokenizers.md. Errors follow attention.h.
 *
 * Encoding a text runs as the library does: the added tokens are found in
 * the raw text first (leftmost, longest); every piece between them is
 * normalized, split into pre-tokens by the splits and merged by rank
 * within each pre-token; the post-processor's BOS goes first.
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

#define BPE_MAX_NORM_STEPS 8   /* steps of a normalizer */
#define BPE_MAX_NORM_GROWTH 64 /* bytes a normalizer makes of one byte */
#define BPE_MAX_SPLITS 8       /* pre-tokenizers applied one after another */

/* How the text between added tokens is normalized: a shorthand for the
 * common normalizers, or NONE with the steps of struct bpe_spec. */
enum bpe_normalizer {
    BPE_NORM_NONE = 0,
    BPE_NORM_NFC,           /* Unicode NFC (Qwen2) */
    BPE_NORM_SENTENCEPIECE, /* prepend U+2581 to a nonempty piece, then
                               replace each " " with U+2581 (Llama 2) */
};

/* One step of a normalizer, as tokenizer.json's normalizers of those
 * names do it. */
enum bpe_norm_kind {
    BPE_NORM_STEP_NFC = 0, /* Unicode NFC */
    BPE_NORM_STEP_PREPEND, /* content before a nonempty piece */
    BPE_NORM_STEP_REPLACE, /* every pattern, leftmost first and not
                              overlapping, becomes content */
};

struct bpe_norm_step {
    enum bpe_norm_kind kind;
    struct bpe_string pattern; /* REPLACE: the text replaced, nonempty */
    struct bpe_string content; /* PREPEND, REPLACE: what is put in */
};

/* The known regexes of the library's Split / ByteLevel pre-tokenizers,
 * each a hand-written scanner (bpe_text.c). Every character matches one
 * of their alternatives, so the matches cover the text. */
enum bpe_pattern {
    BPE_PATTERN_NONE = 0,
    BPE_PATTERN_GPT2,   /* ByteLevel's own, use_regex true */
    BPE_PATTERN_LLAMA3, /* Llama 3's and cl100k's: digits in threes */
    BPE_PATTERN_QWEN2,  /* Qwen2's: one digit per token */
    BPE_PATTERN_O200K,  /* o200k's (GPT-4o): words by case, marks kept */
    /* \p{N}: each number character alone, what lies between them the
     * gaps; a split's pattern only, whose matches do not cover the text
     * (the library's Digits with individual_digits, llama.cpp's first
     * regex for SmolLM) */
    BPE_PATTERN_DIGIT,
};

/* What a split does with the matches of its pattern and the text between
 * them (the gaps), as the library's SplitDelimiterBehavior. */
enum bpe_split_behavior {
    BPE_SPLIT_ISOLATED = 0,         /* each match and each gap a piece */
    BPE_SPLIT_REMOVED,              /* the gaps are the pieces */
    BPE_SPLIT_MERGED_WITH_PREVIOUS, /* a match ends the gap before it */
    BPE_SPLIT_MERGED_WITH_NEXT,     /* a match starts the gap after it */
    BPE_SPLIT_CONTIGUOUS,           /* runs of matches, and gaps, merged */
};

/* One Split pre-tokenizer: a known regex, or a literal text. */
struct bpe_split {
    enum bpe_pattern pattern; /* NONE: the literal */
    struct bpe_string literal;
    enum bpe_split_behavior behavior;
    bool invert; /* matches and gaps swap roles first */
};

struct bpe_spec {
    /* The model's vocabulary: vocab[i] is the token of id i, as the file
     * spells it (byte-level tokens in bytes_to_unicode's characters). */
    const struct bpe_string *vocab;
    size_t n_vocab;
    const struct bpe_merge *merges; /* [n_merges] by rank, first is best */
    size_t n_merges;
    /* Ids at or past n_vocab are added tokens; an id below the largest
     * that none has is a gap (cl100k leaves 15), which stands for no
     * text: it reads "", is special, and no text encodes to it. */
    const struct bpe_added_token *added;
    size_t n_added;
    bool byte_level; /* GPT-2's bytes_to_unicode alphabet */
    /* The normalizer: the shorthand, or its steps in order (then the
     * shorthand is NONE). */
    enum bpe_normalizer normalizer;
    const struct bpe_norm_step *norm_steps;
    size_t n_norm_steps;
    /* The pre-tokenizer: pattern, one Isolated split by a known regex,
     * or the splits, each applied to the pieces of the one before (then
     * pattern is NONE). None: the normalized piece is one pre-token. */
    enum bpe_pattern pattern;
    const struct bpe_split *splits;
    size_t n_splits;
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
 * "merges", "added_tokens", "unk_id", "bos_id", "norm_steps", "splits",
 * ...) and the value at fault, ATTN_E_TOO_BIG past a cap, ATTN_E_NOMEM.
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
