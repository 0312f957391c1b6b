/*
 * problem.c - errors as application/problem+json.
 */
#include "problem.h"
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool problem_set(struct problem *pb, int status, const char *pointer,
                 const char *fmt, ...)
{
    memset(pb, 0, sizeof *pb);
    pb->status = status;
    snprintf(pb->pointer, sizeof pb->pointer, "%s", pointer ? pointer : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pb->detail, sizeof pb->detail, fmt, ap);
    va_end(ap);
    return false;
}

bool problem_from_core(struct problem *pb, attn_status st,
                       const struct attn_error *err, const char *pointer)
{
    /* A failed allocation is the server's lack of room, and a cancelled
     * computation its stopping, not the client's mistake; everything else
     * the core refuses is the input's. */
    if (st == ATTN_E_NOMEM || st == ATTN_E_CANCELLED) {
        if (st == ATTN_E_NOMEM)
            problem_set(pb, 503, pointer, "%s", err->message);
        else {
            problem_set(pb, 503, "",
                        "the server is stopping; the computation was "
                        "cancelled, try again");
            pb->reason = "stopping";
        }
        pb->retry_after = 1;
        return false;
    }
    return problem_set(pb, 422, pointer, "%s", err->message);
}

bool problem_from_draw(struct problem *pb, draw_status st, const char *message)
{
    if (!message)
        message = "";
    switch (st) {
    case DRAW_E_TOO_BIG:
        /* the request asked for an image past a cap; the message names the
         * size (cell or whole image) and the cap */
        return problem_set(pb, 422, "/cell", "%s", message);
    case DRAW_E_NOMEM:
        problem_set(pb, 503, "", "the heatmap could not be drawn: %s", message);
        pb->retry_after = 1;
        return false;
    case DRAW_OK:
    case DRAW_E_INVALID:
    case DRAW_E_FONT:
    case DRAW_E_PNG: break;
    }
    /* a missing font, libpng failing or arguments the server should never
     * pass: nothing the client could change */
    return problem_set(pb, 500, "", "the heatmap could not be drawn: %s",
                       message);
}

/* Every reason a refusal may give: the statuses' own below, and those set
 * where they are found (compute_budget, capacity, stopping, the memory
 * budget's); "server_fault" last, for anything else. */
const char *const problem_reasons[] = {
    "malformed",   "unauthorized", "not_found",     "method",
    "too_large",   "media_type",   "invalid",       "compute_budget",
    "capacity",    "stopping",     "out_of_memory", "memory_budget",
    "memory_busy", "client_gone",  "server_fault"};
const size_t problem_reason_count =
    sizeof problem_reasons / sizeof problem_reasons[0];

const char *problem_reason(const struct problem *pb)
{
    if (pb->reason)
        return pb->reason;
    switch (pb->status) {
    case 400: return "malformed";
    case 401: return "unauthorized";
    case 404: return "not_found";
    case 405: return "method";
    case 413: return "too_large";
    case 415: return "media_type";
    case 422: return "invalid";
    case 503: return "out_of_memory";
    default: return "server_fault";
    }
}

const char *problem_title(int status)
{
    switch (status) {
    case 400: return "malformed request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 406: return "not acceptable";
    case 413: return "request too large";
    case 415: return "unsupported media type";
    case 422: return "invalid request";
    case 500: return "internal error";
    case 501: return "not implemented";
    case 503: return "service unavailable";
    default: return "error";
    }
}

char *problem_body(const struct problem *pb, size_t *len)
{
    struct buf b;
    buf_init(&b, 4096);
    bool ok =
        buf_printf(&b, "{\"type\":\"about:blank\",\"status\":%d,\"title\":",
                   pb->status) &&
        buf_append_json_string(&b, problem_title(pb->status)) &&
        buf_append_str(&b, ",\"detail\":") &&
        buf_append_json_string(&b, pb->detail);
    if (ok && pb->pointer[0])
        ok = buf_append_str(&b, ",\"pointer\":") &&
             buf_append_json_string(&b, pb->pointer);
    ok = ok && buf_append_str(&b, "}\n");
    if (!ok) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, len);
}

/* "/messages/0/content" as OpenAI names a field: "messages[0].content". */
static bool append_param(struct buf *b, const char *pointer)
{
    char name[sizeof((struct problem *)0)->pointer + 32];
    size_t n = 0;
    for (const char *at = pointer; *at && n + 8 < sizeof name;) {
        const char *end = strchr(at + 1, '/');
        const size_t len = end ? (size_t)(end - at - 1) : strlen(at + 1);
        bool index = len > 0;
        for (size_t i = 0; i < len; i++)
            index = index && at[1 + i] >= '0' && at[1 + i] <= '9';
        const int w = snprintf(name + n, sizeof name - n,
                               index ? "[%.*s]"
                               : n   ? ".%.*s"
                                     : "%.*s",
                               (int)len, at + 1);
        n += w > 0 ? (size_t)w : 0;
        n = n < sizeof name ? n : sizeof name - 1;
        at += 1 + len;
    }
    name[n] = 0;
    return buf_append_json_string(b, name);
}

int problem_openai_status(const struct problem *pb)
{
    return pb->status == 422 ? 400 : pb->status;
}

char *problem_body_openai(const struct problem *pb, size_t *len)
{
    const int status = problem_openai_status(pb);
    const char *type = status == 401   ? "authentication_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    const char *code = status == 404 && !strcmp(pb->pointer, "/model")
                           ? "model_not_found"
                           : pb->reason;
    struct buf b;
    buf_init(&b, 4096);
    bool ok = buf_append_str(&b, "{\"error\":{\"message\":") &&
              buf_append_json_string(&b, pb->detail) &&
              buf_printf(&b, ",\"type\":\"%s\",\"param\":", type) &&
              (pb->pointer[0] ? append_param(&b, pb->pointer)
                              : buf_append_str(&b, "null")) &&
              buf_append_str(&b, ",\"code\":") &&
              (code ? buf_append_json_string(&b, code)
                    : buf_append_str(&b, "null")) &&
              buf_append_str(&b, "}}\n");
    if (!ok) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, len);
}
