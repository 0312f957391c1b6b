/*
 * routes.c - the route table and the small routes: health, metrics, the
 * OpenAPI document, the field document and the web page's files.
 * /attention has a file of its own (attention_route.c).
 */
#include "routes.h"
#include "models.h"
#include "reply.h"
#include "request_fields.h"
#include "static.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char openapi_json[];

static enum MHD_Result handle_healthz(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    if (atomic_load(&ex->srv->draining))
        return reply_text(ex, conn, 503, "application/json",
                          "{\"status\":\"draining\"}\n");
    return reply_text(ex, conn, 200, "application/json",
                      "{\"status\":\"ok\"}\n");
}

static enum MHD_Result handle_metrics(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    struct metrics_now now = {
        .waiting = workers_waiting(&ex->srv->workers),
        .generating = batcher_in_flight(ex->srv->batcher),
        .generations_waiting = batcher_waiting(ex->srv->batcher),
        .draining = atomic_load(&ex->srv->draining),
        .memory_reserved = budget_used(&ex->srv->memory),
        .memory_limit = ex->srv->memory.limit,
    };
    drawn_cache_stats(&ex->srv->drawn, &now.drawn);
    size_t len = 0;
    char *text = metrics_render(&now, &len);
    /* the loaded models' counters after the server's own */
    struct buf all;
    buf_init(&all, (size_t)2 << 20);
    if (text && buf_append(&all, text, len) &&
        models_metrics(ex->srv->models, &all)) {
        free(text);
        text = buf_take(&all, &len);
    } else {
        buf_free(&all);
    }
    return reply_queue(
        ex, conn, 200,
        reply_from_heap(text, len, "text/plain; version=0.0.4; charset=utf-8"),
        len);
}

static enum MHD_Result handle_openapi(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    return reply_text(ex, conn, 200, "application/json", openapi_json);
}

/* Every request field with its default and its range under this
 * server's limits: what the page builds its form from. */
static enum MHD_Result handle_config(struct exchange *ex,
                                     struct MHD_Connection *conn)
{
    const struct request_limits *lim = &ex->srv->limits;
    size_t len = 0;
    char *doc = request_fields_document(lim, &len);
    struct MHD_Response *r = reply_from_heap(doc, len, "application/json");
    if (r)
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    return reply_queue(ex, conn, 200, r, len);
}

/* The loaded models with their sizes: what "model" may name. */
static enum MHD_Result handle_models(struct exchange *ex,
                                     struct MHD_Connection *conn)
{
    size_t len = 0;
    char *doc = models_document(ex->srv->models, &len);
    struct MHD_Response *r = reply_from_heap(doc, len, "application/json");
    if (r)
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    return reply_queue(ex, conn, 200, r, len);
}

static enum MHD_Result handle_static(struct exchange *ex,
                                     struct MHD_Connection *conn)
{
    struct problem pb;
    struct static_file f;
    const int status = ex->srv->web_root[0]
                           ? static_load(ex->srv->web_root, ex->path, &f)
                           : 404;
    if (status != 200) {
        problem_set(&pb, 404, "", "no such page: %.200s", ex->path);
        return reply_problem(ex, conn, &pb);
    }
    const char *match = reply_header(conn, "If-None-Match");
    if (match && strstr(match, f.etag)) {
        free(f.body);
        return reply_not_modified(ex, conn, f.etag, "no-cache");
    }
    struct MHD_Response *r = reply_from_heap(f.body, f.len, f.content_type);
    if (r) {
        MHD_add_response_header(r, "ETag", f.etag);
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    }
    return reply_queue(ex, conn, 200, r, f.len);
}

static const struct route routes[] = {
    {"POST", "/attention", handle_attention_post, ROUTE_ATTENTION, true, true,
     0},
    {"GET", "/attention", handle_attention_get, ROUTE_ATTENTION, true, false,
     0},
    {"POST", "/generate", handle_generate_post, ROUTE_GENERATE, true, true,
     ROUTE_SMALL_BODY},
    {"POST", "/patch", handle_patch_post, ROUTE_PATCH, true, true,
     ROUTE_SMALL_BODY},
    {"GET", "/v1/models", handle_v1_models, ROUTE_V1_MODELS, true, false, 0},
    {"GET", "/v1/models/", handle_v1_models, ROUTE_V1_MODELS, true, false, 0},
    {"POST", "/v1/completions", handle_v1_completions, ROUTE_V1_COMPLETIONS,
     true, true, ROUTE_SMALL_BODY},
    {"POST", "/v1/chat/completions", handle_v1_chat, ROUTE_V1_CHAT, true, true,
     ROUTE_SMALL_BODY},
    {"POST", "/tokenize", handle_tokenize, ROUTE_TOKENIZE, true, true,
     ROUTE_SMALL_BODY},
    {"POST", "/detokenize", handle_detokenize, ROUTE_DETOKENIZE, true, true,
     ROUTE_SMALL_BODY},
    {"GET", "/healthz", handle_healthz, ROUTE_HEALTHZ, false, false, 0},
    {"GET", "/metrics", handle_metrics, ROUTE_METRICS, false, false, 0},
    {"GET", "/openapi.json", handle_openapi, ROUTE_OPENAPI, false, false, 0},
    {"GET", "/config", handle_config, ROUTE_CONFIG, false, false, 0},
    {"GET", "/models", handle_models, ROUTE_MODELS, false, false, 0},
    {"GET", NULL, handle_static, ROUTE_STATIC, false, false, 0},
};
enum { N_ROUTES_TABLE = sizeof routes / sizeof routes[0] };

const struct route *route_table(size_t *count)
{
    *count = N_ROUTES_TABLE;
    return routes;
}

/* A route's path is the path, or (ending in '/') every path under it. */
static bool path_matches(const char *route, const char *path)
{
    const size_t len = strlen(route);
    if (len > 1 && route[len - 1] == '/')
        return !strncmp(route, path, len) && path[len] &&
               !strchr(path + len, '/');
    return !strcmp(route, path);
}

const struct route *route_find(const struct http_server *s, const char *method,
                               const char *path, enum metrics_route *metric,
                               struct problem *pb)
{
    /* HEAD is GET without the body; MHD drops the body for us. */
    const char *m = !strcmp(method, "HEAD") ? "GET" : method;
    char allow[64] = "";
    bool path_known = false;
    for (int i = 0; i < N_ROUTES_TABLE; i++) {
        const struct route *r = &routes[i];
        if (r->path && !path_matches(r->path, path))
            continue;
        if (!r->path && path_known)
            break; /* a named path never falls through to static files */
        path_known = path_known || r->path;
        *metric = r->metric;
        if (!strcmp(r->method, m))
            return r;
        const size_t used = strlen(allow);
        snprintf(allow + used, sizeof allow - used, "%s%s%s", used ? ", " : "",
                 r->method, !strcmp(r->method, "GET") ? ", HEAD" : "");
    }
    /* Another method on the web root: 405 where a file is, else 404. */
    if (!path_known && strcmp(m, "GET") &&
        !(s->web_root[0] && static_exists(s->web_root, path))) {
        *metric = ROUTE_OTHER;
        problem_set(pb, 404, "", "no such endpoint: %.20s %.200s", method,
                    path);
        return NULL;
    }
    problem_set(pb, 405, "", "%s is not allowed on %.200s; use %s", method,
                path, allow);
    snprintf(pb->allow, sizeof pb->allow, "%s", allow);
    return NULL;
}
