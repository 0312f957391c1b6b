/*
 * bpe_merge.c - the merge rules and merging one pre-token.
 *
 * The library's BPE keeps a heap of candidate merges, pops the one of
 * lowest rank (leftmost among equals), skips it when its pair has changed
 * since, and pushes the new pairs a merge makes. Here each symbol holds at
 * most one candidate, the pair it starts, in an indexed heap that is
 * updated in place; that takes the same merges in the same order (a stale
 * entry of the library's can never match: a pair's span only grows, so its
 * tokens change), in room fixed by the pre-token's length, and without
 * quadratic work on long runs of one character.
 */
#include "bpe_internal.h"

#include <stdlib.h>
#include <string.h>

#define PAIR_EMPTY UINT64_MAX
#define NO_HEAP UINT32_MAX

static size_t pair_slot(const struct bpe_pairs *p, uint64_t key)
{
    // Fibonacci hashing: the top bits of key times 2^64 / phi
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (p->n_slots - 1);
}

bool bpe_pairs_init(struct bpe_pairs *p, size_t count)
{
    memset(p, 0, sizeof *p);
    size_t n = 16;
    while (n < 2 * count)
        n *= 2;
    p->n_slots = n;
    p->keys = malloc(n * sizeof *p->keys);
    p->rank = malloc(n * sizeof *p->rank);
    p->id = malloc(n * sizeof *p->id);
    if (!p->keys || !p->rank || !p->id) {
        bpe_pairs_free(p);
        return false;
    }
    memset(p->keys, 0xff, n * sizeof *p->keys);
    return true;
}

void bpe_pairs_free(struct bpe_pairs *p)
{
    free(p->keys);
    free(p->rank);
    free(p->id);
    memset(p, 0, sizeof *p);
}

void bpe_pairs_put(struct bpe_pairs *p, uint32_t a, uint32_t b, uint32_t rank,
                   uint32_t id)
{
    const uint64_t key = (uint64_t)a << 32 | b;
    const size_t mask = p->n_slots - 1;
    size_t at = pair_slot(p, key);
    while (p->keys[at] != PAIR_EMPTY && p->keys[at] != key)
        at = (at + 1) & mask;
    p->keys[at] = key;
    p->rank[at] = rank;
    p->id[at] = id;
}

bool bpe_pairs_get(const struct bpe_pairs *p, uint32_t a, uint32_t b,
                   uint32_t *rank, uint32_t *id)
{
    const uint64_t key = (uint64_t)a << 32 | b;
    const size_t mask = p->n_slots - 1;
    for (size_t at = pair_slot(p, key);; at = (at + 1) & mask) {
        if (p->keys[at] == key) {
            *rank = p->rank[at];
            *id = p->id[at];
            return true;
        }
        if (p->keys[at] == PAIR_EMPTY)
            return false;
    }
}

void bpe_word_carve(struct bpe_word *w, void *mem, size_t n)
{
    uint32_t *m = mem;
    w->id = m;
    w->prev = (int32_t *)(m + n);
    w->next = (int32_t *)(m + 2 * n);
    w->rank = m + 3 * n;
    w->pair_id = m + 4 * n;
    w->heap_at = m + 5 * n;
    w->heap = m + 6 * n;
}

/* ---------------------------------------------------- the indexed heap */

/* Symbol a's pair comes before symbol b's: lower rank, then leftmost. */
static bool before(const struct bpe_word *w, uint32_t a, uint32_t b)
{
    return w->rank[a] < w->rank[b] || (w->rank[a] == w->rank[b] && a < b);
}

static void heap_place(struct bpe_word *w, size_t at, uint32_t sym)
{
    w->heap[at] = sym;
    w->heap_at[sym] = (uint32_t)at;
}

static void sift_up(struct bpe_word *w, size_t at)
{
    const uint32_t sym = w->heap[at];
    while (at > 0) {
        const size_t parent = (at - 1) / 2;
        if (!before(w, sym, w->heap[parent]))
            break;
        heap_place(w, at, w->heap[parent]);
        at = parent;
    }
    heap_place(w, at, sym);
}

static void sift_down(struct bpe_word *w, size_t n, size_t at)
{
    const uint32_t sym = w->heap[at];
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(w, w->heap[child + 1], w->heap[child]))
            child++;
        if (!before(w, w->heap[child], sym))
            break;
        heap_place(w, at, w->heap[child]);
        at = child;
    }
    heap_place(w, at, sym);
}

static void heap_remove(struct bpe_word *w, size_t *n, uint32_t sym)
{
    const uint32_t at = w->heap_at[sym];
    if (at == NO_HEAP)
        return;
    w->heap_at[sym] = NO_HEAP;
    const uint32_t last = w->heap[--*n];
    if (at == *n)
        return;
    heap_place(w, at, last);
    sift_down(w, *n, at);
    sift_up(w, w->heap_at[last]);
}

/* Symbol sym's pair (with its next) again: into the heap, moved, or out. */
static void pair_update(const struct bpe_pairs *pairs, struct bpe_word *w,
                        size_t *n, uint32_t sym)
{
    uint32_t rank, id;
    const int32_t next = w->next[sym];
    if (next < 0 ||
        !bpe_pairs_get(pairs, w->id[sym], w->id[next], &rank, &id)) {
        heap_remove(w, n, sym);
        return;
    }
    w->pair_id[sym] = id;
    if (w->heap_at[sym] == NO_HEAP) {
        w->rank[sym] = rank;
        w->heap[*n] = sym;
        w->heap_at[sym] = (uint32_t)*n;
        sift_up(w, (*n)++);
        return;
    }
    const uint32_t old = w->rank[sym];
    w->rank[sym] = rank;
    if (rank < old)
        sift_up(w, w->heap_at[sym]);
    else
        sift_down(w, *n, w->heap_at[sym]);
}

void bpe_merge_word(const struct bpe_pairs *pairs, struct bpe_word *w, size_t n)
{
    size_t heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        w->heap_at[i] = NO_HEAP;
    }
    for (size_t i = 0; i + 1 < n; i++)
        pair_update(pairs, w, &heap_n, (uint32_t)i);
    while (heap_n > 0) {
        // the best pair: sym and its next become one symbol at sym
        const uint32_t sym = w->heap[0];
        const uint32_t gone = (uint32_t)w->next[sym];
        w->id[sym] = w->pair_id[sym];
        heap_remove(w, &heap_n, gone);
        w->next[sym] = w->next[gone];
        if (w->next[gone] >= 0)
            w->prev[w->next[gone]] = (int32_t)sym;
        pair_update(pairs, w, &heap_n, sym);
        if (w->prev[sym] >= 0)
            pair_update(pairs, w, &heap_n, (uint32_t)w->prev[sym]);
    }
}
