/*
 * tokenizer_json.h - a decoder checkpoint's BPE tokenizer from its folder:
 * tokenizer.json as the tokenizers library reads it, or GPT-2's
 * vocab.json and merges.txt when there is none, with tokenizer_config.json
 * deciding the BOS as transformers does (docs/tokenizers.md). The files
 * become a struct bpe_spec for the core (src/bpe.h).
 *
 * Anything the core would not follow exactly (a model other than BPE, an
 * unknown normalizer, pre-tokenizer, regex or post-processor, dropout,
 * truncation) is refused at load with one line naming the file, the field
 * and its value. The decoder, which does not change ids, is not read.
 */
#ifndef ATTND_TOKENIZER_JSON_H
#define ATTND_TOKENIZER_JSON_H

#include "model.h"
#include "model_files.h"
#include "tokenizer.h"

#include <stdbool.h>
#include <stddef.h>

/* Caps on the files (the largest real tokenizer.json, Gemma 3's, is 33 MB). */
#define TOKENIZER_JSON_MAX_BYTES ((size_t)64 << 20)
#define TOKENIZER_CONFIG_MAX_BYTES ((size_t)4 << 20)

/* The files' contents; NULL when a file is absent. Each is read by length. */
struct tokenizer_texts {
    const char *tokenizer_json;
    size_t tokenizer_json_len;
    const char *config; /* tokenizer_config.json */
    size_t config_len;
    const char *vocab_json; /* GPT-2's, read only without tokenizer.json */
    size_t vocab_json_len;
    const char *merges_txt;
    size_t merges_txt_len;
};

/*
 * The tokenizer of those texts. On failure returns false with *file the
 * name of the file at fault and one line in err naming the field and its
 * value. On success the caller owns *out; release it with tok_free().
 */
bool tokenizer_json_build(const struct tokenizer_texts *in,
                          struct tokenizer *out, const char **file, char *err,
                          size_t err_len);

/*
 * What a decoder family's open_tokenizer calls: read the folder's files
 * into m->tokenizer (m->do_lower_case false). Every id must be below
 * config.json's vocab_size (m->xf.vocab_size, when set). Fails through
 * model_files_fail(), naming the file.
 */
bool tokenizer_json_open(struct model *m, const struct model_files *files);

#endif
