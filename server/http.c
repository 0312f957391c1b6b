/*
 * http.c - libmicrohttpd glue. One struct exchange per request lives in
 * MHD's request closure from the first byte to the completion callback,
 * where it is logged, counted and freed. Handlers turn a request into a
 * response; errors become problem+json in respond_problem() only.
 *
 * Computation is gated: at most `threads` run at once (one core each),
 * at most `max_queue` wait for a slot, and the next one is told 503.
 */
#define _XOPEN_SOURCE 700 /* realpath() */
#include "http.h"
#include "attend.h"
#include "buf.h"
#include "heatmap.h"
#include "metrics.h"
#include "problem.h"
#include "render.h"
#include "request.h"
#include "response.h"
#include "static.h"

#include <arpa/inet.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define ATTND_VERSION "0.1.0"
#define MAX_QUERY_PARAMS 64
#define MAX_PNG_PIXELS ((size_t)64 << 20)

extern const char openapi_json[];

struct http_server {
    struct MHD_Daemon *daemon;
    struct options opt;
    char web_root[PATH_MAX]; /* canonical; "" when there is none */
    unsigned port;
    atomic_bool draining;
    atomic_int exchanges; /* begun and not yet completed */
    /* the compute gate */
    pthread_mutex_t gate_lock;
    pthread_cond_t gate_free;
    size_t running, waiting;
};

/* Everything about one request, owned by MHD's request closure. */
struct exchange {
    struct http_server *srv;
    struct timespec started;
    enum metrics_route route;
    char method[16];
    char path[256];
    struct buf body;
    bool body_too_big;
    bool answered;
    int status;
    size_t bytes_out;
};

/* A streamed body: the JSON stream and where to count its bytes. The
 * counter lives in the exchange, which outlives every read. */
struct streamed {
    struct response_stream *stream;
    size_t *bytes_out;
};

typedef enum MHD_Result (*handler_fn)(struct exchange *ex,
                                      struct MHD_Connection *conn);

/* ------------------------------------------------------------ helpers */

static double seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) +
           (double)(now.tv_nsec - t0->tv_nsec) * 1e-9;
}

static enum MHD_Result queue(struct exchange *ex, struct MHD_Connection *conn,
                             int status, struct MHD_Response *resp,
                             size_t bytes)
{
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Server", "attnd/" ATTND_VERSION);
    ex->status = status;
    ex->bytes_out = bytes;
    ex->answered = true;
    const enum MHD_Result r = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* A body we already hold; MHD frees it. */
static struct MHD_Response *from_heap(char *body, size_t len,
                                      const char *content_type)
{
    if (!body)
        return NULL;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", content_type);
    return r;
}

static enum MHD_Result respond_text(struct exchange *ex,
                                    struct MHD_Connection *conn, int status,
                                    const char *content_type, const char *text)
{
    const size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (copy)
        memcpy(copy, text, len + 1);
    return queue(ex, conn, status, from_heap(copy, len, content_type), len);
}

/* 304 for a conditional GET whose tag still matches. */
static enum MHD_Result respond_not_modified(struct exchange *ex,
                                            struct MHD_Connection *conn,
                                            const char *etag,
                                            const char *cache_control)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (r) {
        MHD_add_response_header(r, "ETag", etag);
        MHD_add_response_header(r, "Cache-Control", cache_control);
    }
    return queue(ex, conn, 304, r, 0);
}

/* The one place a problem becomes a response. */
static enum MHD_Result respond_problem(struct exchange *ex,
                                       struct MHD_Connection *conn,
                                       const struct problem *pb)
{
    size_t len = 0;
    char *body = problem_body(pb, &len);
    struct MHD_Response *r = from_heap(body, len, "application/problem+json");
    if (!r)
        return MHD_NO;
    if (pb->status == 405 && pb->allow[0])
        MHD_add_response_header(r, "Allow", pb->allow);
    if (pb->status == 401)
        MHD_add_response_header(r, "WWW-Authenticate",
                                "Bearer realm=\"attnd\"");
    if (pb->retry_after > 0) {
        char secs[24];
        snprintf(secs, sizeof secs, "%ld", pb->retry_after);
        MHD_add_response_header(r, "Retry-After", secs);
    }
    return queue(ex, conn, pb->status, r, len);
}

/* Equal strings in time that depends only on the length of the given one. */
static bool same_secret(const char *given, const char *secret)
{
    const size_t n = strlen(given), m = strlen(secret);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |=
            (unsigned char)given[i] ^ (unsigned char)secret[i % (m ? m : 1)];
    return diff == 0;
}

static bool authorized(const struct exchange *ex, struct MHD_Connection *conn)
{
    const char *key = ex->srv->opt.api_key;
    if (!key[0])
        return true;
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7))
        return false;
    return same_secret(auth + 7, key);
}

/* ------------------------------------------------------- compute gate */

static bool gate_enter(struct http_server *s)
{
    pthread_mutex_lock(&s->gate_lock);
    bool admitted = false;
    if (s->running < s->opt.threads) {
        admitted = true;
    } else if (s->waiting < s->opt.max_queue) {
        s->waiting++;
        while (s->running >= s->opt.threads)
            pthread_cond_wait(&s->gate_free, &s->gate_lock);
        s->waiting--;
        admitted = true;
    }
    if (admitted)
        s->running++;
    pthread_mutex_unlock(&s->gate_lock);
    return admitted;
}

static void gate_leave(struct http_server *s)
{
    pthread_mutex_lock(&s->gate_lock);
    s->running--;
    pthread_cond_signal(&s->gate_free);
    pthread_mutex_unlock(&s->gate_lock);
}

/* ---------------------------------------------------------- /attention */

struct query_collect {
    struct request_param params[MAX_QUERY_PARAMS];
    size_t n;
    bool overflow;
};

static enum MHD_Result collect_param(void *cls, enum MHD_ValueKind kind,
                                     const char *key, const char *value)
{
    (void)kind;
    struct query_collect *q = cls;
    if (q->n == MAX_QUERY_PARAMS) {
        q->overflow = true;
        return MHD_NO;
    }
    q->params[q->n++] = (struct request_param){key, value ? value : ""};
    return MHD_YES;
}

/* The URL's query parameters, or a 422 in pb when there are too many. */
static bool collect_query(struct MHD_Connection *conn, struct query_collect *q,
                          struct problem *pb)
{
    q->n = 0;
    q->overflow = false;
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_param, q);
    if (q->overflow)
        return problem_set(pb, 422, "", "more than %d query parameters",
                           MAX_QUERY_PARAMS);
    return true;
}

static bool accepts_png(struct MHD_Connection *conn)
{
    const char *accept =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
    return accept && strstr(accept, "image/png") &&
           !strstr(accept, "application/json");
}

/* A stable tag for a GET: the sorted query plus what it answers with. */
static void query_etag(const struct query_collect *q, bool png, char out[24])
{
    const struct request_param *order[MAX_QUERY_PARAMS];
    for (size_t i = 0; i < q->n; i++)
        order[i] = &q->params[i];
    for (size_t i = 1; i < q->n; i++) /* insertion sort: few params */
        for (size_t j = i;
             j > 0 && strcmp(order[j - 1]->key, order[j]->key) > 0; j--) {
            const struct request_param *t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    uint64_t h = 0xcbf29ce484222325ULL;
    const char *version = "attnd " ATTND_VERSION;
    for (const char *p = version; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    for (size_t i = 0; i < q->n; i++) {
        for (const char *p = order[i]->key; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
        h = (h ^ '=') * 0x100000001b3ULL;
        for (const char *p = order[i]->value; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
        h = (h ^ '&') * 0x100000001b3ULL;
    }
    h = (h ^ (png ? 'p' : 'j')) * 0x100000001b3ULL;
    snprintf(out, 24, "\"%016llx\"", (unsigned long long)h);
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct streamed *st = cls;
    const size_t n = response_stream_read(st->stream, buf, max);
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    *st->bytes_out += n;
    return (ssize_t)n;
}

static void free_stream(void *cls)
{
    struct streamed *st = cls;
    response_stream_free(st->stream);
    free(st);
}

static void add_timing(struct MHD_Response *r, double parse_s, double compute_s,
                       double encode_s)
{
    char timing[160];
    if (encode_s >= 0)
        snprintf(timing, sizeof timing,
                 "parse;dur=%.3f, compute;dur=%.3f, encode;dur=%.3f",
                 parse_s * 1e3, compute_s * 1e3, encode_s * 1e3);
    else
        snprintf(timing, sizeof timing, "parse;dur=%.3f, compute;dur=%.3f",
                 parse_s * 1e3, compute_s * 1e3);
    MHD_add_response_header(r, "Server-Timing", timing);
}

/* Answers are deterministic, so GETs may be cached; only privately when
 * a key guards them. */
static const char *attention_cache_control(const struct http_server *s)
{
    return s->opt.api_key[0] ? "private, max-age=86400"
                             : "public, max-age=86400";
}

/* Parse (done by the caller), compute, encode, respond. Owns req. */
static enum MHD_Result answer_attention(struct exchange *ex,
                                        struct MHD_Connection *conn,
                                        struct request *req, double parse_s,
                                        const char *etag)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    if (!gate_enter(s)) {
        request_free(req);
        problem_set(&pb, 503, "",
                    "the server is at capacity (%u computing, %zu waiting); "
                    "try again shortly",
                    s->opt.threads, s->opt.max_queue);
        pb.retry_after = 1;
        return respond_problem(ex, conn, &pb);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct attn_result res;
    const bool ok = attend_run(req, 1, &res, &pb);
    gate_leave(s);
    const double compute_s = seconds_since(&t0);
    if (!ok) {
        request_free(req);
        return respond_problem(ex, conn, &pb);
    }
    if (req->cfg.want)
        metrics_add_flops(attn_flops(&req->cfg));

    struct MHD_Response *r = NULL;
    size_t bytes = 0;
    if (req->png.wanted) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        unsigned char *png = NULL;
        const bool drawn =
            render_png(req, &res, MAX_PNG_PIXELS, &png, &bytes, &pb);
        attn_result_free(&res);
        request_free(req);
        if (!drawn)
            return respond_problem(ex, conn, &pb);
        r = from_heap((char *)png, bytes, "image/png");
        if (r)
            add_timing(r, parse_s, compute_s, seconds_since(&t0));
    } else {
        struct streamed *st = malloc(sizeof *st);
        struct response_stream *stream = response_stream_new(req, &res);
        if (!st || !stream) {
            free(st);
            response_stream_free(stream);
            problem_set(&pb, 503, "", "out of memory encoding the response");
            return respond_problem(ex, conn, &pb);
        }
        *st = (struct streamed){stream, &ex->bytes_out};
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                              read_stream, st, free_stream);
        if (!r) {
            free_stream(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "application/json");
        add_timing(r, parse_s, compute_s, -1);
    }
    if (!r)
        return MHD_NO;
    if (etag) {
        MHD_add_response_header(r, "ETag", etag);
        MHD_add_response_header(r, "Cache-Control", attention_cache_control(s));
    } else {
        MHD_add_response_header(r, "Cache-Control", "no-store");
    }
    MHD_add_response_header(r, "Vary", "Accept, Authorization");
    const enum MHD_Result q = queue(ex, conn, 200, r, bytes);
    return q;
}

static const struct request_limits *limits_of(const struct http_server *s,
                                              struct request_limits *lim)
{
    *lim = (struct request_limits){
        .max_tokens = s->opt.max_tokens,
        .max_dim = s->opt.max_dim,
        .max_heads = s->opt.max_heads,
        .max_output = s->opt.max_output,
    };
    return lim;
}

static enum MHD_Result handle_attention_get(struct exchange *ex,
                                            struct MHD_Connection *conn)
{
    struct problem pb;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct query_collect q;
    if (!collect_query(conn, &q, &pb))
        return respond_problem(ex, conn, &pb);
    struct request req;
    request_init(&req);
    struct request_limits lim;
    const bool png_accept = accepts_png(conn);
    if (!request_parse_query(&req, q.params, q.n, limits_of(ex->srv, &lim),
                             &pb) ||
        !request_parse_png(&req, q.params, q.n, png_accept, &pb)) {
        request_free(&req);
        return respond_problem(ex, conn, &pb);
    }
    char etag[24];
    query_etag(&q, req.png.wanted, etag);
    const char *match =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
    if (match && (strstr(match, etag) || !strcmp(match, "*"))) {
        request_free(&req);
        return respond_not_modified(ex, conn, etag,
                                    attention_cache_control(ex->srv));
    }
    return answer_attention(ex, conn, &req, seconds_since(&t0), etag);
}

static enum MHD_Result handle_attention_post(struct exchange *ex,
                                             struct MHD_Connection *conn)
{
    struct problem pb;
    const char *type =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    if (!type || strncasecmp(type, "application/json", 16) ||
        (type[16] && type[16] != ';' && type[16] != ' ')) {
        problem_set(&pb, 415, "",
                    "Content-Type is \"%.60s\"; send application/json",
                    type ? type : "(none)");
        return respond_problem(ex, conn, &pb);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct query_collect q;
    if (!collect_query(conn, &q, &pb))
        return respond_problem(ex, conn, &pb);
    for (size_t i = 0; i < q.n; i++)
        if (!request_is_png_param(q.params[i].key)) {
            problem_set(&pb, 422, "",
                        "query parameter \"%.60s\" is not taken by POST; "
                        "options go in the JSON body (only format, head, "
                        "batch, colormap, cell and labels go in the URL)",
                        q.params[i].key);
            return respond_problem(ex, conn, &pb);
        }
    struct request req;
    request_init(&req);
    struct request_limits lim;
    const char *body = ex->body.data ? ex->body.data : "";
    if (!request_parse_json(&req, body, ex->body.len, limits_of(ex->srv, &lim),
                            &pb) ||
        !request_parse_png(&req, q.params, q.n, accepts_png(conn), &pb)) {
        request_free(&req);
        return respond_problem(ex, conn, &pb);
    }
    buf_free(&ex->body); /* parsed: the request holds what it needs */
    return answer_attention(ex, conn, &req, seconds_since(&t0), NULL);
}

/* ------------------------------------------------------ other routes */

static enum MHD_Result handle_healthz(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    if (atomic_load(&ex->srv->draining))
        return respond_text(ex, conn, 503, "application/json",
                            "{\"status\":\"draining\"}\n");
    return respond_text(ex, conn, 200, "application/json",
                        "{\"status\":\"ok\"}\n");
}

static enum MHD_Result handle_metrics(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    size_t len = 0;
    char *text = metrics_render(&len);
    return queue(
        ex, conn, 200,
        from_heap(text, len, "text/plain; version=0.0.4; charset=utf-8"), len);
}

static enum MHD_Result handle_openapi(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    return respond_text(ex, conn, 200, "application/json", openapi_json);
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
        return respond_problem(ex, conn, &pb);
    }
    const char *match =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
    if (match && strstr(match, f.etag)) {
        free(f.body);
        return respond_not_modified(ex, conn, f.etag, "no-cache");
    }
    struct MHD_Response *r = from_heap(f.body, f.len, f.content_type);
    if (r) {
        MHD_add_response_header(r, "ETag", f.etag);
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    }
    return queue(ex, conn, 200, r, f.len);
}

/* The route table: where every request goes. */
static const struct route {
    const char *method, *path; /* path NULL: any path (static files) */
    handler_fn handler;
    enum metrics_route metric;
    bool needs_key; /* behind --api-key when one is set */
} routes[] = {
    {"POST", "/attention", handle_attention_post, ROUTE_ATTENTION, true},
    {"GET", "/attention", handle_attention_get, ROUTE_ATTENTION, true},
    {"GET", "/healthz", handle_healthz, ROUTE_HEALTHZ, false},
    {"GET", "/metrics", handle_metrics, ROUTE_METRICS, false},
    {"GET", "/openapi.json", handle_openapi, ROUTE_OPENAPI, false},
    {"GET", NULL, handle_static, ROUTE_STATIC, false},
};
enum { N_ROUTES_TABLE = sizeof routes / sizeof routes[0] };

/* The route for method and path; NULL with pb set (404 or 405) if none. */
static const struct route *route_find(const struct http_server *s,
                                      const char *method, const char *path,
                                      enum metrics_route *metric,
                                      struct problem *pb)
{
    /* HEAD is GET without the body; MHD drops the body for us. */
    const char *m = !strcmp(method, "HEAD") ? "GET" : method;
    char allow[64] = "";
    bool path_known = false;
    for (int i = 0; i < N_ROUTES_TABLE; i++) {
        const struct route *r = &routes[i];
        if (r->path && strcmp(r->path, path))
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

/* ------------------------------------------------------- MHD callbacks */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct http_server *s = cls;
    struct exchange *ex = *con_cls;
    if (!ex) { /* first call: headers only */
        ex = calloc(1, sizeof *ex);
        if (!ex)
            return MHD_NO;
        ex->srv = s;
        clock_gettime(CLOCK_MONOTONIC, &ex->started);
        snprintf(ex->method, sizeof ex->method, "%s", method);
        snprintf(ex->path, sizeof ex->path, "%s", url);
        ex->route = ROUTE_OTHER;
        buf_init(&ex->body, s->opt.max_body);
        *con_cls = ex;
        atomic_fetch_add(&s->exchanges, 1);
        metrics_request_started();
        /* refuse an oversized body before reading it */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->opt.max_body) {
            struct problem pb;
            problem_set(&pb, 413, "",
                        "the body has %.20s bytes; the limit is %zu "
                        "(--max-body)",
                        cl, s->opt.max_body);
            return respond_problem(ex, conn, &pb);
        }
        return MHD_YES;
    }
    if (*upload_size) { /* body data */
        if (!ex->answered && !ex->body_too_big &&
            !buf_append(&ex->body, upload_data, *upload_size)) {
            ex->body_too_big = true;
            buf_free(&ex->body);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (ex->answered)
        return MHD_YES;
    struct problem pb;
    if (ex->body_too_big) {
        problem_set(&pb, 413, "",
                    "the body is over the limit of %zu bytes "
                    "(--max-body)",
                    s->opt.max_body);
        return respond_problem(ex, conn, &pb);
    }
    const struct route *r = route_find(s, method, url, &ex->route, &pb);
    if (!r)
        return respond_problem(ex, conn, &pb);
    ex->route = r->metric;
    if (r->needs_key && !authorized(ex, conn)) {
        problem_set(&pb, 401, "",
                    "%s needs the API key as "
                    "\"Authorization: Bearer <key>\"",
                    r->path);
        return respond_problem(ex, conn, &pb);
    }
    return r->handler(ex, conn);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    (void)conn;
    struct http_server *s = cls;
    struct exchange *ex = *con_cls;
    if (!ex)
        return;
    const double secs = seconds_since(&ex->started);
    metrics_request_done(ex->route, ex->status, secs, ex->bytes_out);
    if (!s->opt.quiet) {
        char stamp[32];
        const time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
        fprintf(stderr, "%s %s %s %d %zu %.1fms%s\n", stamp, ex->method,
                ex->path, ex->status, ex->bytes_out, secs * 1e3,
                why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? ""
                                                           : " (cut short)");
    }
    buf_free(&ex->body);
    free(ex);
    *con_cls = NULL;
    atomic_fetch_sub(&s->exchanges, 1);
}

/* --------------------------------------------------------------- life */

struct http_server *http_start(const struct options *o)
{
    struct http_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->opt = *o;
    pthread_mutex_init(&s->gate_lock, NULL);
    pthread_cond_init(&s->gate_free, NULL);
    if (o->web_root[0] && !realpath(o->web_root, s->web_root)) {
        fprintf(stderr,
                "attnd: web root \"%s\" not found; only the API is "
                "served\n",
                o->web_root);
        s->web_root[0] = '\0';
    }
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->bind, &addr.sin_addr) != 1) {
        fprintf(stderr, "attnd: --bind \"%s\" is not an IPv4 address\n",
                o->bind);
        free(s);
        return NULL;
    }
    /* Threads: one per computation, one per request allowed to wait for
     * a computation, and two more so /healthz and /metrics always answer. */
    size_t pool = o->threads + o->max_queue + 2;
    if (pool > 512)
        pool = 512;
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
            MHD_USE_ERROR_LOG,
        (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)pool,
        MHD_OPTION_CONNECTION_TIMEOUT, o->timeout, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(pool * 16), MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_END);
    if (!s->daemon) {
        fprintf(stderr, "attnd: cannot listen on %s:%u\n", o->bind, o->port);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o->port;
    return s;
}

unsigned http_port(const struct http_server *s)
{
    return s->port;
}

void http_drain_and_stop(struct http_server *s, unsigned grace_seconds)
{
    atomic_store(&s->draining, true);
    MHD_quiesce_daemon(s->daemon); /* no new connections */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&s->exchanges) > 0 &&
           seconds_since(&t0) < (double)grace_seconds)
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    MHD_stop_daemon(s->daemon);
    pthread_mutex_destroy(&s->gate_lock);
    pthread_cond_destroy(&s->gate_free);
    free(s);
}
