/*
 * vocab.h - a checkpoint's vocab.txt: one token per line, the id its line
 * number, as transformers reads it (universal newlines: "\n", "\r\n" and
 * "\r" all end a line; nothing else is stripped).
 */
#ifndef ATTND_VOCAB_H
#define ATTND_VOCAB_H

#include "wordpiece.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * The vocabulary in text[0..len). Lines must be valid UTF-8 without NUL
 * bytes; more than max_tokens lines is refused (the model's vocab_size:
 * an id past it has no embedding). On success the caller owns *out;
 * release it with wordpiece_vocab_free(). On failure returns false with one
 * line in err naming the line.
 */
bool vocab_parse(const char *text, size_t len, size_t max_tokens,
                 struct wordpiece_vocab **out, char *err, size_t err_len);

#endif
