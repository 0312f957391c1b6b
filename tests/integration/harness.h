/*
 * harness.h - integration tests against the real attnd binary: start it
 * on a free loopback port, talk to it with libcurl, stop it by its PID.
 */
#ifndef ATTND_HARNESS_H
#define ATTND_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct server {
    pid_t pid;
    int start_exit; /* its exit status when it stopped during start-up
                       (server_start() false), else -1 */
    unsigned port;
    char log_path[256];
    char web_root[512];
};

/* Start $ATTND_BIN (default build/attnd) with extra arguments (NULL-
 * terminated) on port 0 and wait until /healthz answers. */
bool server_start(struct server *s, const char *const *extra_args);

/* The same in at most address_space bytes of address space (RLIMIT_AS;
 * 0: no cap), so that an allocation can be made to fail. */
bool server_start_capped(struct server *s, const char *const *extra_args,
                         size_t address_space);

/* SIGTERM, wait for the exit; returns the exit status (or -1). */
int server_stop(struct server *s, double timeout_seconds);

struct reply {
    long status;
    char *body; /* NUL-terminated, owned */
    size_t len;
    char content_type[128];
    char headers[4096]; /* raw response headers */
};

/* method "GET", "POST", ...; body may be NULL; headers a NULL-terminated
 * list of "Name: value" lines, may be NULL. */
bool http_call(const struct server *s, const char *method, const char *path,
               const char *body, size_t body_len, const char *const *headers,
               struct reply *out);
void reply_free(struct reply *r);

/* The value of a response header (case-insensitive name) into out. */
bool reply_header(const struct reply *r, const char *name, char *out,
                  size_t len);

/* Built with AddressSanitizer (UNDER_ASAN 1): tests of address-space
 * caps and resident memory skip themselves there. gcc says so by a
 * macro, clang by a feature. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* A monotonic clock, in seconds. */
double clock_seconds(void);

void pause_ms(long ms);

/* POST body to s's /attention on a thread of its own:
 * pthread_create(&t, NULL, post_call_run, &call); ok and r once joined. */
struct post_call {
    const struct server *s;
    const char *body;
    struct reply r;
    bool ok;
};
void *post_call_run(void *arg);

/* POST a JSON body to /attention (extra headers may be NULL). */
bool post_json(const struct server *s, const char *path, const char *json,
               struct reply *out);

/* A raw connection to s from the loopback address `from` ("127.0.0.1",
 * "127.0.0.2", ...): the client's address is what per-address limits
 * see. -1 on failure. */
int raw_connect(const struct server *s, const char *from);

/* Send request (NULL: nothing) on fd and read what comes back within ms
 * milliseconds, until the peer closes or out (cap bytes, NUL-terminated)
 * is full. Returns the bytes read. */
size_t raw_exchange(int fd, const char *request, char *out, size_t cap, int ms);

/* The same, reading one response only (a keep-alive connection stays
 * open after it): until its headers and body have come. */
size_t raw_response(int fd, const char *request, char *out, size_t cap, int ms);

/* The value of the metric `name` (a full series name, e.g.
 * "attnd_memory_reserved_bytes") from GET /metrics, asked from the
 * loopback address `from`. */
bool metric_read(const struct server *s, const char *from, const char *name,
                 double *value);

/* The OpenBLAS kernels s runs (its /metrics' attnd_blas_info), into out
 * ("unknown" when it does not say). */
void server_blas_core(const struct server *s, char *out, size_t cap);

/* Bytes of a /proc/PID/status field of pid such as "VmHWM:", or 0. */
size_t status_bytes(pid_t pid, const char *field);

/* A streamed answer as a client reads it: the bytes so far; with
 * stop_after, the client hangs up once that many events (blocks ending
 * in a blank line, Server-Sent Events) have come. */
struct stream {
    char *data; /* NUL-terminated, owned */
    size_t len;
    size_t stop_after; /* events; 0: read to the end */
};

/* POST a JSON body to path on s with Accept: accept (NULL: none), the
 * answer read into out as it comes (within 120 s); the status, and the
 * content type into type (type_len bytes; NULL: not wanted). */
long post_stream(const struct server *s, const char *path, const char *body,
                 const char *accept, struct stream *out, char *type,
                 size_t type_len);

/* A JSON body of a sentence of `words` words ("a a a ...") and options,
 * members written as in a body ("\"heads\":8"); the caller frees it. */
char *sentence_body(size_t words, const char *options);

/* A checkpoint folder made from tests/models/<variant>: a link to each
 * of its files in dir (a mkdtemp() template, filled in), and one more
 * file, name with text, which stands beside them (a chat_template.jinja,
 * a generation_config.json). false on failure. */
bool model_folder_with(const char *variant, char *dir, const char *name,
                       const char *text);

/* dir and everything in it, removed. */
void model_folder_remove(const char *dir);

/* Read a whole file (the caller frees the result); NULL on failure. */
char *read_file(const char *path, size_t *len);

#endif
