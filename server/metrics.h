/*
 * metrics.h - counters for GET /metrics in Prometheus' text format:
 * requests by route and status, a latency histogram, bytes out, attention
 * FLOPs and requests in flight. Lock-free; safe from every thread.
 */
#ifndef ATTND_METRICS_H
#define ATTND_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "drawn_cache.h"

enum metrics_route {
    ROUTE_ATTENTION,
    ROUTE_GENERATE,
    ROUTE_PATCH,
    ROUTE_HEALTHZ,
    ROUTE_METRICS,
    ROUTE_OPENAPI,
    ROUTE_CONFIG,
    ROUTE_MODELS,
    ROUTE_V1_MODELS,
    ROUTE_V1_COMPLETIONS,
    ROUTE_V1_CHAT,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE,
    ROUTE_STATIC,
    ROUTE_OTHER,
    N_ROUTES
};

const char *metrics_route_name(enum metrics_route r);

void metrics_request_started(void);
void metrics_request_done(enum metrics_route route, int status, double seconds,
                          size_t bytes_out);
void metrics_add_flops(double flops);

/* A generation made a token in this long; or ended because its client
 * went away. */
void metrics_generated_token(double seconds);
void metrics_generation_abandoned(void);

/* A batched decoding step that made a token for sequences of its
 * members, and brought prompt_tokens of their prompts. */
void metrics_decode_step(size_t sequences, size_t prompt_tokens);

/* A patch made count more patched runs; or stopped because its client
 * went away. */
void metrics_patched_runs(size_t count);
void metrics_patch_abandoned(void);

/* A computation waited this long for its compute slot. */
void metrics_queue_wait(double seconds);

/* A computation took a compute slot, or gave it back. */
void metrics_computation_started(void);
void metrics_computation_done(void);
/* Computations holding a compute slot now (attnd_computations_running). */
int metrics_computations_running(void);

/* A connection opened, closed, or was cut for not sending a whole request
 * within --receive-seconds. */
void metrics_connection_opened(void);
void metrics_connection_closed(void);
void metrics_connection_cut(void);

/* A request refused, by reason (problem_reason()). */
void metrics_refused(const char *reason);

/* What the server is doing now, beside the counters. */
struct metrics_now {
    size_t waiting; /* requests waiting for a compute slot */
    size_t generating, generations_waiting; /* in the batch, and for it */
    bool draining;  /* stopping */
    size_t memory_reserved, memory_limit; /* bytes, of --max-memory */
    struct drawn_cache_stats drawn;       /* --drawn-cache */
};

/* The exposition text; the caller frees it with free(). */
char *metrics_render(const struct metrics_now *now, size_t *len);

#endif
