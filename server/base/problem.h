/*
 * problem.h - the one place where a failure becomes an HTTP answer:
 * application/problem+json (RFC 9457) with status, title, a detail that
 * names the field and the value, and a JSON pointer where one applies.
 */
#ifndef ATTND_PROBLEM_H
#define ATTND_PROBLEM_H

#include "attention.h"
#include "draw.h"

#include <stdbool.h>
#include <stddef.h>

struct problem {
    int status; /* HTTP status */
    char detail[320];
    char pointer[128];  /* "" when no field applies */
    char allow[64];     /* for 405: the Allow header */
    long retry_after;   /* for 503: seconds, 0 = none */
    const char *reason; /* why, for the metrics: NULL to go by status */
};

/* Fill pb and return false, so parsers can `return problem_set(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
bool problem_set(struct problem *pb, int status, const char *pointer,
                 const char *fmt, ...);

/* The core's error as a problem: 503 for an allocation that failed, else
 * 422 at pointer (the request field err->field stands for). */
bool problem_from_core(struct problem *pb, attn_status st,
                       const struct attn_error *err, const char *pointer);

/* The drawing library's error (st is not DRAW_OK) as a problem: an image
 * too big is the request's, at "/cell"; no memory is a 503 to retry; the
 * rest are the server's own failures, 500. message is the library's. */
bool problem_from_draw(struct problem *pb, draw_status st, const char *message);

/* Why a request was refused, as /metrics counts it: pb->reason, or the
 * status's own ("invalid", "unauthorized", "out_of_memory", ...); one of
 * problem_reasons[], whose last is "server_fault". */
const char *problem_reason(const struct problem *pb);
extern const char *const problem_reasons[];
extern const size_t problem_reason_count;

/* The short title for a status, e.g. "invalid request" for 422. */
const char *problem_title(int status);

/* The problem+json body; the caller frees it with free(). */
char *problem_body(const struct problem *pb, size_t *len);

/* The same failure in OpenAI's shape, for the /v1/ routes:
 * {"error": {"message", "type", "param", "code"}}, param the pointer's
 * field as OpenAI names one ("messages[0].content"), code the reason
 * when there is one ("model_not_found", "compute_budget", ...); and its
 * status (an invalid request is OpenAI's 400). */
char *problem_body_openai(const struct problem *pb, size_t *len);
int problem_openai_status(const struct problem *pb);

#endif
