/*
 * checked.h - size arithmetic that reports overflow instead of wrapping.
 * Every size computed from outside input goes through these before it
 * reaches malloc.
 */
#ifndef ATTN_CHECKED_H
#define ATTN_CHECKED_H

#include <stdbool.h>
#include <stddef.h>

/* *out = a * b; false on overflow. */
static inline bool size_mul(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* *out = a * b * c; false on overflow. */
static inline bool size_mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t ab;
    return size_mul(a, b, &ab) && size_mul(ab, c, out);
}

/* *acc += a; false on overflow. */
static inline bool size_add_to(size_t *acc, size_t a)
{
    return !__builtin_add_overflow(*acc, a, acc);
}

#endif
