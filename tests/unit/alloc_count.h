/*
 * alloc_count.h - counting what a call allocates, for the tests that hold
 * a size estimate to it. The test program is linked with the allocator
 * wrapped (ALLOC_WRAP in the Makefile), so that every malloc, calloc,
 * realloc, aligned_alloc and free of the program, the core's included,
 * passes through alloc_count.c.
 */
#ifndef ATTN_TEST_ALLOC_COUNT_H
#define ATTN_TEST_ALLOC_COUNT_H

#include <stddef.h>

/* Forget what was counted and count from now on; stop counting. */
void alloc_count_start(void);
void alloc_count_stop(void);

/* The bytes held now, their peak since the start, and the blocks that
 * found no room in the table (a test of its own size). */
size_t alloc_live(void);
size_t alloc_peak(void);
size_t alloc_overflowed(void);

#endif
