/*
 * workers.h - the compute pool: `threads` threads of its own run the jobs
 * handed to it, one at a time each (one core each), at most `max_waiting`
 * jobs wait their turn in order, and the next one is turned away at once,
 * so that a burst costs a queue, not the machine. The HTTP threads never
 * wait for a computation: they hand it over and go on serving others.
 */
#ifndef ATTND_WORKERS_H
#define ATTND_WORKERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* One piece of work, embedded in whatever owns it (an exchange). run()
 * does it on a pool thread; refuse() answers it when the pool is closed
 * before its turn came. Either is called exactly once per job handed
 * over. */
struct job {
    struct job *next;
    void (*run)(struct job *job, double waited_seconds);
    void (*refuse)(struct job *job);
    struct timespec queued;
};

struct workers {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job was queued, or the pool is closing */
    struct job *head, *tail;
    size_t threads, max_waiting;
    size_t running, waiting;
    bool closed;   /* draining: nothing more is taken but what is owed */
    bool stopping; /* the threads end once the queue is empty */
    pthread_t *ids;
    size_t started; /* threads that exist */
};

/* Start the threads. false (nothing left running) when they cannot be
 * made. */
bool workers_start(struct workers *w, size_t threads, size_t max_waiting);

/* Queue job; false when the queue is full or the pool closed (the job is
 * then the caller's to answer). */
bool workers_submit(struct workers *w, struct job *job);

/* Queue a job owed to work already taken (a generation's answer once
 * its steps are done elsewhere): past max_waiting, which the work it
 * finishes was counted against, and while the pool is closed but not yet
 * stopped (a drain); false only once workers_stop() has begun (the caller
 * then runs it itself). Such a job may have no refuse(). */
bool workers_submit_owed(struct workers *w, struct job *job);

/* Take nothing more but what is owed, and refuse() every job still
 * waiting but those owed (workers_submit_owed()), which the threads
 * still run, as they run those owed later, until workers_stop(). */
void workers_close(struct workers *w);
bool workers_closed(struct workers *w);

/* Close, let the threads run what is queued and end, and free them. */
void workers_stop(struct workers *w);

/* How many jobs wait, and run, now. */
size_t workers_waiting(struct workers *w);
size_t workers_running(struct workers *w);

#endif
