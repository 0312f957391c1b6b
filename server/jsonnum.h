/*
 * jsonnum.h - float32 values as JSON numbers.
 */
#ifndef ATTND_JSONNUM_H
#define ATTND_JSONNUM_H

#include <stddef.h>

/* Longest text jsonnum_format() writes, with its NUL. */
#define JSONNUM_MAX 24

/*
 * Write f into out (JSONNUM_MAX bytes) and return the length.
 * precision 0: the shortest decimal that strtof() reads back as f;
 * 1..9: f rounded to that many significant digits. Non-finite values
 * (never produced by the core) are written as null.
 */
size_t jsonnum_format(float f, int precision, char *out);

#endif
