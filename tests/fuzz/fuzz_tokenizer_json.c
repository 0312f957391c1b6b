/*
 * fuzz_tokenizer_json.c - libFuzzer target for a checkpoint's tokenizer
 * files (server/model/tokenizer_json.h): the input is tokenizer.json,
 * whose model.vocab and model.merges are read from the text by the
 * loader's own reader, with tokenizer_config.json absent or, when the
 * input's first byte is odd, asking for a BOS.
 *
 * Checks beyond the sanitizers: a refusal names the file at fault and
 * says why in one line; a tokenizer that loads encodes a few texts with
 * every id below its vocabulary, each with a readable text, and frees.
 */
#include "tokenizer.h"
#include "tokenizer_json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_tokenizer_json: %s\n", what);
    abort();
}

/* Texts of every class a tokenizer meets: words, digits, CJK, a byte
 * that needs a fallback, whitespace runs, a typed special token. */
static const char *const texts[] = {"The cat sat on the mat.", "12345 67",
                                    "\xe6\x9d\xb1\xe4\xba\xac", "\x01\t\n  x",
                                    "<s><|endoftext|><bos>"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const char config[] = "{\"add_bos_token\": true}";
    const struct tokenizer_texts in = {.tokenizer_json = (const char *)data + 1,
                                       .tokenizer_json_len = size - 1,
                                       .config = data[0] & 1 ? config : NULL,
                                       .config_len =
                                           data[0] & 1 ? sizeof config - 1 : 0};
    struct tokenizer t;
    const char *file = NULL;
    char err[256] = "";
    if (!tokenizer_json_build(&in, &t, &file, err, sizeof err)) {
        if (!file || !err[0] || strchr(err, '\n'))
            fail("a refusal without its file or its reason");
        return 0;
    }
    const size_t vocab = tok_vocab_size(&t);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct tok_encoding enc;
        struct attn_error aerr = {0};
        const struct tok_options opts = {.max_tokens = 256};
        if (tok_encode(&t, texts[i], strlen(texts[i]), NULL, 0, &opts, &enc,
                       &aerr) != ATTN_OK) {
            if (!aerr.message[0])
                fail("an encoding refused without a reason");
            continue;
        }
        for (size_t k = 0; k < enc.count; k++) {
            if (enc.ids[k] >= vocab)
                fail("an id past the vocabulary");
            if (!tok_token_text(&t, enc.ids[k]))
                fail("a token without its text");
        }
        tok_encoding_free(&enc);
    }
    tok_free(&t);
    return 0;
}
