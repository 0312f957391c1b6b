/*
 * spm.h - SentencePiece's BPE as llama.cpp applies it to the vocabularies
 * of GGUF files whose tokenizer.ggml.model is "llama" (Llama 1 and 2,
 * Mistral 7B, Phi-3, Gemma, ...). Another kind behind the tokenizer
 * interface (tokenizer.h), next to WordPiece (wordpiece.h) and the
 * tokenizers library's BPE (bpe.h).
 *
 * The core knows no file format: a loader reads tokenizer.ggml.tokens,
 * .scores, .token_type and the rest into a struct spm_spec of plain
 * arrays, and spm_tokenizer_new() builds the tokenizer from it. There are
 * no merge rules: two neighbouring pieces merge when what they make is a
 * token, the one of highest score first.
 *
 * Encoding a text runs as llama.cpp's llama_tokenize(add_special,
 * parse_special = true) does:
 *
 *   1. The special tokens (types CONTROL, USER_DEFINED and UNKNOWN) typed
 *      in the text are taken out first: the longest token first, each at
 *      every place it occurs, leftmost first and not overlapping, in what
 *      the tokens before it left (and the whitespace a token strips,
 *      enum spm_strip, is dropped). Tokens of equal length go by id, the
 *      lower first; llama.cpp orders them with std::sort, which keeps the
 *      ids' order for up to 16 special tokens and may not past that, so
 *      two tokens of one length overlapping in a text may be taken the
 *      other way round there.
 *   2. Every piece of text between them is encoded on its own: a space
 *      put before it when add_space_prefix and it is the first piece or
 *      follows a special token; each " " written as U+2581; cut into
 *      characters; then the neighbouring pair whose joined text is a
 *      token of highest score is joined, the leftmost among equal scores,
 *      until no pair is a token.
 *   3. A character left that is no token becomes its bytes' tokens:
 *      "<0xNN>" (NN in upper-case hex), else the byte itself as a
 *      one-byte token. When one of its bytes has neither, the character
 *      is the unk token (llama.cpp stops with an exception there).
 *   4. The BOS goes first when add_bos, the EOS last when add_eos.
 *
 * An empty text is the BOS alone (with add_bos); no space is added to it.
 *
 * Besides step 3's unk, what llama.cpp takes and this refuses: invalid
 * UTF-8 in a text (llama.cpp cuts it by lead bytes and falls back to
 * bytes), a token type outside 0 to 6 (it reads UNDEFINED), a NaN score
 * (its heap has no order then), a BYTE token not spelt <0xNN>, and the
 * caps below.
 */
#ifndef ATTN_SPM_H
#define ATTN_SPM_H

#include "attention.h"
#include "tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Caps on what a spec may hold, checked before anything is allocated.
 * Real vocabularies are far inside them (Gemma: 256,000 tokens; Llama 2's
 * longest is 16 x U+2581, 48 bytes). */
#define SPM_MAX_VOCAB ((size_t)1 << 20)        /* tokens */
#define SPM_MAX_TOKEN_BYTES ((size_t)1024)     /* one token's text */
#define SPM_MAX_INPUT_BYTES ((size_t)64 << 20) /* one text to encode */

/* The token types of tokenizer.ggml.token_type, numbered as llama.cpp's
 * llama_token_type. */
enum spm_token_type {
    SPM_TOKEN_UNDEFINED = 0, /* decodes to nothing */
    SPM_TOKEN_NORMAL = 1,
    SPM_TOKEN_UNKNOWN = 2,      /* <unk>: special, found in the text */
    SPM_TOKEN_CONTROL = 3,      /* <s>, </s>: special, found in the text */
    SPM_TOKEN_USER_DEFINED = 4, /* found in the text; decodes to itself */
    SPM_TOKEN_UNUSED = 5,       /* decodes to nothing */
    SPM_TOKEN_BYTE = 6,         /* <0xNN>: the byte NN */
};

/* How a special token takes the whitespace (C's isspace(): space, \t, \n,
 * \v, \f, \r) beside it in the text: dropped, not encoded. llama.cpp sets
 * these by the model's general.name, not from the file: when it holds
 * "phi-3" or "phi3", RIGHT on every special token and </s>, but <unk>, <s>
 * and <|endoftext|>; when it holds "modern-bert", LEFT on [MASK]. */
enum spm_strip {
    SPM_STRIP_LEFT = 1,  /* the whitespace before it */
    SPM_STRIP_RIGHT = 2, /* the whitespace after it */
};

/* A string by length; it need not be NUL-terminated. */
struct spm_string {
    const char *text; /* may be NULL when len is 0 */
    size_t len;
};

struct spm_spec {
    /* tokens[i] is the text of id i as tokenizer.ggml.tokens holds it,
     * U+2581 for a space; no two alike (llama.cpp asserts it). An empty
     * one reads "[EMPTY_i]", as llama.cpp renames it. */
    const struct spm_string *tokens;
    size_t n_tokens;
    const float *scores;  /* [n_tokens], NaN refused; NULL: every one 0 */
    const int32_t *types; /* [n_tokens] enum spm_token_type; NULL: every
                             one NORMAL. A BYTE token's text must be
                             "<0xNN>" */
    const uint8_t *strip; /* [n_tokens] enum spm_strip flags, read on the
                             special tokens only; NULL: none */
    /* Each an id or -1: none. llama.cpp's defaults for "llama" when the
     * file has no tokenizer.ggml.unknown_token_id, bos_token_id or
     * eos_token_id: 0, 1 and 2 (none when past the vocabulary). */
    int64_t unk_id, bos_id, eos_id;
    bool add_bos;          /* tokenizer.ggml.add_bos_token (llama.cpp's
                              default for "llama": true) */
    bool add_eos;          /* tokenizer.ggml.add_eos_token (default false) */
    bool add_space_prefix; /* tokenizer.ggml.add_space_prefix (default
                              true) */
};

/*
 * The tokenizer interface over a SentencePiece tokenizer built from spec,
 * whose arrays are copied. Fails with ATTN_E_INVALID naming the field
 * ("tokens": a text repeated; "scores", "types", "unk_id", "bos_id",
 * "eos_id") and the value at fault (add_bos or add_eos without the id is
 * "bos_id" or "eos_id"), ATTN_E_TOO_BIG past a cap (naming "tokens"),
 * ATTN_E_NOMEM.
 *
 * Encoding (tok_encode): the ids of a as above; the BOS and EOS are
 * marked added and left out with opts->no_special; every type id is 0. A
 * second text is refused (ATTN_E_INVALID naming "sentence_b"). Invalid
 * UTF-8 is ATTN_E_INPUT naming "sentence", and so is a character with
 * neither a token for each byte nor an unk token; more than max_tokens
 * tokens, the BOS and EOS included, or more than SPM_MAX_INPUT_BYTES, is
 * ATTN_E_TOO_BIG naming "sentence".
 *
 * Token texts (tok_token_text) are readable: a NORMAL token with U+2581
 * as a space, a BYTE token as its byte's character when that is a whole
 * one (ASCII but NUL) and as "<0xNN>" otherwise, any other token as it is
 * spelt; in each, a NUL and every byte of a broken character as "<0xNN>".
 * tok_token_id() finds a token by that text (the lowest id of a text;
 * BYTE tokens after every other).
 *
 * Token bytes (tok_token_bytes) are what llama.cpp's detokenizer writes
 * with special tokens shown: a NORMAL token's text with U+2581 as a
 * space, a BYTE token's byte, a CONTROL, UNKNOWN or USER_DEFINED token's
 * text as it is, nothing for UNUSED and UNDEFINED ones. Special
 * (tok_token_special) are the ones that detokenizer leaves out unless
 * asked for them, CONTROL and UNKNOWN, and the ones it never writes,
 * UNUSED and UNDEFINED; a USER_DEFINED token is text.
 *
 * On success the caller owns *out; release it with tok_free().
 */
attn_status spm_tokenizer_new(const struct spm_spec *spec,
                              struct tokenizer *out, struct attn_error *err);

#endif
