/*
 * drawn_cache.h - values drawn from a seed, kept for the requests after:
 * projection parameters and token embeddings. A parameter tensor depends
 * on the seed, its name and its shape only (attn_params_draw_tensor()), a
 * token's embedding on the seed, its text and the width
 * (attn_embed_token()); drawing them costs more than a small request's
 * whole pass. So each is drawn once and shared, read-only, by every
 * request that needs the same one. Answers are the same bits with or
 * without the cache.
 *
 * The cache holds at most its cap in bytes, entries and values together,
 * forgetting the least recently used entries that no request holds to
 * make room; a value larger than the cap, or than the room left beside
 * what requests hold, is drawn for its request alone. Once it is full, a
 * value is kept only when it is drawn a second time while its key is
 * still among the recent ones passed over (a table of their hashes, a
 * slot each): a stream of one-off seeds is drawn for each request alone
 * and does not wash out what the requests share. Its table of entries
 * grows with them, within an eighth of the cap (9 KiB at least); the
 * table of keys passed over has a slot for each 8 KiB of the cap (512
 * bytes to 32 KiB), beside it.
 * Cap 0 turns it off.
 * Safe from every thread.
 */
#ifndef ATTND_DRAWN_CACHE_H
#define ATTND_DRAWN_CACHE_H

#include "attention.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum drawn_kind { DRAWN_PARAM, DRAWN_TOKEN, DRAWN_KINDS };

struct drawn;

struct drawn_cache {
    pthread_mutex_t lock;
    size_t cap, bytes;
    struct drawn **slots; /* chained; n_slots a power of two */
    uint8_t *tags; /* [n_slots]: drawn_cache.c's tag_of() of each entry in
                      the slot, or'ed */
    size_t n_slots, n_held;
    struct drawn *lru_head, *lru_tail; /* most recent first */
    uint64_t *passed; /* hashes of keys passed over; n_passed a power of 2 */
    size_t n_passed;
    uint64_t hits[DRAWN_KINDS], misses[DRAWN_KINDS], evictions, passes;
};

/* The parameter tensors one request uses, held until drawn_lease_end(). */
struct drawn_lease {
    struct drawn_cache *cache;
    struct drawn *held[ATTN_PARAM_COUNT];
    float *own[ATTN_PARAM_COUNT]; /* drawn for this request alone */
    size_t n_held, n_own;
};

void drawn_cache_init(struct drawn_cache *c, size_t cap_bytes);
void drawn_cache_free(struct drawn_cache *c);

/*
 * The seeded parameters of resolved projected config cfg into *out, each
 * tensor from c (NULL: no cache) or drawn now; *lease holds them until
 * drawn_lease_end(). false only when memory ran out (err filled).
 */
bool drawn_params_lease(struct drawn_cache *c, const struct attn_config *cfg,
                        struct attn_params *out, struct drawn_lease *lease,
                        struct attn_error *err);

/* The same for only the tensors in slots (bits 1u << enum
 * attn_param_slot); the others stay NULL. A tensor is kept by its seed,
 * name and shape alone, so a later lease that takes one left out here
 * draws it then, and finds the ones taken here. */
bool drawn_params_lease_some(struct drawn_cache *c,
                             const struct attn_config *cfg, unsigned slots,
                             struct attn_params *out, struct drawn_lease *lease,
                             struct attn_error *err);

/* Every slot, for drawn_params_lease_some(). */
#define DRAWN_ALL_SLOTS ((1u << ATTN_PARAM_COUNT) - 1)

/*
 * The tensors attn_forward() reads of resolved projected config cfg, by
 * what cfg->want (with cfg->want_internal) asks of the pass: W_q, W_k
 * and their biases always, and bias_k and bias_v when cfg has them;
 * W_v and its bias when the pass computes V (V itself, the head
 * outputs, the output, the value-weighted norms, or a value residual);
 * W_o and its bias for the output or the value-weighted norms. The
 * weights alone need half the parameters drawn.
 */
unsigned drawn_params_needed(const struct attn_config *cfg);
void drawn_lease_end(struct drawn_lease *lease);

/* The embeddings of n tokens (text[i], NUL-terminated) from seed, dim
 * wide, into out [n][dim], each from c (NULL: no cache) or drawn now; a
 * text that comes more than once is looked up or drawn once. */
void drawn_embed_tokens(struct drawn_cache *c, char *const *text, size_t n,
                        uint64_t seed, size_t dim, float *out);

/* The bytes drawn_embed_tokens() allocates for n tokens while it runs,
 * beside out (a list of their texts; none for a few dozen), for the
 * caller to reserve first. Without them it draws every place. */
size_t drawn_embed_tokens_scratch(size_t n);

struct drawn_cache_stats {
    size_t bytes, cap, entries;
    size_t slots; /* of its table: one an entry or more, within cap / 8 */
    uint64_t hits[DRAWN_KINDS], misses[DRAWN_KINDS], evictions;
    uint64_t passes; /* values not kept: a full cache's first draw of them */
};
void drawn_cache_stats(struct drawn_cache *c, struct drawn_cache_stats *s);

/* "params", "tokens": a kind's name in /metrics. */
const char *drawn_kind_name(enum drawn_kind kind);

#endif
