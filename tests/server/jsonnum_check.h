/*
 * jsonnum_check.h - what jsonnum_format() promises, checked for one float
 * and one text without using jsonnum.c: by glibc's strtof (correctly
 * rounded) and, where two decimals are equally near in double precision,
 * by exact decimal arithmetic of its own. Shared by the unit test and the
 * exhaustive check (`make jsonnum-exhaustive`).
 *
 * Each check returns true when the text is right, and otherwise false with
 * the reason in why (why_size bytes, caller's buffer).
 */
#ifndef ATTND_JSONNUM_CHECK_H
#define ATTND_JSONNUM_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A JSON number in this module's style, read back: (-1)^negative *
 * digits * 10^exp10, digits without trailing zeros (0 for a zero). */
struct jsonnum_decimal {
    bool negative;
    uint64_t digits;
    int n_digits;
    int exp10;
};

/* JSON's number grammar and this module's style within it: scientific
 * notation, one digit before the point, exactly when the decimal exponent
 * is outside -5..8; no '+', no leading zeros in the exponent, no trailing
 * zeros after a point, at most 9 significant digits. Fills *d. */
bool jsonnum_check_style(const char *text, struct jsonnum_decimal *d, char *why,
                         size_t why_size);

/* The text of a finite f in the shortest form: it reads back as f (sign
 * included), no decimal with fewer significant digits does, and no other
 * decimal with as few is nearer to f (at equal distance, the text's last
 * digit is even). Non-finite f must be null. */
bool jsonnum_check_shortest(float f, const char *text, char *why,
                            size_t why_size);

/* The text of f rounded to p significant digits (1..9): the value of
 * snprintf's "%.*e" (correctly rounded, ties to even), in this style. */
bool jsonnum_check_fixed(float f, int p, const char *text, char *why,
                         size_t why_size);

#endif
