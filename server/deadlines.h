/*
 * deadlines.h - a whole request, headers and body, must arrive within
 * --receive-seconds of the moment its connection may carry it (when it
 * opens, or when the answer before it has been sent). libmicrohttpd's own
 * timeout is one of idleness, which a byte a second resets for ever, and
 * it calls nobody while headers trickle in; so every connection is
 * watched here, and one past its deadline is shut, which its HTTP thread
 * sees as the client going away.
 */
#ifndef ATTND_DEADLINES_H
#define ATTND_DEADLINES_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>

struct watched;

struct deadlines {
    pthread_mutex_t lock; /* the list, and every watched fd's life */
    pthread_cond_t wake;  /* stop */
    struct watched *head;
    double seconds;
    bool stop;
    pthread_t thread;
};

bool deadlines_start(struct deadlines *d, unsigned seconds);
void deadlines_stop(struct deadlines *d);

/* MHD's connection notification (MHD_OPTION_NOTIFY_CONNECTION): a
 * connection opened, and its deadline runs; it closed. */
void deadlines_notify(void *cls, struct MHD_Connection *conn,
                      void **socket_context,
                      enum MHD_ConnectionNotificationCode code);

/* The connection's request has all arrived: no deadline while it is
 * answered. */
void deadlines_received(struct deadlines *d, struct MHD_Connection *conn);

/* Its answer has been sent: the next request's deadline runs from now. */
void deadlines_restart(struct deadlines *d, struct MHD_Connection *conn);

#endif
