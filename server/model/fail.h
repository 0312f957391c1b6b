/*
 * fail.h - the model loader's one error convention: a function returns
 * false after writing one line, naming what is wrong, into its caller's
 * buffer (err, err_len bytes, always terminated; err may be NULL). Control
 * characters, which a file's names may hold, become '?' so that the
 * message stays one line.
 */
#ifndef ATTND_MODEL_FAIL_H
#define ATTND_MODEL_FAIL_H

#include <stdbool.h>
#include <stddef.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bool model_fail(char *err, size_t err_len, const char *fmt, ...);

#endif
