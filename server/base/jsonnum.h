/*
 * jsonnum.h - float32 values, and unsigned integers, as JSON numbers.
 */
#ifndef ATTND_JSONNUM_H
#define ATTND_JSONNUM_H

#include <stddef.h>
#include <stdint.h>

/* Longest text jsonnum_format() writes, with its NUL. */
#define JSONNUM_MAX 24

/*
 * Write f into out (JSONNUM_MAX bytes) and return the length.
 * precision 0: the shortest decimal that strtof() reads back as f, and
 * of those the nearest to f (ties to an even last digit); 1..9: f rounded
 * to that many significant digits, ties to even, as printf's %.*e rounds.
 * Trailing zeros are dropped; the form is plain for decimal exponents
 * -5..8 (0.00001, 123456789), scientific otherwise (1e-6, 1.5e9); a zero
 * keeps its sign (-0). Non-finite values (never produced by the core) are
 * written as null. Uses no locale, no libm and no allocation.
 */
size_t jsonnum_format(float f, int precision, char *out);

/*
 * Write values[0 .. count) as jsonnum_format() does, separated by commas,
 * into out, which has room for count * JSONNUM_MAX bytes (and is
 * NUL-terminated after the last, unless count is 0); returns the length.
 * The same text as a loop over jsonnum_format(), in fewer instructions: a
 * row of weights is formatted in one call.
 */
size_t jsonnum_format_list(const float *values, size_t count, int precision,
                           char *out);

/* Longest text a row's end writes (struct jsonnum_rows). */
#define JSONNUM_ROW_END_MAX 16

/* Write into out what follows the last number of a row, at most
 * JSONNUM_ROW_END_MAX bytes, and return its length. */
typedef size_t jsonnum_row_end_fn(void *context, char *out);

/* Numbers laid out in rows (jsonnum_format_rows()). */
struct jsonnum_rows {
    size_t row;                  /* numbers to a row, at least 1 */
    size_t col;                  /* the first number's place in its row */
    jsonnum_row_end_fn *row_end; /* called after each row's last number */
    void *context;               /* row_end's */
};

/*
 * Write values[0 .. count) as jsonnum_format() does, each followed by a
 * comma or, when it ends a row, by what rows->row_end writes; returns the
 * length, no NUL. out has room for count * (JSONNUM_MAX +
 * JSONNUM_ROW_END_MAX) bytes. A whole array goes in one call, its
 * brackets written by row_end: numbers are formatted eight at a time
 * where the CPU has AVX-512, across the ends of rows.
 */
size_t jsonnum_format_rows(const float *values, size_t count, int precision,
                           const struct jsonnum_rows *rows, char *out);

/* Write v in decimal into out (20 bytes, no NUL) and return the length:
 * the one writer of counts, indices and sizes in the answer's path. */
size_t jsonnum_uint(uint64_t v, char *out);

#endif
