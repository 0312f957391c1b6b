/*
 * batcher.h - the generations in flight, decoded together: at each step
 * every sequence that can take a token contributes its next row, and one
 * pass over a model's weights serves all of that model's sequences
 * (src/ xf_run.seqs), each with its own cache, position, sampling, stops
 * and rows of attention, and each getting the bits it would get alone.
 *
 * A generation holds a slot from its prompt to its end: at most
 * max_batch at once. One that finds every slot taken waits, at most
 * max_waiting of them in order, each until its deadline; past it (or with
 * no room to wait) it is answered 503 with Retry-After. It joins at the
 * next step, bringing its prompt's tokens as rows of the steps (a step
 * takes DECODE_STEP_PROMPT rows of prompts at most: what is left waits
 * for the next), so that prompts arriving together share one pass over
 * the weights with each other and with the generations decoding; a
 * longer prompt, or one with edits, runs first on the compute pool as its
 * own work. It leaves at the first step after its end, its cache freed
 * then. The steps run on the batcher's own thread and pool.
 */
#ifndef ATTND_BATCHER_H
#define ATTND_BATCHER_H

#include "problem.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct batcher;
struct decoding;

struct batcher_limits {
    size_t max_batch;          /* generations in flight at once, 1 or more */
    size_t max_waiting;        /* generations that may wait for a slot */
    double wait_seconds;       /* how long one may wait */
    unsigned threads;          /* the steps' team */
    const atomic_bool *cancel; /* the server's: stop computing */
    const struct problem *stopping; /* the server's answer once it stops */
};

/* A generation's place in the line for a slot. */
struct batch_ticket {
    struct batch_ticket *next;
    struct timespec deadline;
    /* one of them is called, once, on the batcher's thread: a slot is
     * the ticket's (start the prompt), or it is not to be had (answer pb,
     * a 503) */
    void (*granted)(struct batch_ticket *t);
    void (*refused)(struct batch_ticket *t, const struct problem *pb);
    /* NULL, or: has its client gone away? Asked on the batcher's thread
     * while the ticket waits (every BATCH_LOOK_SECONDS at most) and as a
     * slot is to be granted: one whose client has left is refused (the
     * problem's reason "client_gone") and its place in line freed, so that no
     * slot, prompt or step goes to a client that is not there. */
    bool (*left)(struct batch_ticket *t);
};

/* How often the tickets waiting are asked whether their clients left. */
#define BATCH_LOOK_SECONDS 0.1

/* Start the thread. NULL, with a line on stderr, when it cannot be. */
struct batcher *batcher_start(const struct batcher_limits *lim);

enum batch_admit {
    BATCH_ADMITTED, /* the slot is the caller's now */
    BATCH_WAITING,  /* the ticket waits: granted() or refused() follows */
    BATCH_FULL      /* no slot and no room to wait (or stopping): *pb */
};

/* Ask for a slot for t. With BATCH_FULL, pb is the 503 to answer. */
enum batch_admit batcher_admit(struct batcher *b, struct batch_ticket *t,
                               struct problem *pb);

/* A slot given back by a generation that ended before it joined (its
 * prompt's own pass failed or finished it, or its client had gone). */
void batcher_release(struct batcher *b);

/* d, started (its prompt run, or to be brought to the steps), goes on in
 * the batch from the next step. When it ends, its slot is given back and
 * decoding_end() answers it. */
void batcher_join(struct batcher *b, struct decoding *d);

/* Generations in flight (holding a slot) and waiting, now. */
size_t batcher_in_flight(struct batcher *b);
size_t batcher_waiting(struct batcher *b);

/* Refuse every ticket still waiting (the server is stopping); those in
 * flight go on until they end or their cancel is raised. */
void batcher_close(struct batcher *b);

/* Close, wait for every generation in the batch to end, stop the thread
 * and free everything. */
void batcher_stop(struct batcher *b);

#endif
