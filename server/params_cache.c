/*
 * params_cache.c - see params_cache.h.
 */
#include "params_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cached_tensor {
    /* the key: what the values depend on */
    uint64_t seed;
    char name[32];
    size_t rows, cols, count;
    float *values; /* [count], read-only once drawn */
    size_t bytes;
    unsigned refs;                       /* leases holding it */
    struct cached_tensor *chain;         /* next in its slot */
    struct cached_tensor *newer, *older; /* the LRU list */
};

static uint64_t key_hash(uint64_t seed, const char *name, size_t rows,
                         size_t cols)
{
    uint64_t h = attn_fnv1a64(name, strlen(name));
    h ^= seed + 0x9E3779B97F4A7C15u + (h << 6) + (h >> 2);
    h ^= (uint64_t)rows * 0xBF58476D1CE4E5B9u;
    h ^= (uint64_t)cols * 0x94D049BB133111EBu;
    return h ^ (h >> 29);
}

static struct cached_tensor **slot_of(struct params_cache *c, uint64_t seed,
                                      const struct attn_param_tensor *t)
{
    const uint64_t h = key_hash(seed, t->name, t->rows, t->cols);
    return &c->slots[h & (c->n_slots - 1)];
}

static struct cached_tensor *find(struct params_cache *c, uint64_t seed,
                                  const struct attn_param_tensor *t,
                                  size_t count)
{
    for (struct cached_tensor *e = *slot_of(c, seed, t); e; e = e->chain)
        if (e->seed == seed && e->rows == t->rows && e->cols == t->cols &&
            e->count == count && !strcmp(e->name, t->name))
            return e;
    return NULL;
}

static void lru_unlink(struct params_cache *c, struct cached_tensor *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->lru_head = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->lru_tail = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(struct params_cache *c, struct cached_tensor *e)
{
    e->older = c->lru_head;
    e->newer = NULL;
    if (c->lru_head)
        c->lru_head->newer = e;
    c->lru_head = e;
    if (!c->lru_tail)
        c->lru_tail = e;
}

static void forget(struct params_cache *c, struct cached_tensor *e)
{
    struct cached_tensor **p =
        slot_of(c, e->seed,
                &(struct attn_param_tensor){
                    .name = e->name, .rows = e->rows, .cols = e->cols});
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
    lru_unlink(c, e);
    c->bytes -= e->bytes;
    c->n_held--;
    free(e->values);
    free(e);
}

/* Forget the least recently used tensors no lease holds, until the cache
 * is within its cap (or only held ones are left). */
static void evict(struct params_cache *c)
{
    struct cached_tensor *e = c->lru_tail;
    while (c->bytes > c->cap && e) {
        struct cached_tensor *newer = e->newer;
        if (!e->refs) {
            forget(c, e);
            c->evictions++;
        }
        e = newer;
    }
}

void params_cache_init(struct params_cache *c, size_t cap_bytes)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    c->cap = cap_bytes;
    /* slots for the tensors of a few thousand small configs; a full
     * table only makes chains longer */
    c->n_slots = cap_bytes ? 4096 : 0;
    c->slots = c->n_slots ? calloc(c->n_slots, sizeof *c->slots) : NULL;
    if (!c->slots)
        c->cap = c->n_slots = 0;
}

void params_cache_free(struct params_cache *c)
{
    while (c->lru_head)
        forget(c, c->lru_head);
    free(c->slots);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

/* The cached tensor t of seed with one more lease on it, or NULL. */
static struct cached_tensor *take(struct params_cache *c, uint64_t seed,
                                  const struct attn_param_tensor *t,
                                  size_t count)
{
    struct cached_tensor *e = find(c, seed, t, count);
    if (e) {
        e->refs++;
        lru_unlink(c, e);
        lru_push(c, e);
    }
    return e;
}

/* Keep values (drawn for t of seed) in the cache with one lease on them;
 * NULL when they are not kept (too large, or no memory for the entry). */
static struct cached_tensor *keep(struct params_cache *c, uint64_t seed,
                                  const struct attn_param_tensor *t,
                                  size_t count, float *values)
{
    const size_t bytes = count * sizeof(float);
    if (bytes > c->cap ||
        strlen(t->name) >= sizeof(((struct cached_tensor *)0)->name))
        return NULL;
    struct cached_tensor *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->seed = seed;
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->rows = t->rows;
    e->cols = t->cols;
    e->count = count;
    e->values = values;
    e->bytes = bytes + sizeof *e;
    e->refs = 1;
    struct cached_tensor **slot = slot_of(c, seed, t);
    e->chain = *slot;
    *slot = e;
    lru_push(c, e);
    c->bytes += e->bytes;
    c->n_held++;
    evict(c);
    return e;
}

bool params_cache_lease(struct params_cache *c, const struct attn_config *cfg,
                        struct attn_params *out, struct params_lease *lease,
                        struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    memset(lease, 0, sizeof *lease);
    lease->cache = c;
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n = attn_params_layout(cfg, 0, tensors);
    for (size_t i = 0; i < n; i++) {
        const struct attn_param_tensor *t = &tensors[i];
        const size_t count = attn_param_count(t);
        float **slot = attn_params_slot(out, t->slot);
        struct cached_tensor *e = NULL;
        if (c && c->cap) {
            pthread_mutex_lock(&c->lock);
            e = take(c, cfg->seed, t, count);
            if (e)
                c->hits++;
            else
                c->misses++;
            pthread_mutex_unlock(&c->lock);
        }
        if (e) {
            lease->held[lease->n_held++] = e;
            *slot = e->values;
            continue;
        }
        /* drawn outside the lock: a large tensor takes a while */
        float *values = malloc(count * sizeof *values);
        if (!values) {
            params_lease_end(lease);
            memset(out, 0, sizeof *out);
            snprintf(err->field, sizeof err->field, "params");
            snprintf(err->message, sizeof err->message,
                     "out of memory drawing %s (%zu numbers)", t->name, count);
            err->n_index = 0;
            return false;
        }
        attn_params_draw_tensor(cfg->seed, t, values);
        if (c && c->cap) {
            pthread_mutex_lock(&c->lock);
            /* another request may have drawn the same meanwhile */
            e = take(c, cfg->seed, t, count);
            if (e)
                free(values);
            else
                e = keep(c, cfg->seed, t, count, values);
            pthread_mutex_unlock(&c->lock);
        }
        if (e) {
            lease->held[lease->n_held++] = e;
            *slot = e->values;
        } else {
            lease->own[lease->n_own++] = values;
            *slot = values;
        }
    }
    return true;
}

void params_lease_end(struct params_lease *lease)
{
    struct params_cache *c = lease->cache;
    if (lease->n_held) {
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < lease->n_held; i++)
            lease->held[i]->refs--;
        evict(c); /* what was over the cap while held */
        pthread_mutex_unlock(&c->lock);
    }
    for (size_t i = 0; i < lease->n_own; i++)
        free(lease->own[i]);
    memset(lease, 0, sizeof *lease);
}

void params_cache_stats(struct params_cache *c, struct params_cache_stats *s)
{
    pthread_mutex_lock(&c->lock);
    *s = (struct params_cache_stats){.bytes = c->bytes,
                                     .cap = c->cap,
                                     .tensors = c->n_held,
                                     .hits = c->hits,
                                     .misses = c->misses,
                                     .evictions = c->evictions};
    pthread_mutex_unlock(&c->lock);
}
