/*
 * workspace.h - the plan of a call's one scratch block: parts laid back
 * to back, each on a WS_ALIGN boundary, their sizes checked for overflow
 * before anything is allocated. Internal to the core.
 */
#ifndef ATTN_WORKSPACE_H
#define ATTN_WORKSPACE_H

#include "checked.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

/* Every part starts on a cache line. */
enum { WS_ALIGN = 64 };

struct ws_plan {
    size_t bytes;  /* the block so far */
    bool overflow; /* a size did not fit in size_t: the plan is void */
};

/* Lay count elements of elem bytes next in the block: their offset into
 * *offset (a multiple of WS_ALIGN), the block grown to hold them. */
static inline void ws_take(struct ws_plan *pl, size_t *offset, size_t count,
                           size_t elem)
{
    size_t bytes;
    if (!size_mul(count, elem, &bytes) || !size_add_to(&bytes, WS_ALIGN - 1)) {
        pl->overflow = true;
        return;
    }
    *offset = pl->bytes;
    if (!size_add_to(&pl->bytes, bytes & ~(size_t)(WS_ALIGN - 1)))
        pl->overflow = true;
}

/* The block of a plan (at least one line, for an empty one); release it
 * with free(). NULL when memory runs out. */
static inline void *ws_alloc(const struct ws_plan *pl)
{
    return aligned_alloc(WS_ALIGN, pl->bytes ? pl->bytes : WS_ALIGN);
}

#endif
