/*
 * jinja_arena.c - the memory of a compiled template: nodes, names and
 * literals, bump-allocated in chunks and freed together, so that a
 * template of any shape is freed without walking it.
 */
#include "jinja_internal.h"

#include <stdlib.h>
#include <string.h>

struct jchunk {
    struct jchunk *next;
    size_t used, size;
    max_align_t data[];
};

#define CHUNK_BYTES ((size_t)64 << 10)

void *jinja_arena_alloc(struct jchunk **arena, size_t n)
{
    const size_t align = sizeof(max_align_t);
    n = (n + align - 1) / align * align;
    struct jchunk *c = *arena;
    if (!c || c->size - c->used < n) {
        const size_t size = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        c = malloc(sizeof *c + size);
        if (!c)
            return NULL;
        c->used = 0;
        c->size = size;
        c->next = *arena;
        *arena = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void jinja_arena_free(struct jchunk *arena)
{
    while (arena) {
        struct jchunk *next = arena->next;
        free(arena);
        arena = next;
    }
}

struct jstr *jinja_arena_str(struct jchunk **arena, const char *s, size_t len)
{
    struct jstr *r = jinja_arena_alloc(arena, sizeof *r + len + 1);
    if (!r)
        return NULL;
    r->h = (struct jobj){.refs = 1, .immortal = 1, .depth = 1};
    r->len = len;
    if (len)
        memcpy(r->s, s, len);
    r->s[len] = '\0';
    /* computed now: a template's strings are never written to again */
    r->hash = jinja_hash_bytes(s, len);
    r->hashed = true;
    return r;
}
