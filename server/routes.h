/*
 * routes.h - the route table: where every request goes.
 */
#ifndef ATTND_ROUTES_H
#define ATTND_ROUTES_H

#include "exchange.h"
#include "problem.h"

struct route {
    const char *method, *path; /* path NULL: any path (static files) */
    handler_fn handler;
    enum metrics_route metric;
    bool needs_key;  /* behind --api-key when one is set */
    bool takes_body; /* a request body is read (else discarded unread) */
};

/* The route for method and path, with *metric set to its route's metric;
 * NULL with pb set (404 or 405 with Allow) if none. HEAD goes as GET. */
const struct route *route_find(const struct http_server *s, const char *method,
                               const char *path, enum metrics_route *metric,
                               struct problem *pb);

#endif
