/*
 * test_exhaustion.c - clients that try to make the server hold what it
 * should not: connections that trickle a request in for ever, readers
 * that stop reading a large answer, PNGs of the largest canvas, a context
 * repeated for a batch, and keep-alive clients beside long computations.
 * Each runs against a real server under a small --max-memory, on
 * loopback, every wait bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Address space beyond the budget for a server under test: its code,
 * thread stacks and OpenBLAS's buffers. Were the budget to fail, an
 * allocation past it would fail too (503) instead of taking the machine's
 * memory. */
#define SAFETY_NET ((size_t)1536 << 20)

/* Whether the server has closed fd (end of stream or reset), looking for
 * at most ms milliseconds; anything it sends first is read and dropped. */
static bool closed_by_server(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char sink[4096];
    const double until = clock_seconds() + ms / 1e3;
    for (;;) { /* one look at least */
        const int left = (int)((until - clock_seconds()) * 1e3);
        if (poll(&p, 1, left > 0 ? left : 0) <= 0)
            return false;
        const ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return true;
    }
}

static const char healthz[] =
    "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/* A request trickled in a byte at a time, each byte well within the idle
 * timeout, is cut at --receive-seconds, headers or body; meanwhile another
 * address is served, and the cut connections are counted. */
static void test_trickling_clients_are_cut(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--receive-seconds",  "2", "--timeout", "30",
                          "--max-conns-per-ip", "6", NULL};
    assert_true(server_start(&s, args));
    /* the start's own health check has let go of its connection (the
     * look itself holds one) */
    double open_now = -1;
    for (int i = 0; i < 100 && open_now != 1; i++) {
        if (!metric_read(&s, "127.0.0.2", "attnd_connections_open", &open_now))
            open_now = -1;
        if (open_now != 1)
            pause_ms(20);
    }
    assert_true(open_now == 1);
    enum { ATTACKERS = 6 };
    int fd[ATTACKERS];
    double cut_at[ATTACKERS];
    const double t0 = clock_seconds();
    for (int i = 0; i < ATTACKERS; i++) {
        fd[i] = raw_connect(&s, "127.0.0.1");
        assert_true(fd[i] >= 0);
        cut_at[i] = 0;
        /* half trickle headers, half a body they said was long */
        const char *start =
            i % 2 ? "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
                  : "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
                    "application/json\r\nContent-Length: 100000\r\n\r\n{";
        assert_true(send(fd[i], start, strlen(start), MSG_NOSIGNAL) > 0);
    }
    /* every slot of 127.0.0.1 is held: the next is turned away, another
     * address is served */
    char out[4096];
    const int extra = raw_connect(&s, "127.0.0.1");
    assert_true(extra >= 0);
    raw_exchange(extra, healthz, out, sizeof out, 1000);
    close(extra);
    if (strstr(out, " 200 "))
        fail_msg("a seventh connection from one address was served");
    const int other = raw_connect(&s, "127.0.0.2");
    assert_true(other >= 0);
    raw_exchange(other, healthz, out, sizeof out, 3000);
    close(other);
    if (strncmp(out, "HTTP/1.1 200", 12))
        fail_msg("another address was not served beside the trickle: %.80s",
                 out);
    /* a byte every 200 ms, for at most 8 s */
    int open = ATTACKERS;
    while (open > 0 && clock_seconds() - t0 < 8.0) {
        for (int i = 0; i < ATTACKERS; i++) {
            if (cut_at[i] > 0)
                continue;
            if (closed_by_server(fd[i], 0)) {
                cut_at[i] = clock_seconds() - t0;
                open--;
                continue;
            }
            send(fd[i], i % 2 ? "a" : "1", 1, MSG_NOSIGNAL);
        }
        pause_ms(200);
    }
    bool all_cut = true;
    for (int i = 0; i < ATTACKERS; i++) {
        close(fd[i]);
        /* the deadline, plus the watch's look every tenth of it and the
         * drip's own step */
        if (cut_at[i] < 1.9 || cut_at[i] > 3.5) {
            print_message("trickling connection %d (%s): %s %.2f s; the "
                          "deadline is 2 s\n",
                          i, i % 2 ? "headers" : "body",
                          cut_at[i] > 0 ? "cut after" : "still open after",
                          cut_at[i] > 0 ? cut_at[i] : clock_seconds() - t0);
            all_cut = false;
        }
    }
    assert_true(all_cut);
    double cut = 0;
    assert_true(
        metric_read(&s, "127.0.0.2", "attnd_connections_cut_total", &cut));
    if (cut < ATTACKERS)
        fail_msg("attnd_connections_cut_total is %.0f after %d cuts", cut,
                 ATTACKERS);
    /* the address has its slots back */
    const int again = raw_connect(&s, "127.0.0.1");
    assert_true(again >= 0);
    raw_exchange(again, healthz, out, sizeof out, 3000);
    close(again);
    if (strncmp(out, "HTTP/1.1 200", 12))
        fail_msg("the address was not served once its trickles were cut");
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* A connection that answers promptly keeps its keep-alive: the deadline
 * runs per request, from the end of the answer before it. */
static void test_prompt_keepalive_is_not_cut(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--receive-seconds", "1", NULL};
    assert_true(server_start(&s, args));
    const int fd = raw_connect(&s, "127.0.0.2");
    assert_true(fd >= 0);
    char out[4096];
    for (int i = 0; i < 6; i++) { /* 3 s in all, 0.5 s apart */
        raw_response(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", out,
                     sizeof out, 2000);
        if (strncmp(out, "HTTP/1.1 200", 12))
            fail_msg("request %d of a prompt keep-alive client: %.80s", i, out);
        pause_ms(200);
    }
    close(fd);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* Until s has `running` computations under way; false after 30 s. */
static bool wait_running(const struct server *s, double running)
{
    const double until = clock_seconds() + 30.0;
    while (clock_seconds() < until) {
        double now = 0;
        if (metric_read(s, "127.0.0.9", "attnd_computations_running", &now) &&
            now >= running)
            return true;
        pause_ms(20);
    }
    return false;
}

/* A keep-alive client's small requests are answered while two long
 * computations hold both compute threads: no HTTP thread waits for a
 * computation, so no connection waits behind one. */
static void test_keepalive_beside_long_computations(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--threads", "2", "--drain-seconds", "0", NULL};
    assert_true(server_start(&s, args));
    const int fd = raw_connect(&s, "127.0.0.2");
    assert_true(fd >= 0);
    const char small[] = "POST /attention HTTP/1.1\r\nHost: x\r\n"
                         "Content-Type: application/json\r\n"
                         "Content-Length: 26\r\n\r\n"
                         "{\"sentence\":\"the cat sat\"}";
    char out[16384];
    raw_response(fd, small, out, sizeof out, 2000);
    assert_true(strncmp(out, "HTTP/1.1 200", 12) == 0);
    char *body = sentence_body(4096, "\"d_model\":256,\"heads\":64,"
                                     "\"d_k\":64,\"d_v\":64,"
                                     "\"return\":[\"output\"]");
    struct post_call large[2];
    pthread_t tids[2];
    for (int i = 0; i < 2; i++) {
        large[i] = (struct post_call){.s = &s, .body = body};
        pthread_create(&tids[i], NULL, post_call_run, &large[i]);
    }
    assert_true(wait_running(&s, 2));
    for (int i = 0; i < 10; i++) {
        raw_response(fd, small, out, sizeof out, 5000);
        if (strncmp(out, "HTTP/1.1 200", 12))
            fail_msg("small request %d on a keep-alive connection beside two "
                     "long computations: %.80s",
                     i, out);
    }
    double running = 0;
    assert_true(
        metric_read(&s, "127.0.0.9", "attnd_computations_running", &running));
    if (running != 2) /* answered while both still ran */
        fail_msg("%.0f computations running after the small requests", running);
    close(fd);
    assert_int_equal(server_stop(&s, 20.0), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(tids[i], NULL);
        if (large[i].ok)
            reply_free(&large[i].r);
    }
    free(body);
}

/* Readers that ask for large answers and stop reading hold what they were
 * reserved, never more than the budget: the rest are told to come back,
 * small requests are still answered, and once the idle timeout closes the
 * stalled connections everything is given back. */
static void test_stalled_readers_stay_within_budget(void **state)
{
    (void)state;
#if UNDER_ASAN
    skip(); /* resident memory is no measure under ASan */
#endif
    const size_t budget = (size_t)256 << 20;
    struct server s;
    const char *args[] = {"--max-memory", "268435456", "--timeout", "3",
                          "--threads",    "2",         NULL};
    assert_true(server_start(&s, args));
    const size_t baseline = status_bytes(s.pid, "VmRSS:");
    /* 724 tokens, 32 heads of weights: 16.8 M numbers, 67 MB as floats
     * and about 170 MB as JSON; a few fit the budget at once */
    char *body = sentence_body(724, "\"heads\":32,\"return\":[\"weights\"]");
    const size_t len = strlen(body);
    char head[256];
    snprintf(head, sizeof head,
             "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
             "application/json\r\nContent-Length: %zu\r\n\r\n",
             len);
    enum { READERS = 8 };
    int fd[READERS];
    int answered_200 = 0, told_503 = 0;
    for (int i = 0; i < READERS; i++) {
        fd[i] = raw_connect(&s, "127.0.0.1");
        assert_true(fd[i] >= 0);
        int small = 4096;
        setsockopt(fd[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        assert_true(send(fd[i], head, strlen(head), MSG_NOSIGNAL) > 0);
        assert_true(send(fd[i], body, len, MSG_NOSIGNAL) == (ssize_t)len);
        char first[1024];
        const size_t got =
            raw_exchange(fd[i], NULL, first, sizeof first, 30000);
        assert_true(got > 12);
        if (!strncmp(first, "HTTP/1.1 200", 12))
            answered_200++; /* and reads no more */
        else if (!strncmp(first, "HTTP/1.1 503", 12))
            told_503++;
        else
            fail_msg("a stalled reader's request answered %.80s", first);
    }
    if (answered_200 == 0 || told_503 == 0)
        fail_msg("%d answered, %d told to retry: the budget should allow "
                 "some and not all",
                 answered_200, told_503);
    /* small requests still get through beside them */
    struct reply r;
    assert_true(post_json(&s, "/attention", "{\"sentence\":\"a b\"}", &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    const size_t peak = status_bytes(s.pid, "VmHWM:");
    const size_t allowed = budget + baseline + ((size_t)128 << 20);
    if (peak > allowed)
        fail_msg("peak RSS %zu MiB with readers stalled; allowed %zu MiB",
                 peak >> 20, allowed >> 20);
    /* the idle timeout (3 s) closes them, and the budget is empty again */
    bool empty = false;
    for (int i = 0; i < 100 && !empty; i++) {
        double reserved = -1;
        empty = metric_read(&s, "127.0.0.2", "attnd_memory_reserved_bytes",
                            &reserved) &&
                reserved == 0;
        if (!empty)
            pause_ms(100);
    }
    if (!empty)
        fail_msg("memory still reserved 10 s after the readers stalled");
    for (int i = 0; i < READERS; i++)
        close(fd[i]);
    assert_int_equal(server_stop(&s, 10.0), 0);
    free(body);
}

struct get_call {
    const struct server *s;
    const char *path;
    struct reply r;
    bool ok;
};

static void *get_path(void *arg)
{
    struct get_call *c = arg;
    c->ok = http_call(c->s, "GET", c->path, NULL, 0, NULL, &c->r);
    return NULL;
}

/* PNGs of the largest canvas, eight at once: drawn within the budget,
 * the others told to come back. */
static void test_large_pngs_stay_within_budget(void **state)
{
    (void)state;
#if UNDER_ASAN
    skip(); /* resident memory is no measure under ASan */
#endif
    /* one such PNG holds about 390 MiB while it is drawn */
    const size_t budget = (size_t)640 << 20;
    struct server s;
    const char *args[] = {"--max-memory", "671088640", "--threads", "2", NULL};
    assert_true(server_start(&s, args));
    const size_t baseline = status_bytes(s.pid, "VmRSS:");
    /* 500 tokens at 16 pixels a weight: a canvas of 8000 pixels square
     * and its labels */
    char path[4096];
    size_t n = (size_t)snprintf(path, sizeof path,
                                "/attention?format=png&cell=16&heads=1&"
                                "sentence=a");
    for (int i = 1; i < 500; i++)
        n += (size_t)snprintf(path + n, sizeof path - n, "+%c", 'a' + i % 26);
    enum { CALLS = 8 };
    struct get_call calls[CALLS];
    pthread_t tids[CALLS];
    for (int i = 0; i < CALLS; i++) {
        calls[i] = (struct get_call){.s = &s, .path = path};
        pthread_create(&tids[i], NULL, get_path, &calls[i]);
    }
    int drawn = 0;
    for (int i = 0; i < CALLS; i++) {
        pthread_join(tids[i], NULL);
        assert_true(calls[i].ok);
        const long st = calls[i].r.status;
        if (st == 200) {
            drawn++;
            assert_true(calls[i].r.len > 8 &&
                        !memcmp(calls[i].r.body, "\x89PNG", 4));
        } else if (st != 503) {
            fail_msg("a large PNG answered %ld: %.200s", st, calls[i].r.body);
        }
        reply_free(&calls[i].r);
    }
    if (drawn == 0)
        fail_msg("no large PNG was drawn within a 640 MiB budget");
    const size_t peak = status_bytes(s.pid, "VmHWM:");
    const size_t allowed = budget + baseline + ((size_t)128 << 20);
    if (peak > allowed)
        fail_msg("peak RSS %zu MiB drawing large PNGs; allowed %zu MiB",
                 peak >> 20, allowed >> 20);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* A context repeated for every sequence of a batch is sized before it is
 * repeated: 40 sequences against a 4,096-word context as wide as 4,096
 * would be 2.7 GB, and is refused having held one copy at most. */
static void test_batch_context_sized_first(void **state)
{
    (void)state;
#if UNDER_ASAN
    skip(); /* resident memory is no measure under ASan */
#endif
    struct server s;
    assert_true(server_start(&s, NULL));
    const size_t baseline = status_bytes(s.pid, "VmRSS:");
    const size_t batch = 40, width = 4096, words = 4096;
    char *body = malloc(batch * (2 * width + 4) + words * 2 + 128);
    size_t n = (size_t)snprintf(body, 32, "{\"embeddings\":[");
    for (size_t b = 0; b < batch; b++) {
        n += (size_t)snprintf(body + n, 8, "%s[[", b ? "," : "");
        for (size_t k = 0; k < width; k++)
            body[n++] = k ? ',' : '1', body[n++] = k ? '1' : ' ';
        body[n++] = ']', body[n++] = ']';
    }
    n += (size_t)snprintf(body + n, 64, "],\"context\":{\"sentence\":\"");
    for (size_t i = 0; i < words; i++)
        body[n++] = 'a', body[n++] = ' ';
    snprintf(body + n, 64, "\"},\"return\":[\"output\"]}");
    struct reply r;
    assert_true(post_json(&s, "/attention", body, &r));
    if (r.status != 422 || !strstr(r.body, "--max-output"))
        fail_msg("a 40-fold context answered %ld: %.200s", r.status, r.body);
    reply_free(&r);
    const size_t peak = status_bytes(s.pid, "VmHWM:");
    if (peak > baseline + ((size_t)256 << 20))
        fail_msg("peak RSS %zu MiB refusing a 40-fold context (from %zu)",
                 peak >> 20, baseline >> 20);
    assert_int_equal(server_stop(&s, 10.0), 0);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trickling_clients_are_cut),
        cmocka_unit_test(test_prompt_keepalive_is_not_cut),
        cmocka_unit_test(test_keepalive_beside_long_computations),
        cmocka_unit_test(test_stalled_readers_stay_within_budget),
        cmocka_unit_test(test_large_pngs_stay_within_budget),
        cmocka_unit_test(test_batch_context_sized_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
