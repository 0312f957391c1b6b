/*
 * http.h - the HTTP front: libmicrohttpd in its own thread pool, the route
 * table, and the life of one exchange from first byte to access-log line.
 */
#ifndef ATTND_HTTP_H
#define ATTND_HTTP_H

#include "options.h"

#include <stdbool.h>

struct http_server;
struct models;

/* Listen as o says, serving models (loaded, borrowed until the server
 * has stopped; may be NULL). NULL with a message on stderr when it
 * cannot. */
struct http_server *http_start(const struct options *o, struct models *models);

/* Answer /healthz and every new /attention with 503 and turn away those
 * waiting for a compute slot; let computations in flight finish for at most
 * grace_seconds, then cancel them (503 too), and stop at most 2 s later. */
void http_drain_and_stop(struct http_server *s, unsigned grace_seconds);

/* The port actually bound (useful with --port 0 in tests). */
unsigned http_port(const struct http_server *s);

#endif
