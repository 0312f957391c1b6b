/*
 * token_text.h - what a token adds to a generated text, as the
 * tokenizer decodes it: a byte token's byte, SentencePiece's U+2581 a
 * space, a byte-level BPE's bytes as they are.
 */
#ifndef ATTND_TOKEN_TEXT_H
#define ATTND_TOKEN_TEXT_H

#include "buf.h"
#include "model.h"

#include <stdbool.h>
#include <stdint.h>

/* Append token id's bytes to text; a NUL, which the text cannot hold,
 * as U+FFFD. False when text's cap or memory runs out. */
bool token_text_append(struct buf *text, const struct model *m, uint32_t id);

#endif
