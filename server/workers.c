/*
 * workers.c - see workers.h.
 */
#include "workers.h"

#include <stddef.h>
#include <stdlib.h>

static double seconds_between(const struct timespec *a,
                              const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) +
           (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

static void *work(void *arg)
{
    struct workers *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->head && !w->stopping)
            pthread_cond_wait(&w->work, &w->lock);
        if (!w->head) /* stopped, and nothing left to run */
            break;
        struct job *job = w->head;
        w->head = job->next;
        if (!w->head)
            w->tail = NULL;
        w->waiting--;
        w->running++;
        pthread_mutex_unlock(&w->lock);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        job->run(job, seconds_between(&job->queued, &now));
        pthread_mutex_lock(&w->lock);
        w->running--;
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

bool workers_start(struct workers *w, size_t threads, size_t max_waiting)
{
    *w = (struct workers){.threads = threads, .max_waiting = max_waiting};
    w->ids = calloc(threads, sizeof *w->ids);
    if (!w->ids)
        return false;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->work, NULL);
    for (; w->started < threads; w->started++)
        if (pthread_create(&w->ids[w->started], NULL, work, w)) {
            workers_stop(w);
            return false;
        }
    return true;
}

/* Queue job when the pool takes it (owed: past max_waiting, while not
 * stopping); false otherwise. */
static bool enqueue(struct workers *w, struct job *job, bool owed)
{
    clock_gettime(CLOCK_MONOTONIC, &job->queued);
    job->next = NULL;
    pthread_mutex_lock(&w->lock);
    /* a free thread takes it at once; otherwise it waits, if there is
     * room to wait */
    const bool taken = owed ? !w->stopping
                            : !w->closed && w->running + w->waiting <
                                                w->started + w->max_waiting;
    if (taken) {
        if (w->tail)
            w->tail->next = job;
        else
            w->head = job;
        w->tail = job;
        w->waiting++;
        pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->lock);
    return taken;
}

bool workers_submit(struct workers *w, struct job *job)
{
    return enqueue(w, job, false);
}

bool workers_submit_owed(struct workers *w, struct job *job)
{
    return enqueue(w, job, true);
}

void workers_close(struct workers *w)
{
    pthread_mutex_lock(&w->lock);
    w->closed = true;
    // jobs owed to work already taken stay, and the threads run them
    // before they end; the others are refused
    struct job *refused = NULL, **last_refused = &refused, *kept = NULL,
               **last_kept = &kept;
    for (struct job *job = w->head, *next; job; job = next) {
        next = job->next;
        job->next = NULL;
        if (job->refuse) {
            *last_refused = job;
            last_refused = &job->next;
            w->waiting--;
        } else {
            *last_kept = job;
            last_kept = &job->next;
        }
    }
    w->head = kept;
    w->tail = kept ? (struct job *)(void *)((char *)last_kept -
                                            offsetof(struct job, next))
                   : NULL;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->lock);
    /* answered outside the lock: refuse() may take others */
    while (refused) {
        struct job *next = refused->next;
        refused->refuse(refused);
        refused = next;
    }
}

bool workers_closed(struct workers *w)
{
    pthread_mutex_lock(&w->lock);
    const bool closed = w->closed;
    pthread_mutex_unlock(&w->lock);
    return closed;
}

void workers_stop(struct workers *w)
{
    workers_close(w);
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->lock);
    for (size_t i = 0; i < w->started; i++)
        pthread_join(w->ids[i], NULL);
    free(w->ids);
    w->ids = NULL;
    w->started = 0;
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->work);
}

size_t workers_waiting(struct workers *w)
{
    pthread_mutex_lock(&w->lock);
    const size_t n = w->waiting;
    pthread_mutex_unlock(&w->lock);
    return n;
}

size_t workers_running(struct workers *w)
{
    pthread_mutex_lock(&w->lock);
    const size_t n = w->running;
    pthread_mutex_unlock(&w->lock);
    return n;
}
