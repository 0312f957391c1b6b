/*
 * fuzz_tokenize.c - libFuzzer target for attn_tokenize(): any bytes, with
 * the server's default options (lowercase, no special tokens) and their
 * opposite (keep case, [CLS] ... [SEP]), under a small max_tokens; then
 * attn_embed_token() on every token.
 *
 * Checks beyond the sanitizers: a refusal is ATTN_E_INPUT or
 * ATTN_E_TOO_BIG with a message; tokens are non-empty, within the cap and
 * valid UTF-8 (they tokenize again without error); embeddings are finite.
 */
#include "attention.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 64
#define EMBED_DIM 7 /* odd: the last Box-Muller pair is cut in half */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const struct attn_tokenize_options *o)
{
    fprintf(stderr, "fuzz_tokenize: %s (keep_case %d, special_tokens %d)\n",
            what, o->keep_case, o->special_tokens);
    abort();
}

static void check(const char *text, size_t len,
                  const struct attn_tokenize_options *o)
{
    struct attn_tokens toks;
    struct attn_error err;
    memset(&err, 0, sizeof err);
    const attn_status st = attn_tokenize(text, len, o, MAX_TOKENS, &toks, &err);
    if (st != ATTN_OK) {
        if ((st != ATTN_E_INPUT && st != ATTN_E_TOO_BIG) || !err.message[0] ||
            toks.count != 0 || toks.text != NULL)
            fail("bad refusal", o);
        return;
    }
    if (toks.count > MAX_TOKENS || (toks.count > 0) != (toks.text != NULL))
        fail("token count", o);
    for (size_t i = 0; i < toks.count; i++) {
        const char *t = toks.text[i];
        const size_t n = strlen(t);
        if (n == 0)
            fail("empty token", o);
        /* a token is valid UTF-8 and holds no separator: keeping case, it
         * tokenizes to itself (punctuation and CJK are tokens of one
         * character already); [CLS] and [SEP] are the exception */
        const bool special =
            o->special_tokens && (i == 0 || i + 1 == toks.count);
        if (special && strcmp(t, i == 0 ? "[CLS]" : "[SEP]"))
            fail("special token missing", o);
        struct attn_tokens again;
        const struct attn_tokenize_options keep = {.keep_case = true};
        if (attn_tokenize(t, n, &keep, 0, &again, &err) != ATTN_OK)
            fail("token does not tokenize again", o);
        if (!special && (again.count != 1 || strcmp(again.text[0], t))) {
            fprintf(stderr, "token \"%s\" -> %zu tokens\n", t, again.count);
            fail("token splits again", o);
        }
        attn_tokens_free(&again);
        float e[EMBED_DIM];
        attn_embed_token(t, n, (uint64_t)len * 0x9E3779B97F4A7C15ULL, EMBED_DIM,
                         e);
        for (size_t k = 0; k < EMBED_DIM; k++)
            if (!isfinite(e[k]))
                fail("embedding not finite", o);
    }
    attn_tokens_free(&toks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* exactly size bytes, so ASan sees a read past the end */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    const struct attn_tokenize_options server = {.keep_case = false,
                                                 .special_tokens = false};
    const struct attn_tokenize_options other = {.keep_case = true,
                                                .special_tokens = true};
    check(text, size, &server);
    check(text, size, &other);
    free(text);
    return 0;
}
