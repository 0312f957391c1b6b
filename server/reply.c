/*
 * reply.c - see reply.h.
 */
#include "reply.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

enum MHD_Result reply_queue(struct exchange *ex, struct MHD_Connection *conn,
                            int status, struct MHD_Response *resp, size_t bytes)
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

struct MHD_Response *reply_from_heap(char *body, size_t len,
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

enum MHD_Result reply_text(struct exchange *ex, struct MHD_Connection *conn,
                           int status, const char *content_type,
                           const char *text)
{
    const size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (copy)
        memcpy(copy, text, len + 1);
    return reply_queue(ex, conn, status,
                       reply_from_heap(copy, len, content_type), len);
}

enum MHD_Result reply_not_modified(struct exchange *ex,
                                   struct MHD_Connection *conn,
                                   const char *etag, const char *cache_control)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (r) {
        MHD_add_response_header(r, "ETag", etag);
        MHD_add_response_header(r, "Cache-Control", cache_control);
    }
    return reply_queue(ex, conn, 304, r, 0);
}

/* The OpenAI-compatible routes answer failures in OpenAI's shape. */
static bool speaks_openai(const struct exchange *ex)
{
    return !strncmp(ex->path, "/v1/", 4);
}

/* The response of a problem, with its headers; *len its body's bytes. */
static struct MHD_Response *problem_response(const struct exchange *ex,
                                             const struct problem *pb,
                                             size_t *len)
{
    *len = 0;
    const bool openai = speaks_openai(ex);
    char *body = openai ? problem_body_openai(pb, len) : problem_body(pb, len);
    struct MHD_Response *r = reply_from_heap(
        body, *len, openai ? "application/json" : "application/problem+json");
    if (!r)
        return NULL;
    if (pb->status == 405 && pb->allow[0])
        MHD_add_response_header(r, "Allow", pb->allow);
    if (pb->status == 401)
        MHD_add_response_header(r, "WWW-Authenticate",
                                "Bearer realm=\"attnd\"");
    metrics_refused(problem_reason(pb));
    if (pb->retry_after > 0) {
        char secs[24];
        snprintf(secs, sizeof secs, "%ld", pb->retry_after);
        MHD_add_response_header(r, "Retry-After", secs);
    }
    return r;
}

int reply_problem_status(const struct exchange *ex, const struct problem *pb)
{
    return speaks_openai(ex) ? problem_openai_status(pb) : pb->status;
}

enum MHD_Result reply_problem(struct exchange *ex, struct MHD_Connection *conn,
                              const struct problem *pb)
{
    size_t len = 0;
    struct MHD_Response *r = problem_response(ex, pb, &len);
    return reply_queue(ex, conn, reply_problem_status(ex, pb), r, len);
}

void reply_prepare(struct exchange *ex, int status, struct MHD_Response *resp,
                   size_t bytes)
{
    ex->prepared.status = status;
    ex->prepared.response = resp;
    ex->prepared.bytes = bytes;
    ex->prepared.ready = true;
}

void reply_prepare_problem(struct exchange *ex, const struct problem *pb)
{
    size_t len = 0;
    struct MHD_Response *r = problem_response(ex, pb, &len);
    reply_prepare(ex, reply_problem_status(ex, pb), r, len);
}

enum MHD_Result reply_prepared(struct exchange *ex, struct MHD_Connection *conn)
{
    struct MHD_Response *r = ex->prepared.response;
    ex->prepared.response = NULL; /* reply_queue() takes it */
    return reply_queue(ex, conn, ex->prepared.status, r, ex->prepared.bytes);
}

const char *reply_header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

int reply_socket(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

bool reply_client_left(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLHUP | POLLERR))
        return true;
    char byte;
    return (p.revents & POLLIN) && recv(fd, &byte, 1, MSG_PEEK) == 0;
}

enum MHD_Result reply_busy(struct exchange *ex, struct MHD_Connection *conn)
{
    struct http_server *s = ex->srv;
    if (workers_closed(&s->workers))
        return reply_problem(ex, conn, &s->stopping);
    struct problem pb;
    problem_set(&pb, 503, "",
                "the server is at capacity (%u computing, %zu waiting); "
                "try again shortly",
                s->opt.threads, s->opt.max_queue);
    pb.retry_after = 1;
    pb.reason = "capacity";
    return reply_problem(ex, conn, &pb);
}

bool reply_small_json(const struct exchange *ex, struct MHD_Connection *conn,
                      struct problem *pb)
{
    if (!reply_json_body(conn, pb))
        return false;
    if (atomic_load(&ex->srv->draining)) {
        *pb = ex->srv->stopping;
        return false;
    }
    return true;
}

bool reply_json_body(struct MHD_Connection *conn, struct problem *pb)
{
    const char *type = reply_header(conn, "Content-Type");
    if (type && !strncasecmp(type, "application/json", 16) &&
        (!type[16] || type[16] == ';' || type[16] == ' '))
        return true;
    return problem_set(pb, 415, "",
                       "Content-Type is \"%.60s\"; send application/json",
                       type ? type : "(none)");
}
