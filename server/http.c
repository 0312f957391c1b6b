/*
 * http.c - libmicrohttpd glue. One struct exchange per request lives in
 * MHD's request closure from the first byte to the completion callback,
 * where it is logged, counted and freed with everything it owns. The
 * route table (routes.c) says which handler answers; errors become
 * problem+json in reply_problem() only.
 *
 * Few HTTP threads serve every connection and never wait for a
 * computation: a small one is done on the spot, a larger one is handed to
 * the compute pool (workers.h) with its connection suspended, and resumed
 * with its answer.
 */
#define _XOPEN_SOURCE 700 /* realpath() */
#include "http.h"
#include "widen.h"
#include "exchange.h"
#include "reply.h"
#include "routes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

/* Each connection's memory for a request's line and headers and an
 * answer's headers. libmicrohttpd zeroes all of it, and half of it again,
 * for every request: at its default of 32 KB that was a tenth of a small
 * request's instructions. In 16 KB a request line and headers of about
 * 15 KB fit (a GET's sentence of some 2,000 words); a longer one is
 * answered 414 or 431. A body is not held here: it is handed over as it
 * arrives. */
#define CONNECTION_MEMORY ((size_t)16 << 10)

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
    const char *auth = reply_header(conn, "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7))
        return false;
    return same_secret(auth + 7, key);
}

/* ------------------------------------------------------- MHD callbacks */

/* The headers that frame a request's body. */
struct framing {
    unsigned content_lengths;      /* Content-Length headers */
    const char *content_length;    /* the first one's value, or NULL */
    unsigned transfer_encodings;   /* Transfer-Encoding headers */
    const char *transfer_encoding; /* the last one's value, or NULL */
};

static enum MHD_Result read_framing(void *cls, enum MHD_ValueKind kind,
                                    const char *key, const char *value)
{
    (void)kind;
    struct framing *f = cls;
    if (!strcasecmp(key, "Content-Length")) {
        if (!f->content_lengths++)
            f->content_length = value;
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        f->transfer_encoding = value;
        f->transfer_encodings++;
    }
    return MHD_YES;
}

/* A framing that a proxy in front could read otherwise than attnd
 * (request smuggling), refused before the body is read, and with it the
 * connection (RFC 9112 6.1): two Content-Length or two Transfer-Encoding
 * headers, or one of each, 400; a coding other than chunked, which would
 * be read as no body at all or until the client closes, 501. False with
 * pb set when refused. */
static bool framing_ok(const struct framing *f, struct problem *pb)
{
    if (f->content_lengths > 1)
        return problem_set(pb, 400, "",
                           "the request has %u Content-Length headers; send "
                           "one",
                           f->content_lengths);
    if (f->transfer_encodings > 1)
        return problem_set(pb, 400, "",
                           "the request has %u Transfer-Encoding headers; "
                           "send one",
                           f->transfer_encodings);
    if (f->content_lengths && f->transfer_encodings)
        return problem_set(pb, 400, "",
                           "the request has both Content-Length and "
                           "Transfer-Encoding; send one");
    if (f->transfer_encoding && strcasecmp(f->transfer_encoding, "chunked"))
        return problem_set(pb, 501, "",
                           "Transfer-Encoding \"%.40s\" is not understood; "
                           "send the body chunked or with a Content-Length",
                           f->transfer_encoding);
    return true;
}

/* Text from outside as one log field: spaces, bytes below 0x20, 0x7f and the
 * backslash escaped, so that no request can start a line of its own. */
static void log_field(const char *text, char *out, size_t cap)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char one[5];
        const bool plain = *p > 0x20 && *p != 0x7f && *p != '\\';
        if (plain)
            one[0] = (char)*p, one[1] = '\0';
        else
            snprintf(one, sizeof one, "\\x%02x", *p);
        const size_t len = strlen(one);
        if (n + len + 1 > cap)
            break;
        memcpy(out + n, one, len);
        n += len;
    }
    out[n] = '\0';
}

/* text into out (cap bytes), cut short if need be, NUL-terminated. */
static void copy_cut(char *out, size_t cap, const char *text)
{
    const size_t n = strnlen(text, cap - 1);
    memcpy(out, text, n);
    out[n] = '\0';
}

/* The first call for a request: headers only. */
static enum MHD_Result begin_exchange(struct http_server *s,
                                      struct MHD_Connection *conn,
                                      const char *url, const char *method,
                                      void **con_cls)
{
    struct exchange *ex = calloc(1, sizeof *ex);
    if (!ex)
        return MHD_NO;
    ex->srv = s;
    clock_gettime(CLOCK_MONOTONIC, &ex->started);
    copy_cut(ex->method, sizeof ex->method, method);
    copy_cut(ex->path, sizeof ex->path, url);
    ex->route = ROUTE_OTHER;
    buf_init(&ex->body, s->opt.max_body);
    ex->hold.budget = &s->memory;
    *con_cls = ex;
    atomic_fetch_add(&s->exchanges, 1);
    metrics_request_started();
    struct framing framing = {0, NULL, 0, NULL};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, read_framing, &framing);
    struct problem pb;
    if (!framing_ok(&framing, &pb))
        return reply_problem(ex, conn, &pb);
    /* refuse an oversized body before reading it */
    const char *cl = framing.content_length;
    if (cl && strtoull(cl, NULL, 10) > s->opt.max_body) {
        problem_set(&pb, 413, "",
                    "the body has %.20s bytes; the limit is %zu "
                    "(--max-body)",
                    cl, s->opt.max_body);
        return reply_problem(ex, conn, &pb);
    }
    /* where it goes and whether it may, from the headers alone: a body
     * nobody may send is never read */
    const struct route *r = route_find(s, method, url, &ex->route, &pb);
    if (!r)
        return reply_problem(ex, conn, &pb);
    ex->route = r->metric;
    if (r->needs_key && !authorized(ex, conn)) {
        problem_set(&pb, 401, "",
                    "%s needs the API key as "
                    "\"Authorization: Bearer <key>\"",
                    r->path);
        return reply_problem(ex, conn, &pb);
    }
    ex->handler = r;
    /* a route that takes small bodies: past its own limit, refused by the
     * headers too, and never kept past it */
    if (r->takes_body && r->body_bytes && r->body_bytes < s->opt.max_body) {
        ex->body.cap_bytes = r->body_bytes;
        if (cl && strtoull(cl, NULL, 10) > r->body_bytes) {
            problem_set(&pb, 413, "",
                        "the body has %.20s bytes; %s %s takes at most %zu "
                        "(%.3g MiB)",
                        cl, r->method, r->path, r->body_bytes,
                        (double)r->body_bytes / (1 << 20));
            return reply_problem(ex, conn, &pb);
        }
    }
    /* whether the body's bytes could be had now, before any is read, when
     * their number is known: a 503 then rather than after the upload. They
     * are reserved, all of them, with its first byte (on_request()), so
     * that a client that announces a body and sends none holds nothing,
     * and one whose body has begun is not refused halfway. */
    if (r->takes_body && cl) {
        const size_t bytes = (size_t)strtoull(cl, NULL, 10);
        if (!budget_reserve(&ex->hold, bytes, "the body", true, &pb))
            return reply_problem(ex, conn, &pb);
        budget_release(&ex->hold, bytes);
        ex->body_announced = bytes;
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct http_server *s = cls;
    struct exchange *ex = *con_cls;
    if (!ex)
        return begin_exchange(s, conn, url, method, con_cls);
    if (ex->handed_over) /* back from the compute pool with its answer */
        return ex->answered || !ex->prepared.ready ? MHD_YES
                                                   : reply_prepared(ex, conn);
    if (*upload_size) { /* body data, kept only where the route reads it */
        const bool keep = !ex->answered && !ex->body_too_big &&
                          !ex->body_refused && ex->handler->takes_body;
        /* a body whose length was announced is reserved whole with its
         * first bytes; one of unknown length as it grows */
        const size_t held = ex->body.len + *upload_size > ex->body_announced
                                ? ex->body.len + *upload_size
                                : ex->body_announced;
        const size_t beyond =
            held > ex->body_reserved ? held - ex->body_reserved : 0;
        if (keep && beyond &&
            budget_reserve(&ex->hold, beyond, "the body", true, &ex->refusal))
            ex->body_reserved += beyond;
        else if (keep && beyond)
            ex->body_refused = true;
        if (keep && !ex->body_refused &&
            !buf_append(&ex->body, upload_data, *upload_size)) {
            /* past the limit, or no memory to grow into: not the same */
            if (ex->body.len + *upload_size > ex->body.cap_bytes) {
                ex->body_too_big = true;
            } else {
                problem_set(&ex->refusal, 503, "",
                            "out of memory receiving the body; try again "
                            "later");
                ex->refusal.retry_after = 1;
                ex->body_refused = true;
            }
        }
        /* a body refused here is read to its end and dropped: what it held
         * goes back at once, so that a body growing beside it can finish */
        if (keep && (ex->body_refused || ex->body_too_big)) {
            buf_free(&ex->body);
            budget_release(&ex->hold, ex->body_reserved);
            ex->body_reserved = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    /* all of the request is in */
    deadlines_received(&s->deadlines, conn);
    if (ex->answered)
        return MHD_YES;
    struct problem pb;
    if (ex->body_refused)
        return reply_problem(ex, conn, &ex->refusal);
    if (ex->body_too_big) {
        if (ex->body.cap_bytes == s->opt.max_body)
            problem_set(&pb, 413, "",
                        "the body is over the limit of %zu bytes "
                        "(--max-body)",
                        s->opt.max_body);
        else
            problem_set(&pb, 413, "",
                        "the body is over the limit of %zu bytes (%.3g MiB) "
                        "%s %s takes",
                        ex->body.cap_bytes,
                        (double)ex->body.cap_bytes / (1 << 20),
                        ex->handler->method, ex->handler->path);
        return reply_problem(ex, conn, &pb);
    }
    return ex->handler->handler(ex, conn);
}

/* The one place an exchange ends: logged, counted, freed. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    struct http_server *s = cls;
    struct exchange *ex = *con_cls;
    if (!ex)
        return;
    deadlines_restart(&s->deadlines, conn); /* for the next request */
    const double secs = seconds_since(&ex->started);
    metrics_request_done(ex->route, ex->status, secs, ex->bytes_out);
    if (!s->opt.quiet) {
        char stamp[32];
        const time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
        char method[4 * sizeof ex->method], path[4 * sizeof ex->path];
        log_field(ex->method, method, sizeof method);
        log_field(ex->path, path, sizeof path);
        fprintf(stderr, "%s %s %s %d %zu %.1fms%s\n", stamp, method, path,
                ex->status, ex->bytes_out, secs * 1e3,
                why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? ""
                                                           : " (cut short)");
    }
    if (ex->prepared.response) /* made, never queued */
        MHD_destroy_response(ex->prepared.response);
    if (ex->has_request) {
        answer_result_free(&ex->result);
        request_free(&ex->req);
    }
    buf_free(&ex->body);
    budget_release(&ex->hold, ex->hold.held);
    free(ex);
    *con_cls = NULL;
    atomic_fetch_sub(&s->exchanges, 1);
}

/* --------------------------------------------------------------- life */

/* Every connection is an open file: --max-connections, with room for the
 * server's own files, within what the process may open (raised to the
 * hard limit if need be). */
static unsigned connection_limit(unsigned wanted)
{
    const rlim_t own = 64, want = (rlim_t)wanted + own;
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files))
        return wanted;
    if (files.rlim_cur < want && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = want < files.rlim_max ? want : files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
        getrlimit(RLIMIT_NOFILE, &files);
    }
    if (files.rlim_cur >= want)
        return wanted;
    const unsigned allowed =
        files.rlim_cur > 2 * own ? (unsigned)(files.rlim_cur - own) : 16;
    fprintf(stderr,
            "attnd: --max-connections lowered from %u to %u: the process "
            "may open %llu files\n",
            wanted, allowed, (unsigned long long)files.rlim_cur);
    return allowed;
}

/* A connection opened or closed: its deadline (deadlines.h), and the
 * listener's count. */
static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_server *s = cls;
    deadlines_notify(&s->deadlines, conn, socket_context, code);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        listener_closed(&s->listener);
}

struct http_server *http_start(const struct options *o, struct models *models)
{
    struct http_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->opt = *o;
    s->models = models;
    s->limits = (struct request_limits){
        .models = models,
        .max_tokens = o->max_tokens,
        .max_dim = o->max_dim,
        .max_heads = o->max_heads,
        .max_output = o->max_output,
        .max_flops = o->max_flops,
    };
    // the decoding batch's steps hold a panel and a row of scores a
    // member of their team besides what each generation reserves for its
    // own rows: what requests may reserve is the rest of --max-memory
    const size_t batch_bytes = (size_t)o->threads *
                               (WIDEN_PANEL_FLOATS + o->max_tokens) *
                               sizeof(float);
    if (batch_bytes >= o->max_memory / 2) {
        fprintf(stderr,
                "attnd: --max-memory (%zu bytes) leaves too little beside the "
                "decoding batch's own working memory (%zu bytes for "
                "--threads %u and --max-tokens %zu)\n",
                o->max_memory, batch_bytes, o->threads, o->max_tokens);
        free(s);
        return NULL;
    }
    budget_init(&s->memory, o->max_memory - batch_bytes);
    drawn_cache_init(&s->drawn, o->drawn_cache);
    problem_set(&s->stopping, 503, "",
                "the server is stopping; try again "
                "shortly");
    s->stopping.retry_after = 1;
    s->stopping.reason = "stopping";
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
        drawn_cache_free(&s->drawn);
        free(s);
        return NULL;
    }
    if (!listener_open(&s->listener, &addr)) {
        fprintf(stderr, "attnd: cannot listen on %s:%u: %s\n", o->bind, o->port,
                strerror(errno));
        drawn_cache_free(&s->drawn);
        free(s);
        return NULL;
    }
    if (!workers_start(&s->workers, o->threads, o->max_queue)) {
        fprintf(stderr, "attnd: cannot start %u compute threads\n", o->threads);
        listener_close(&s->listener);
        drawn_cache_free(&s->drawn);
        free(s);
        return NULL;
    }
    const struct batcher_limits batch = {.max_batch = o->max_batch,
                                         .max_waiting = o->batch_queue,
                                         .wait_seconds = o->batch_wait,
                                         .threads = o->threads,
                                         .cancel = &s->cancel,
                                         .stopping = &s->stopping};
    s->batcher = batcher_start(&batch);
    if (!s->batcher) {
        listener_close(&s->listener);
        workers_stop(&s->workers);
        drawn_cache_free(&s->drawn);
        free(s);
        return NULL;
    }
    if (!deadlines_start(&s->deadlines, o->receive)) {
        fprintf(stderr, "attnd: cannot start the deadline watch\n");
        listener_close(&s->listener);
        batcher_stop(s->batcher);
        workers_stop(&s->workers);
        drawn_cache_free(&s->drawn);
        free(s);
        return NULL;
    }
    const unsigned max_connections = connection_limit(o->max_connections);
    /* HTTP threads only move bytes and answer small requests: one a core
     * is enough, two at least so that one busy thread is never all. They
     * are handed their connections by the listener (listener.h). */
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const unsigned io_threads = cores > 2 ? (unsigned)cores : 2;
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
            MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_request, s, MHD_OPTION_THREAD_POOL_SIZE, io_threads,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, o->timeout, MHD_OPTION_CONNECTION_LIMIT,
        max_connections + LISTENER_SLACK, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        o->max_conns_per_ip, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!s->daemon ||
        !listener_start(&s->listener, s->daemon, max_connections)) {
        fprintf(stderr, "attnd: cannot start the HTTP threads\n");
        if (s->daemon)
            MHD_stop_daemon(s->daemon);
        listener_close(&s->listener);
        deadlines_stop(&s->deadlines);
        batcher_stop(s->batcher);
        workers_stop(&s->workers);
        drawn_cache_free(&s->drawn);
        free(s);
        return NULL;
    }
    s->port = s->listener.port;
    return s;
}

unsigned http_port(const struct http_server *s)
{
    return s->port;
}

void http_drain_and_stop(struct http_server *s, unsigned grace_seconds)
{
    /* New connections are still accepted, so that every request gets an
     * answer: /attention 503 "stopping", /healthz 503 "draining". Those
     * waiting for a compute slot are turned away now; those computing
     * have the grace period, then are cancelled between units of work
     * and answered 503. */
    atomic_store(&s->draining, true);
    workers_close(&s->workers);
    batcher_close(s->batcher);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const double grace = (double)grace_seconds;
    /* a generation whose client has gone still computes until its next
     * step sees it gone: the exchanges alone do not say all is done */
    while ((atomic_load(&s->exchanges) > 0 ||
            metrics_computations_running() > 0) &&
           seconds_since(&t0) < grace)
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    atomic_store(&s->cancel, true);
    /* a cancelled computation ends within one unit of work; its answer
     * then goes out */
    while ((atomic_load(&s->exchanges) > 0 ||
            metrics_computations_running() > 0) &&
           seconds_since(&t0) < grace + 2.0)
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    /* A computation still running is stuck where no cancel reaches (a
     * library that retries an allocation for ever, say); stopping the
     * daemon would wait for its thread for ever too. The stop is bounded
     * instead. An exchange that only waits on its client (an answer it
     * does not read, a body it does not finish) holds no thread: the
     * daemon's stop closes it. */
    const int stuck = metrics_computations_running();
    if (stuck > 0) {
        fprintf(stderr,
                "attnd: %d request%s still running %.1f s after the stop; "
                "exiting without them\n",
                stuck, stuck == 1 ? "" : "s", seconds_since(&t0));
        fflush(stderr);
        _exit(1);
    }
    listener_close(&s->listener);
    MHD_stop_daemon(s->daemon);
    deadlines_stop(&s->deadlines);
    // the batch's last answers go to the pool, which outlives it
    batcher_stop(s->batcher);
    workers_stop(&s->workers);
    drawn_cache_free(&s->drawn);
    free(s);
}
