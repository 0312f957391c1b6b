/*
 * reply.h - queueing an exchange's answer with libmicrohttpd: bodies are
 * handed over with their free function, every answer names the server,
 * and the exchange records status and size for the access log.
 */
#ifndef ATTND_REPLY_H
#define ATTND_REPLY_H

#include "exchange.h"
#include "problem.h"

/* Queue resp (NULL: fail the connection) as the answer, and drop our
 * reference to it. */
enum MHD_Result reply_queue(struct exchange *ex, struct MHD_Connection *conn,
                            int status, struct MHD_Response *resp,
                            size_t bytes);

/* A response over body, which MHD frees; NULL (body freed) on failure. */
struct MHD_Response *reply_from_heap(char *body, size_t len,
                                     const char *content_type);

/* A copy of text. */
enum MHD_Result reply_text(struct exchange *ex, struct MHD_Connection *conn,
                           int status, const char *content_type,
                           const char *text);

/* 304 for a conditional GET whose tag still matches. */
enum MHD_Result reply_not_modified(struct exchange *ex,
                                   struct MHD_Connection *conn,
                                   const char *etag, const char *cache_control);

/* The one place a problem becomes a response: problem+json (OpenAI's
 * error object on the /v1/ routes), with Allow, WWW-Authenticate and
 * Retry-After where the status calls for them. */
enum MHD_Result reply_problem(struct exchange *ex, struct MHD_Connection *conn,
                              const struct problem *pb);

/* The status a problem is answered with on ex's route. */
int reply_problem_status(const struct exchange *ex, const struct problem *pb);

/* An answer made before it can be queued (on a worker, while the
 * connection is suspended): the exchange holds it until reply_prepared()
 * queues it, or its completion drops it. resp NULL: no answer could be
 * made, and the connection is closed. */
void reply_prepare(struct exchange *ex, int status, struct MHD_Response *resp,
                   size_t bytes);
void reply_prepare_problem(struct exchange *ex, const struct problem *pb);
enum MHD_Result reply_prepared(struct exchange *ex,
                               struct MHD_Connection *conn);

/* The request header name, or NULL. */
const char *reply_header(struct MHD_Connection *conn, const char *name);

/* The connection's socket, or -1: for reply_client_left(). */
int reply_socket(struct MHD_Connection *conn);

/* Has the client of a suspended exchange, whose socket is fd, closed its
 * side? Its socket reads an end of file (a byte already sent is no sign
 * either way). MHD does not read a suspended connection, so looking
 * takes nothing from it. false for fd -1. */
bool reply_client_left(int fd);

/* The compute pool is full (503 "capacity", retry in a second) or closed
 * (the stopping answer). */
enum MHD_Result reply_busy(struct exchange *ex, struct MHD_Connection *conn);

/* Is the request's body JSON (Content-Type application/json, with or
 * without parameters)? If not, a 415 in pb that names the type sent. */
bool reply_json_body(struct MHD_Connection *conn, struct problem *pb);

/* May a POST whose JSON body is decoded on the HTTP thread go on? Its
 * body is JSON (its route's ROUTE_SMALL_BODY bound its size as it came,
 * so that a long one holds up no other connection) and the server is not
 * stopping; else pb holds the refusal. */
bool reply_small_json(const struct exchange *ex, struct MHD_Connection *conn,
                      struct problem *pb);

#endif
