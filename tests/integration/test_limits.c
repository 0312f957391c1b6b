/*
 * test_limits.c - what a hostile or careless client can make the server
 * spend, and what it answers: framing (Content-Length), the access log,
 * the compute budget, connections per client address, and stopping with
 * work in flight. Loopback only, every wait bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct server srv;

static int setup(void **state)
{
    (void)state;
    const char *args[] = {"--max-flops", "1000000000", NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

static void test_two_content_lengths_are_refused(void **state)
{
    (void)state;
    const char *requests[] = {
        "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
        "application/json\r\nContent-Length: 20\r\nContent-Length: 5\r\n\r\n"
        "{\"sentence\":\"a b\"}  ",
        "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
        "application/json\r\nContent-Length: 19\r\nContent-Length: 19\r\n\r\n"
        "{\"sentence\":\"a b\"}",
    };
    for (size_t i = 0; i < 2; i++) {
        const int fd = raw_connect(&srv, "127.0.0.1");
        assert_true(fd >= 0);
        char out[4096];
        raw_exchange(fd, requests[i], out, sizeof out, 5000);
        close(fd);
        if (strncmp(out, "HTTP/1.1 400", 12) || !strstr(out, "Content-Length"))
            fail_msg("two Content-Length headers answered: %.200s", out);
    }
}

/* Framings a proxy in front could read otherwise are refused from the
 * headers, and the connection with them: a request pipelined after one
 * is not answered. A Content-Length beside a Transfer-Encoding is 400,
 * so are two Transfer-Encoding headers; a transfer coding other than
 * chunked 501, at once, where it had been waited on as a body that never
 * ends. */
static void test_ambiguous_framing_is_refused(void **state)
{
    (void)state;
    const struct {
        const char *headers, *status, *says;
    } cases[] = {
        {"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "HTTP/1.1 400",
         "Transfer-Encoding"},
        {"Transfer-Encoding: gzip, chunked\r\n", "HTTP/1.1 501",
         "gzip, chunked"},
        {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
         "HTTP/1.1 400", "2 Transfer-Encoding headers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char request[512], out[4096];
        snprintf(request, sizeof request,
                 "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\n%s\r\n"
                 "12\r\n{\"sentence\":\"a b\"}\r\n0\r\n\r\n"
                 "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                 cases[i].headers);
        const int fd = raw_connect(&srv, "127.0.0.1");
        assert_true(fd >= 0);
        raw_exchange(fd, request, out, sizeof out, 3000);
        close(fd);
        if (strncmp(out, cases[i].status, 12) || !strstr(out, cases[i].says))
            fail_msg("%s answered: %.300s", cases[i].headers, out);
        if (strstr(out + 12, "HTTP/1.1 "))
            fail_msg("the request after %s was answered: %.400s",
                     cases[i].headers, out);
    }
}

/* A body is reserved as it comes, not as announced: connections that
 * announce bodies and send none hold none of the memory budget. A small
 * route's limit is enforced from the headers. */
static void test_announced_bodies_hold_nothing(void **state)
{
    (void)state;
    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = raw_connect(&srv, "127.0.0.1");
        assert_true(fds[i] >= 0);
        const char *head = "POST /attention HTTP/1.1\r\nHost: x\r\n"
                           "Content-Type: application/json\r\n"
                           "Content-Length: 30000000\r\n\r\n";
        assert_int_equal(write(fds[i], head, strlen(head)),
                         (ssize_t)strlen(head));
    }
    // their headers read: the 8 are in flight (the metric's own GET too),
    // within 10 s
    double in_flight = 0;
    for (int waited = 0; in_flight < 9 && waited < 10000; waited += 20) {
        assert_true(metric_read(&srv, "127.0.0.1", "attnd_requests_in_flight",
                                &in_flight));
        if (in_flight < 9)
            pause_ms(20);
    }
    if (in_flight < 9)
        fail_msg("8 announced bodies: %.0f requests in flight after 10 s",
                 in_flight);
    double reserved = -1;
    assert_true(metric_read(&srv, "127.0.0.1", "attnd_memory_reserved_bytes",
                            &reserved));
    if (reserved > 1e6)
        fail_msg("8 announced bodies hold %.0f bytes", reserved);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    const int fd = raw_connect(&srv, "127.0.0.1");
    assert_true(fd >= 0);
    char out[4096];
    raw_exchange(fd,
                 "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\nContent-Length: 33554432\r\n\r\n",
                 out, sizeof out, 3000);
    close(fd);
    if (strncmp(out, "HTTP/1.1 413", 12) || !strstr(out, "POST /generate") ||
        !strstr(out, "1 MiB"))
        fail_msg("an announced 32 MiB generation answered: %.300s", out);
}

/* Two bodies that each fit the budget alone but not together, sent side
 * by side: the first to begin holds all of its length, the other is
 * refused as it begins (503) and holds nothing, so that the first is read
 * whole (and answered by its handler) rather than both being refused
 * halfway. */
static void test_bodies_side_by_side(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--max-memory", "100000000", "--max-body", "67108864",
                          NULL};
    assert_true(server_start(&s, args));
    enum { BODY = 50000000, PIECE = 1 << 20 };
    char *piece = malloc(PIECE);
    memset(piece, 'x', PIECE);
    int fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i] = raw_connect(&s, "127.0.0.1");
        assert_true(fds[i] >= 0);
        char head[256];
        const int n = snprintf(head, sizeof head,
                               "POST /attention HTTP/1.1\r\nHost: x\r\n"
                               "Content-Type: application/json\r\n"
                               "Content-Length: %d\r\n\r\n",
                               BODY);
        assert_int_equal(write(fds[i], head, (size_t)n), n);
    }
    // a side the server has refused may be answered and closed before
    // all of it is sent: it takes no more
    bool open[2] = {true, true};
    for (size_t sent = 0; sent < BODY;) {
        const size_t n = BODY - sent < PIECE ? BODY - sent : PIECE;
        for (int i = 0; i < 2; i++)
            for (size_t off = 0; open[i] && off < n;) {
                const ssize_t w =
                    send(fds[i], piece + off, n - off, MSG_NOSIGNAL);
                if (w <= 0)
                    open[i] = false;
                off += w > 0 ? (size_t)w : 0;
            }
        sent += n;
    }
    int whole = 0, refused = 0;
    for (int i = 0; i < 2; i++) {
        char out[4096];
        raw_exchange(fds[i], NULL, out, sizeof out, 10000);
        close(fds[i]);
        // read whole, its answer the handler's (a 413: parsing 50 MB of
        // it would need more than the budget), or refused as it began
        if (!strncmp(out, "HTTP/1.1 503", 12) &&
            strstr(out, "memory is in use"))
            refused++;
        else if (!strncmp(out, "HTTP/1.1 4", 10))
            whole++;
        else
            fail_msg("a body beside another answered: %.300s", out);
    }
    free(piece);
    if (whole != 1)
        fail_msg("%d of the two bodies read whole, %d refused", whole, refused);
    double reserved = -1;
    assert_true(
        metric_read(&s, "127.0.0.1", "attnd_memory_reserved_bytes", &reserved));
    assert_true(reserved == 0);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* A path that decodes to a newline and a made-up log line stays on one
 * line of the log, escaped. */
static void test_log_lines_cannot_be_forged(void **state)
{
    (void)state;
    const int fd = raw_connect(&srv, "127.0.0.1");
    assert_true(fd >= 0);
    char out[4096];
    raw_exchange(fd,
                 "GET /x%0a2026-01-01T00:00:00Z%20POST%20/attention%20200%201"
                 "%201.0ms HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 out, sizeof out, 5000);
    close(fd);
    assert_int_equal(strncmp(out, "HTTP/1.1 404", 12), 0);
    /* the line is written when the exchange completes: give it a moment */
    char *log = NULL;
    for (int i = 0; i < 100; i++) {
        free(log);
        log = read_file(srv.log_path, NULL);
        if (log && strstr(log, "/x\\x0a2026"))
            break;
        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
    assert_non_null(log);
    if (!strstr(log,
                " GET /x\\x0a2026-01-01T00:00:00Z\\x20POST\\x20/attention"))
        fail_msg("the forged path is not escaped in the log:\n%s", log);
    assert_null(strstr(log, "\n2026-01-01T00:00:00Z POST"));
    free(log);
}

/* The status of a GET of /attention?...&sentence=abcdefghijk+... (words
 * words of 11 letters), sent raw: the whole request line goes out as it
 * is. A thousand words are answered on the spot (no queue). */
static long get_sentence(size_t words)
{
    static const char head[] =
        "GET /attention?d_model=8&heads=1&return=weights&sentence=abcdefghijk";
    static const char tail[] = " HTTP/1.1\r\nHost: x\r\n\r\n";
    const size_t len = strlen(head) + 12 * (words - 1) + strlen(tail);
    char *request = malloc(len + 1);
    assert_non_null(request);
    char *at = request;
    memcpy(at, head, strlen(head));
    at += strlen(head);
    for (size_t i = 1; i < words; i++, at += 12)
        memcpy(at, "+abcdefghijk", 12);
    memcpy(at, tail, strlen(tail) + 1);
    const int fd = raw_connect(&srv, "127.0.0.1");
    assert_true(fd >= 0);
    char out[1024];
    raw_response(fd, request, out, sizeof out, 10000);
    close(fd);
    free(request);
    long status = 0;
    if (sscanf(out, "HTTP/1.1 %ld", &status) != 1)
        fail_msg("no status line: %.100s", out);
    return status;
}

/* A connection's memory (CONNECTION_MEMORY in server/http.c) holds a
 * request line and headers of about 15 KB: a 12 KB URL is answered, a
 * 24 KB one refused by libmicrohttpd, and the server serves on. */
static void test_long_request_lines(void **state)
{
    (void)state;
    assert_int_equal(get_sentence(1000), 200);
    const long refused = get_sentence(2000);
    if (refused != 414 && refused != 431)
        fail_msg("a 24 KB request line was answered %ld", refused);
    assert_int_equal(get_sentence(10), 200);
}

/* --max-flops: the estimate and the cap named, before any work. */
static void test_compute_budget(void **state)
{
    (void)state;
    struct reply r;
    /* 200 tokens of width 512: about 2 * (4 * 200 * 512^2 + 2 * 200^2 *
     * 512) = 0.29 GFLOP, under the 1 GFLOP cap; 800 tokens are not */
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"sentence\":\"");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "w ");
    snprintf(body + n, sizeof body - n, "\",\"d_model\":512}");
    assert_true(post_json(&srv, "/attention", body, &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    n = (size_t)snprintf(body, sizeof body, "{\"sentence\":\"");
    for (int i = 0; i < 800; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "w ");
    snprintf(body + n, sizeof body - n, "\",\"d_model\":512}");
    assert_true(post_json(&srv, "/attention", body, &r));
    assert_int_equal(r.status, 422);
    if (!strstr(r.body, "GFLOP") || !strstr(r.body, "--max-flops"))
        fail_msg("the refusal names neither estimate nor cap: %s", r.body);
    reply_free(&r);
    /* counted by its reason */
    assert_true(http_call(&srv, "GET", "/metrics", NULL, 0, NULL, &r));
    assert_non_null(
        strstr(r.body, "attnd_refused_total{reason=\"compute_budget\"} 1\n"));
    /* and the one computed waited for its slot, briefly */
    assert_non_null(strstr(r.body, "\nattnd_queue_wait_seconds_count 1\n"));
    reply_free(&r);
}

/* Bytes of address space process pid holds (VmSize), or 0. */
static size_t address_space_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7))
            kib = strtoull(line + 7, NULL, 10);
    if (f)
        fclose(f);
    return kib * 1024;
}

/* ------------------------------------------------------------ stopping */

/* Until s has a computation running (its gauge in /metrics), at most
 * 30 s. Each look is a new connection given 200 ms, since one accepted by
 * the worker about to compute waits for the computation. */
static void wait_computing(const struct server *s)
{
    const double deadline = clock_seconds() + 30.0;
    while (clock_seconds() < deadline) {
        const int fd = raw_connect(s, "127.0.0.1");
        assert_true(fd >= 0);
        static char out[1 << 16]; /* the whole of /metrics */
        raw_exchange(fd,
                     "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: "
                     "close\r\n\r\n",
                     out, sizeof out, 200);
        close(fd);
        if (strstr(out, "\nattnd_computations_running 1\n"))
            return;
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    fail_msg("no computation started");
}

/* A computation of many seconds: 4096 tokens, 64 heads of 64, 256 wide,
 * about 0.3 TFLOP, within every default limit. */
#define LONG_OPTIONS                                                           \
    "\"d_model\":256,\"heads\":64,\"d_k\":64,\"d_v\":64,\"return\":["          \
    "\"output\"]"

/* The working memory of a pass counts against --max-output like its
 * answer: the queries and head outputs of a whole sequence that walking
 * keys outside queries holds were once 17 GB for an 8 KB request. */
static void test_working_memory_is_capped(void **state)
{
    (void)state;
    char *body = sentence_body(4096, "\"d_model\":16,\"heads\":128,"
                                     "\"kv_heads\":1,\"d_k\":4096,"
                                     "\"d_v\":4096,\"return\":[\"output\"]");
    struct reply r;
    assert_true(post_json(&srv, "/attention", body, &r));
    if (r.status != 422 || !strstr(r.body, "working memory"))
        fail_msg("answered %ld: %.300s", r.status, r.body);
    reply_free(&r);
    free(body);
}

/* --max-memory: what can never fit is refused for its size, what cannot
 * fit now is told to retry, and every reservation is given back. */
static void test_memory_budget(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--max-memory",    "209715200", "--threads", "2",
                          "--drain-seconds", "0",         NULL};
    assert_true(server_start(&s, args));
    struct reply r;
    /* 2 MB of numbers: about 96 MB to parse, fine; 8 MB: never */
    const size_t small = (size_t)1 << 20, large = (size_t)4 << 20;
    char *body = malloc(large * 3 + 64);
    for (int pass = 0; pass < 2; pass++) {
        const size_t numbers = pass ? large : small, width = 1024;
        size_t n = (size_t)snprintf(body, 64, "{\"embeddings\":[");
        for (size_t i = 0; i < numbers; i++)
            n += (size_t)snprintf(body + n, 8, "%s%s1", i % width ? "," : "",
                                  i % width ? "" : (i ? "],[" : "["));
        snprintf(body + n, 64, "]],\"return\":[]}");
        assert_true(post_json(&s, "/attention", body, &r));
        const long want = pass ? 413 : 200;
        if (r.status != want)
            fail_msg("%zu numbers answered %ld: %.200s", numbers, r.status,
                     r.body);
        if (pass && !strstr(r.body, "--max-memory"))
            fail_msg("the refusal does not name the budget: %s", r.body);
        reply_free(&r);
    }
    free(body);
    /* a computation that needs more than the whole budget: 422 */
    /* 2000 tokens, 8 heads: scores and weights of 32 M numbers each, under
     * --max-output, over 200 MiB together */
    char *text =
        sentence_body(2000, "\"heads\":8,\"return\":[\"scores\",\"weights\"]");
    assert_true(post_json(&s, "/attention", text, &r));
    if (r.status != 422 || !strstr(r.body, "the computation"))
        fail_msg("a computation over the budget answered %ld: %.200s", r.status,
                 r.body);
    reply_free(&r);
    /* one that fits alone, twice at once: the second is told to retry */
    char *held = sentence_body(4096, LONG_OPTIONS);
    struct post_call first = {.s = &s, .body = held};
    pthread_t tid;
    pthread_create(&tid, NULL, post_call_run, &first);
    wait_computing(&s);
    assert_true(post_json(&s, "/attention", held, &r));
    if (r.status != 503 || !strstr(r.body, "memory is in use"))
        fail_msg("a second large request answered %ld: %.200s", r.status,
                 r.body);
    char retry[16];
    assert_true(reply_header(&r, "Retry-After", retry, sizeof retry));
    reply_free(&r);
    assert_int_equal(server_stop(&s, 15.0), 0);
    pthread_join(tid, NULL);
    if (first.ok)
        reply_free(&first.r);
    free(held);
    free(text);
}

/* Under a burst of requests that together want far more than the budget,
 * the server's peak resident memory stays within the budget plus its own
 * part: what it holds once it has computed, and OpenBLAS's packing buffers
 * of its two computing threads (under 64 MiB each). */
static void test_peak_memory_within_budget(void **state)
{
    (void)state;
#if UNDER_ASAN
    /* AddressSanitizer keeps freed memory in quarantine (256 MiB) and adds
     * its shadow to every byte: resident memory is no measure there. */
    skip();
#endif
    const size_t budget = (size_t)256 << 20;
    struct server s;
    const char *args[] = {"--max-memory", "268435456", "--threads", "2",
                          "--max-queue",  "16",        NULL};
    /* and, as a safety net should the budget fail, a cap on its address
     * space: an allocation past it fails (503) instead of taking the
     * machine's memory */
    assert_true(server_start_capped(&s, args, budget + ((size_t)1536 << 20)));
    struct reply r;
    assert_true(post_json(&s, "/attention", "{\"sentence\":\"a b\"}", &r));
    reply_free(&r);
    const size_t baseline = status_bytes(s.pid, "VmRSS:");
    assert_true(baseline > 0);
    /* long computations, large weights, and a body too large to parse */
    char *long_body = sentence_body(4096, LONG_OPTIONS);
    char *weights = sentence_body(2000, "\"heads\":8,\"return\":[\"weights\"]");
    const size_t rows = 1500, width = 1024;
    char *numbers = malloc(rows * (2 * width + 2) + 64);
    size_t n = (size_t)snprintf(numbers, 64, "{\"embeddings\":[");
    for (size_t row = 0; row < rows; row++) {
        numbers[n++] = row ? ',' : '[';
        if (row)
            numbers[n++] = '[';
        for (size_t k = 0; k < width; k++) {
            if (k)
                numbers[n++] = ',';
            numbers[n++] = '1';
        }
        numbers[n++] = ']';
    }
    snprintf(numbers + n, 64, "],\"heads\":8,\"return\":[\"weights\"]}");
    enum { CALLS = 12 };
    struct post_call calls[CALLS];
    pthread_t tids[CALLS];
    const char *kinds[3] = {long_body, weights, numbers};
    for (int i = 0; i < CALLS; i++) {
        calls[i] = (struct post_call){.s = &s, .body = kinds[i % 3]};
        pthread_create(&tids[i], NULL, post_call_run, &calls[i]);
    }
    int answered = 0;
    for (int i = 0; i < CALLS; i++) {
        pthread_join(tids[i], NULL);
        if (calls[i].ok) {
            const long st = calls[i].r.status;
            if (st != 200 && st != 413 && st != 422 && st != 503)
                fail_msg("a request of the burst answered %ld", st);
            answered++;
            reply_free(&calls[i].r);
        }
    }
    assert_int_equal(answered, CALLS);
    const size_t peak = status_bytes(s.pid, "VmHWM:");
    const size_t allowed = budget + baseline + ((size_t)128 << 20);
    if (peak > allowed)
        fail_msg("peak RSS %zu MiB; the budget %zu MiB and the server's own "
                 "%zu MiB allow %zu MiB",
                 peak >> 20, budget >> 20, baseline >> 20, allowed >> 20);
    assert_int_equal(server_stop(&s, 15.0), 0);
    free(numbers);
    free(weights);
    free(long_body);
}

/* Every reservation is given back: after requests of every kind the
 * budget is empty again. */
static void test_memory_is_given_back(void **state)
{
    (void)state;
    struct reply r;
    const char *bodies[] = {
        "{\"sentence\":\"the cat sat\",\"return\":[\"weights\",\"params\"]}",
        "{\"sentence\":\"the cat\",\"heads\":6}",
        "{\"embeddings\":[[1,2],[3]]}",
        "{\"sentence\":\"a b\",\"return\":[]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        assert_true(post_json(&srv, "/attention", bodies[i], &r));
        reply_free(&r);
    }
    assert_true(http_call(&srv, "GET", "/attention?sentence=a%20b&format=png",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    /* an exchange ends (and gives back) just after its last byte is sent:
     * look until then, 2 s at most; the look itself reserves nothing */
    bool empty = false;
    for (int i = 0; i < 100 && !empty; i++) {
        assert_true(http_call(&srv, "GET", "/metrics", NULL, 0, NULL, &r));
        empty = strstr(r.body, "\nattnd_memory_reserved_bytes 0\n") != NULL;
        reply_free(&r);
        if (!empty)
            nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
    if (!empty)
        fail_msg("memory is still reserved 2 s after every request ended");
}

/* One address holding all its connections locks out nobody else: the next
 * from it is closed at once, another address is served. */
static void test_connections_per_address(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--max-conns-per-ip", "4", NULL};
    assert_true(server_start(&s, args));
    int held[4];
    for (int i = 0; i < 4; i++) {
        held[i] = raw_connect(&s, "127.0.0.3");
        assert_true(held[i] >= 0);
    }
    /* every one of them is the server's now: each has been answered and
     * is kept open */
    char out[4096];
    for (int i = 0; i < 4; i++) {
        raw_exchange(held[i], "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", out,
                     sizeof out, 300);
        if (strncmp(out, "HTTP/1.1 200", 12))
            fail_msg("held connection %d was not served: %.80s", i, out);
    }
    const int fifth = raw_connect(&s, "127.0.0.3");
    assert_true(fifth >= 0);
    const size_t got =
        raw_exchange(fifth, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", out,
                     sizeof out, 2000);
    close(fifth);
    if (got && strstr(out, "200"))
        fail_msg("a fifth connection from one address was served");
    const int other = raw_connect(&s, "127.0.0.2");
    assert_true(other >= 0);
    raw_exchange(other,
                 "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: "
                 "close\r\n\r\n",
                 out, sizeof out, 5000);
    close(other);
    if (strncmp(out, "HTTP/1.1 200", 12))
        fail_msg("another address was not served: %.100s", out);
    for (int i = 0; i < 4; i++)
        close(held[i]);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* With an API key set, an unauthenticated upload is answered from its
 * headers: 401 before a byte of the body is sent. */
static void test_key_checked_before_the_body(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--api-key", "k3y", NULL};
    assert_true(server_start(&s, args));
    const int fd = raw_connect(&s, "127.0.0.1");
    assert_true(fd >= 0);
    char out[4096];
    raw_exchange(fd,
                 "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\nContent-Length: 30000000\r\n\r\n",
                 out, sizeof out, 3000);
    close(fd);
    if (strncmp(out, "HTTP/1.1 401", 12))
        fail_msg("an unauthenticated upload was not refused from its "
                 "headers: %.100s",
                 out);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* A small request is answered while a large one holds the only compute
 * slot and no request may wait: it never queues behind large ones. */
static void test_small_requests_pass_large_ones(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--threads",       "1", "--max-queue", "0",
                          "--drain-seconds", "0", NULL};
    assert_true(server_start(&s, args));
    char *body = sentence_body(4096, LONG_OPTIONS);
    struct post_call large = {.s = &s, .body = body};
    pthread_t tid;
    pthread_create(&tid, NULL, post_call_run, &large);
    wait_computing(&s);
    for (int i = 0; i < 5; i++) {
        struct reply r;
        assert_true(
            post_json(&s, "/attention", "{\"sentence\":\"the cat sat\"}", &r));
        if (r.status != 200)
            fail_msg("a small request behind a large one answered %ld: %s",
                     r.status, r.body);
        reply_free(&r);
    }
    /* the large one was still computing all along */
    assert_int_equal(server_stop(&s, 15.0), 0);
    pthread_join(tid, NULL);
    assert_true(large.ok);
    reply_free(&large.r);
    free(body);
}

/* A valid body that the server has no memory to parse is its own lack of
 * room: 503 with Retry-After, never a 4xx blaming the client; and the
 * server goes on answering. */
static void test_out_of_memory_is_503(void **state)
{
    (void)state;
#if UNDER_ASAN
    /* AddressSanitizer reserves terabytes of shadow memory up front and
     * allocates inside it: a cap on address space caps nothing there. */
    skip();
#endif
    const char *args[] = {"--threads", "1", "--max-queue", "0", NULL};
    /* glibc gives each thread that allocates an arena of its own, 64 MiB
     * of address space reserved at once: under a cap on address space the
     * server's next connection could then fail to get any memory at all.
     * One arena makes the cap a cap on what the server uses. */
    setenv("MALLOC_ARENA_MAX", "1", 1);
    /* what the server holds once it has computed, measured, plus 128 MiB:
     * room for small requests, not for the parse tree of 4 million
     * numbers (about 300 MB) */
    struct server s;
    struct reply r;
    assert_true(server_start(&s, args));
    /* one computation first: OpenBLAS maps its buffers on the first
     * product of a thread, and under the cap that must already be done */
    assert_true(post_json(&s, "/attention", "{\"sentence\":\"a b\"}", &r));
    reply_free(&r);
    const size_t started = address_space_of(s.pid);
    assert_int_equal(server_stop(&s, 10.0), 0);
    assert_true(started > 0);
    const bool capped =
        server_start_capped(&s, args, started + ((size_t)128 << 20));
    unsetenv("MALLOC_ARENA_MAX");
    assert_true(capped);
    assert_true(post_json(&s, "/attention", "{\"sentence\":\"a b\"}", &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    const size_t rows = 4096, width = 1024;
    char *body = malloc(rows * (2 * width + 2) + 64);
    size_t n = (size_t)snprintf(body, 64, "{\"embeddings\":[");
    for (size_t row = 0; row < rows; row++) {
        if (row)
            body[n++] = ',';
        body[n++] = '[';
        for (size_t k = 0; k < width; k++) {
            if (k)
                body[n++] = ',';
            body[n++] = '1';
        }
        body[n++] = ']';
    }
    snprintf(body + n, 64, "],\"return\":[]}");
    assert_true(post_json(&s, "/attention", body, &r));
    if (r.status != 503)
        fail_msg("a body parsed out of memory answered %ld: %.200s", r.status,
                 r.body ? r.body : "");
    char retry[16];
    assert_true(reply_header(&r, "Retry-After", retry, sizeof retry));
    reply_free(&r);
    assert_true(post_json(&s, "/attention", "{\"sentence\":\"a b\"}", &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    free(body);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* SIGTERM with a long computation running and another request waiting:
 * both get an answer (503, the first once the drain time is over and it
 * is cancelled), and the process exits soon after the drain time. */
static void test_stop_cancels_long_computations(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--threads",       "1", "--max-queue", "4",
                          "--drain-seconds", "1", NULL};
    assert_true(server_start(&s, args));
    char *body = sentence_body(4096, LONG_OPTIONS);
    struct post_call long_call = {.s = &s, .body = body};
    /* a large request, so that it waits for the one slot (a small one
     * would be answered on the HTTP thread): 300 tokens 512 wide */
    char queued[1024];
    size_t q = (size_t)snprintf(queued, sizeof queued, "{\"sentence\":\"");
    for (int i = 0; i < 300; i++)
        q += (size_t)snprintf(queued + q, sizeof queued - q, "b ");
    snprintf(queued + q, sizeof queued - q, "\",\"d_model\":512}");
    struct post_call waiting = {.s = &s, .body = queued};
    pthread_t long_tid, wait_tid;
    pthread_create(&long_tid, NULL, post_call_run, &long_call);
    wait_computing(&s);
    pthread_create(&wait_tid, NULL, post_call_run, &waiting);
    const double t0 = clock_seconds();
    kill(s.pid, SIGTERM);
    /* draining, and saying so */
    bool said = false;
    while (!said && clock_seconds() - t0 < 0.8) {
        const int fd = raw_connect(&s, "127.0.0.1");
        static char out[1 << 16]; /* the whole of /metrics */
        if (fd >= 0) {
            raw_exchange(fd,
                         "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: "
                         "close\r\n\r\n",
                         out, sizeof out, 200);
            close(fd);
            said = strstr(out, "\nattnd_draining 1\n") != NULL;
        }
    }
    assert_true(said);
    const int status = server_stop(&s, 15.0);
    const double took = clock_seconds() - t0;
    pthread_join(long_tid, NULL);
    pthread_join(wait_tid, NULL);
    assert_int_equal(status, 0);
    if (took > 4.0)
        fail_msg("the server took %.1f s to stop; the drain is 1 s", took);
    assert_true(long_call.ok);
    assert_int_equal(long_call.r.status, 503);
    assert_non_null(strstr(long_call.r.body, "cancelled"));
    assert_true(waiting.ok);
    assert_int_equal(waiting.r.status, 503);
    assert_non_null(strstr(waiting.r.body, "stopping"));
    reply_free(&long_call.r);
    reply_free(&waiting.r);
    free(body);
}

/* A computation stuck where no cancel reaches does not hold the stop for
 * ever: under a cap on address space below OpenBLAS's first buffer, its
 * first OpenBLAS product (the Gram matrix of the value-weighted norms,
 * value_weighted.c, which only OpenBLAS computes) retries its allocation
 * for ever; SIGTERM still ends the process soon after the drain time,
 * with status 1. The product is 64 x 64 x 512, 2.1 M multiply-adds:
 * OpenBLAS's AVX-512 kernels (Cooperlake, as it takes a Zen 4) compute
 * one of a million or fewer by a small-matrix way that needs no buffer,
 * so that 8 heads of a 64-wide model got through and never stuck. */
static void test_stop_is_bounded_when_stuck(void **state)
{
    (void)state;
#if UNDER_ASAN
    skip(); /* a cap on address space caps nothing under ASan */
#endif
    const char *args[] = {"--threads", "1", "--drain-seconds", "1", NULL};
    struct server s;
    assert_true(server_start(&s, args));
    const size_t started = address_space_of(s.pid);
    assert_int_equal(server_stop(&s, 10.0), 0);
    assert_true(server_start_capped(&s, args, started + ((size_t)32 << 20)));
    struct post_call stuck = {
        .s = &s,
        .body = "{\"sentence\":\"a b\",\"d_model\":512,\"heads\":64,"
                "\"return\":[\"value_weighted\"]}"};
    pthread_t tid;
    pthread_create(&tid, NULL, post_call_run, &stuck);
    wait_computing(&s);
    const double t0 = clock_seconds();
    const int status = server_stop(&s, 15.0);
    const double took = clock_seconds() - t0;
    pthread_join(tid, NULL);
    if (stuck.ok)
        reply_free(&stuck.r);
    assert_int_equal(status, 1);
    if (took > 5.0)
        fail_msg("a stuck server took %.1f s to stop; the drain is 1 s", took);
    char *log = read_file(s.log_path, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "exiting without them"));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_content_lengths_are_refused),
        cmocka_unit_test(test_ambiguous_framing_is_refused),
        cmocka_unit_test(test_announced_bodies_hold_nothing),
        cmocka_unit_test(test_bodies_side_by_side),
        cmocka_unit_test(test_log_lines_cannot_be_forged),
        cmocka_unit_test(test_long_request_lines),
        cmocka_unit_test(test_compute_budget),
        cmocka_unit_test(test_working_memory_is_capped),
        cmocka_unit_test(test_memory_is_given_back),
        cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_peak_memory_within_budget),
        cmocka_unit_test(test_connections_per_address),
        cmocka_unit_test(test_key_checked_before_the_body),
        cmocka_unit_test(test_small_requests_pass_large_ones),
        cmocka_unit_test(test_out_of_memory_is_503),
        cmocka_unit_test(test_stop_cancels_long_computations),
        cmocka_unit_test(test_stop_is_bounded_when_stuck),
    };
    return cmocka_run_group_tests_name("limits", tests, setup, teardown);
}
