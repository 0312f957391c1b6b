/*
 * fuzz_wordpiece.c - libFuzzer target for the BERT tokenizer: the input's
 * first byte picks the case handling and the cap, the rest up to a 0xFF
 * byte is a vocab.txt (read by server/model/vocab.c; a small built-in one
 * when it is refused), what follows is sentence A, and after a second
 * 0xFF, sentence B.
 *
 * Checks beyond the sanitizers: a refusal is ATTN_E_INPUT or
 * ATTN_E_TOO_BIG naming sentence or sentence_b; an encoding starts with
 * [CLS], ends with [SEP], stays within the cap, has every id inside the
 * vocabulary and token type ids 0 then 1 (1 only for a pair).
 */
#include "transformer.h"
#include "wordpiece.h"
#include "model/vocab.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_wordpiece: %s\n", what);
    abort();
}

static const char builtin[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n"
                              "##s\n##at\na\n##a\nun\n##want\n##ed\n,\n.\n"
                              "caf\n##e\n\xe6\x9d\xb1\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const unsigned mode = data[0];
    const char *rest = (const char *)data + 1;
    const size_t left = size - 1;
    const char *cut = memchr(rest, 0xFF, left);
    const size_t vocab_len = cut ? (size_t)(cut - rest) : 0;
    const char *a = cut ? cut + 1 : rest;
    const size_t a_all = left - (size_t)(a - rest);
    const char *cut_b = memchr(a, 0xFF, a_all);
    const size_t a_len = cut_b ? (size_t)(cut_b - a) : a_all;
    const char *b = cut_b ? cut_b + 1 : NULL;
    const size_t b_len = cut_b ? a_all - a_len - 1 : 0;

    struct wordpiece_vocab *v = NULL;
    char err[300];
    if (!vocab_parse(rest, vocab_len, 5000, &v, err, sizeof err) &&
        !vocab_parse(builtin, sizeof builtin - 1, 5000, &v, err, sizeof err))
        fail("the built-in vocabulary is refused");
    const struct wordpiece_options opts = {.do_lower_case = mode & 1,
                                           .max_tokens = (mode >> 1) & 63};
    struct tok_encoding enc;
    struct attn_error aerr = {0};
    const attn_status st =
        wordpiece_encode(v, &opts, a, a_len, b, b_len, &enc, &aerr);
    if (st != ATTN_OK) {
        if ((st != ATTN_E_INPUT && st != ATTN_E_TOO_BIG) || enc.ids ||
            (strcmp(aerr.field, "sentence") != 0 &&
             strcmp(aerr.field, "sentence_b") != 0))
            fail("an unexpected refusal");
        wordpiece_vocab_free(v);
        return 0;
    }
    const size_t nv = wordpiece_vocab_size(v);
    if (enc.count < (b ? 3u : 2u) ||
        (opts.max_tokens && enc.count > opts.max_tokens))
        fail("an encoding of the wrong length");
    if (strcmp(wordpiece_vocab_token(v, enc.ids[0]), "[CLS]") != 0 ||
        strcmp(wordpiece_vocab_token(v, enc.ids[enc.count - 1]), "[SEP]") != 0)
        fail("an encoding not in [CLS] ... [SEP]");
    // added: [CLS], the [SEP] ending A (the last of type 0), the last
    size_t n_added = 0;
    for (size_t i = 0; i < enc.count; i++) {
        const bool ends_a = i + 1 < enc.count && enc.type_ids[i] == 0 &&
                            enc.type_ids[i + 1] == 1;
        if (enc.added[i] != (i == 0 || i + 1 == enc.count || ends_a))
            fail("a token marked added that the tokenizer did not add, or "
                 "the other way round");
        n_added += enc.added[i];
    }
    if (n_added != (b ? 3u : 2u))
        fail("the wrong number of added tokens");
    for (size_t i = 0; i < enc.count; i++) {
        if (enc.ids[i] >= nv)
            fail("an id outside the vocabulary");
        if (enc.type_ids[i] > (b ? 1 : 0) ||
            (i > 0 && enc.type_ids[i] < enc.type_ids[i - 1]))
            fail("token type ids out of order");
    }
    tok_encoding_free(&enc);
    wordpiece_vocab_free(v);
    return 0;
}
