/*
 * jsonnum_wide.h - jsonnum_format_rows()'s shortest form eight floats at
 * a time in the lanes of AVX-512 registers, on CPUs that have it.
 * Internal to jsonnum.c and its tests.
 */
#ifndef ATTND_JSONNUM_WIDE_H
#define ATTND_JSONNUM_WIDE_H

#include "jsonnum.h"

#include <stdbool.h>
#include <stddef.h>

/* Can this CPU run jsonnum_wide_rows()? Asked afresh each call (a load
 * and a test). */
bool jsonnum_wide_available(void);

/*
 * jsonnum_format_rows() in the shortest form: the same bytes. Only when
 * jsonnum_wide_available().
 */
size_t jsonnum_wide_rows(const float *values, size_t count,
                         const struct jsonnum_rows *rows, char *out);

#endif
