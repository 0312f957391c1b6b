/*
 * drawn_cache.c - see drawn_cache.h.
 */
#include "drawn_cache.h"

#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One kept value: a parameter tensor or a token's embedding. */
struct drawn {
    /* the key: what the values depend on */
    enum drawn_kind kind;
    uint64_t seed;
    size_t cols, count; /* a tensor's fan-in; the values' number */
    uint64_t hash;
    float *values;               /* [count], read-only once kept */
    size_t bytes;                /* of the entry, its label and its values */
    unsigned refs;               /* leases holding it */
    struct drawn *chain;         /* next in its slot */
    struct drawn *newer, *older; /* the LRU list */
    size_t label_len;
    char label[]; /* a tensor's name, a token's text */
};

/* The table's slots: from MIN_SLOTS, doubled as entries come while the
 * table stays within an eighth of the cap (a power of two each) */
#define MIN_SLOTS ((size_t)1024)

/* Keys passed over that a full cache remembers: a slot for each 8 KiB of
 * the cap, within [MIN_PASSED, MAX_PASSED] (a power of two; 32 KiB at
 * most). At the default cap, a key is remembered for some hundreds of
 * one-off requests. */
#define MIN_PASSED ((size_t)64)
#define MAX_PASSED ((size_t)4096)

struct key {
    enum drawn_kind kind;
    uint64_t seed;
    const char *label;
    size_t label_len, cols, count;
    uint64_t hash;
};

static struct key key_of(enum drawn_kind kind, uint64_t seed, const char *label,
                         size_t cols, size_t count)
{
    struct key k = {kind, seed, label, strlen(label), cols, count, 0};
    uint64_t h = attn_fnv1a64(label, k.label_len) ^ (uint64_t)kind;
    h ^= seed + 0x9E3779B97F4A7C15u + (h << 6) + (h >> 2);
    h ^= (uint64_t)cols * 0xBF58476D1CE4E5B9u;
    h ^= (uint64_t)count * 0x94D049BB133111EBu;
    /* every bit of the key into every bit of the hash: a slot's index
     * takes its low bits, its tag (tag_of()) the top ones, and a seed
     * below 2^53 would otherwise reach the top bits only by its carries */
    RNG_MIX64(h);
    k.hash = h;
    return k;
}

static struct drawn **slot_of(struct drawn_cache *c, uint64_t hash)
{
    return &c->slots[hash & (c->n_slots - 1)];
}

/* A slot's tag has the bit of each of its entries' hashes, from bits the
 * slot's index does not use: a look for a key that is not kept (a new
 * seed's, every one) mostly ends at the tag, a byte in a table an eighth
 * the size of the slots', without reading an entry, each a miss in the
 * processor's caches once the cache is full. */
static uint8_t tag_of(uint64_t hash)
{
    return (uint8_t)(1u << (hash >> 61));
}

static uint8_t *tag_slot(struct drawn_cache *c, uint64_t hash)
{
    return &c->tags[hash & (c->n_slots - 1)];
}

static struct drawn *find(struct drawn_cache *c, const struct key *k)
{
    if (!(*tag_slot(c, k->hash) & tag_of(k->hash)))
        return NULL;
    for (struct drawn *e = *slot_of(c, k->hash); e; e = e->chain)
        if (e->hash == k->hash && e->kind == k->kind && e->seed == k->seed &&
            e->cols == k->cols && e->count == k->count &&
            e->label_len == k->label_len &&
            !memcmp(e->label, k->label, k->label_len))
            return e;
    return NULL;
}

static void lru_unlink(struct drawn_cache *c, struct drawn *e)
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

static void lru_push(struct drawn_cache *c, struct drawn *e)
{
    e->older = c->lru_head;
    e->newer = NULL;
    if (c->lru_head)
        c->lru_head->newer = e;
    c->lru_head = e;
    if (!c->lru_tail)
        c->lru_tail = e;
}

/* Take e out of the table and the list; it is then the caller's to
 * free, which it does outside the lock (free_forgotten()). */
static void forget(struct drawn_cache *c, struct drawn *e)
{
    struct drawn **p = slot_of(c, e->hash);
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
    uint8_t tag = 0;
    for (const struct drawn *left = *slot_of(c, e->hash); left;
         left = left->chain)
        tag |= tag_of(left->hash);
    *tag_slot(c, e->hash) = tag;
    lru_unlink(c, e);
    c->bytes -= e->bytes;
    c->n_held--;
}

static void free_forgotten(struct drawn *gone)
{
    while (gone) {
        struct drawn *next = gone->chain;
        free(gone->values);
        free(gone);
        gone = next;
    }
}

/* Forget the least recently used entries no lease holds until room more
 * bytes fit within the cap (or only held ones are left), onto *gone. */
static void evict(struct drawn_cache *c, size_t room, struct drawn **gone)
{
    struct drawn *e = c->lru_tail;
    while (c->bytes + room > c->cap && e) {
        struct drawn *newer = e->newer;
        if (!e->refs) {
            forget(c, e);
            e->chain = *gone;
            *gone = e;
            c->evictions++;
        }
        e = newer;
    }
}

/* Twice the slots once there are more entries than slots, so that a
 * chain stays about one entry long however small the entries are (a
 * token's embedding is a few hundred bytes). The table, beside the
 * entries the cap counts, stays within an eighth of it: past that, or
 * when the larger table cannot be had, the chains grow instead. */
static void grow(struct drawn_cache *c)
{
    const size_t n = c->n_slots * 2;
    if (c->n_held <= c->n_slots ||
        n * (sizeof *c->slots + sizeof *c->tags) > c->cap / 8)
        return;
    struct drawn **slots = calloc(n, sizeof *slots);
    uint8_t *tags = calloc(n, sizeof *tags);
    if (!slots || !tags) {
        free(slots);
        free(tags);
        return;
    }
    for (size_t i = 0; i < c->n_slots; i++)
        for (struct drawn *e = c->slots[i], *next; e; e = next) {
            next = e->chain;
            e->chain = slots[e->hash & (n - 1)];
            slots[e->hash & (n - 1)] = e;
            tags[e->hash & (n - 1)] |= tag_of(e->hash);
        }
    free(c->slots);
    free(c->tags);
    c->slots = slots;
    c->tags = tags;
    c->n_slots = n;
}

/* The slot of `passed` that remembers the key of hash. */
static uint64_t *passed_slot(struct drawn_cache *c, uint64_t hash)
{
    return &c->passed[hash & (c->n_passed - 1)];
}

/* Whether values of bytes for the key of hash go in: at once while they
 * fit beside what is kept, else on their second draw in a while. The
 * first is remembered in the key's slot of `passed`, in place of
 * whichever key was there; keep() forgets it once the values are in. */
static bool admit(struct drawn_cache *c, uint64_t hash, size_t bytes)
{
    if (c->bytes + bytes <= c->cap)
        return true;
    uint64_t *slot = passed_slot(c, hash);
    if (*slot == hash)
        return true;
    *slot = hash;
    c->passes++;
    return false;
}

void drawn_cache_init(struct drawn_cache *c, size_t cap_bytes)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    c->cap = cap_bytes;
    /* it grows with its entries (grow()) */
    c->n_slots = cap_bytes ? MIN_SLOTS : 0;
    c->slots = c->n_slots ? calloc(c->n_slots, sizeof *c->slots) : NULL;
    c->tags = c->n_slots ? calloc(c->n_slots, sizeof *c->tags) : NULL;
    c->n_passed = MIN_PASSED;
    while (c->n_passed < MAX_PASSED && c->n_passed * 2 * 8192 <= cap_bytes)
        c->n_passed *= 2;
    c->passed = c->slots ? calloc(c->n_passed, sizeof *c->passed) : NULL;
    if (!c->slots || !c->tags || !c->passed) {
        free(c->slots);
        free(c->tags);
        free(c->passed);
        c->slots = NULL;
        c->tags = NULL;
        c->passed = NULL;
        c->cap = c->n_slots = c->n_passed = 0;
    }
}

void drawn_cache_free(struct drawn_cache *c)
{
    while (c->lru_head) {
        struct drawn *e = c->lru_head;
        forget(c, e);
        e->chain = NULL;
        free_forgotten(e);
    }
    free(c->slots);
    free(c->tags);
    free(c->passed);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

/* The kept entry of k with one more lease on it (refs > 0) or none
 * (refs 0: a copy is all the caller takes), or NULL. */
static struct drawn *take(struct drawn_cache *c, const struct key *k,
                          bool lease)
{
    struct drawn *e = find(c, k);
    if (e) {
        e->refs += lease;
        lru_unlink(c, e);
        lru_push(c, e);
    }
    return e;
}

/* The bytes an entry for k takes, values included. */
static size_t entry_bytes(const struct key *k)
{
    return sizeof(struct drawn) + k->label_len + 1 + k->count * sizeof(float);
}

/* Whether values for k, drawn now, are to be kept (admit()). */
static bool to_keep(struct drawn_cache *c, const struct key *k)
{
    const size_t bytes = entry_bytes(k);
    return bytes <= c->cap && admit(c, k->hash, bytes);
}

/* Keep values (drawn for k and admitted by to_keep(), now the cache's)
 * with `lease` leases on them, room made for them first; NULL when they
 * are not kept (no room beside what leases hold, or no memory for the
 * entry), and the values stay the caller's. So the cache is never over
 * its cap, and what keep() returns is never one of the entries it
 * forgot. */
static struct drawn *keep(struct drawn_cache *c, const struct key *k,
                          float *values, bool lease, struct drawn **gone)
{
    const size_t bytes = entry_bytes(k);
    if (bytes > c->cap)
        return NULL;
    evict(c, bytes, gone);
    if (c->bytes + bytes > c->cap)
        return NULL;
    struct drawn *e = malloc(sizeof *e + k->label_len + 1);
    if (!e)
        return NULL;
    *e = (struct drawn){.kind = k->kind,
                        .seed = k->seed,
                        .cols = k->cols,
                        .count = k->count,
                        .hash = k->hash,
                        .values = values,
                        .bytes = bytes,
                        .refs = lease,
                        .label_len = k->label_len};
    memcpy(e->label, k->label, k->label_len + 1);
    struct drawn **slot = slot_of(c, k->hash);
    e->chain = *slot;
    *slot = e;
    *tag_slot(c, k->hash) |= tag_of(k->hash);
    lru_push(c, e);
    c->bytes += bytes;
    c->n_held++;
    /* in now: its first draw need not be remembered; kept remembered
     * until then, so that values admitted but not kept (no room beside
     * the leases) go in on the next draw */
    uint64_t *passed = passed_slot(c, k->hash);
    if (*passed == k->hash)
        *passed = 0;
    grow(c);
    return e;
}

unsigned drawn_params_needed(const struct attn_config *cfg)
{
    const unsigned want = cfg->want | cfg->want_internal;
    unsigned slots = 1u << ATTN_PARAM_WQ | 1u << ATTN_PARAM_BQ |
                     1u << ATTN_PARAM_WK | 1u << ATTN_PARAM_BK |
                     1u << ATTN_PARAM_BIAS_K | 1u << ATTN_PARAM_BIAS_V;
    if ((want & (ATTN_WANT_V | ATTN_WANT_HEADS | ATTN_WANT_OUTPUT |
                 ATTN_WANT_VALUE_WEIGHTED)) ||
        cfg->residual == ATTN_RESIDUAL_VALUE)
        slots |= 1u << ATTN_PARAM_WV | 1u << ATTN_PARAM_BV;
    if (want & (ATTN_WANT_OUTPUT | ATTN_WANT_VALUE_WEIGHTED))
        slots |= 1u << ATTN_PARAM_WO | 1u << ATTN_PARAM_BO;
    return slots;
}

bool drawn_params_lease(struct drawn_cache *c, const struct attn_config *cfg,
                        struct attn_params *out, struct drawn_lease *lease,
                        struct attn_error *err)
{
    return drawn_params_lease_some(c, cfg, DRAWN_ALL_SLOTS, out, lease, err);
}

bool drawn_params_lease_some(struct drawn_cache *c,
                             const struct attn_config *cfg, unsigned slots,
                             struct attn_params *out, struct drawn_lease *lease,
                             struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    memset(lease, 0, sizeof *lease);
    lease->cache = c;
    const bool cached = c && c->cap;
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n = attn_params_layout(cfg, 0, tensors);
    for (size_t i = 0; i < n; i++) {
        const struct attn_param_tensor *t = &tensors[i];
        if (!(slots & 1u << t->slot))
            continue;
        const struct key k = key_of(DRAWN_PARAM, cfg->seed, t->name, t->cols,
                                    attn_param_count(t));
        const float **slot = attn_params_slot(out, t->slot);
        struct drawn *e = NULL;
        if (cached) {
            pthread_mutex_lock(&c->lock);
            e = take(c, &k, true);
            if (e)
                c->hits[DRAWN_PARAM]++;
            else
                c->misses[DRAWN_PARAM]++;
            pthread_mutex_unlock(&c->lock);
        }
        if (e) {
            lease->held[lease->n_held++] = e;
            *slot = e->values;
            continue;
        }
        /* drawn outside the lock: a large tensor takes a while */
        float *values = malloc(k.count * sizeof *values);
        if (!values) {
            drawn_lease_end(lease);
            memset(out, 0, sizeof *out);
            memset(err, 0, sizeof *err);
            snprintf(err->field, sizeof err->field, "params");
            snprintf(err->message, sizeof err->message,
                     "out of memory drawing %s (%zu numbers)", t->name,
                     k.count);
            return false;
        }
        attn_params_draw_tensor(cfg->seed, t, values);
        if (cached) {
            struct drawn *gone = NULL;
            pthread_mutex_lock(&c->lock);
            /* another request may have drawn the same meanwhile */
            e = take(c, &k, true);
            if (!e && to_keep(c, &k))
                e = keep(c, &k, values, true, &gone);
            pthread_mutex_unlock(&c->lock);
            if (e && e->values != values)
                free(values);
            free_forgotten(gone);
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

void drawn_lease_end(struct drawn_lease *lease)
{
    struct drawn_cache *c = lease->cache;
    if (lease->n_held) {
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < lease->n_held; i++)
            lease->held[i]->refs--;
        pthread_mutex_unlock(&c->lock);
    }
    for (size_t i = 0; i < lease->n_own; i++)
        free(lease->own[i]);
    memset(lease, 0, sizeof *lease);
}

/* Whether two keys of one call (the same kind, seed and shape) are the
 * same key. */
static bool same_text(const struct key *a, const struct key *b)
{
    return a->hash == b->hash && a->label_len == b->label_len &&
           !memcmp(a->label, b->label, a->label_len);
}

/* Tokens of a call whose bookkeeping fits the stack; a longer text's is
 * allocated. */
enum { STACK_TOKENS = 64 };

/* first[t] = the first place of token t's text among the n keys (t
 * itself for a first place), by a table of twice n places or more. */
static void first_places(const struct key *keys, size_t n, uint32_t *first,
                         uint32_t *place, size_t places)
{
    memset(place, 0, places * sizeof *place); /* a first place + 1, or 0 */
    for (size_t t = 0; t < n; t++) {
        size_t at = keys[t].hash & (places - 1);
        while (place[at] && !same_text(&keys[place[at] - 1], &keys[t]))
            at = (at + 1) & (places - 1);
        if (!place[at])
            place[at] = (uint32_t)t + 1;
        first[t] = place[at] - 1;
    }
}

/* Tokens looked up under one hold of the lock: a long text's looks
 * leave it to other requests between batches. */
enum { LOOK_BATCH = 128 };

/* The distinct texts among keys [t0, t1) (first places, first[t] == t)
 * from c, or drawn and then kept: one look under the lock for all of
 * them, copies of those kept; the others drawn outside it, then kept. */
static void embed_distinct(struct drawn_cache *c, const struct key *keys,
                           const uint32_t *first, size_t t0, size_t t1,
                           uint64_t seed, size_t dim, float *out, bool *found)
{
    const size_t row = dim * sizeof(float);
    bool drew = false;
    pthread_mutex_lock(&c->lock);
    for (size_t t = t0; t < t1; t++) {
        if (first[t] != t)
            continue;
        const struct drawn *e = take(c, &keys[t], false);
        found[t] = e != NULL;
        if (e) {
            memcpy(out + t * dim, e->values, row);
            c->hits[DRAWN_TOKEN]++;
        } else {
            c->misses[DRAWN_TOKEN]++;
        }
    }
    pthread_mutex_unlock(&c->lock);
    for (size_t t = t0; t < t1; t++)
        if (first[t] == t && !found[t]) {
            attn_embed_token(keys[t].label, keys[t].label_len, seed, dim,
                             out + t * dim);
            drew = true;
        }
    if (!drew)
        return;
    struct drawn *gone = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t t = t0; t < t1; t++) {
        /* another request may have kept it meanwhile; or not kept */
        if (first[t] != t || found[t] || find(c, &keys[t]) ||
            !to_keep(c, &keys[t]))
            continue;
        float *copy = malloc(row);
        if (copy) {
            memcpy(copy, out + t * dim, row);
            if (!keep(c, &keys[t], copy, false, &gone))
                free(copy);
        }
    }
    pthread_mutex_unlock(&c->lock);
    free_forgotten(gone);
}

/* Places of first_places()'s table for n tokens: a power of two, twice
 * n or more. */
static size_t places_for(size_t n)
{
    size_t places = 2 * STACK_TOKENS;
    while (places / 2 < n)
        places *= 2;
    return places;
}

/* Whether n tokens are listed (first_places()): a place holds a token's
 * index + 1 in 32 bits. */
static bool listable(size_t n)
{
    return n < UINT32_MAX;
}

size_t drawn_embed_tokens_scratch(size_t n)
{
    if (n <= STACK_TOKENS || !listable(n))
        return 0;
    return n * (sizeof(struct key) + sizeof(uint32_t) + sizeof(bool)) +
           places_for(n) * sizeof(uint32_t);
}

/* Every token drawn, each place on its own. */
static void draw_each(char *const *text, size_t n, uint64_t seed, size_t dim,
                      float *out)
{
    for (size_t t = 0; t < n; t++)
        attn_embed_token(text[t], strlen(text[t]), seed, dim, out + t * dim);
}

void drawn_embed_tokens(struct drawn_cache *c, char *const *text, size_t n,
                        uint64_t seed, size_t dim, float *out)
{
    if (!c || !c->cap) {
        draw_each(text, n, seed, dim, out);
        return;
    }
    /* each text once however many times it comes: a word twice in a text
     * is one draw (or one look), not the second draw that would keep it
     * in a full cache, then copied to its other places. The list of the
     * texts is on the stack for a few dozen tokens, else allocated
     * (drawn_embed_tokens_scratch()); without it, each place is drawn. */
    struct key keys_here[STACK_TOKENS];
    uint32_t first_here[STACK_TOKENS], place_here[2 * STACK_TOKENS];
    bool found_here[STACK_TOKENS];
    const bool here = n <= STACK_TOKENS;
    size_t places = 2 * STACK_TOKENS;
    struct key *keys = keys_here;
    uint32_t *first = first_here, *place = place_here;
    bool *found = found_here;
    if (!here) {
        const bool listed = listable(n);
        places = listed ? places_for(n) : 0;
        keys = listed ? malloc(n * sizeof *keys) : NULL;
        first = listed ? malloc(n * sizeof *first) : NULL;
        place = listed ? malloc(places * sizeof *place) : NULL;
        found = listed ? malloc(n * sizeof *found) : NULL;
    }
    if (!keys || !first || !place || !found) {
        draw_each(text, n, seed, dim, out);
    } else {
        for (size_t t = 0; t < n; t++)
            keys[t] = key_of(DRAWN_TOKEN, seed, text[t], dim, dim);
        first_places(keys, n, first, place, places);
        for (size_t t0 = 0; t0 < n; t0 += LOOK_BATCH)
            embed_distinct(c, keys, first, t0,
                           n - t0 < LOOK_BATCH ? n : t0 + LOOK_BATCH, seed, dim,
                           out, found);
        for (size_t t = 0; t < n; t++)
            if (first[t] != t)
                memcpy(out + t * dim, out + first[t] * dim,
                       dim * sizeof(float));
    }
    if (!here) {
        free(keys);
        free(first);
        free(place);
        free(found);
    }
}

void drawn_cache_stats(struct drawn_cache *c, struct drawn_cache_stats *s)
{
    pthread_mutex_lock(&c->lock);
    *s = (struct drawn_cache_stats){.bytes = c->bytes,
                                    .cap = c->cap,
                                    .entries = c->n_held,
                                    .slots = c->n_slots,
                                    .evictions = c->evictions,
                                    .passes = c->passes};
    for (int k = 0; k < DRAWN_KINDS; k++) {
        s->hits[k] = c->hits[k];
        s->misses[k] = c->misses[k];
    }
    pthread_mutex_unlock(&c->lock);
}

const char *drawn_kind_name(enum drawn_kind kind)
{
    return kind == DRAWN_PARAM ? "params" : "tokens";
}
