/*
 * attention_route.c - GET and POST /attention: decode the request into the
 * exchange, wait for a compute slot, compute, and answer with a streamed
 * JSON body or a PNG. The exchange owns the request and the result until
 * its completion callback; the JSON stream only borrows them.
 */
#include "attend.h"
#include "exchange.h"
#include "render.h"
#include "reply.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_QUERY_PARAMS 64
#define MAX_PNG_PIXELS ((size_t)64 << 20)
/* cJSON's nodes per byte of JSON text, at most: "1," is a node of 64
 * bytes plus its allocator's overhead for 2 bytes of text */
#define JSON_TREE_BYTES 48

/* ------------------------------------------------------ query strings */

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
    const char *accept = reply_header(conn, "Accept");
    return accept && strstr(accept, "image/png") &&
           !strstr(accept, "application/json");
}

/* A stable tag for a GET: FNV-1a over the version, the sorted query and
 * what it answers with. */
static bool query_etag(const struct query_collect *q, bool png, char out[24])
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
    struct buf text;
    buf_init(&text, (size_t)1 << 20);
    bool ok = buf_append_str(&text, "attnd " ATTND_VERSION);
    for (size_t i = 0; ok && i < q->n; i++)
        ok = buf_printf(&text, "%s=%s&", order[i]->key, order[i]->value);
    ok = ok && buf_append_str(&text, png ? "p" : "j");
    if (ok)
        snprintf(out, 24, "\"%016llx\"",
                 (unsigned long long)attn_fnv1a64(text.data, text.len));
    buf_free(&text);
    return ok;
}

/* ------------------------------------------------------------ answers */

struct streamed {
    struct response_stream *stream;
    size_t *bytes_out; /* in the exchange, which outlives every read */
};

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
static const char *cache_control(const struct http_server *s)
{
    return s->opt.api_key[0] ? "private, max-age=86400"
                             : "public, max-age=86400";
}

static struct MHD_Response *png_answer(struct exchange *ex, double parse_s,
                                       double compute_s, size_t *bytes,
                                       struct problem *pb)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned char *png = NULL;
    if (!render_png(&ex->req, &ex->res, MAX_PNG_PIXELS, &png, bytes, pb))
        return NULL;
    struct MHD_Response *r = reply_from_heap((char *)png, *bytes, "image/png");
    if (r)
        add_timing(r, parse_s, compute_s, seconds_since(&t0));
    return r;
}

static struct MHD_Response *json_answer(struct exchange *ex, double parse_s,
                                        double compute_s, struct problem *pb)
{
    struct streamed *st = malloc(sizeof *st);
    struct response_stream *stream = response_stream_new(&ex->req, &ex->res);
    if (!st || !stream) {
        free(st);
        response_stream_free(stream);
        problem_set(pb, 503, "", "out of memory encoding the response");
        return NULL;
    }
    *st = (struct streamed){stream, &ex->bytes_out};
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 64 * 1024, read_stream, st, free_stream);
    if (!r) {
        free_stream(st);
        problem_set(pb, 503, "", "out of memory encoding the response");
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    add_timing(r, parse_s, compute_s, -1);
    return r;
}

/* Compute the decoded ex->req and answer it. */
static enum MHD_Result answer(struct exchange *ex, struct MHD_Connection *conn,
                              double parse_s, const char *etag)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    const double work = ex->req.compute ? attn_flops(&ex->req.cfg) : 0.0;
    struct gate *gate = work < EXPRESS_FLOPS ? &s->express : &s->gate;
    /* what computing and answering will hold, before either starts */
    const size_t computed =
        ex->req.compute ? attn_forward_bytes(&ex->req.cfg) : 0;
    const size_t answer_bytes = ex->req.png.wanted
                                    ? render_png_bytes(&ex->req, MAX_PNG_PIXELS)
                                    : response_stream_bytes(&ex->req);
    if (!budget_reserve(&ex->hold, computed, "the computation", false, &pb) ||
        !budget_reserve(&ex->hold, answer_bytes, "the answer", false, &pb))
        return reply_problem(ex, conn, &pb);
    struct timespec queued;
    clock_gettime(CLOCK_MONOTONIC, &queued);
    const bool admitted = gate_enter(gate);
    if (admitted)
        metrics_queue_wait(seconds_since(&queued));
    if (!admitted) {
        const bool stopping = gate_closed(gate);
        if (stopping)
            problem_set(&pb, 503, "",
                        "the server is stopping; try again shortly");
        else
            problem_set(&pb, 503, "",
                        "the server is at capacity (%u computing, %zu "
                        "waiting); try again shortly",
                        s->opt.threads, s->opt.max_queue);
        pb.retry_after = 1;
        pb.reason = stopping ? "stopping" : "capacity";
        return reply_problem(ex, conn, &pb);
    }
    metrics_computation_started();
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const bool ok = attend_run(&ex->req, 1, &s->cancel, &ex->res, &pb);
    const double compute_s = seconds_since(&t0);
    /* A PNG is drawn in the slot too: its canvas is as large as any
     * array; a JSON answer is formatted as it is read, a bounded buffer
     * at a time. */
    size_t bytes = 0;
    struct MHD_Response *r = NULL;
    if (ok && ex->req.png.wanted)
        r = png_answer(ex, parse_s, compute_s, &bytes, &pb);
    metrics_computation_done();
    gate_leave(gate);
    if (!ok)
        return reply_problem(ex, conn, &pb);
    if (ex->req.compute)
        metrics_add_flops(attn_flops(&ex->req.cfg));
    if (!ex->req.png.wanted)
        r = json_answer(ex, parse_s, compute_s, &pb);
    if (!r)
        return reply_problem(ex, conn, &pb);
    if (etag) {
        MHD_add_response_header(r, "ETag", etag);
        MHD_add_response_header(r, "Cache-Control", cache_control(s));
    } else {
        MHD_add_response_header(r, "Cache-Control", "no-store");
    }
    MHD_add_response_header(r, "Vary", "Accept, Authorization");
    return reply_queue(ex, conn, 200, r, bytes);
}

/* The exchange takes a request to decode into. */
static struct request *begin_request(struct exchange *ex)
{
    request_init(&ex->req);
    ex->req.hold = &ex->hold;
    ex->has_request = true;
    return &ex->req;
}

enum MHD_Result handle_attention_get(struct exchange *ex,
                                     struct MHD_Connection *conn)
{
    struct problem pb;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct query_collect q;
    if (!collect_query(conn, &q, &pb))
        return reply_problem(ex, conn, &pb);
    struct request *req = begin_request(ex);
    const struct request_limits *lim = &ex->srv->limits;
    if (!request_parse_png(req, q.params, q.n, accepts_png(conn), &pb) ||
        !request_parse_query(req, q.params, q.n, lim, &pb))
        return reply_problem(ex, conn, &pb);
    char etag[24];
    if (!query_etag(&q, req->png.wanted, etag)) {
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    const char *match = reply_header(conn, "If-None-Match");
    if (match && (strstr(match, etag) || !strcmp(match, "*")))
        return reply_not_modified(ex, conn, etag, cache_control(ex->srv));
    return answer(ex, conn, seconds_since(&t0), etag);
}

enum MHD_Result handle_attention_post(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    struct problem pb;
    const char *type = reply_header(conn, "Content-Type");
    if (!type || strncasecmp(type, "application/json", 16) ||
        (type[16] && type[16] != ';' && type[16] != ' ')) {
        problem_set(&pb, 415, "",
                    "Content-Type is \"%.60s\"; send application/json",
                    type ? type : "(none)");
        return reply_problem(ex, conn, &pb);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct query_collect q;
    if (!collect_query(conn, &q, &pb))
        return reply_problem(ex, conn, &pb);
    for (size_t i = 0; i < q.n; i++)
        if (!request_is_png_param(q.params[i].key)) {
            problem_set(&pb, 422, "",
                        "query parameter \"%.60s\" is not taken by POST; "
                        "options go in the JSON body (only format, head, "
                        "batch, colormap, cell and labels go in the URL)",
                        q.params[i].key);
            return reply_problem(ex, conn, &pb);
        }
    struct request *req = begin_request(ex);
    const struct request_limits *lim = &ex->srv->limits;
    const char *body = ex->body.data ? ex->body.data : "";
    /* the parse tree, about JSON_TREE_BYTES a byte of body at most, is
     * reserved while it lives */
    const size_t tree = ex->body.len <= (SIZE_MAX - 4096) / JSON_TREE_BYTES
                            ? ex->body.len * JSON_TREE_BYTES + 4096
                            : SIZE_MAX;
    if (!budget_reserve(&ex->hold, tree, "parsing the body", true, &pb))
        return reply_problem(ex, conn, &pb);
    const bool parsed =
        request_parse_png(req, q.params, q.n, accepts_png(conn), &pb) &&
        request_parse_json(req, body, ex->body.len, lim, &pb);
    budget_release(&ex->hold, tree);
    if (!parsed)
        return reply_problem(ex, conn, &pb);
    buf_free(&ex->body); /* parsed: the request holds what it needs */
    budget_release(&ex->hold, ex->body_reserved);
    ex->body_reserved = 0;
    return answer(ex, conn, seconds_since(&t0), NULL);
}
