/*
 * metrics.c - process-wide counters. They are the server's only shared
 * mutable state besides the compute gate, kept in atomics.
 */
#include "metrics.h"
#include "attention.h"
#include "buf.h"
#include "problem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The statuses attnd answers with; anything else is counted as "other". */
static const int statuses[] = {200, 304, 400, 401, 404, 405,
                               413, 415, 422, 500, 501, 503};
enum { N_STATUSES = sizeof statuses / sizeof statuses[0] + 1 };

/* Upper bounds of the latency buckets, seconds. */
static const double buckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                 0.25,  0.5,   1,    2.5,   5,    10};
enum { N_BUCKETS = sizeof buckets / sizeof buckets[0] };

static atomic_uint_fast64_t requests[N_ROUTES][N_STATUSES];
static atomic_uint_fast64_t latency_count[N_ROUTES][N_BUCKETS + 1];
static atomic_uint_fast64_t latency_micros[N_ROUTES];
static atomic_uint_fast64_t bytes_out;
static atomic_uint_fast64_t flops_total;
static atomic_uint_fast64_t tokens_generated, token_micros, abandoned;
static atomic_uint_fast64_t decode_steps, decode_rows, decode_prompt_tokens;
static atomic_uint_fast64_t patched_runs, patches_abandoned;
static atomic_int in_flight;
static atomic_int computing;
static atomic_uint_fast64_t queue_waits, queue_wait_micros;

/* One counter per reason of problem_reasons[], room for MAX_REASONS. */
enum { MAX_REASONS = 32 };
static atomic_uint_fast64_t refused[MAX_REASONS];

static size_t reason_count(void)
{
    return problem_reason_count < MAX_REASONS ? problem_reason_count
                                              : MAX_REASONS;
}

const char *metrics_route_name(enum metrics_route r)
{
    static const char *const names[N_ROUTES] = {"/attention",
                                                "/generate",
                                                "/patch",
                                                "/healthz",
                                                "/metrics",
                                                "/openapi.json",
                                                "/config",
                                                "/models",
                                                "/v1/models",
                                                "/v1/completions",
                                                "/v1/chat/completions",
                                                "/tokenize",
                                                "/detokenize",
                                                "static",
                                                "other"};
    return r < N_ROUTES ? names[r] : "other";
}

void metrics_request_started(void)
{
    atomic_fetch_add(&in_flight, 1);
}

void metrics_request_done(enum metrics_route route, int status, double seconds,
                          size_t bytes)
{
    int s = 0;
    while (s < N_STATUSES - 1 && statuses[s] != status)
        s++;
    atomic_fetch_add(&requests[route][s], 1);
    int b = 0;
    while (b < N_BUCKETS && seconds > buckets[b])
        b++;
    atomic_fetch_add(&latency_count[route][b], 1);
    atomic_fetch_add(&latency_micros[route], (uint_fast64_t)(seconds * 1e6));
    atomic_fetch_add(&bytes_out, bytes);
    atomic_fetch_sub(&in_flight, 1);
}

void metrics_add_flops(double flops)
{
    atomic_fetch_add(&flops_total, (uint_fast64_t)flops);
}

void metrics_generated_token(double seconds)
{
    atomic_fetch_add(&tokens_generated, 1);
    atomic_fetch_add(&token_micros, (uint_fast64_t)(seconds * 1e6));
}

void metrics_generation_abandoned(void)
{
    atomic_fetch_add(&abandoned, 1);
}

void metrics_decode_step(size_t sequences, size_t prompt_tokens)
{
    atomic_fetch_add(&decode_steps, 1);
    atomic_fetch_add(&decode_rows, sequences);
    atomic_fetch_add(&decode_prompt_tokens, prompt_tokens);
}

void metrics_patched_runs(size_t count)
{
    atomic_fetch_add(&patched_runs, count);
}

void metrics_patch_abandoned(void)
{
    atomic_fetch_add(&patches_abandoned, 1);
}

void metrics_queue_wait(double seconds)
{
    atomic_fetch_add(&queue_waits, 1);
    atomic_fetch_add(&queue_wait_micros, (uint_fast64_t)(seconds * 1e6));
}

void metrics_computation_started(void)
{
    atomic_fetch_add(&computing, 1);
}

void metrics_computation_done(void)
{
    atomic_fetch_sub(&computing, 1);
}

int metrics_computations_running(void)
{
    return atomic_load(&computing);
}

static atomic_int connections_open;
static atomic_uint_fast64_t connections_cut;

void metrics_connection_opened(void)
{
    atomic_fetch_add(&connections_open, 1);
}

void metrics_connection_closed(void)
{
    atomic_fetch_sub(&connections_open, 1);
}

void metrics_connection_cut(void)
{
    atomic_fetch_add(&connections_cut, 1);
}

void metrics_refused(const char *reason)
{
    size_t i = 0;
    while (i + 1 < reason_count() && strcmp(problem_reasons[i], reason))
        i++;
    atomic_fetch_add(&refused[i], 1);
}

char *metrics_render(const struct metrics_now *now, size_t *len)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    bool ok = buf_append_str(
        &b, "# HELP attnd_requests_total HTTP requests by route and status.\n"
            "# TYPE attnd_requests_total counter\n");
    for (int r = 0; ok && r < N_ROUTES; r++)
        for (int s = 0; ok && s < N_STATUSES; s++) {
            const uint_fast64_t n = atomic_load(&requests[r][s]);
            if (!n)
                continue;
            if (s < N_STATUSES - 1)
                ok = buf_printf(
                    &b,
                    "attnd_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                    metrics_route_name(r), statuses[s], (unsigned long long)n);
            else
                ok = buf_printf(&b,
                                "attnd_requests_total{route=\"%s\",status="
                                "\"other\"} %llu\n",
                                metrics_route_name(r), (unsigned long long)n);
        }
    ok = ok &&
         buf_append_str(
             &b, "# HELP attnd_request_duration_seconds Time from request to "
                 "last byte handed over.\n"
                 "# TYPE attnd_request_duration_seconds histogram\n");
    for (int r = 0; ok && r < N_ROUTES; r++) {
        uint_fast64_t cumulative = 0;
        for (int k = 0; ok && k <= N_BUCKETS; k++) {
            cumulative += atomic_load(&latency_count[r][k]);
            if (k < N_BUCKETS)
                ok = buf_printf(&b,
                                "attnd_request_duration_seconds_bucket{route="
                                "\"%s\",le=\"%g\"} %llu\n",
                                metrics_route_name(r), buckets[k],
                                (unsigned long long)cumulative);
            else
                ok = buf_printf(
                    &b,
                    "attnd_request_duration_seconds_bucket{route=\"%s\",le=\"+"
                    "Inf\"} %llu\n"
                    "attnd_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                    "attnd_request_duration_seconds_count{route=\"%s\"} %llu\n",
                    metrics_route_name(r), (unsigned long long)cumulative,
                    metrics_route_name(r),
                    (double)atomic_load(&latency_micros[r]) * 1e-6,
                    metrics_route_name(r), (unsigned long long)cumulative);
        }
    }
    ok =
        ok &&
        buf_printf(
            &b,
            "# HELP attnd_response_bytes_total Bytes of response bodies sent.\n"
            "# TYPE attnd_response_bytes_total counter\n"
            "attnd_response_bytes_total %llu\n"
            "# HELP attnd_attention_flops_total Floating-point operations of "
            "attention computed.\n"
            "# TYPE attnd_attention_flops_total counter\n"
            "attnd_attention_flops_total %llu\n"
            "# HELP attnd_generated_token_seconds Time each generated "
            "token took, from the one before.\n"
            "# TYPE attnd_generated_token_seconds summary\n"
            "attnd_generated_token_seconds_sum %.6f\n"
            "attnd_generated_token_seconds_count %llu\n"
            "# HELP attnd_generations_abandoned_total Generations stopped "
            "because their client went away.\n"
            "# TYPE attnd_generations_abandoned_total counter\n"
            "attnd_generations_abandoned_total %llu\n"
            "# HELP attnd_patched_runs_total Patched runs made by /patch.\n"
            "# TYPE attnd_patched_runs_total counter\n"
            "attnd_patched_runs_total %llu\n"
            "# HELP attnd_patches_abandoned_total Patches stopped because "
            "their client went away.\n"
            "# TYPE attnd_patches_abandoned_total counter\n"
            "attnd_patches_abandoned_total %llu\n"
            "# HELP attnd_requests_in_flight Requests being handled now.\n"
            "# TYPE attnd_requests_in_flight gauge\n"
            "attnd_requests_in_flight %d\n"
            "# HELP attnd_computations_running Computations holding a "
            "compute slot now.\n"
            "# TYPE attnd_computations_running gauge\n"
            "attnd_computations_running %d\n"
            "# HELP attnd_computations_waiting Requests waiting for a compute "
            "slot now.\n"
            "# TYPE attnd_computations_waiting gauge\n"
            "attnd_computations_waiting %zu\n"
            "# HELP attnd_queue_wait_seconds Time computations waited for a "
            "compute slot.\n"
            "# TYPE attnd_queue_wait_seconds summary\n"
            "attnd_queue_wait_seconds_sum %.6f\n"
            "attnd_queue_wait_seconds_count %llu\n"
            "# HELP attnd_memory_reserved_bytes Memory the requests in flight "
            "have reserved.\n"
            "# TYPE attnd_memory_reserved_bytes gauge\n"
            "attnd_memory_reserved_bytes %zu\n"
            "# HELP attnd_memory_limit_bytes The memory budget of the "
            "requests (--max-memory, less the decoding batch's own "
            "working memory).\n"
            "# TYPE attnd_memory_limit_bytes gauge\n"
            "attnd_memory_limit_bytes %zu\n"
            "# HELP attnd_draining 1 once the server has been told to stop.\n"
            "# TYPE attnd_draining gauge\n"
            "attnd_draining %d\n"
            "# HELP attnd_connections_open Client connections open now.\n"
            "# TYPE attnd_connections_open gauge\n"
            "attnd_connections_open %d\n"
            "# HELP attnd_connections_cut_total Connections closed for not "
            "sending a whole request within --receive-seconds.\n"
            "# TYPE attnd_connections_cut_total counter\n"
            "attnd_connections_cut_total %llu\n"
            "# HELP attnd_blas_info The kernels OpenBLAS runs (by "
            "OPENBLAS_CORETYPE, or its choice for this CPU).\n"
            "# TYPE attnd_blas_info gauge\n"
            "attnd_blas_info{core=\"%s\"} 1\n",
            (unsigned long long)atomic_load(&bytes_out),
            (unsigned long long)atomic_load(&flops_total),
            (double)atomic_load(&token_micros) * 1e-6,
            (unsigned long long)atomic_load(&tokens_generated),
            (unsigned long long)atomic_load(&abandoned),
            (unsigned long long)atomic_load(&patched_runs),
            (unsigned long long)atomic_load(&patches_abandoned),
            atomic_load(&in_flight), atomic_load(&computing), now->waiting,
            (double)atomic_load(&queue_wait_micros) * 1e-6,
            (unsigned long long)atomic_load(&queue_waits), now->memory_reserved,
            now->memory_limit, now->draining ? 1 : 0,
            atomic_load(&connections_open),
            (unsigned long long)atomic_load(&connections_cut),
            attn_blas_core());
    ok = ok &&
         buf_printf(&b,
                    "# HELP attnd_decode_steps_total Batched decoding steps "
                    "(one pass over a model's weights).\n"
                    "# TYPE attnd_decode_steps_total counter\n"
                    "attnd_decode_steps_total %llu\n"
                    "# HELP attnd_decode_step_sequences_total Sequences those "
                    "steps made a token for.\n"
                    "# TYPE attnd_decode_step_sequences_total counter\n"
                    "attnd_decode_step_sequences_total %llu\n"
                    "# HELP attnd_decode_step_prompt_tokens_total Prompt "
                    "tokens those steps brought, beside the generations "
                    "decoding.\n"
                    "# TYPE attnd_decode_step_prompt_tokens_total counter\n"
                    "attnd_decode_step_prompt_tokens_total %llu\n"
                    "# HELP attnd_generations_in_flight Generations holding a "
                    "place in the batch (--max-batch) now.\n"
                    "# TYPE attnd_generations_in_flight gauge\n"
                    "attnd_generations_in_flight %zu\n"
                    "# HELP attnd_generations_waiting Generations waiting for "
                    "a place in the batch now.\n"
                    "# TYPE attnd_generations_waiting gauge\n"
                    "attnd_generations_waiting %zu\n",
                    (unsigned long long)atomic_load(&decode_steps),
                    (unsigned long long)atomic_load(&decode_rows),
                    (unsigned long long)atomic_load(&decode_prompt_tokens),
                    now->generating, now->generations_waiting);
    const struct drawn_cache_stats *d = &now->drawn;
    ok = ok &&
         buf_printf(&b,
                    "# HELP attnd_drawn_cache_bytes Bytes of values drawn from "
                    "seeds kept for later requests.\n"
                    "# TYPE attnd_drawn_cache_bytes gauge\n"
                    "attnd_drawn_cache_bytes %zu\n"
                    "# HELP attnd_drawn_cache_limit_bytes Their cap "
                    "(--drawn-cache).\n"
                    "# TYPE attnd_drawn_cache_limit_bytes gauge\n"
                    "attnd_drawn_cache_limit_bytes %zu\n"
                    "# HELP attnd_drawn_cache_entries Tensors and token "
                    "embeddings kept.\n"
                    "# TYPE attnd_drawn_cache_entries gauge\n"
                    "attnd_drawn_cache_entries %zu\n"
                    "# HELP attnd_drawn_cache_evictions_total Entries "
                    "forgotten to stay within the cap.\n"
                    "# TYPE attnd_drawn_cache_evictions_total counter\n"
                    "attnd_drawn_cache_evictions_total %llu\n"
                    "# HELP attnd_drawn_cache_passes_total Values not kept: "
                    "drawn once while the cache was full.\n"
                    "# TYPE attnd_drawn_cache_passes_total counter\n"
                    "attnd_drawn_cache_passes_total %llu\n"
                    "# HELP attnd_drawn_cache_hits_total Values a request "
                    "found kept, by kind.\n"
                    "# TYPE attnd_drawn_cache_hits_total counter\n",
                    d->bytes, d->cap, d->entries,
                    (unsigned long long)d->evictions,
                    (unsigned long long)d->passes);
    for (int k = 0; ok && k < DRAWN_KINDS; k++)
        ok = buf_printf(&b, "attnd_drawn_cache_hits_total{kind=\"%s\"} %llu\n",
                        drawn_kind_name((enum drawn_kind)k),
                        (unsigned long long)d->hits[k]);
    ok =
        ok && buf_printf(&b, "# HELP attnd_drawn_cache_misses_total Values "
                             "a request drew, by kind.\n"
                             "# TYPE attnd_drawn_cache_misses_total counter\n");
    for (int k = 0; ok && k < DRAWN_KINDS; k++)
        ok =
            buf_printf(&b, "attnd_drawn_cache_misses_total{kind=\"%s\"} %llu\n",
                       drawn_kind_name((enum drawn_kind)k),
                       (unsigned long long)d->misses[k]);
    ok = ok && buf_printf(&b, "# HELP attnd_refused_total Requests refused, "
                              "by reason.\n"
                              "# TYPE attnd_refused_total counter\n");
    for (size_t i = 0; ok && i < reason_count(); i++)
        ok = buf_printf(&b, "attnd_refused_total{reason=\"%s\"} %llu\n",
                        problem_reasons[i],
                        (unsigned long long)atomic_load(&refused[i]));
    if (!ok) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, len);
}
