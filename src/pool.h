/*
 * pool.h - the worker threads a forward pass runs its phases on; internal
 * to the core. The public face is struct attn_pool in attention.h.
 */
#ifndef ATTN_POOL_H
#define ATTN_POOL_H

#include "attention.h"

/* At most this many members (the calling thread and its helpers). */
enum { POOL_MAX_MEMBERS = 64 };

/* A job: member m (0 = the calling thread) runs job(arg, m). */
typedef void (*pool_job)(void *arg, unsigned member);

/* The calling thread and the pool's helpers. */
unsigned pool_members(const struct attn_pool *pool);

/* Bytes attn_pool_create() allocates (its threads' stacks aside). */
size_t pool_bytes(void);

/* Take the pool for one call; false when another call has it. */
bool pool_acquire(struct attn_pool *pool);
void pool_release(struct attn_pool *pool);

/* The pool a call of a team of `team` runs on (*use): given, when the
 * caller gave one and no other call has it (acquired then), else one of
 * its own (*own, also *use) for a team of more than one, else none (a
 * team of one runs on the calling thread alone). */
attn_status pool_take(struct attn_pool *given, unsigned team,
                      struct attn_pool **use, struct attn_pool **own,
                      struct attn_error *err);

/* Undo pool_take(): release use when it was the given pool, free own. */
void pool_give_back(struct attn_pool *use, struct attn_pool *own);

/* Run job on members 0 .. members - 1 (at most pool_members()), the
 * calling thread as member 0, and return once every member is done.
 * Only the call that acquired the pool may run jobs on it. */
void pool_run(struct attn_pool *pool, unsigned members, pool_job job,
              void *arg);

/* ---------------------------------------------------------------- phases */

/*
 * A pass runs as phases of independent units with fixed boundaries: any
 * member may take any unit, and which one does never changes what the
 * unit computes, so the results are the same bits for every team size.
 */

/* The members a call allowed threads (0 means 1) needs when its widest
 * phase has units units: never more than POOL_MAX_MEMBERS or units, which
 * a larger team would only idle over. */
unsigned pool_team_size(unsigned threads, size_t units);

/* A team: the calling thread plus, when pool is not NULL, its helpers, at
 * most size members in all; members stop taking units once *cancel (when
 * not NULL) is raised. */
struct pool_team {
    struct attn_pool *pool;
    unsigned size;
    const atomic_bool *cancel;
};

/* Unit u of a phase, run by member (0 = the calling thread), which
 * indexes any per-member scratch. */
typedef void (*pool_unit)(void *arg, size_t u, unsigned member);

/* Run units 0 .. n_units - 1 of a phase on the team and return once all
 * are done (or skipped after a cancel, which the caller checks). The
 * caller must hold team->pool (pool_take() or pool_acquire()). */
void pool_phase(const struct pool_team *team, pool_unit unit, void *arg,
                size_t n_units);

#endif
