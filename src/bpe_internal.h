/*
 * bpe_internal.h - the pieces of the BPE tokenizer (bpe.h) shared between
 * its files; internal to the core. bpe_text.c: UTF-8, the normalizers,
 * the pre-tokenizer scanners and splits; bpe_merge.c: the merge rules and
 * merging one pre-token; bpe.c: the vocabulary, the added tokens, encoding and
 * the interface.
 */
#ifndef ATTN_BPE_INTERNAL_H
#define ATTN_BPE_INTERNAL_H

#include "bpe.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ bpe_text.c */

/* The length of the valid UTF-8 prefix of s[0..n): n when all of it is. */
size_t bpe_utf8_valid(const char *s, size_t n);

/* The readable form of a token's bytes s[0..len) into out (room for 6
 * bytes a byte; NULL: only count): whole characters as they are, U+2581
 * as a space when sentencepiece, a NUL and every byte of a broken
 * character as <0xNN>. Its length. The BPE and SentencePiece tokenizers'
 * token texts alike. */
size_t bpe_readable(const char *s, size_t len, bool sentencepiece, char *out);

/* The code point at s[at] (valid UTF-8, at < n) into *cp; its length. */
size_t bpe_utf8_next(const char *s, size_t n, size_t at, uint32_t *cp);

/* The steps of a shorthand normalizer into steps (BPE_MAX_NORM_STEPS);
 * their count. */
size_t bpe_norm_shorthand(enum bpe_normalizer norm,
                          struct bpe_norm_step *steps);

/* At most the bytes that normalizing len bytes by steps[0..n) gives,
 * after any of the steps (NFC: 3x, its UTF-8 expansion limit, which
 * src/unicode_tables.py checks for every code point; PREPEND: its
 * content more; REPLACE: each pattern's bytes become the content's), or
 * SIZE_MAX on overflow. */
size_t bpe_norm_bound(const struct bpe_norm_step *steps, size_t n, size_t len);

/* The code points of scratch bpe_norm_apply() needs for len bytes. */
size_t bpe_norm_scratch(const struct bpe_norm_step *steps, size_t n,
                        size_t len);

/* Normalize valid UTF-8 in[0..len) by steps[0..n) into out, through tmp
 * (each bpe_norm_bound(len) bytes, neither overlapping in), with
 * scratch[bpe_norm_scratch(len)]; returns the length. */
size_t bpe_norm_apply(const struct bpe_norm_step *steps, size_t n,
                      const char *in, size_t len, uint32_t *scratch, char *out,
                      char *tmp);

/* Where the match of pattern (not NONE) that starts at s[at] ends (> at),
 * for valid UTF-8 s[0..n) and at < n. */
size_t bpe_pretok_end(enum bpe_pattern pattern, const char *s, size_t n,
                      size_t at);

/* The next piece split sp makes of valid UTF-8 s[0..n) from *at on:
 * [*start, *end), nonempty, and *at past it; false when none is left.
 * Pieces come in order and never overlap; REMOVED leaves bytes out. */
bool bpe_split_next(const struct bpe_split *sp, const char *s, size_t n,
                    size_t *at, size_t *start, size_t *end);

/* ----------------------------------------------------------- bpe_merge.c */

/* The merge rules: the pair (a, b) of ids -> its rank and the id of a+b. */
struct bpe_pairs {
    uint64_t *keys; /* [n_slots] a << 32 | b, or PAIR_EMPTY */
    uint32_t *rank; /* [n_slots] */
    uint32_t *id;   /* [n_slots] */
    size_t n_slots; /* a power of two, at least twice the rules */
};

/* Room for count rules. On success the caller owns *p; release it with
 * bpe_pairs_free(). False when out of memory. */
bool bpe_pairs_init(struct bpe_pairs *p, size_t count);
void bpe_pairs_free(struct bpe_pairs *p);

/* Set the rule (a, b) -> id at rank; a pair set again takes the later
 * rank and id, as the library's map of merges keeps the last. */
void bpe_pairs_put(struct bpe_pairs *p, uint32_t a, uint32_t b, uint32_t rank,
                   uint32_t id);

/* The rule of (a, b): true with *rank and *id, or false. */
bool bpe_pairs_get(const struct bpe_pairs *p, uint32_t a, uint32_t b,
                   uint32_t *rank, uint32_t *id);

/* The symbols of one pre-token while it is merged, in arrays of at least
 * n entries each, carved from the caller's workspace. */
struct bpe_word {
    uint32_t *id;      /* the symbol's token */
    int32_t *prev;     /* the symbol before, or -1 */
    int32_t *next;     /* the symbol after, or -1 */
    uint32_t *rank;    /* the rank of the pair (symbol, next) */
    uint32_t *pair_id; /* the token that pair merges into */
    uint32_t *heap_at; /* where the symbol's pair is in heap, or NO_HEAP */
    uint32_t *heap;    /* a min-heap of symbols by (rank, position) */
};

/* Bytes of workspace per symbol. */
#define BPE_WORD_BYTES (7 * sizeof(uint32_t))

/* Carve a word of room for n symbols from mem (n * BPE_WORD_BYTES bytes,
 * aligned for uint32_t). */
void bpe_word_carve(struct bpe_word *w, void *mem, size_t n);

/*
 * Merge w->id[0..n) as the library's BPE does: always the pair of lowest
 * rank, leftmost among equals, until no pair has a rule. The tokens left
 * are then w->id[0], w->id[w->next[0]], ... Each merge costs O(log n).
 */
void bpe_merge_word(const struct bpe_pairs *pairs, struct bpe_word *w,
                    size_t n);

#endif
