/*
 * event_stream.c - events to one client as they are made
 * (event_stream.h).
 */
#include "event_stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct event_stream {
    pthread_mutex_t lock;
    pthread_cond_t drained; /* the reader took some: a waiting writer goes on */
    struct MHD_Connection *conn;
    char *data; /* [cap]: written, not yet read */
    size_t cap, head, len;
    double stall_seconds;
    const atomic_bool *cancel; /* the server's: a waiting writer gives up */
    bool suspended;            /* the reader found nothing and suspended conn */
    bool behind;               /* event_stream_ready() found no room ... */
    struct timespec behind_since; /* ... first then, since the last read */
    bool gone;     /* the response was freed, or the writer gave up */
    bool finished; /* the writer has written all but the tail */
    struct response_stream *tail;
    size_t skip;
    char suffix[1024];
    size_t suffix_at;
    void (*done)(void *);
    void *done_arg;
    size_t *sent;
    int owners;
};

static void release(struct event_stream *s)
{
    pthread_mutex_lock(&s->lock);
    const bool last = --s->owners == 0;
    pthread_mutex_unlock(&s->lock);
    if (!last)
        return;
    response_stream_free(s->tail);
    if (s->done)
        s->done(s->done_arg);
    pthread_cond_destroy(&s->drained);
    pthread_mutex_destroy(&s->lock);
    free(s->data);
    free(s);
}

/* Up to max unread bytes into buf: the ring, then (finished) the tail,
 * then the suffix. Holds the lock. */
static size_t take(struct event_stream *s, char *buf, size_t max)
{
    size_t n = 0;
    while (n < max && s->len) {
        const size_t run =
            s->cap - s->head < s->len ? s->cap - s->head : s->len;
        const size_t k = run < max - n ? run : max - n;
        memcpy(buf + n, s->data + s->head, k);
        s->head = (s->head + k) % s->cap;
        s->len -= k;
        n += k;
    }
    if (n || !s->finished)
        return n;
    while (s->tail && n < max) {
        const size_t k = response_stream_read(s->tail, buf + n, max - n);
        if (k == 0) {
            response_stream_free(s->tail);
            s->tail = NULL;
            break;
        }
        const size_t drop = s->skip < k ? s->skip : k;
        s->skip -= drop;
        memmove(buf + n, buf + n + drop, k - drop);
        n += k - drop;
    }
    const size_t left = strlen(s->suffix) - s->suffix_at;
    if (!s->tail && n < max && left) {
        const size_t k = left < max - n ? left : max - n;
        memcpy(buf + n, s->suffix + s->suffix_at, k);
        s->suffix_at += k;
        n += k;
    }
    return n;
}

static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct event_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    const size_t n = take(s, buf, max);
    ssize_t out = (ssize_t)n;
    if (n) {
        *s->sent += n;
        s->behind = false;
        pthread_cond_broadcast(&s->drained);
    } else if (s->finished && !s->tail) {
        out = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (s->gone) {
        out = MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        // nothing yet: sleep until the writer has more (MHD calls back
        // once the connection is resumed)
        s->suspended = true;
        MHD_suspend_connection(s->conn);
    }
    pthread_mutex_unlock(&s->lock);
    return out;
}

/* MHD is done with the response: the client took it all or went away. */
static void free_events(void *cls)
{
    struct event_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    s->gone = true;
    pthread_cond_broadcast(&s->drained);
    pthread_mutex_unlock(&s->lock);
    release(s);
}

struct event_stream *event_stream_new(struct MHD_Connection *conn, size_t cap,
                                      double stall_seconds, size_t *sent,
                                      const atomic_bool *cancel,
                                      struct MHD_Response **response)
{
    struct event_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->data = malloc(cap);
    if (!s->data) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->drained, &attr);
    pthread_condattr_destroy(&attr);
    s->conn = conn;
    s->cap = cap;
    s->stall_seconds = stall_seconds;
    s->cancel = cancel;
    s->sent = sent;
    s->owners = 2;
    *response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                                  read_events, s, free_events);
    if (!*response) {
        s->owners = 1;
        release(s);
        return NULL;
    }
    return s;
}

/* Wake a reader that found nothing. Holds the lock. */
static void wake(struct event_stream *s)
{
    if (s->suspended && !s->gone) {
        s->suspended = false;
        MHD_resume_connection(s->conn);
    }
}

bool event_stream_write(struct event_stream *s, const char *data, size_t len)
{
    pthread_mutex_lock(&s->lock);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)s->stall_seconds;
    bool ok = true;
    while (ok && !s->gone && len > s->cap - s->len) {
        if (len > s->cap) { /* never fits: write it a ring at a time */
            pthread_mutex_unlock(&s->lock);
            const size_t half = s->cap / 2;
            ok = event_stream_write(s, data, half) &&
                 event_stream_write(s, data + half, len - half);
            return ok;
        }
        wake(s);
        // a tenth of a second at a time, so that a drain's cancel is seen
        struct timespec slice;
        clock_gettime(CLOCK_MONOTONIC, &slice);
        slice.tv_nsec += 100000000;
        if (slice.tv_nsec >= 1000000000) {
            slice.tv_sec++;
            slice.tv_nsec -= 1000000000;
        }
        const bool last =
            slice.tv_sec > until.tv_sec ||
            (slice.tv_sec == until.tv_sec && slice.tv_nsec >= until.tv_nsec);
        if (pthread_cond_timedwait(&s->drained, &s->lock,
                                   last ? &until : &slice) == ETIMEDOUT &&
            last)
            ok = false; /* the client has stopped taking */
        if (s->cancel && atomic_load(s->cancel))
            ok = false; /* the server is stopping */
    }
    ok = ok && !s->gone;
    if (ok) {
        for (size_t i = 0; i < len; i++)
            s->data[(s->head + s->len + i) % s->cap] = data[i];
        s->len += len;
        wake(s);
    } else {
        s->gone = true;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

bool event_stream_ready(struct event_stream *s, size_t len)
{
    pthread_mutex_lock(&s->lock);
    bool ready = s->gone || len <= s->cap - s->len || len > s->cap;
    if (!ready) {
        wake(s);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!s->behind) {
            s->behind = true;
            s->behind_since = now;
        } else if ((double)(now.tv_sec - s->behind_since.tv_sec) +
                       (double)(now.tv_nsec - s->behind_since.tv_nsec) * 1e-9 >=
                   s->stall_seconds) {
            s->gone = true; /* the client has stopped taking */
            ready = true;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return ready;
}

bool event_stream_gone(struct event_stream *s)
{
    pthread_mutex_lock(&s->lock);
    const bool gone = s->gone;
    pthread_mutex_unlock(&s->lock);
    return gone;
}

void event_stream_finish(struct event_stream *s, struct response_stream *tail,
                         size_t skip, const char *suffix, void (*done)(void *),
                         void *arg)
{
    pthread_mutex_lock(&s->lock);
    s->done = done;
    s->done_arg = arg;
    s->tail = tail;
    s->skip = skip;
    snprintf(s->suffix, sizeof s->suffix, "%s", suffix ? suffix : "");
    s->finished = true;
    wake(s);
    pthread_mutex_unlock(&s->lock);
    release(s);
}
