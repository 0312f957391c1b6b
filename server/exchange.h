/*
 * exchange.h - the server and one exchange (a request and its answer), as
 * the HTTP modules share them: http.c runs the exchange's life, routes.c
 * and attention_route.c answer it, reply.c queues the answer.
 */
#ifndef ATTND_EXCHANGE_H
#define ATTND_EXCHANGE_H

#include "answer.h"
#include "batcher.h"
#include "budget.h"
#include "buf.h"
#include "deadlines.h"
#include "listener.h"
#include "metrics.h"
#include "options.h"
#include "request.h"
#include "response.h"
#include "workers.h"

#include <limits.h>
#include <stddef.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#define ATTND_VERSION "0.1.0"

struct http_server {
    struct MHD_Daemon *daemon;
    struct listener listener; /* accepts, and hands connections to daemon */
    struct options opt;
    char web_root[PATH_MAX]; /* canonical; "" when there is none */
    unsigned port;
    atomic_bool draining;   /* stopping: /healthz 503, nothing new computed */
    atomic_bool cancel;     /* the drain's deadline passed: stop computing */
    atomic_int exchanges;   /* begun and not yet completed */
    struct workers workers; /* the compute pool */
    struct batcher *batcher; /* the generations in flight, decoded together */
    struct deadlines deadlines;   /* --receive-seconds */
    struct problem stopping;      /* the answer once draining began */
    struct request_limits limits; /* of the flags, for every request */
    struct budget memory;         /* --max-memory, less the decoding
                                     batch's own working memory */
    struct drawn_cache drawn;     /* --drawn-cache */
    struct models *models;        /* loaded at start-up; borrowed */
};

/*
 * Everything about one request, in MHD's request closure from the first
 * byte to the completion callback, which frees it and all it owns in one
 * place. A streamed answer borrows the request and the result.
 */
struct exchange {
    struct http_server *srv;
    struct timespec started;
    enum metrics_route route;
    const struct route *handler; /* decided from the headers */
    char method[16];
    char path[256];
    struct buf body;
    bool body_too_big;
    struct budget_hold hold; /* all it has reserved of the memory budget */
    size_t body_reserved;    /* of which for the body */
    size_t body_announced;   /* its Content-Length, 0 when unknown */
    bool body_refused;       /* the body could not be reserved: refusal */
    struct problem refusal;
    bool answered;
    int status;
    size_t bytes_out;
    /* /attention: the decoded request, its kind's operations and plan,
     * and its result */
    bool has_request;
    struct request req;
    const struct answer_ops *ops; /* set with the plan */
    struct answer_plan plan;
    struct answer_result result;
    bool decoded;      /* ex->req holds the whole request */
    bool decoded_late; /* the body is a worker's to decode */
    double parse_seconds;
    char etag[24]; /* of a GET; "" for a POST */
    /* handed to the compute pool, the connection suspended meanwhile */
    struct job job;
    struct MHD_Connection *conn;
    bool handed_over;
    /* the answer made off the connection's thread, queued once it is
     * back: a response, or NULL when none could be made */
    struct {
        bool ready;
        int status;
        struct MHD_Response *response;
        size_t bytes;
    } prepared;
};

static inline struct exchange *exchange_of_job(struct job *job)
{
    return (struct exchange *)(void *)((char *)job -
                                       offsetof(struct exchange, job));
}

struct route;
typedef enum MHD_Result (*handler_fn)(struct exchange *ex,
                                      struct MHD_Connection *conn);

/* Seconds on the monotonic clock since t0. */
static inline double seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) +
           (double)(now.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* POST /patch (patch_route.c). */
enum MHD_Result handle_patch_post(struct exchange *ex,
                                  struct MHD_Connection *conn);

/* The OpenAI-compatible routes (openai_route.c): GET /v1/models (and
 * /v1/models/ID), POST /v1/completions, POST /v1/chat/completions. */
enum MHD_Result handle_v1_models(struct exchange *ex,
                                 struct MHD_Connection *conn);
enum MHD_Result handle_v1_completions(struct exchange *ex,
                                      struct MHD_Connection *conn);
enum MHD_Result handle_v1_chat(struct exchange *ex,
                               struct MHD_Connection *conn);

/* POST /tokenize and POST /detokenize (tokenize_route.c). */
enum MHD_Result handle_tokenize(struct exchange *ex,
                                struct MHD_Connection *conn);
enum MHD_Result handle_detokenize(struct exchange *ex,
                                  struct MHD_Connection *conn);

/* POST /generate (generate_route.c). */
enum MHD_Result handle_generate_post(struct exchange *ex,
                                     struct MHD_Connection *conn);

/* /attention, GET and POST (attention_route.c). */
enum MHD_Result handle_attention_get(struct exchange *ex,
                                     struct MHD_Connection *conn);
enum MHD_Result handle_attention_post(struct exchange *ex,
                                      struct MHD_Connection *conn);

#endif
