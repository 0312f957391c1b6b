/*
 * event_stream.h - a stream of events to one client: a worker writes
 * them as they are made, and MHD sends them as the client takes them,
 * through a callback response. While nothing is unread the connection is
 * suspended, and a write resumes it. A writer that gets more than a cap
 * ahead of the client waits for it, at most a stall time; a client gone
 * is seen by the writer at its next write. The stream has two owners,
 * the writer and the response; the last to let go frees it.
 */
#ifndef ATTND_EVENT_STREAM_H
#define ATTND_EVENT_STREAM_H

#include "response.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct event_stream;

/* A stream to conn holding at most cap unread bytes, and its response in
 * *response (queue it, then hand the stream to the writer); the bytes
 * the client takes are added to *sent (the exchange's, which outlives
 * every read). A writer waiting for the client gives up when *cancel
 * (the server's drain deadline; NULL: never) is set. NULL when memory
 * runs out. */
struct event_stream *event_stream_new(struct MHD_Connection *conn, size_t cap,
                                      double stall_seconds, size_t *sent,
                                      const atomic_bool *cancel,
                                      struct MHD_Response **response);

/* Append len bytes of data; false (and nothing appended) when the client
 * is gone or has taken nothing for the stall time. */
bool event_stream_write(struct event_stream *s, const char *data, size_t len);

/* Could len more bytes be written now without waiting for the client?
 * false while the client is behind; once it has taken nothing for the
 * stall time the stream is gone (and this true: the next write fails). A
 * writer that serves others meanwhile asks this instead of waiting in
 * event_stream_write(). */
bool event_stream_ready(struct event_stream *s, size_t len);

/* The client went away (or stalled): nothing more reaches it. */
bool event_stream_gone(struct event_stream *s);

/* The end: after what was written, tail's text (without its first
 * skip bytes; the stream owns tail, which may be NULL), then suffix (at
 * most 1023 bytes);
 * then the response ends. Lets the writer's hold go; when the stream is
 * freed, done(arg) releases what the tail reads from (NULL: nothing). */
void event_stream_finish(struct event_stream *s, struct response_stream *tail,
                         size_t skip, const char *suffix, void (*done)(void *),
                         void *arg);

#endif
