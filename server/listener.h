/*
 * listener.h - the listening socket, and the thread that accepts on it
 * and hands each connection to libmicrohttpd (MHD_add_connection()).
 *
 * libmicrohttpd's own accept lets each HTTP thread accept for itself, up
 * to ten connections a wake-up: one thread could take every connection of
 * a burst (32 keep-alive clients, say) while the other sat idle, and the
 * server then had one core where it had two. Connections it is handed are
 * spread over its threads by descriptor number instead, which mostly
 * alternates.
 * While --max-connections are open, nothing is accepted: the kernel's
 * backlog keeps the rest waiting, as libmicrohttpd's own accept did. The
 * count is the listener's own (libmicrohttpd counts a connection only
 * when its thread gets to it), so the daemon is started with room for
 * LISTENER_SLACK more, and never refuses one for the limit.
 */
#ifndef ATTND_LISTENER_H
#define ATTND_LISTENER_H

#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Connections a daemon may have beyond the listener's limit: those it
 * has closed and not yet counted out. */
enum { LISTENER_SLACK = 64 };

struct listener {
    int fd;                    /* the listening socket, -1 when closed */
    unsigned port;             /* bound, the kernel's choice for port 0 */
    struct MHD_Daemon *daemon; /* given the connections; borrowed */
    unsigned max_connections;  /* accepting pauses while this many are open */
    atomic_uint open;          /* handed over and not yet closed */
    atomic_bool stop;
    bool running; /* the thread was started */
    pthread_t thread;
};

/* Bind and listen on addr; false with errno set when that fails. */
bool listener_open(struct listener *l, const struct sockaddr_in *addr);

/* Accept on a thread, handing connections to daemon (started with
 * MHD_USE_NO_LISTEN_SOCKET, MHD_USE_ITC, and a connection limit of
 * max_connections + LISTENER_SLACK). */
bool listener_start(struct listener *l, struct MHD_Daemon *daemon,
                    unsigned max_connections);

/* A connection it handed over has closed: call from the daemon's
 * MHD_CONNECTION_NOTIFY_CLOSED. */
void listener_closed(struct listener *l);

/* Stop accepting, join the thread, close the socket; idempotent. */
void listener_close(struct listener *l);

#endif
