/*
 * listener.c - the listening socket and its accepting thread (listener.h).
 */
#define _GNU_SOURCE /* accept4() */
#include "listener.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The kernel's queue of connections not yet accepted. */
enum { BACKLOG = 511 };

/* How long the thread waits when it may not accept: the daemon is full,
 * or the process is out of descriptors or memory for now. */
static void wait_a_little(void)
{
    nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
}

bool listener_open(struct listener *l, const struct sockaddr_in *addr)
{
    memset(l, 0, sizeof *l);
    atomic_init(&l->stop, false);
    atomic_init(&l->open, 0);
    l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0)
        return false;
    const int on = 1;
    setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in bound;
    socklen_t len = sizeof bound;
    if (bind(l->fd, (const struct sockaddr *)addr, sizeof *addr) != 0 ||
        listen(l->fd, BACKLOG) != 0 ||
        getsockname(l->fd, (struct sockaddr *)&bound, &len) != 0) {
        const int e = errno;
        close(l->fd);
        l->fd = -1;
        errno = e;
        return false;
    }
    l->port = ntohs(bound.sin_port);
    return true;
}

static void *accept_loop(void *arg)
{
    struct listener *l = arg;
    while (!atomic_load(&l->stop)) {
        if (atomic_load(&l->open) >= l->max_connections) {
            wait_a_little();
            continue;
        }
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        const int fd = accept4(l->fd, (struct sockaddr *)&peer, &len,
                               SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            /* a client that gave up (ECONNABORTED), or a signal: at once;
             * anything else (no descriptors or memory for now, the socket
             * shut to stop this loop) after a pause, never spinning */
            if (errno != ECONNABORTED && errno != EINTR)
                wait_a_little();
            continue;
        }
        /* the daemon owns the socket from here, and closes it itself when
         * it refuses it (its per-address limit, say); it counts its
         * connections as its threads get to them, so the count here is
         * the one that decides */
        atomic_fetch_add(&l->open, 1);
        if (MHD_add_connection(l->daemon, fd, (const struct sockaddr *)&peer,
                               len) != MHD_YES)
            atomic_fetch_sub(&l->open, 1); /* refused: no close to come */
    }
    return NULL;
}

void listener_closed(struct listener *l)
{
    atomic_fetch_sub(&l->open, 1);
}

bool listener_start(struct listener *l, struct MHD_Daemon *daemon,
                    unsigned max_connections)
{
    l->daemon = daemon;
    l->max_connections = max_connections;
    l->running = pthread_create(&l->thread, NULL, accept_loop, l) == 0;
    return l->running;
}

void listener_close(struct listener *l)
{
    if (l->fd < 0)
        return;
    atomic_store(&l->stop, true);
    /* a thread blocked in accept() returns from it with an error */
    shutdown(l->fd, SHUT_RDWR);
    if (l->running)
        pthread_join(l->thread, NULL);
    l->running = false;
    close(l->fd);
    l->fd = -1;
}
