/*
 * gguf_tokenizer.h - the tokenizer and chat templates a GGUF file's
 * metadata describes, as llama.cpp reads them:
 *
 *   tokenizer.ggml.model "gpt2": byte-level BPE from tokenizer.ggml.tokens
 *     and .merges, split before merging by the pre-tokenizer that
 *     tokenizer.ggml.pre names (only those docs/models.md lists; any other
 *     is refused by name, never guessed);
 *   tokenizer.ggml.model "llama": SentencePiece from the tokens, their
 *     scores and types, with byte fallback (spm.h).
 *
 * Control, user-defined and unknown tokens (tokenizer.ggml.token_type 3,
 * 4 and 2), and the tokens llama.cpp makes control tokens by their text
 * (<|im_end|>, </s>, <|fim_prefix|>, ...), are found in a text before the
 * rest is tokenized, as llama.cpp does with special tokens parsed. The BOS goes
 * first when tokenizer.ggml.add_bos_token says so (or, without it, as llama.cpp
 * defaults for that pre-tokenizer).
 */
#ifndef ATTND_GGUF_TOKENIZER_H
#define ATTND_GGUF_TOKENIZER_H

#include "chat_template.h"
#include "gguf.h"
#include "tokenizer.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * The tokenizer of g into *out, for a model of vocab_size rows (every id
 * the tokenizer gives is below it). False with one line in err naming
 * the key and what is wrong. Release *out with tok_free().
 */
bool gguf_tokenizer_open(const struct gguf_file *g, size_t vocab_size,
                         struct tokenizer *out, char *err, size_t err_len);

/*
 * The ids that end a generation, as llama.cpp gathers them: the EOS, the
 * end-of-turn and end-of-message ids the file gives, and every token
 * whose text ends a turn or a generation in the common templates
 * (<|eot_id|>, <|im_end|>, <end_of_turn>, ...). At most max into ids, each
 * below vocab_size, each once; returns how many.
 */
size_t gguf_end_ids(const struct gguf_file *g, size_t vocab_size, unsigned *ids,
                    size_t max);

/*
 * g's chat templates into *out: tokenizer.chat_template as "default" and
 * each tokenizer.chat_template.NAME as NAME, with the special tokens map
 * (bos_token, eos_token, unk_token, pad_token) from the ids the file gives
 * and t's texts of them. A model without any gets none. False only out of
 * memory or past CHAT_MAX_TEMPLATES, with the line in err. Release with
 * chat_templates_free().
 */
bool gguf_chat_templates(const struct gguf_file *g, const struct tokenizer *t,
                         struct chat_templates *out, char *err, size_t err_len);

#endif
