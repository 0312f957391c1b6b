/*
 * test_listener.c - the listener hands connections to libmicrohttpd's
 * HTTP threads: eight keep-alive clients connected at once are served
 * three to five by each of two threads (libmicrohttpd's own accept gave
 * one thread all of a burst two times in three); while the daemon holds its
 * connection limit the next client waits in the backlog and is served once one
 * closes; a closed listener accepts nothing more.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "listener.h"

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { CLIENTS = 8, MAX_THREADS = 8 };

/* The HTTP threads that answered, and how many connections each. */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t seen[MAX_THREADS];
static int seen_count[MAX_THREADS], n_seen;

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn,
                              const char *url, const char *method,
                              const char *version, const char *data,
                              size_t *size, void **state)
{
    (void)cls, (void)url, (void)method, (void)version, (void)data, (void)size;
    if (!*state) { /* headers: nothing to do until the request is whole */
        *state = conn;
        return MHD_YES;
    }
    const pthread_t self = pthread_self();
    pthread_mutex_lock(&seen_lock);
    int i = 0;
    while (i < n_seen && !pthread_equal(seen[i], self))
        i++;
    if (i == n_seen && n_seen < MAX_THREADS)
        seen[n_seen++] = self;
    if (i < MAX_THREADS)
        seen_count[i]++;
    pthread_mutex_unlock(&seen_lock);
    struct MHD_Response *r = MHD_create_response_from_buffer(
        2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
    const enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)conn, (void)socket_context;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        listener_closed(cls);
}

/* A daemon as http.c starts one, fed by l, limit connections at most. */
static struct MHD_Daemon *start_daemon(struct listener *l, unsigned threads,
                                       unsigned limit)
{
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
            MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
        0, NULL, NULL, answer, NULL, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, limit + LISTENER_SLACK,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_END);
    if (d && !listener_start(l, d, limit)) {
        MHD_stop_daemon(d);
        return NULL;
    }
    return d;
}

/* Connect fd (a socket) to the listener. */
static int connect_to(int fd, unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("cannot connect to the listener");
    return fd;
}

static int client(unsigned port)
{
    return connect_to(socket(AF_INET, SOCK_STREAM, 0), port);
}

/* Send one request on fd and wait up to ms for the start of an answer;
 * true when it came. */
static bool served(int fd, int ms)
{
    const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char out[512];
    return poll(&p, 1, ms) == 1 && read(fd, out, sizeof out) > 12 &&
           !strncmp(out, "HTTP/1.1 200", 12);
}

static void test_connections_spread_evenly(void **state)
{
    (void)state;
    struct listener l;
    const struct sockaddr_in any = {.sin_family = AF_INET,
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(listener_open(&l, &any));
    assert_true(l.port > 0);
    struct MHD_Daemon *d = start_daemon(&l, 2, 64);
    assert_non_null(d);
    /* the clients' sockets first: the server's, in this same process, are
     * then numbered one after the other, as they are when the clients are
     * other processes */
    int fds[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    for (int i = 0; i < CLIENTS; i++)
        connect_to(fds[i], l.port);
    for (int i = 0; i < CLIENTS; i++)
        assert_true(served(fds[i], 5000));
    /* by descriptor: consecutive ones alternate, and a gap another thread
     * left in the table may tip one more to a side */
    assert_int_equal(n_seen, 2);
    assert_in_range(seen_count[0], CLIENTS / 2 - 1, CLIENTS / 2 + 1);
    assert_int_equal(seen_count[0] + seen_count[1], CLIENTS);
    for (int i = 0; i < CLIENTS; i++)
        close(fds[i]);
    listener_close(&l);
    listener_close(&l); /* idempotent */
    MHD_stop_daemon(d);
}

static void test_full_daemon_leaves_clients_waiting(void **state)
{
    (void)state;
    struct listener l;
    const struct sockaddr_in any = {.sin_family = AF_INET,
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(listener_open(&l, &any));
    struct MHD_Daemon *d = start_daemon(&l, 2, 2);
    assert_non_null(d);
    const int a = client(l.port), b = client(l.port);
    assert_true(served(a, 5000));
    assert_true(served(b, 5000));
    // the third waits in the backlog, unanswered, not refused
    const int c = client(l.port);
    assert_false(served(c, 300));
    close(a);
    struct pollfd p = {.fd = c, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    char out[512];
    const ssize_t got = read(c, out, sizeof out);
    if (got <= 12)
        fail_msg("the waiting client got %zd bytes", got);
    assert_memory_equal(out, "HTTP/1.1 200", 12);
    close(b);
    close(c);
    const unsigned port = l.port;
    listener_close(&l);
    // nothing listens there now
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    assert_int_not_equal(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
    close(fd);
    MHD_stop_daemon(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connections_spread_evenly),
        cmocka_unit_test(test_full_daemon_leaves_clients_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
