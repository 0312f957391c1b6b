/*
 * alloc_count.c - the allocator wrapped (-Wl,--wrap=malloc,... in the
 * Makefile) for the tests that hold a size estimate to what a call
 * allocates: while counting, every block the program allocates is noted
 * with its size, and the bytes held and their peak kept (alloc_count.h).
 */
#include "alloc_count.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void __wrap_free(void *p);

/* The live blocks while counting: pointer -> size, open addressing. */
enum { SLOTS = 1 << 14 };
static struct {
    void *p;
    size_t n;
} blocks[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool counting;
static size_t live, peak, overflowed;

static size_t slot_of(const void *p)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) % SLOTS;
}

static void note_alloc(void *p, size_t n)
{
    if (!p)
        return;
    pthread_mutex_lock(&lock);
    if (counting) {
        size_t at = slot_of(p), tries = 0;
        while (blocks[at].p && tries++ < SLOTS)
            at = (at + 1) % SLOTS;
        if (blocks[at].p) {
            overflowed++;
        } else {
            blocks[at].p = p;
            blocks[at].n = n;
            live += n;
            peak = live > peak ? live : peak;
        }
    }
    pthread_mutex_unlock(&lock);
}

static void note_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&lock);
    for (size_t at = slot_of(p), tries = 0; tries < SLOTS;
         at = (at + 1) % SLOTS, tries++) {
        if (blocks[at].p == p) {
            live -= blocks[at].n;
            // keep the probe chains whole: re-insert what follows
            blocks[at].p = NULL;
            for (size_t k = (at + 1) % SLOTS; blocks[k].p;
                 k = (k + 1) % SLOTS) {
                void *q = blocks[k].p;
                const size_t qn = blocks[k].n;
                blocks[k].p = NULL;
                size_t to = slot_of(q);
                while (blocks[to].p)
                    to = (to + 1) % SLOTS;
                blocks[to].p = q;
                blocks[to].n = qn;
            }
            break;
        }
        if (!blocks[at].p)
            break;
    }
    pthread_mutex_unlock(&lock);
}

void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    note_alloc(p, n);
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    void *p = __real_calloc(n, size);
    note_alloc(p, n * size);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    note_free(p);
    void *q = __real_realloc(p, n);
    note_alloc(q, n);
    return q;
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    void *p = __real_aligned_alloc(align, n);
    note_alloc(p, n);
    return p;
}

void __wrap_free(void *p)
{
    note_free(p);
    __real_free(p);
}

void alloc_count_start(void)
{
    pthread_mutex_lock(&lock);
    memset(blocks, 0, sizeof blocks);
    live = peak = overflowed = 0;
    counting = true;
    pthread_mutex_unlock(&lock);
}

void alloc_count_stop(void)
{
    pthread_mutex_lock(&lock);
    counting = false;
    pthread_mutex_unlock(&lock);
}

size_t alloc_live(void)
{
    pthread_mutex_lock(&lock);
    const size_t n = live;
    pthread_mutex_unlock(&lock);
    return n;
}

size_t alloc_peak(void)
{
    pthread_mutex_lock(&lock);
    const size_t n = peak;
    pthread_mutex_unlock(&lock);
    return n;
}

size_t alloc_overflowed(void)
{
    pthread_mutex_lock(&lock);
    const size_t n = overflowed;
    pthread_mutex_unlock(&lock);
    return n;
}
