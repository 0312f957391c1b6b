/*
 * params_cache.h - drawn parameters, kept for the requests after. A
 * tensor drawn from the seed depends on the seed, its name and its shape
 * only (attn_params_draw_tensor()), and drawing it costs more than most
 * small requests' whole pass; so each is drawn once and shared, read-only,
 * by every request that needs the same one. Results are the same bits
 * with or without the cache.
 *
 * The cache holds at most its cap in bytes, forgetting the least recently
 * used tensor that no request is using; a tensor larger than the cap is
 * drawn for its request alone. Cap 0 turns it off.
 */
#ifndef ATTND_PARAMS_CACHE_H
#define ATTND_PARAMS_CACHE_H

#include "attention.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cached_tensor;

struct params_cache {
    pthread_mutex_t lock;
    size_t cap, bytes;            /* bytes of the tensors held */
    struct cached_tensor **slots; /* open addressing; n_slots a power of 2 */
    size_t n_slots, n_held;
    struct cached_tensor *lru_head, *lru_tail; /* most recent first */
    uint64_t hits, misses, evictions;
};

/* The tensors one request uses, held until params_lease_end(). */
struct params_lease {
    struct params_cache *cache;
    struct cached_tensor *held[ATTN_PARAM_COUNT];
    float *own[ATTN_PARAM_COUNT]; /* drawn for this request alone */
    size_t n_held, n_own;
};

void params_cache_init(struct params_cache *c, size_t cap_bytes);
void params_cache_free(struct params_cache *c);

/*
 * The seeded parameters of resolved projected config cfg into *out, each
 * tensor from the cache or drawn now; *lease holds them until
 * params_lease_end(). false only when memory ran out (err filled).
 */
bool params_cache_lease(struct params_cache *c, const struct attn_config *cfg,
                        struct attn_params *out, struct params_lease *lease,
                        struct attn_error *err);
void params_lease_end(struct params_lease *lease);

struct params_cache_stats {
    size_t bytes, cap, tensors;
    uint64_t hits, misses, evictions;
};
void params_cache_stats(struct params_cache *c, struct params_cache_stats *s);

#endif
