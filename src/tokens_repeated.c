/*
 * tokens_repeated.c - a random sequence of tokens, repeated: the input of
 * the induction probe (tokenizer.h).
 */
#include "checked.h"
#include "error.h"
#include "rng.h"
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* Draws tried for one position before the vocabulary is judged to hold
 * too few ordinary tokens: with half of it special, 2^-64 to fail. */
enum { DRAWS_PER_TOKEN = 64 };

/* A text of one ordinary token: where the tokenizer's own tokens go
 * around a text is read off its encoding. */
static const char PROBE_TEXT[] = "a";

size_t tok_encode_repeated_bytes(const struct tokenizer *t, size_t length)
{
    size_t bytes;
    if (!size_mul(length, 2 * (sizeof(uint32_t) + 2), &bytes) ||
        !size_add_to(&bytes, tok_encode_bytes(t, strlen(PROBE_TEXT), 0)) ||
        !size_add_to(&bytes, 64 * (sizeof(uint32_t) + 2)))
        return SIZE_MAX;
    return bytes;
}

attn_status tok_encode_repeated(const struct tokenizer *t, size_t vocab,
                                uint64_t seed, size_t length,
                                const struct tok_options *opts,
                                struct tok_encoding *out,
                                struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    if (length < 1)
        return attn_fail(err, ATTN_E_INVALID, "probe_length",
                         "probe_length is 0; the sequence needs a token");
    if (vocab > tok_vocab_size(t))
        vocab = tok_vocab_size(t);
    // the tokens the tokenizer puts before and after a text
    struct tok_encoding frame = {0};
    size_t before = 0, after = 0;
    if (!opts->no_special) {
        attn_status st = tok_encode(t, PROBE_TEXT, strlen(PROBE_TEXT), NULL, 0,
                                    NULL, &frame, err);
        if (st)
            return st;
        while (before < frame.count && frame.added[before])
            before++;
        while (after < frame.count - before &&
               frame.added[frame.count - 1 - after])
            after++;
    }
    const size_t count = before + 2 * length + after;
    if (length > SIZE_MAX / 4 ||
        (opts->max_tokens && count > opts->max_tokens)) {
        tok_encoding_free(&frame);
        return attn_fail(err, ATTN_E_TOO_BIG, "probe_length",
                         "probe_length (%zu) gives %zu tokens, twice it "
                         "and %zu the tokenizer adds; at most %zu fit",
                         length, count, before + after, opts->max_tokens);
    }
    // one block, as every encoding: the ids, then the type ids and flags
    uint32_t *ids = malloc(count * (sizeof *ids + 2));
    if (!ids) {
        tok_encoding_free(&frame);
        return attn_fail(err, ATTN_E_NOMEM, "probe_length",
                         "out of memory for %zu tokens", count);
    }
    out->count = count;
    out->ids = ids;
    out->type_ids = (uint8_t *)(ids + count);
    out->added = out->type_ids + count;
    memset(out->type_ids, 0, count);
    memset(out->added, 0, count);
    for (size_t i = 0; i < before; i++) {
        ids[i] = frame.ids[i];
        out->added[i] = 1;
    }
    for (size_t i = 0; i < after; i++) {
        ids[count - after + i] = frame.ids[frame.count - after + i];
        out->added[count - after + i] = 1;
    }
    tok_encoding_free(&frame);
    const uint64_t key = attn_stream_key(seed, "probe", strlen("probe"));
    for (size_t p = 0; p < length; p++) {
        size_t draw = 0;
        uint32_t id = 0;
        for (; draw < DRAWS_PER_TOKEN; draw++) {
            id = (uint32_t)(rng_unit(key, p * DRAWS_PER_TOKEN + draw) *
                            (double)vocab);
            if (id < vocab && !tok_token_special(t, id))
                break;
        }
        if (draw == DRAWS_PER_TOKEN) {
            tok_encoding_free(out);
            return attn_fail(err, ATTN_E_INVALID, "probe_length",
                             "the vocabulary of %zu tokens gave no ordinary "
                             "token in %d draws",
                             vocab, DRAWS_PER_TOKEN);
        }
        ids[before + p] = ids[before + length + p] = id;
    }
    return ATTN_OK;
}
