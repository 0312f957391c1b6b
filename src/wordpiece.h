/*
 * wordpiece.h - BERT's vocabulary and WordPiece tokenizer, as
 * transformers' BertTokenizer applies them; the first kind behind the
 * tokenizer interface (tokenizer.h).
 *
 * The vocabulary is a list of strings: a loader reads vocab.txt, the
 * core knows no file format. Errors follow attention.h.
 */
#ifndef ATTN_WORDPIECE_H
#define ATTN_WORDPIECE_H

#include "attention.h"
#include "tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Words longer than this many code points become one [UNK], as in
 * transformers (Google's original code allows 200). */
#define WORDPIECE_MAX_WORD_CHARS 100

struct wordpiece_vocab; /* opaque: the tokens and a hash table over them */

/*
 * A vocabulary from its tokens, id = index in tokens[count] (the line
 * number in vocab.txt). The strings are copied. A token listed twice keeps
 * the last id, as transformers' load_vocab does; id -> token still gives
 * each line's own string. [UNK], [CLS] and [SEP] must be present.
 * On success the caller owns *out; release it with wordpiece_vocab_free().
 */
attn_status wordpiece_vocab_new(const char *const *tokens, size_t count,
                                struct wordpiece_vocab **out,
                                struct attn_error *err);
void wordpiece_vocab_free(struct wordpiece_vocab *vocab);

size_t wordpiece_vocab_size(const struct wordpiece_vocab *vocab);

/* The token of id (< wordpiece_vocab_size()), NUL-terminated. */
const char *wordpiece_vocab_token(const struct wordpiece_vocab *vocab,
                                  uint32_t id);

/* The id of the token text[0..len), or -1 when it is not in the vocabulary. */
int64_t wordpiece_vocab_id(const struct wordpiece_vocab *vocab,
                           const char *text, size_t len);

/* NULL options mean BertTokenizer's defaults: lowercase, no cap. */
struct wordpiece_options {
    bool do_lower_case; /* lowercase and strip accents (uncased models) */
    size_t max_tokens;  /* cap on the encoding, [CLS] and [SEP]s included:
                           the model's max_position_embeddings; 0 = none */
    bool no_special;    /* without [CLS] and [SEP]: A, or A B with B's
                           types 1 (add_special_tokens=False) */
};

/*
 * Encode a sentence, or a pair when b is not NULL, as BertTokenizer does:
 * the special tokens typed in the text ([CLS], [SEP], [PAD], [MASK],
 * [UNK], exactly so) are kept whole; the rest goes through the basic
 * tokenizer (attn_tokenize) and WordPiece, greedy longest match first with
 * ## continuations, a word with an unmatched part or of more than
 * WORDPIECE_MAX_WORD_CHARS code points becoming one [UNK]. The result is
 * [CLS] A [SEP] or [CLS] A [SEP] B [SEP], the [CLS] and those [SEP]s
 * marked added (a [SEP] typed in the text is not). Type ids are 0 for
 * [CLS] A [SEP], 1 for B [SEP]. Invalid UTF-8 fails naming "sentence" or
 * "sentence_b"; more than opts->max_tokens is ATTN_E_TOO_BIG.
 * On success the caller owns *out; release it with tok_encoding_free().
 */
attn_status wordpiece_encode(const struct wordpiece_vocab *vocab,
                             const struct wordpiece_options *opts,
                             const char *a, size_t a_len, const char *b,
                             size_t b_len, struct tok_encoding *out,
                             struct attn_error *err);

/* At most the bytes wordpiece_encode() allocates for texts of these
 * lengths. */
size_t wordpiece_encode_bytes(size_t a_len, size_t b_len);

/*
 * The tokenizer interface over vocab, which it takes over (tok_free()
 * frees it, also when this fails), lowercasing when do_lower_case.
 * On success the caller owns *out; release it with tok_free().
 */
attn_status wordpiece_tokenizer_new(struct wordpiece_vocab *vocab,
                                    bool do_lower_case, struct tokenizer *out,
                                    struct attn_error *err);

#endif
