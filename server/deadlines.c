/*
 * deadlines.c - see deadlines.h.
 */
#include "deadlines.h"
#include "metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

struct watched {
    struct watched *prev, *next;
    int fd;
    bool receiving; /* a request is due; since when: */
    struct timespec since;
};

static void add_seconds(struct timespec *t, double s)
{
    const long ns = t->tv_nsec + (long)((s - (double)(long)s) * 1e9);
    t->tv_sec += (time_t)s + ns / 1000000000L;
    t->tv_nsec = ns % 1000000000L;
}

static bool after(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec
                                  : a->tv_nsec > b->tv_nsec;
}

/* A tenth of the deadline between looks, so that none runs over by more
 * than that. */
static void *watch(void *arg)
{
    struct deadlines *d = arg;
    double step = d->seconds / 10;
    step = step < 0.05 ? 0.05 : step > 1.0 ? 1.0 : step;
    pthread_mutex_lock(&d->lock);
    while (!d->stop) {
        struct timespec wake;
        clock_gettime(CLOCK_MONOTONIC, &wake);
        add_seconds(&wake, step);
        while (!d->stop &&
               pthread_cond_timedwait(&d->wake, &d->lock, &wake) != ETIMEDOUT)
            ;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (struct watched *w = d->head; w; w = w->next) {
            struct timespec due = w->since;
            add_seconds(&due, d->seconds);
            if (!w->receiving || !after(&now, &due))
                continue;
            /* The fd is still open: MHD tells us of a close (under this
             * lock) before it closes the socket. shutdown() leaves the
             * closing to MHD's thread, which reads the end of stream. */
            shutdown(w->fd, SHUT_RDWR);
            w->receiving = false;
            metrics_connection_cut();
        }
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

bool deadlines_start(struct deadlines *d, unsigned seconds)
{
    *d = (struct deadlines){.seconds = seconds};
    pthread_mutex_init(&d->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&d->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&d->thread, NULL, watch, d)) {
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->wake);
        return false;
    }
    return true;
}

void deadlines_stop(struct deadlines *d)
{
    pthread_mutex_lock(&d->lock);
    d->stop = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    /* MHD has stopped: every connection told us of its close */
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->wake);
}

static struct watched *watched_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void deadlines_notify(void *cls, struct MHD_Connection *conn,
                      void **socket_context,
                      enum MHD_ConnectionNotificationCode code)
{
    struct deadlines *d = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct watched *w = calloc(1, sizeof *w);
        if (!w || !info) { /* unwatched: only the idle timeout holds it */
            free(w);
            return;
        }
        w->fd = info->connect_fd;
        w->receiving = true;
        clock_gettime(CLOCK_MONOTONIC, &w->since);
        pthread_mutex_lock(&d->lock);
        w->next = d->head;
        if (d->head)
            d->head->prev = w;
        d->head = w;
        pthread_mutex_unlock(&d->lock);
        *socket_context = w;
        metrics_connection_opened();
        return;
    }
    struct watched *w = *socket_context;
    if (!w)
        return;
    pthread_mutex_lock(&d->lock);
    if (w->prev)
        w->prev->next = w->next;
    else
        d->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&d->lock);
    free(w);
    *socket_context = NULL;
    metrics_connection_closed();
}

void deadlines_received(struct deadlines *d, struct MHD_Connection *conn)
{
    struct watched *w = watched_of(conn);
    if (!w)
        return;
    pthread_mutex_lock(&d->lock);
    w->receiving = false;
    pthread_mutex_unlock(&d->lock);
}

void deadlines_restart(struct deadlines *d, struct MHD_Connection *conn)
{
    struct watched *w = watched_of(conn);
    if (!w)
        return;
    pthread_mutex_lock(&d->lock);
    w->receiving = true;
    clock_gettime(CLOCK_MONOTONIC, &w->since);
    pthread_mutex_unlock(&d->lock);
}
