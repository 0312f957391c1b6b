/*
 * attention_route.c - GET and POST /attention: decode the request into the
 * exchange, plan its answer, wait for a compute slot, compute, and answer
 * with a streamed JSON body or a PNG, every step after decoding through
 * the operations of the request's kind (answer.h). The exchange owns the
 * request and the result until its completion callback; the JSON stream
 * only borrows them.
 */
#include "answer.h"
#include "exchange.h"
#include "jsonnum.h"
#include "render.h"
#include "reply.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_QUERY_PARAMS 64
/* cJSON's nodes per byte of JSON text, at most: "1," is a node of 64
 * bytes plus its allocator's overhead for 2 bytes of text */
#define JSON_TREE_BYTES 48
/* Answered on the HTTP thread, without a handover: computations under
 * this estimate (a few milliseconds at most), PNGs under this many bytes
 * and bodies under this many. */
#define INLINE_FLOPS 1e8
#define INLINE_PNG_BYTES ((size_t)4 << 20)
#define INLINE_BODY_BYTES ((size_t)64 << 10)

/* ------------------------------------------------------ query strings */

struct query_collect {
    struct request_param params[MAX_QUERY_PARAMS];
    size_t len[MAX_QUERY_PARAMS]; /* each value's bytes, NULs included */
    size_t n;
    bool overflow;
};

static enum MHD_Result collect_param(void *cls, enum MHD_ValueKind kind,
                                     const char *key, size_t key_size,
                                     const char *value, size_t value_size)
{
    (void)kind;
    (void)key_size;
    struct query_collect *q = cls;
    if (q->n == MAX_QUERY_PARAMS) {
        q->overflow = true;
        return MHD_NO;
    }
    q->len[q->n] = value ? value_size : 0;
    q->params[q->n++] = (struct request_param){key, value ? value : ""};
    return MHD_YES;
}

/* The URL's query parameters, or a 422 in pb when there are too many. */
static bool collect_query(struct MHD_Connection *conn, struct query_collect *q,
                          struct problem *pb)
{
    q->n = 0;
    q->overflow = false;
    MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, collect_param, q);
    if (q->overflow)
        return problem_set(pb, 422, "", "more than %d query parameters",
                           MAX_QUERY_PARAMS);
    return request_query_values_ok(q->params, q->len, q->n, pb);
}

/* The URL's image options, and the format the Accept header asks for. */
static bool parse_image(struct request *req, struct MHD_Connection *conn,
                        const struct query_collect *q, struct problem *pb)
{
    return request_parse_image(
        req, q->params, q->n,
        image_format_accepted(reply_header(conn, "Accept")), pb);
}

/* A stable tag for a GET: FNV-1a over the version, the sorted query,
 * what it answers with and what else its kind's answer depends on. */
static bool query_etag(const struct query_collect *q, const struct exchange *ex,
                       char out[24])
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
    for (size_t i = 0; ok && i < q->n; i++) { /* a text's NULs too */
        const size_t len = q->len[order[i] - q->params];
        ok = buf_printf(&text, "%s=%zu:", order[i]->key, len) &&
             buf_append(&text, order[i]->value, len) &&
             buf_append(&text, "&", 1);
    }
    // the format by its name's first letter: "j", "p" or "s"
    ok = ok && buf_append(&text, image_writers[ex->req.png.format].name, 1);
    ok = ok && ex->ops->tag(&ex->req, &text);
    if (ok)
        snprintf(out, 24, "\"%016llx\"",
                 (unsigned long long)attn_fnv1a64(text.data, text.len));
    buf_free(&text);
    return ok;
}

/* ------------------------------------------------------------ answers */

/* A JSON answer up to this size is formatted whole and sent with its
 * length; a longer one is formatted as it is read, this much at a time. */
#define WHOLE_ANSWER_BYTES ((size_t)64 << 10)

/* A long answer: the head already formatted, then the rest as read. */
struct streamed {
    struct response_stream *stream;
    char *head;
    size_t head_len, head_at;
    size_t *bytes_out; /* in the exchange, which outlives every read */
};

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct streamed *st = cls;
    size_t n = 0;
    if (st->head_at < st->head_len) {
        n = st->head_len - st->head_at < max ? st->head_len - st->head_at : max;
        memcpy(buf, st->head + st->head_at, n);
        st->head_at += n;
    } else {
        n = response_stream_read(st->stream, buf, max);
    }
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    *st->bytes_out += n;
    return (ssize_t)n;
}

static void free_stream(void *cls)
{
    struct streamed *st = cls;
    response_stream_free(st->stream);
    free(st->head);
    free(st);
}

/* At out: ", " unless first, name, ";dur=", seconds as milliseconds to
 * 3 decimals; returns the end. Every answer has these: no printf. out
 * has room for name and 40 more bytes. */
static char *put_timing(char *out, bool first, const char *name, double seconds)
{
    const double us = seconds > 0 ? seconds * 1e6 + 0.5 : 0.0;
    uint64_t v = us < 1e15 ? (uint64_t)us : 0;
    if (!first) {
        *out++ = ',';
        *out++ = ' ';
    }
    while (*name)
        *out++ = *name++;
    memcpy(out, ";dur=", 5);
    out += 5;
    // the milliseconds, a point, three digits of the rest
    out += jsonnum_uint(v / 1000, out);
    *out++ = '.';
    *out++ = (char)('0' + v / 100 % 10);
    *out++ = (char)('0' + v / 10 % 10);
    *out++ = (char)('0' + v % 10);
    return out;
}

static void add_timing(struct MHD_Response *r, double parse_s, double compute_s,
                       double encode_s)
{
    char timing[160];
    char *end = put_timing(timing, true, "parse", parse_s);
    end = put_timing(end, false, "compute", compute_s);
    if (encode_s >= 0)
        end = put_timing(end, false, "encode", encode_s);
    *end = '\0';
    MHD_add_response_header(r, "Server-Timing", timing);
}

/* Answers are deterministic, so GETs may be cached; only privately when
 * a key guards them. */
static const char *cache_control(const struct http_server *s)
{
    return s->opt.api_key[0] ? "private, max-age=86400"
                             : "public, max-age=86400";
}

static struct MHD_Response *image_answer(struct exchange *ex, double compute_s,
                                         size_t *bytes, struct problem *pb)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned char *image = NULL;
    if (!ex->ops->draw_png(&ex->req, &ex->result, RENDER_MAX_PIXELS, &image,
                           bytes, pb))
        return NULL;
    struct MHD_Response *r = reply_from_heap(
        (char *)image, *bytes, image_writers[ex->req.png.format].content_type);
    if (r)
        add_timing(r, ex->parse_seconds, compute_s, seconds_since(&t0));
    return r;
}

/* The JSON answer: whole, with its length in *bytes, when it is short;
 * otherwise its head, then the rest formatted as the client reads it. */
static struct MHD_Response *json_answer(struct exchange *ex, double compute_s,
                                        size_t *bytes, struct problem *pb)
{
    struct response_stream *stream =
        ex->ops->encode_json(&ex->req, &ex->result);
    char *head = stream ? malloc(WHOLE_ANSWER_BYTES) : NULL;
    struct MHD_Response *r = NULL;
    *bytes = 0;
    if (head) {
        const size_t n = response_stream_read(stream, head, WHOLE_ANSWER_BYTES);
        if (n < WHOLE_ANSWER_BYTES) { /* all of it */
            response_stream_free(stream);
            stream = NULL;
            *bytes = n;
            r = reply_from_heap(head, n,
                                image_writers[IMAGE_JSON].content_type);
        } else {
            struct streamed *st = malloc(sizeof *st);
            if (st) {
                *st = (struct streamed){stream, head, n, 0, &ex->bytes_out};
                r = MHD_create_response_from_callback(
                    MHD_SIZE_UNKNOWN, WHOLE_ANSWER_BYTES, read_stream, st,
                    free_stream);
                if (!r)
                    free_stream(st);
                else
                    MHD_add_response_header(
                        r, "Content-Type",
                        image_writers[IMAGE_JSON].content_type);
            } else {
                response_stream_free(stream);
                free(head);
            }
        }
    } else {
        response_stream_free(stream);
    }
    if (!r) {
        problem_set(pb, 503, "", "out of memory encoding the response");
        return NULL;
    }
    add_timing(r, ex->parse_seconds, compute_s, -1);
    return r;
}

/* The decoded ex->req's operations, by its kind, and its plan: the image
 * measured (one the drawing would refuse is refused now, before anything
 * is computed), the work and the memory its answer will take. */
static bool plan_answer(struct exchange *ex, struct problem *pb)
{
    ex->ops = answer_ops(ex->req.kind);
    return ex->ops->plan(&ex->req, &ex->plan, pb);
}

/* Reserve what computing and answering the planned ex->req will hold,
 * before either starts. */
static bool reserve_answer(struct exchange *ex, struct problem *pb)
{
    const size_t answer_bytes =
        ex->req.png.format != IMAGE_JSON
            ? ex->plan.answer_bytes
            : ex->plan.answer_bytes + WHOLE_ANSWER_BYTES; /* the head */
    return budget_reserve(&ex->hold, ex->plan.run_bytes, "the computation",
                          false, pb) &&
           budget_reserve(&ex->hold, answer_bytes, "the answer", false, pb);
}

/* Compute the decoded and reserved ex->req and make its answer in
 * ex->prepared (a problem when it fails). Runs on an HTTP thread for small
 * requests, on a worker for the others. */
static void compute_answer(struct exchange *ex)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    metrics_computation_started();
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const bool ok =
        ex->ops->run(&ex->req, 1, &s->cancel, &s->drawn, &ex->result, &pb);
    const double compute_s = seconds_since(&t0);
    /* A PNG is drawn here too: its canvas is as large as any array. A JSON
     * answer is formatted as it is read, a bounded buffer at a time. */
    size_t bytes = 0;
    struct MHD_Response *r = NULL;
    if (ok && ex->req.png.format != IMAGE_JSON)
        r = image_answer(ex, compute_s, &bytes, &pb);
    else if (ok)
        r = json_answer(ex, compute_s, &bytes, &pb);
    metrics_computation_done();
    if (ok) {
        metrics_add_flops(ex->plan.flops);
        ex->ops->count(&ex->req, ex->plan.flops);
    }
    if (!r) {
        reply_prepare_problem(ex, &pb);
        return;
    }
    if (ex->etag[0]) {
        MHD_add_response_header(r, "ETag", ex->etag);
        MHD_add_response_header(r, "Cache-Control", cache_control(s));
    } else {
        MHD_add_response_header(r, "Cache-Control", "no-store");
    }
    MHD_add_response_header(r, "Vary", "Accept, Authorization");
    reply_prepare(ex, 200, r, bytes);
}

static bool decode_body(struct exchange *ex, struct problem *pb);

/* A worker's turn for a handed-over request: decode it if it came with a
 * large body, reserve, compute, and give the connection back to MHD with
 * its answer. Nothing touches ex after the resume: it may be gone. */
static void run_handed_over(struct job *job, double waited)
{
    struct exchange *ex = exchange_of_job(job);
    metrics_queue_wait(waited);
    struct problem pb;
    if (atomic_load(&ex->srv->cancel))
        reply_prepare_problem(ex, &ex->srv->stopping);
    else if (!ex->decoded && !decode_body(ex, &pb))
        reply_prepare_problem(ex, &pb);
    else if (ex->decoded_late && !reserve_answer(ex, &pb))
        reply_prepare_problem(ex, &pb);
    else
        compute_answer(ex);
    MHD_resume_connection(ex->conn);
}

/* The pool closed before its turn: the server is stopping. */
static void refuse_handed_over(struct job *job)
{
    struct exchange *ex = exchange_of_job(job);
    reply_prepare_problem(ex, &ex->srv->stopping);
    MHD_resume_connection(ex->conn);
}

/* Suspend the connection and hand the request to the compute pool. */
static enum MHD_Result hand_over(struct exchange *ex,
                                 struct MHD_Connection *conn)
{
    ex->job.run = run_handed_over;
    ex->job.refuse = refuse_handed_over;
    ex->conn = conn;
    ex->handed_over = true;
    /* suspended first: a worker may resume it as soon as it has it */
    MHD_suspend_connection(conn);
    if (workers_submit(&ex->srv->workers, &ex->job))
        return MHD_YES;
    MHD_resume_connection(conn);
    ex->handed_over = false;
    return reply_busy(ex, conn);
}

/* Small requests are answered at once on the HTTP thread, where the
 * handover would cost more than the work; the rest go to the pool. */
static bool answer_inline(const struct exchange *ex)
{
    if (ex->plan.flops >= INLINE_FLOPS)
        return false;
    if (ex->req.png.format == IMAGE_JSON)
        return true;
    return ex->plan.answer_bytes <= INLINE_PNG_BYTES;
}

/* Answer the decoded ex->req: reserve, then compute here or hand over. */
static enum MHD_Result answer_decoded(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    if (atomic_load(&s->draining))
        return reply_problem(ex, conn, &s->stopping);
    if (!reserve_answer(ex, &pb))
        return reply_problem(ex, conn, &pb);
    if (!answer_inline(ex))
        return hand_over(ex, conn);
    compute_answer(ex);
    return reply_prepared(ex, conn);
}

/* The exchange takes a request to decode into. */
static struct request *begin_request(struct exchange *ex)
{
    request_init(&ex->req);
    ex->req.hold = &ex->hold;
    ex->req.drawn = &ex->srv->drawn;
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
    if (!parse_image(req, conn, &q, &pb) ||
        !request_parse_query_n(req, q.params, q.len, q.n, lim, &pb) ||
        !plan_answer(ex, &pb))
        return reply_problem(ex, conn, &pb);
    if (!query_etag(&q, ex, ex->etag)) {
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    const char *match = reply_header(conn, "If-None-Match");
    if (match && (strstr(match, ex->etag) || !strcmp(match, "*")))
        return reply_not_modified(ex, conn, ex->etag, cache_control(ex->srv));
    ex->decoded = true;
    ex->parse_seconds = seconds_since(&t0);
    return answer_decoded(ex, conn);
}

/* Decode the body into ex->req (whose PNG options are already read), with
 * its parse tree reserved while it lives, let the body go, and plan the
 * answer. */
static bool decode_body(struct exchange *ex, struct problem *pb)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *body = ex->body.data ? ex->body.data : "";
    /* the parse tree, about JSON_TREE_BYTES a byte of body at most */
    const size_t tree = ex->body.len <= (SIZE_MAX - 4096) / JSON_TREE_BYTES
                            ? ex->body.len * JSON_TREE_BYTES + 4096
                            : SIZE_MAX;
    if (!budget_reserve(&ex->hold, tree, "parsing the body", true, pb))
        return false;
    const bool parsed =
        request_parse_json(&ex->req, body, ex->body.len, &ex->srv->limits, pb);
    budget_release(&ex->hold, tree);
    if (!parsed)
        return false;
    buf_free(&ex->body); /* parsed: the request holds what it needs */
    budget_release(&ex->hold, ex->body_reserved);
    ex->body_reserved = 0;
    if (!plan_answer(ex, pb))
        return false;
    ex->decoded = true;
    ex->parse_seconds += seconds_since(&t0);
    return true;
}

enum MHD_Result handle_attention_post(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    struct problem pb;
    if (!reply_json_body(conn, &pb))
        return reply_problem(ex, conn, &pb);
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
                        "view, batch, colormap, cell, labels, special, "
                        "color_scale, pool and pool_size go in the URL)",
                        q.params[i].key);
            return reply_problem(ex, conn, &pb);
        }
    struct request *req = begin_request(ex);
    if (!parse_image(req, conn, &q, &pb))
        return reply_problem(ex, conn, &pb);
    ex->parse_seconds = seconds_since(&t0);
    /* a large body is parsed by a worker: parsing it here would hold up
     * every other connection of this HTTP thread */
    if (ex->body.len > INLINE_BODY_BYTES) {
        if (atomic_load(&ex->srv->draining))
            return reply_problem(ex, conn, &ex->srv->stopping);
        ex->decoded_late = true;
        return hand_over(ex, conn);
    }
    if (!decode_body(ex, &pb))
        return reply_problem(ex, conn, &pb);
    return answer_decoded(ex, conn);
}
