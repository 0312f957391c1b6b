/*
 * pool.c - helper threads kept between the phases of a forward pass, and
 * between calls when the caller keeps the pool.
 *
 * Starting and joining a thread costs tens of microseconds, as much as a
 * small forward pass; a pass runs two phases or more (two per key block
 * in the key-outer order). So helpers wait for the next job instead: they
 * spin a little after each job, since the next phase usually follows at
 * once, then sleep on a condition variable.
 *
 * A job is published by storing it and then opening a new generation.
 * A helper that sees it joins (counts itself in) while the generation is
 * open, runs the job, and counts itself out. The caller runs the job too,
 * then closes the generation and waits only for the helpers inside it: a
 * helper that is asleep, or whose core a neighbour holds, never delays a
 * call it had no part in, and finding the generation closed (or a newer
 * one) it leaves the job, which may no longer exist, alone.
 */
#include "pool.h"
#include "error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* Pauses a waiting thread spins before it sleeps: some tens of
 * microseconds, about the gap between two phases of one pass. */
enum { SPIN_PAUSES = 2000 };

/* The pool's state word: the generation above GEN_SHIFT, CLOSED, and in
 * the bits below it the helpers inside the generation's job. */
#define INSIDE_MASK ((uint_fast64_t)0xff)
#define CLOSED ((uint_fast64_t)1 << 8)
#define GEN_SHIFT 9

struct helper {
    struct attn_pool *pool;
    unsigned member;
    pthread_t tid;
};

struct attn_pool {
    pthread_mutex_t lock; /* guards the sleeps on wake and done */
    pthread_cond_t wake;  /* a new generation, or stopping */
    pthread_cond_t done;  /* the last helper left a closed generation */
    atomic_flag busy;     /* held by the call using the pool */
    unsigned helpers;     /* started, members 1 .. helpers */
    struct helper helper[POOL_MAX_MEMBERS - 1];
    /* the job in hand, written before its generation opens */
    pool_job job;
    void *arg;
    unsigned members;
    bool stopping;
    atomic_uint_fast64_t state;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline uint_fast64_t generation_of(uint_fast64_t state)
{
    return state >> GEN_SHIFT;
}

/* Count a helper into generation gen if it is still open; false if not. */
static bool join(struct attn_pool *p, uint_fast64_t gen)
{
    uint_fast64_t st = atomic_load(&p->state);
    while (generation_of(st) == gen && !(st & CLOSED))
        if (atomic_compare_exchange_weak(&p->state, &st, st + 1))
            return true;
    return false;
}

static void leave(struct attn_pool *p)
{
    const uint_fast64_t old = atomic_fetch_sub(&p->state, 1);
    if ((old & CLOSED) && (old & INSIDE_MASK) == 1) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->lock);
    }
}

static void *helper_main(void *arg)
{
    struct helper *h = arg;
    struct attn_pool *p = h->pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t g = generation_of(atomic_load(&p->state));
        for (int i = 0; i < SPIN_PAUSES && g == seen; i++) {
            cpu_relax();
            g = generation_of(atomic_load(&p->state));
        }
        if (g == seen) {
            pthread_mutex_lock(&p->lock);
            while ((g = generation_of(atomic_load(&p->state))) == seen)
                pthread_cond_wait(&p->wake, &p->lock);
            pthread_mutex_unlock(&p->lock);
        }
        seen = g;
        if (!join(p, g))
            continue; /* over before this helper came */
        if (p->stopping) {
            leave(p);
            return NULL;
        }
        if (h->member < p->members)
            p->job(p->arg, h->member);
        leave(p);
    }
}

/* Open a new generation for the job (or stopping) and wake the helpers. */
static void publish(struct attn_pool *p)
{
    pthread_mutex_lock(&p->lock);
    const uint_fast64_t gen = generation_of(atomic_load(&p->state)) + 1;
    atomic_store(&p->state, gen << GEN_SHIFT);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

/* Close the generation and wait for the helpers inside it. */
static void close_and_wait(struct attn_pool *p)
{
    atomic_fetch_or(&p->state, CLOSED);
    for (int i = 0; i < SPIN_PAUSES && (atomic_load(&p->state) & INSIDE_MASK);
         i++)
        cpu_relax();
    if (!(atomic_load(&p->state) & INSIDE_MASK))
        return;
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->state) & INSIDE_MASK)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

attn_status attn_pool_create(unsigned threads, struct attn_pool **out,
                             struct attn_error *err)
{
    *out = NULL;
    if (threads == 0 || threads > POOL_MAX_MEMBERS)
        return attn_fail(err, ATTN_E_INVALID, "threads",
                         "a pool has 1 to %d threads, not %u", POOL_MAX_MEMBERS,
                         threads);
    struct attn_pool *p = calloc(1, sizeof *p);
    if (!p)
        return attn_fail(err, ATTN_E_NOMEM, "threads",
                         "out of memory for a pool of %u threads", threads);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_flag_clear(&p->busy);
    atomic_init(&p->state, 0);
    for (unsigned m = 1; m < threads; m++) {
        struct helper *h = &p->helper[m - 1];
        h->pool = p;
        h->member = m;
        if (pthread_create(&h->tid, NULL, helper_main, h) != 0)
            break; /* fewer helpers only means less parallelism */
        p->helpers = m;
    }
    *out = p;
    return ATTN_OK;
}

void attn_pool_free(struct attn_pool *p)
{
    if (!p)
        return;
    /* every helper sees the flag at its next generation, this one or a
     * later, whether or not it joins it */
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_mutex_unlock(&p->lock);
    publish(p);
    for (unsigned m = 0; m < p->helpers; m++)
        pthread_join(p->helper[m].tid, NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

unsigned attn_pool_threads(const struct attn_pool *p)
{
    return p->helpers + 1;
}

size_t pool_bytes(void)
{
    return sizeof(struct attn_pool);
}

unsigned pool_members(const struct attn_pool *p)
{
    return p->helpers + 1;
}

bool pool_acquire(struct attn_pool *p)
{
    return !atomic_flag_test_and_set_explicit(&p->busy, memory_order_acquire);
}

void pool_release(struct attn_pool *p)
{
    atomic_flag_clear_explicit(&p->busy, memory_order_release);
}

void pool_run(struct attn_pool *p, unsigned members, pool_job job, void *arg)
{
    if (members > p->helpers + 1)
        members = p->helpers + 1;
    if (members <= 1) {
        job(arg, 0);
        return;
    }
    p->job = job;
    p->arg = arg;
    p->members = members;
    publish(p);
    job(arg, 0);
    close_and_wait(p);
}

attn_status pool_take(struct attn_pool *given, unsigned team,
                      struct attn_pool **use, struct attn_pool **own,
                      struct attn_error *err)
{
    *use = *own = NULL;
    if (team <= 1)
        return ATTN_OK;
    if (given && pool_acquire(given)) {
        *use = given;
        return ATTN_OK;
    }
    const attn_status st = attn_pool_create(team, own, err);
    *use = *own;
    return st;
}

void pool_give_back(struct attn_pool *use, struct attn_pool *own)
{
    if (use && use != own)
        pool_release(use);
    attn_pool_free(own);
}

/* ---------------------------------------------------------------- phases */

unsigned pool_team_size(unsigned threads, size_t units)
{
    unsigned t = threads ? threads : 1;
    if (t > POOL_MAX_MEMBERS)
        t = POOL_MAX_MEMBERS;
    if (t > units)
        t = (unsigned)units;
    return t;
}

/* One phase as its members see it. */
struct phase {
    pool_unit unit;
    void *arg;
    size_t n_units;
    const atomic_bool *cancel;
    atomic_size_t next_unit;
};

/* Take units until none is left. */
static void phase_member(void *arg, unsigned member)
{
    struct phase *ph = arg;
    for (;;) {
        if (ph->cancel &&
            atomic_load_explicit(ph->cancel, memory_order_relaxed))
            return; /* the units left are skipped; the caller sees it */
        const size_t u = atomic_fetch_add(&ph->next_unit, 1);
        if (u >= ph->n_units)
            return;
        ph->unit(ph->arg, u, member);
    }
}

void pool_phase(const struct pool_team *team, pool_unit unit, void *arg,
                size_t n_units)
{
    struct phase ph = {
        .unit = unit, .arg = arg, .n_units = n_units, .cancel = team->cancel};
    atomic_init(&ph.next_unit, 0);
    const unsigned members =
        team->size < n_units ? team->size : (unsigned)n_units;
    if (team->pool && members > 1)
        pool_run(team->pool, members, phase_member, &ph);
    else
        phase_member(&ph, 0);
}
