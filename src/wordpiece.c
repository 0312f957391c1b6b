/*
 * wordpiece.c - BERT's vocabulary and WordPiece tokenizer, as transformers'
 * BertTokenizer applies them: special tokens typed in the text kept whole,
 * the basic tokenizer (basic_tokenizer.c) on the rest, then each word split
 * greedily into the longest pieces the vocabulary has.
 *
 * The vocabulary is one block of token bytes plus an open-addressing hash
 * table of ids keyed by FNV-1a, so a lookup hashes the piece once and
 * compares bytes only on a hash hit.
 */
#include "wordpiece.h"
#include "checked.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>

/* The special tokens BertTokenizer never splits (its all_special_tokens). */
static const char *const special_tokens[] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]",
                                             "[MASK]"};
enum { N_SPECIAL = sizeof special_tokens / sizeof special_tokens[0] };

#define MAX_VOCAB_TOKENS 0x7fffffffu
#define EMPTY_SLOT UINT32_MAX

struct wordpiece_vocab {
    size_t count;
    char *bytes;      /* every token, NUL-terminated, back to back */
    size_t *offset;   /* [count] where token id starts in bytes */
    uint32_t *len;    /* [count] its length in bytes */
    uint32_t *slots;  /* [n_slots] an id or EMPTY_SLOT */
    uint64_t *hashes; /* [n_slots] the hash of the token in each slot */
    size_t n_slots;   /* a power of two, at least twice count */
    size_t max_len;   /* the longest token, in bytes */
    uint32_t unk, cls, sep;
};

static uint64_t hash_piece(const char *prefix, size_t prefix_len,
                           const char *text, size_t len)
{
    // FNV-1a over prefix then text, without joining them
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < prefix_len; i++)
        h = (h ^ (unsigned char)prefix[i]) * 0x100000001b3ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * 0x100000001b3ull;
    return h;
}

/* The slot that holds prefix+text, or the empty slot where it would go. */
static size_t find_slot(const struct wordpiece_vocab *v, const char *prefix,
                        size_t prefix_len, const char *text, size_t len,
                        uint64_t h)
{
    const size_t mask = v->n_slots - 1;
    for (size_t at = (size_t)h & mask;; at = (at + 1) & mask) {
        const uint32_t id = v->slots[at];
        if (id == EMPTY_SLOT)
            return at;
        if (v->hashes[at] == h && v->len[id] == prefix_len + len) {
            const char *t = v->bytes + v->offset[id];
            if (memcmp(t, prefix, prefix_len) == 0 &&
                memcmp(t + prefix_len, text, len) == 0)
                return at;
        }
    }
}

static int64_t lookup(const struct wordpiece_vocab *v, const char *prefix,
                      size_t prefix_len, const char *text, size_t len)
{
    if (prefix_len + len > v->max_len)
        return -1;
    const uint64_t h = hash_piece(prefix, prefix_len, text, len);
    const uint32_t id =
        v->slots[find_slot(v, prefix, prefix_len, text, len, h)];
    return id == EMPTY_SLOT ? -1 : (int64_t)id;
}

int64_t wordpiece_vocab_id(const struct wordpiece_vocab *vocab,
                           const char *text, size_t len)
{
    return lookup(vocab, "", 0, text, len);
}

size_t wordpiece_vocab_size(const struct wordpiece_vocab *vocab)
{
    return vocab->count;
}

const char *wordpiece_vocab_token(const struct wordpiece_vocab *vocab,
                                  uint32_t id)
{
    return id < vocab->count ? vocab->bytes + vocab->offset[id] : NULL;
}

void wordpiece_vocab_free(struct wordpiece_vocab *vocab)
{
    if (!vocab)
        return;
    free(vocab->bytes);
    free(vocab->offset);
    free(vocab->len);
    free(vocab->slots);
    free(vocab->hashes);
    free(vocab);
}

static attn_status required_id(const struct wordpiece_vocab *v,
                               const char *token, uint32_t *id,
                               struct attn_error *err)
{
    const int64_t found = wordpiece_vocab_id(v, token, strlen(token));
    if (found < 0)
        return attn_fail(err, ATTN_E_INVALID, "vocab",
                         "the vocabulary has no %s token", token);
    *id = (uint32_t)found;
    return ATTN_OK;
}

attn_status wordpiece_vocab_new(const char *const *tokens, size_t count,
                                struct wordpiece_vocab **out,
                                struct attn_error *err)
{
    *out = NULL;
    if (count == 0 || count > MAX_VOCAB_TOKENS)
        return attn_fail(err, ATTN_E_INVALID, "vocab",
                         "the vocabulary has %zu tokens; 1 to %u are allowed",
                         count, MAX_VOCAB_TOKENS);
    size_t total = 0, max_len = 0;
    for (size_t i = 0; i < count; i++) {
        const size_t n = strlen(tokens[i]);
        if (n > UINT32_MAX / 2 || !size_add_to(&total, n + 1))
            return attn_fail(err, ATTN_E_TOO_BIG, "vocab",
                             "vocabulary token %zu is too long", i);
        if (n > max_len)
            max_len = n;
    }
    size_t n_slots = 16;
    while (n_slots < 2 * count)
        n_slots *= 2;
    struct wordpiece_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return attn_fail(err, ATTN_E_NOMEM, "vocab", "out of memory");
    v->count = count;
    v->n_slots = n_slots;
    v->max_len = max_len;
    v->bytes = malloc(total);
    v->offset = malloc(count * sizeof *v->offset);
    v->len = malloc(count * sizeof *v->len);
    v->slots = malloc(n_slots * sizeof *v->slots);
    v->hashes = malloc(n_slots * sizeof *v->hashes);
    if (!v->bytes || !v->offset || !v->len || !v->slots || !v->hashes) {
        wordpiece_vocab_free(v);
        return attn_fail(err, ATTN_E_NOMEM, "vocab",
                         "out of memory for %zu tokens", count);
    }
    memset(v->slots, 0xff, n_slots * sizeof *v->slots);
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        const size_t n = strlen(tokens[i]);
        memcpy(v->bytes + at, tokens[i], n + 1);
        v->offset[i] = at;
        v->len[i] = (uint32_t)n;
        at += n + 1;
        // a token seen before takes the later id, as transformers does
        const uint64_t h = hash_piece("", 0, tokens[i], n);
        const size_t slot = find_slot(v, "", 0, tokens[i], n, h);
        v->slots[slot] = (uint32_t)i;
        v->hashes[slot] = h;
    }
    attn_status st = required_id(v, "[UNK]", &v->unk, err);
    if (!st)
        st = required_id(v, "[CLS]", &v->cls, err);
    if (!st)
        st = required_id(v, "[SEP]", &v->sep, err);
    if (st) {
        wordpiece_vocab_free(v);
        return st;
    }
    *out = v;
    return ATTN_OK;
}

/* ---------------------------------------------------------------- encode */

/* Where the ids go: counted only while ids is NULL. */
struct id_sink {
    uint32_t *ids;
    uint8_t *type_ids, *added;
    size_t count;
    uint8_t type;
};

static void put(struct id_sink *s, uint32_t id, bool added)
{
    if (s->ids) {
        s->ids[s->count] = id;
        s->type_ids[s->count] = s->type;
        s->added[s->count] = added;
    }
    s->count++;
}

/* An id of the text's. */
static void put_id(struct id_sink *s, uint32_t id)
{
    put(s, id, false);
}

/*
 * WordPiece on one word of len bytes (valid UTF-8, from the basic
 * tokenizer): from each start, the longest piece in the vocabulary (with
 * "##" after the first), else the whole word is one [UNK].
 */
static void wordpiece_word(const struct wordpiece_vocab *v, const char *word,
                           size_t len, struct id_sink *s)
{
    // the code point boundaries; more than the cap is [UNK] outright
    size_t bound[WORDPIECE_MAX_WORD_CHARS + 1];
    size_t chars = 0;
    for (size_t at = 0; at < len; at++) {
        if (((unsigned char)word[at] & 0xC0) == 0x80)
            continue;
        if (chars == WORDPIECE_MAX_WORD_CHARS) {
            put_id(s, v->unk);
            return;
        }
        bound[chars++] = at;
    }
    bound[chars] = len;

    uint32_t pieces[WORDPIECE_MAX_WORD_CHARS];
    size_t n_pieces = 0;
    for (size_t start = 0; start < chars;) {
        const char *prefix = start > 0 ? "##" : "";
        const size_t prefix_len = start > 0 ? 2 : 0;
        int64_t id = -1;
        size_t end = chars;
        for (; end > start; end--) {
            id = lookup(v, prefix, prefix_len, word + bound[start],
                        bound[end] - bound[start]);
            if (id >= 0)
                break;
        }
        if (id < 0) {
            put_id(s, v->unk);
            return;
        }
        pieces[n_pieces++] = (uint32_t)id;
        start = end;
    }
    for (size_t i = 0; i < n_pieces; i++)
        put_id(s, pieces[i]);
}

/* The ids of the basic tokens of one text. */
static void encode_tokens(const struct wordpiece_vocab *v,
                          const struct attn_tokens *t, struct id_sink *s)
{
    for (size_t i = 0; i < t->count; i++) {
        const char *word = t->text[i];
        const size_t len = strlen(word);
        // a special token the basic tokenizer kept whole is its own id
        bool special = false;
        for (size_t k = 0; k < N_SPECIAL && !special; k++)
            special = strcmp(word, special_tokens[k]) == 0;
        if (special) {
            const int64_t id = wordpiece_vocab_id(v, word, len);
            put_id(s, id >= 0 ? (uint32_t)id : v->unk);
        } else {
            wordpiece_word(v, word, len, s);
        }
    }
}

/* [CLS] A [SEP] (B [SEP]), or A (B) without the special tokens. */
static void encode_all(const struct wordpiece_vocab *v,
                       const struct attn_tokens *a, const struct attn_tokens *b,
                       bool special, struct id_sink *s)
{
    s->type = 0;
    if (special)
        put(s, v->cls, true);
    encode_tokens(v, a, s);
    if (special)
        put(s, v->sep, true);
    if (b) {
        s->type = 1;
        encode_tokens(v, b, s);
        if (special)
            put(s, v->sep, true);
    }
}

size_t wordpiece_encode_bytes(size_t a_len, size_t b_len)
{
    // both basic tokenizations, then an id, a type and a flag per input
    // byte (a piece holds at least one byte) and per [CLS] and [SEP]
    size_t total = attn_tokenize_bytes(a_len);
    size_t ids = a_len;
    if (!size_add_to(&total, attn_tokenize_bytes(b_len)) ||
        !size_add_to(&ids, b_len) || !size_add_to(&ids, 3) ||
        !size_mul(ids, sizeof(uint32_t) + 2, &ids) || !size_add_to(&total, ids))
        return SIZE_MAX;
    return total;
}

attn_status wordpiece_encode(const struct wordpiece_vocab *vocab,
                             const struct wordpiece_options *opts,
                             const char *a, size_t a_len, const char *b,
                             size_t b_len, struct tok_encoding *out,
                             struct attn_error *err)
{
    static const struct wordpiece_options defaults = {.do_lower_case = true};
    memset(out, 0, sizeof *out);
    if (!opts)
        opts = &defaults;
    const size_t cap = opts->max_tokens;
    const bool special = !opts->no_special;
    struct attn_tokenize_options topt = {
        .keep_case = !opts->do_lower_case,
        .never_split = special_tokens,
        .n_never_split = N_SPECIAL,
        .field = "sentence",
    };
    // every basic token gives at least one id, so a cap on the ids caps
    // the basic tokens too, before WordPiece sees them
    struct attn_tokens ta = {0}, tb = {0};
    attn_status st =
        attn_tokenize(a ? a : "", a ? a_len : 0, &topt, cap, &ta, err);
    if (!st && b) {
        topt.field = "sentence_b";
        st = attn_tokenize(b, b_len, &topt, cap, &tb, err);
    }
    if (st) {
        attn_tokens_free(&ta);
        attn_tokens_free(&tb);
        if (st == ATTN_E_TOO_BIG && cap)
            return attn_fail(err, ATTN_E_TOO_BIG, topt.field,
                             "%s has more than the %zu tokens the model has "
                             "positions for (max_position_embeddings)",
                             topt.field, cap);
        return st;
    }
    struct id_sink counted = {0};
    encode_all(vocab, &ta, b ? &tb : NULL, special, &counted);
    if (cap && counted.count > cap) {
        // which part pushed it over: A alone, or A with B
        struct id_sink first = {0};
        encode_all(vocab, &ta, NULL, special, &first);
        attn_tokens_free(&ta);
        attn_tokens_free(&tb);
        return attn_fail(err, ATTN_E_TOO_BIG,
                         first.count > cap ? "sentence" : "sentence_b",
                         "the input has %zu tokens with [CLS] and [SEP], more "
                         "than the %zu the model has positions for "
                         "(max_position_embeddings)",
                         counted.count, cap);
    }
    // one block, as tok_encoding_free() releases it
    uint32_t *block = malloc(counted.count * (sizeof(uint32_t) + 2));
    if (!block) {
        attn_tokens_free(&ta);
        attn_tokens_free(&tb);
        return attn_fail(err, ATTN_E_NOMEM, "sentence",
                         "out of memory for %zu tokens", counted.count);
    }
    struct id_sink sink = {.ids = block,
                           .type_ids = (uint8_t *)(block + counted.count)};
    sink.added = sink.type_ids + counted.count;
    encode_all(vocab, &ta, b ? &tb : NULL, special, &sink);
    attn_tokens_free(&ta);
    attn_tokens_free(&tb);
    out->count = sink.count;
    out->ids = block;
    out->type_ids = sink.type_ids;
    out->added = sink.added;
    return ATTN_OK;
}

/* ------------------------------------------------------------- interface */

struct wordpiece_tokenizer {
    struct wordpiece_vocab *vocab;
    bool do_lower_case;
};

static attn_status tokenizer_encode(const void *impl, const char *a,
                                    size_t a_len, const char *b, size_t b_len,
                                    const struct tok_options *opts,
                                    struct tok_encoding *out,
                                    struct attn_error *err)
{
    const struct wordpiece_tokenizer *t = impl;
    const struct wordpiece_options wo = {.do_lower_case = t->do_lower_case,
                                         .max_tokens = opts->max_tokens,
                                         .no_special = opts->no_special};
    return wordpiece_encode(t->vocab, &wo, a, a_len, b, b_len, out, err);
}

static size_t tokenizer_encode_bytes(const void *impl, size_t a_len,
                                     size_t b_len)
{
    (void)impl;
    return wordpiece_encode_bytes(a_len, b_len);
}

static size_t tokenizer_vocab_size(const void *impl)
{
    const struct wordpiece_tokenizer *t = impl;
    return wordpiece_vocab_size(t->vocab);
}

static const char *tokenizer_token_text(const void *impl, uint32_t id)
{
    const struct wordpiece_tokenizer *t = impl;
    return wordpiece_vocab_token(t->vocab, id);
}

/* BERT's markers are bracketed words of the vocabulary: [CLS], [SEP],
 * [PAD], [MASK], [UNK], [unused0] ... */
static bool tokenizer_token_special(const void *impl, uint32_t id)
{
    const char *text = tokenizer_token_text(impl, id);
    const size_t len = text ? strlen(text) : 0;
    return len > 2 && text[0] == '[' && text[len - 1] == ']';
}

/* A wordpiece's bytes are its text (no text is decoded from them). */
static size_t tokenizer_token_bytes(const void *impl, uint32_t id, char *out,
                                    size_t cap)
{
    const char *text = tokenizer_token_text(impl, id);
    const size_t len = text ? strlen(text) : 0;
    memcpy(out, text ? text : "", len < cap ? len : cap);
    return len;
}

static int64_t tokenizer_token_id(const void *impl, const char *text,
                                  size_t len)
{
    const struct wordpiece_tokenizer *t = impl;
    return wordpiece_vocab_id(t->vocab, text, len);
}

static void tokenizer_free(void *impl)
{
    struct wordpiece_tokenizer *t = impl;
    if (t)
        wordpiece_vocab_free(t->vocab);
    free(t);
}

static const struct tokenizer_ops wordpiece_ops = {
    .name = "wordpiece",
    .encode = tokenizer_encode,
    .encode_bytes = tokenizer_encode_bytes,
    .vocab_size = tokenizer_vocab_size,
    .token_bytes = tokenizer_token_bytes,
    .token_text = tokenizer_token_text,
    .token_id = tokenizer_token_id,
    .token_special = tokenizer_token_special,
    .free = tokenizer_free,
};

attn_status wordpiece_tokenizer_new(struct wordpiece_vocab *vocab,
                                    bool do_lower_case, struct tokenizer *out,
                                    struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    struct wordpiece_tokenizer *t = malloc(sizeof *t);
    if (!t) {
        wordpiece_vocab_free(vocab);
        return attn_fail(err, ATTN_E_NOMEM, "vocab",
                         "out of memory for the tokenizer");
    }
    t->vocab = vocab;
    t->do_lower_case = do_lower_case;
    out->ops = &wordpiece_ops;
    out->impl = t;
    return ATTN_OK;
}
