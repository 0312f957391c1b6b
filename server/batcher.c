/*
 * batcher.c - the generations in flight, decoded together (batcher.h).
 *
 * The thread's loop: tickets past their deadline are refused and free
 * slots granted in order; generations whose prompts are done join; then
 * one step. In a step each generation in the batch is asked what it does
 * (takes a token, waits for its client, or has ended); those taking a
 * token are grouped by model, and each group is one batched pass
 * (xf_run.seqs) whose logits each member takes. Every member of the
 * batch advances by one token a step, so a long generation cannot starve
 * a short one; a member whose client is behind sits the step out, and
 * one that has ended leaves, its cache freed, its slot given to the next
 * ticket.
 */
#include "batcher.h"
#include "decoding.h"
#include "metrics.h"
#include "models.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct batcher {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a ticket, a joiner or the stop */
    pthread_t thread;
    struct batcher_limits lim;
    size_t in_flight; /* slots held */
    struct batch_ticket *wait_head, *wait_tail;
    size_t waiting;
    struct decoding *joining; /* started, joining at the next step */
    bool closed;              /* no more tickets */
    struct timespec next_look; /* when to ask the waiting if they left */
    bool stopping;            /* end once nothing is in flight */
    /* the thread's own */
    struct decoding **active; /* [max_batch] */
    size_t n_active;
    struct decoding **group; /* [max_batch] a step's members of one model */
    struct xf_seq *seqs;     /* [max_batch] */
    uint32_t *ids;           /* [max_batch + DECODE_STEP_PROMPT] */
    size_t *at;              /* [max_batch] where a group's members are */
    size_t *allot;           /* [max_batch] the tokens each brings to a
                                step */
    bool *takes, *ended, *group_ended; /* [max_batch] each */
};

static void after(struct timespec *t, double seconds)
{
    clock_gettime(CLOCK_MONOTONIC, t);
    const double whole = (double)(time_t)seconds;
    t->tv_sec += (time_t)seconds;
    t->tv_nsec += (long)((seconds - whole) * 1e9);
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

static bool passed(const struct timespec *t, const struct timespec *now)
{
    return now->tv_sec > t->tv_sec ||
           (now->tv_sec == t->tv_sec && now->tv_nsec >= t->tv_nsec);
}

/* Has t's client gone away? */
static bool ticket_left(struct batch_ticket *t)
{
    return t->left && t->left(t);
}

/* The tickets waiting whose clients have left, out of the line onto
 * *gone; under the lock. */
static void drop_left(struct batcher *b, struct batch_ticket **gone)
{
    struct batch_ticket **at = &b->wait_head, *last = NULL;
    while (*at) {
        struct batch_ticket *t = *at;
        if (!ticket_left(t)) {
            last = t;
            at = &t->next;
            continue;
        }
        *at = t->next;
        b->waiting--;
        t->next = *gone;
        *gone = t;
    }
    b->wait_tail = last;
}

/* The 503 of a generation that finds no slot, the batch closed or not
 * (as its lock said). */
static void no_slot(const struct batcher *b, bool closed, struct problem *pb,
                    bool waited)
{
    if (closed) {
        *pb = *b->lim.stopping;
        return;
    }
    if (waited)
        problem_set(pb, 503, "",
                    "every one of the %zu generations at once (--max-batch) "
                    "was still in flight after %.3g s of waiting "
                    "(--batch-wait-seconds); try again shortly",
                    b->lim.max_batch, b->lim.wait_seconds);
    else
        problem_set(pb, 503, "",
                    "the server is generating all it may (%zu at once, "
                    "--max-batch) and %zu more wait (--batch-queue); try "
                    "again shortly",
                    b->lim.max_batch, b->lim.max_waiting);
    pb->retry_after = 1;
    pb->reason = "capacity";
}

enum batch_admit batcher_admit(struct batcher *b, struct batch_ticket *t,
                               struct problem *pb)
{
    enum batch_admit out = BATCH_FULL;
    pthread_mutex_lock(&b->lock);
    if (!b->closed && b->in_flight < b->lim.max_batch && !b->wait_head) {
        b->in_flight++;
        out = BATCH_ADMITTED;
    } else if (!b->closed && b->waiting < b->lim.max_waiting) {
        after(&t->deadline, b->lim.wait_seconds);
        t->next = NULL;
        if (b->wait_tail)
            b->wait_tail->next = t;
        else
            b->wait_head = t;
        b->wait_tail = t;
        b->waiting++;
        pthread_cond_signal(&b->wake);
        out = BATCH_WAITING;
    } else {
        no_slot(b, b->closed, pb, false);
    }
    pthread_mutex_unlock(&b->lock);
    return out;
}

void batcher_release(struct batcher *b)
{
    pthread_mutex_lock(&b->lock);
    b->in_flight--;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->lock);
}

void batcher_join(struct batcher *b, struct decoding *d)
{
    pthread_mutex_lock(&b->lock);
    d->run.next = b->joining;
    b->joining = d;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->lock);
}

size_t batcher_in_flight(struct batcher *b)
{
    pthread_mutex_lock(&b->lock);
    const size_t n = b->in_flight;
    pthread_mutex_unlock(&b->lock);
    return n;
}

size_t batcher_waiting(struct batcher *b)
{
    pthread_mutex_lock(&b->lock);
    const size_t n = b->waiting;
    pthread_mutex_unlock(&b->lock);
    return n;
}

/* ---------------------------------------------------------- a step */

/* Member i of the batch has ended: out of it, its slot given back. */
static void leave(struct batcher *b, size_t i)
{
    struct decoding *d = b->active[i];
    b->active[i] = b->active[--b->n_active];
    batcher_release(b);
    decoding_end(d);
}

/* The model d generates with. */
static const struct xf_model *model_of(const struct decoding *d)
{
    return &d->g->req.model.entry->model->xf;
}

/* Whether d's products take bfloat16 dot products ("products"). */
static bool bf16_dots_of(const struct decoding *d)
{
    return d->g->req.model.run.bf16_dots;
}

/* One batched pass over the n members of group (one model, one way with
 * its products), each bringing its next token or the tokens of its
 * prompt allotted to it; a member that has brought all of its tokens
 * then takes its next one. Those that end are marked in ended. */
static void step_group(struct batcher *b, size_t n, bool *ended)
{
    const struct xf_model *x = model_of(b->group[0]);
    size_t rows = 0, prompt_tokens = 0;
    for (size_t i = 0; i < n; i++) {
        const bool prompt = decoding_in_prompt(b->group[i]);
        const size_t tokens = decoding_seq(b->group[i], &b->seqs[i],
                                           b->ids + rows, b->allot[b->at[i]]);
        prompt_tokens += prompt ? tokens : 0;
        rows += tokens;
    }
    const struct xf_run run = decoding_step_run(
        b->seqs, n, b->ids, b->lim.threads, bf16_dots_of(b->group[0]));
    struct xf_plan plan;
    struct xf_result r = {0};
    struct attn_error err;
    attn_status st = xf_plan(x, &run, &plan, &err);
    // the work as planned, before the pass grows the caches it counts by
    const double flops = st == ATTN_OK ? xf_plan_flops(&plan) : 0.0;
    if (st == ATTN_OK)
        st = xf_forward(&plan, b->lim.cancel, &r, &err);
    if (st == ATTN_OK) {
        metrics_add_flops(flops);
        // counted before any client can see its token
        size_t made = 0;
        for (size_t i = 0; i < n; i++)
            made += decoding_pending(b->group[i]) == 0;
        metrics_decode_step(made, prompt_tokens);
        for (size_t i = 0; i < n; i++)
            ended[i] =
                decoding_pending(b->group[i]) == 0 &&
                !decoding_take(b->group[i], r.logits + i * x->vocab_size);
        xf_result_free(&r);
        return;
    }
    // a pass of many that fails (an input that overflows, the memory of
    // the whole batch) is run again one member at a time, so that only
    // a member whose own pass fails fails
    for (size_t i = 0; i < n; i++) {
        if (st != ATTN_E_CANCELLED && n > 1) {
            ended[i] = !decoding_alone(b->group[i], b->lim.threads);
            continue;
        }
        decoding_fail(b->group[i], st, &err);
        ended[i] = true;
    }
}

/* One step over the batch; false when no member took a token. */
static bool step(struct batcher *b)
{
    bool took = false;
    size_t prompt_rows = DECODE_STEP_PROMPT; /* the step may take yet */
    // each member's turn; those that take a token are marked, the ended
    // leave
    bool *takes = b->takes, *ended = b->ended;
    memset(takes, 0, b->n_active * sizeof *takes);
    memset(ended, 0, b->n_active * sizeof *ended);
    for (size_t i = 0; i < b->n_active; i++) {
        struct decoding *d = b->active[i];
        switch (decoding_turn(d)) {
        case DECODE_ENDED: ended[i] = true; break;
        case DECODE_WAITS: break;
        case DECODE_TAKES:
            // a prompt's tokens as many as the step has rows left for,
            // in the batch's order; with none left it waits a step
            b->allot[i] = decoding_pending(d);
            if (b->allot[i] > 1) {
                if (prompt_rows == 0)
                    break;
                b->allot[i] =
                    b->allot[i] < prompt_rows ? b->allot[i] : prompt_rows;
                prompt_rows -= b->allot[i];
            }
            if (decoding_outgrown(d)) {
                ended[i] = !decoding_alone(d, b->lim.threads);
                took = true;
            } else {
                takes[i] = true;
            }
            break;
        }
    }
    // the takers by model and way with products, in the batch's order
    for (size_t i = 0; i < b->n_active; i++) {
        if (!takes[i])
            continue;
        const struct xf_model *x = model_of(b->active[i]);
        const bool bf16_dots = bf16_dots_of(b->active[i]);
        size_t n = 0;
        for (size_t j = i; j < b->n_active; j++)
            if (takes[j] && model_of(b->active[j]) == x &&
                bf16_dots_of(b->active[j]) == bf16_dots) {
                takes[j] = false;
                b->at[n] = j;
                b->group[n++] = b->active[j];
            }
        step_group(b, n, b->group_ended);
        for (size_t k = 0; k < n; k++)
            ended[b->at[k]] = b->group_ended[k];
        took = true;
    }
    // the ended leave, from the back so that the indices hold
    for (size_t i = b->n_active; i-- > 0;)
        if (ended[i])
            leave(b, i);
    return took;
}

/* ------------------------------------------------------- the thread */

static void *run(void *arg)
{
    struct batcher *b = arg;
    pthread_mutex_lock(&b->lock);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        // tickets past their deadline, or all once closed, are refused;
        // free slots go to the first in line
        struct batch_ticket *refused = NULL, *granted = NULL, *gone = NULL;
        const bool closed = b->closed;
        if (b->wait_head && passed(&b->next_look, &now)) {
            drop_left(b, &gone);
            after(&b->next_look, BATCH_LOOK_SECONDS);
        }
        while (b->wait_head &&
               (b->closed || passed(&b->wait_head->deadline, &now) ||
                b->in_flight < b->lim.max_batch)) {
            struct batch_ticket *t = b->wait_head;
            b->wait_head = t->next;
            if (!b->wait_head)
                b->wait_tail = NULL;
            b->waiting--;
            if (ticket_left(t)) {
                t->next = gone;
                gone = t;
                continue;
            }
            const bool give = !b->closed && b->in_flight < b->lim.max_batch;
            if (give)
                b->in_flight++;
            t->next = give ? granted : refused;
            if (give)
                granted = t;
            else
                refused = t;
        }
        while (b->joining) {
            struct decoding *d = b->joining;
            b->joining = d->run.next;
            b->active[b->n_active++] = d;
        }
        if (!refused && !granted && !gone && b->n_active == 0) {
            if (b->stopping && b->in_flight == 0)
                break;
            // until the first in line's deadline, or the next look
            if (b->wait_head)
                pthread_cond_timedwait(
                    &b->wake, &b->lock,
                    passed(&b->wait_head->deadline, &b->next_look)
                        ? &b->wait_head->deadline
                        : &b->next_look);
            else
                pthread_cond_wait(&b->wake, &b->lock);
            continue;
        }
        pthread_mutex_unlock(&b->lock);
        while (gone) {
            struct batch_ticket *t = gone;
            gone = t->next;
            struct problem pb;
            problem_set(&pb, 503, "",
                        "the client went away while it waited for a place "
                        "in the batch");
            pb.reason = "client_gone";
            t->refused(t, &pb);
        }
        while (refused) {
            struct batch_ticket *t = refused;
            refused = t->next;
            struct problem pb;
            no_slot(b, closed, &pb, true);
            t->refused(t, &pb);
        }
        while (granted) {
            struct batch_ticket *t = granted;
            granted = t->next;
            t->granted(t);
        }
        if (b->n_active && !step(b)) {
            // every member waits for its client: a moment before the next
            // look, so as not to spin
            struct timespec pause;
            after(&pause, 0.002);
            pthread_mutex_lock(&b->lock);
            pthread_cond_timedwait(&b->wake, &b->lock, &pause);
            continue;
        }
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

static void batcher_free(struct batcher *b)
{
    pthread_cond_destroy(&b->wake);
    pthread_mutex_destroy(&b->lock);
    free(b->active);
    free(b->group);
    free(b->seqs);
    free(b->ids);
    free(b->allot);
    free(b->at);
    free(b->takes);
    free(b->ended);
    free(b->group_ended);
    free(b);
}

struct batcher *batcher_start(const struct batcher_limits *lim)
{
    struct batcher *b = calloc(1, sizeof *b);
    if (!b) {
        fprintf(stderr, "attnd: out of memory for the decoding batch\n");
        return NULL;
    }
    b->lim = *lim;
    b->active = calloc(lim->max_batch, sizeof *b->active);
    b->group = calloc(lim->max_batch, sizeof *b->group);
    b->seqs = calloc(lim->max_batch, sizeof *b->seqs);
    b->ids = calloc(lim->max_batch + DECODE_STEP_PROMPT, sizeof *b->ids);
    b->allot = calloc(lim->max_batch, sizeof *b->allot);
    b->at = calloc(lim->max_batch, sizeof *b->at);
    b->takes = calloc(lim->max_batch, sizeof *b->takes);
    b->ended = calloc(lim->max_batch, sizeof *b->ended);
    b->group_ended = calloc(lim->max_batch, sizeof *b->group_ended);
    pthread_mutex_init(&b->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&b->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (!b->active || !b->group || !b->seqs || !b->ids || !b->allot || !b->at ||
        !b->takes || !b->ended || !b->group_ended ||
        pthread_create(&b->thread, NULL, run, b)) {
        fprintf(stderr, "attnd: cannot start the decoding batch's thread\n");
        batcher_free(b);
        return NULL;
    }
    return b;
}

void batcher_close(struct batcher *b)
{
    pthread_mutex_lock(&b->lock);
    b->closed = true;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->lock);
}

void batcher_stop(struct batcher *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->closed = true;
    b->stopping = true;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->thread, NULL);
    batcher_free(b);
}
