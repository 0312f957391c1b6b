/*
 * patch_route.c - POST /patch: activation patching on a loaded decoder
 * (src/patching.h). Everything it holds and its work are counted and
 * reserved before it starts (patch_request.c); it runs on the compute
 * pool.
 *
 * With Accept: text/event-stream the answer is a stream: a `progress`
 * event {done, of} after each batch of patched runs, then one `result`
 * event with the JSON answer, or an `error` event {status, detail}; a
 * client that goes away stops the work after the batch in hand.
 * Otherwise the connection waits, suspended, for the whole answer: JSON,
 * or with format=png or svg (or Accept: image/png, image/svg+xml) the
 * effects drawn.
 */
#include "event_stream.h"
#include "exchange.h"
#include "models.h"
#include "patch_answer.h"
#include "patch_request.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_BYTES ((size_t)1 << 20) /* unread events a client may leave */
#define MAX_PARAMS 16

struct patch_job {
    struct job job;
    struct http_server *srv;
    struct patch_request p;
    struct exchange *ex;         /* the waiting exchange, or NULL (stream) */
    struct event_stream *events; /* the stream, or NULL */
    struct budget_hold hold;     /* a stream's, taken over from ex */
    atomic_bool stop;            /* the client left, or the server stops */
    size_t done;                 /* patched runs made */
    int fd;    /* the waiting exchange's socket, -1: none to watch */
    bool left; /* its client went away, and the work stopped */
    struct MHD_Connection *conn;
};

static struct patch_job *patch_of_job(struct job *job)
{
    return (struct patch_job *)(void *)((char *)job -
                                        offsetof(struct patch_job, job));
}

static void patch_job_free(void *arg)
{
    struct patch_job *pj = arg;
    patch_request_free(&pj->p);
    budget_release(&pj->hold, pj->hold.held);
    free(pj);
}

/* ------------------------------------------------------------- events */

static bool send_event(struct patch_job *pj, const char *kind, const char *data,
                       size_t len)
{
    struct buf e;
    buf_init(&e, len + 64);
    const bool ok = buf_printf(&e, "event: %s\ndata: ", kind) &&
                    buf_append(&e, data, len) && buf_append_str(&e, "\n\n") &&
                    event_stream_write(pj->events, e.data, e.len);
    buf_free(&e);
    return ok;
}

static void send_error(struct patch_job *pj, int status, const char *detail)
{
    struct buf b;
    buf_init(&b, 1024);
    if (buf_printf(&b, "{\"status\":%d,\"detail\":", status) &&
        buf_append_json_string(&b, detail) && buf_append_str(&b, "}"))
        send_event(pj, "error", b.data, b.len);
    buf_free(&b);
    event_stream_finish(pj->events, NULL, 0, "", patch_job_free, pj);
}

/* After each batch: the progress to a stream, and whether to go on. */
static void on_progress(void *ctx, size_t done, size_t of)
{
    struct patch_job *pj = ctx;
    metrics_patched_runs(done - pj->done);
    pj->done = done;
    if (atomic_load(&pj->srv->cancel))
        atomic_store(&pj->stop, true);
    if (!pj->events) {
        if (reply_client_left(pj->fd) && !atomic_exchange(&pj->stop, true))
            pj->left = true;
        return;
    }
    char data[96];
    const int len =
        snprintf(data, sizeof data, "{\"done\":%zu,\"of\":%zu}", done, of);
    if (!send_event(pj, "progress", data, (size_t)len))
        atomic_store(&pj->stop, true); /* the client is gone */
}

/* ---------------------------------------------------------------- run */

/* The answer of a finished patch: its body and type, or a problem. */
static bool answer_of(struct patch_job *pj, const struct xf_patch_result *r,
                      char **body, size_t *len, const char **type,
                      struct problem *pb)
{
    *type = image_writers[pj->p.format].content_type;
    if (pj->p.format == IMAGE_JSON) {
        *body = patch_answer_json(&pj->p, r, len);
        return *body || problem_set(pb, 503, "", "out of memory");
    }
    char err[256] = "";
    unsigned char *image = NULL;
    const draw_status st =
        patch_answer_image(&pj->p, r, &image, len, err, sizeof err);
    if (st != DRAW_OK)
        return problem_from_draw(pb, st, err);
    *body = (char *)image;
    return true;
}

static void run_patch(struct job *job, double waited)
{
    struct patch_job *pj = patch_of_job(job);
    metrics_queue_wait(waited);
    metrics_computation_started();
    const struct model *m = pj->p.entry->model;
    pj->p.patch.progress = on_progress;
    pj->p.patch.progress_ctx = pj;
    struct xf_patch_result r = {0};
    struct attn_error err = {0};
    // a stream whose client left while it waited is not started
    const bool waited_away = pj->events && event_stream_gone(pj->events);
    const attn_status st =
        atomic_load(&pj->srv->cancel) || waited_away
            ? ATTN_E_CANCELLED
            : xf_patch_run(&m->xf, &pj->p.patch, &pj->stop, &r, &err);
    metrics_computation_done();
    if (st == ATTN_OK) {
        metrics_add_flops(pj->p.flops);
        models_count(pj->p.entry, pj->p.flops);
    }
    struct problem pb;
    char *body = NULL;
    size_t len = 0;
    const char *type = NULL;
    const bool gone = pj->events && event_stream_gone(pj->events);
    bool ok = st == ATTN_OK;
    if (!ok && st == ATTN_E_CANCELLED)
        pb = pj->srv->stopping;
    else if (!ok)
        problem_from_core(&pb, st, &err, "");
    ok = ok && answer_of(pj, &r, &body, &len, &type, &pb);
    xf_patch_result_free(&r);
    if (pj->events) {
        if (gone) {
            metrics_patch_abandoned();
            event_stream_finish(pj->events, NULL, 0, "", patch_job_free, pj);
        } else if (!ok) {
            send_error(pj, pb.status, pb.detail);
        } else {
            send_event(pj, "result", body,
                       len && body[len - 1] == '\n' ? len - 1 : len);
            event_stream_finish(pj->events, NULL, 0, "", patch_job_free, pj);
        }
        free(body);
        return;
    }
    // a waiting exchange: its answer prepared, then the connection back
    struct exchange *ex = pj->ex;
    struct MHD_Connection *conn = pj->conn;
    if (pj->left)
        metrics_patch_abandoned();
    if (ok) {
        struct MHD_Response *resp = reply_from_heap(body, len, type);
        if (resp)
            MHD_add_response_header(resp, "Cache-Control", "no-store");
        reply_prepare(ex, 200, resp, len);
    } else {
        reply_prepare_problem(ex, &pb);
    }
    patch_job_free(pj);
    MHD_resume_connection(conn); /* nothing touches ex after this */
}

/* The pool closed before its turn: the server is stopping. */
static void refuse_patch(struct job *job)
{
    struct patch_job *pj = patch_of_job(job);
    if (pj->events) {
        send_error(pj, 503, "the server is stopping");
        return;
    }
    struct MHD_Connection *conn = pj->conn;
    reply_prepare_problem(pj->ex, &pj->srv->stopping);
    patch_job_free(pj);
    MHD_resume_connection(conn);
}

/* -------------------------------------------------------------- route */

struct params {
    struct patch_param at[MAX_PARAMS];
    size_t n;
    bool overflow;
};

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind,
                               const char *key, const char *value)
{
    (void)kind;
    struct params *q = cls;
    if (q->n == MAX_PARAMS) {
        q->overflow = true;
        return MHD_NO;
    }
    q->at[q->n++] = (struct patch_param){key, value};
    return MHD_YES;
}

/* A stream of progress events, then the result: the patch takes over the
 * exchange's reservation, past the exchange if the client leaves. */
static enum MHD_Result stream(struct exchange *ex, struct MHD_Connection *conn,
                              struct patch_job *pj)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    pj->hold = ex->hold;
    ex->hold.held = 0;
    ex->body_reserved = 0;
    struct MHD_Response *r = NULL;
    pj->events = event_stream_new(conn, EVENT_BYTES, (double)s->opt.timeout,
                                  &ex->bytes_out, &s->cancel, &r);
    if (!pj->events) {
        patch_job_free(pj);
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    if (!workers_submit(&s->workers, &pj->job)) {
        event_stream_finish(pj->events, NULL, 0, "", patch_job_free, pj);
        MHD_destroy_response(r);
        return reply_busy(ex, conn);
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    return reply_queue(ex, conn, 200, r, 0);
}

enum MHD_Result handle_patch_post(struct exchange *ex,
                                  struct MHD_Connection *conn)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    if (!reply_small_json(ex, conn, &pb))
        return reply_problem(ex, conn, &pb);
    struct params q = {0};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect, &q);
    if (q.overflow) {
        problem_set(&pb, 422, "", "more than %d query parameters", MAX_PARAMS);
        return reply_problem(ex, conn, &pb);
    }
    struct patch_job *pj = calloc(1, sizeof *pj);
    if (!pj) {
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    pj->srv = s;
    pj->fd = -1;
    atomic_init(&pj->stop, false);
    pj->job.run = run_patch;
    pj->job.refuse = refuse_patch;
    size_t answer = 0;
    char err[256] = "";
    bool ok = patch_parse(&pj->p, ex->body.data ? ex->body.data : "",
                          ex->body.len, q.at, q.n,
                          image_format_accepted(reply_header(conn, "Accept")),
                          &s->limits, &ex->hold, &pb);
    if (ok && pj->p.format != IMAGE_JSON) {
        const draw_status st =
            patch_answer_measure(&pj->p, &answer, err, sizeof err);
        ok = st == DRAW_OK || problem_from_draw(&pb, st, err);
    } else if (ok) {
        answer = 2 * patch_answer_bytes(&pj->p) + EVENT_BYTES;
    }
    ok = ok && budget_reserve(&ex->hold, answer, "the answer", false, &pb);
    if (!ok) {
        patch_job_free(pj);
        return reply_problem(ex, conn, &pb);
    }
    const char *accept = reply_header(conn, "Accept");
    if (pj->p.format == IMAGE_JSON && accept &&
        strstr(accept, "text/event-stream"))
        return stream(ex, conn, pj);
    // the whole answer: the connection waits, suspended, for the pool,
    // its socket watched for a client that leaves
    pj->ex = ex;
    pj->conn = conn;
    pj->fd = reply_socket(conn);
    ex->conn = conn;
    ex->handed_over = true;
    MHD_suspend_connection(conn);
    if (workers_submit(&s->workers, &pj->job))
        return MHD_YES;
    MHD_resume_connection(conn);
    ex->handed_over = false;
    patch_job_free(pj);
    return reply_busy(ex, conn);
}
