/*
 * tokenizer.h - the one interface through which text becomes a model's
 * token ids. Text goes in; out come the ids, each token's text, and which
 * tokens the tokenizer added itself (BOS, [CLS], [SEP], ...) rather than
 * read from the text. Nothing downstream infers the last from anything
 * else. Each kind of tokenizer (WordPiece: wordpiece.h) fills in a
 * struct tokenizer_ops, as curl keeps its TLS backends behind one table.
 */
#ifndef ATTN_TOKENIZER_H
#define ATTN_TOKENIZER_H

#include "attention.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tokens of one input: a text, or a pair of texts. */
struct tok_encoding {
    size_t count;
    uint32_t *ids;     /* [count] each below the tokenizer's vocab size */
    uint8_t *type_ids; /* [count] 0 for the first text (and what the
                          tokenizer put before and after it), 1 for the
                          second's */
    uint8_t *added;    /* [count] 1 where the tokenizer added the token,
                          0 where it came from the text */
};

/* How to encode; NULL, or a zeroed struct, means no cap and the tokens
 * the tokenizer adds. */
struct tok_options {
    size_t max_tokens; /* at most this many tokens, added ones included;
                          0: no cap */
    bool no_special;   /* leave out the tokens the tokenizer would add
                          ([CLS], [SEP], a BOS), as transformers'
                          add_special_tokens=False */
};

/* Release an encoding's arrays (one block) and zero it. */
void tok_encoding_free(struct tok_encoding *enc);

/* What a kind of tokenizer does; impl is its own state. */
struct tokenizer_ops {
    const char *name; /* e.g. "wordpiece" */
    /* Encode a, or the pair a, b when b is not NULL, as opts says (never
     * NULL here). Errors name "sentence" or "sentence_b". On success the
     * caller owns *out. */
    attn_status (*encode)(const void *impl, const char *a, size_t a_len,
                          const char *b, size_t b_len,
                          const struct tok_options *opts,
                          struct tok_encoding *out, struct attn_error *err);
    /* At most the bytes encode() allocates for texts of these lengths. */
    size_t (*encode_bytes)(const void *impl, size_t a_len, size_t b_len);
    size_t (*vocab_size)(const void *impl);
    /* The text of id (< vocab_size()), NUL-terminated, as a person reads
     * it; it lives as long as the tokenizer. */
    const char *(*token_text)(const void *impl, uint32_t id);
    /* The id of the token whose text is text[0..len), or -1. */
    int64_t (*token_id)(const void *impl, const char *text, size_t len);
    /* The bytes id (< vocab_size()) adds to a decoded text: a byte-level
     * token's bytes, a SentencePiece token's with U+2581 as a space and a
     * byte-fallback token's byte, an added token's content. At most cap
     * into out; returns how many there are. */
    size_t (*token_bytes)(const void *impl, uint32_t id, char *out, size_t cap);
    /* Whether id (< vocab_size()) stands for no text: an added token
     * (a BOS, an end-of-text or control token) or a vocabulary's own
     * marker such as BERT's [CLS], [PAD] and [unused0]. */
    bool (*token_special)(const void *impl, uint32_t id);
    void (*free)(void *impl);
};

struct tokenizer {
    const struct tokenizer_ops *ops;
    void *impl;
};

/* The operations above, through t. */
attn_status tok_encode(const struct tokenizer *t, const char *a, size_t a_len,
                       const char *b, size_t b_len,
                       const struct tok_options *opts, struct tok_encoding *out,
                       struct attn_error *err);
size_t tok_encode_bytes(const struct tokenizer *t, size_t a_len, size_t b_len);
size_t tok_vocab_size(const struct tokenizer *t);
const char *tok_token_text(const struct tokenizer *t, uint32_t id);
size_t tok_token_bytes(const struct tokenizer *t, uint32_t id, char *out,
                       size_t cap);
int64_t tok_token_id(const struct tokenizer *t, const char *text, size_t len);
bool tok_token_special(const struct tokenizer *t, uint32_t id);
const char *tok_name(const struct tokenizer *t);

/*
 * An input that needs no text (tokens_repeated.c): length ordinary tokens
 * (none special, each below vocab, the model's rows) drawn uniformly by
 * the keyed stream of seed, then the same tokens again, as
 * TransformerLens' induction demos build them; inside the tokens the
 * tokenizer adds to a text (a BOS; [CLS] ... [SEP]) unless
 * opts->no_special. Errors name "probe_length": more than
 * opts->max_tokens, or a vocabulary with too few ordinary tokens. On
 * success the caller owns *out; release it with tok_encoding_free().
 */
attn_status tok_encode_repeated(const struct tokenizer *t, size_t vocab,
                                uint64_t seed, size_t length,
                                const struct tok_options *opts,
                                struct tok_encoding *out,
                                struct attn_error *err);

/* At most the bytes tok_encode_repeated() allocates for length. */
size_t tok_encode_repeated_bytes(const struct tokenizer *t, size_t length);

/* Release what t holds (its impl) and zero it; a zeroed t is a no-op. */
void tok_free(struct tokenizer *t);

#endif
