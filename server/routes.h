/*
 * routes.h - the route table: where every request goes.
 */
#ifndef ATTND_ROUTES_H
#define ATTND_ROUTES_H

#include "exchange.h"
#include "problem.h"

struct route {
    /* path NULL: any path (static files); ending in '/': every path one
     * segment under it (/v1/models/ID) */
    const char *method, *path;
    handler_fn handler;
    enum metrics_route metric;
    bool needs_key;  /* behind --api-key when one is set */
    bool takes_body; /* a request body is read (else discarded unread) */
    /* the largest body it reads, refused (413) from its Content-Length
     * before any of it is read; 0: --max-body's */
    size_t body_bytes;
};

/* The most bytes a JSON request of a route that takes small ones may
 * have: far more than any model's positions hold of text. */
#define ROUTE_SMALL_BODY ((size_t)1 << 20)

/* The whole table, for the document that describes it: *count rows. */
const struct route *route_table(size_t *count);

/* The route for method and path, with *metric set to its route's metric;
 * NULL with pb set (404 or 405 with Allow) if none. HEAD goes as GET. */
const struct route *route_find(const struct http_server *s, const char *method,
                               const char *path, enum metrics_route *metric,
                               struct problem *pb);

#endif
