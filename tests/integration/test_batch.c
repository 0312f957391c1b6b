/*
 * test_batch.c - generations decoded together on the real binary: many
 * clients at once, of five models (float32, bfloat16, GGUF Q4_K_M and
 * Q8_0 weights; bfloat16 products asked by one), greedy and seeded, with
 * and without ablations, each
 * stream byte for byte what the same request gives alone (and the
 * server's counters show that steps did serve several at once); OpenAI
 * completions among them, whole and streamed with every token's
 * attention row; the place in the batch bounded (--max-batch), the line
 * for it bounded (--batch-queue) and timed (--batch-wait-seconds), each
 * refusal a 503 with Retry-After; a client that stops reading, or reads
 * slowly a stream of large rows, holds back only itself; a place freed
 * when a client leaves, and a waiter that leaves costs nothing; a stop
 * in the middle of a batch ends every stream and the server cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct server srv;

static int setup(void **state)
{
    (void)state;
    const char *const args[] = {
        "--model",     "llama3=tests/models/llama3",
        "--model",     "gpt2=tests/models/gpt2",
        "--model",     "bf16=tests/models/llama2",
        "--model",     "q4=tests/models/gguf/llama-Q4_K_M.gguf",
        "--model",     "q8=tests/models/gguf/qwen2-Q8_0.gguf",
        "--model",     "big=tests/models/llama_32x32",
        "--max-batch", "16",
        NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

/* The requests: five models, greedy and sampled, ablated or not, of
 * different lengths, so that sequences join and leave the batch at
 * different steps. */
enum { CLIENTS = 14 };
static const char *const bodies[CLIENTS] = {
    "{\"model\":\"llama3\",\"prompt\":\"the cat sat on\","
    "\"max_new_tokens\":60,\"top_candidates\":3}",
    "{\"model\":\"llama3\",\"prompt\":\"a\",\"max_new_tokens\":90,"
    "\"temperature\":0.9,\"seed\":7,\"top_candidates\":2}",
    "{\"model\":\"gpt2\",\"prompt\":\"hello there\",\"max_new_tokens\":40,"
    "\"top_candidates\":4}",
    "{\"model\":\"llama3\",\"prompt\":\"one two three four five six\","
    "\"max_new_tokens\":70,\"temperature\":1.2,\"top_k\":5,\"seed\":11}",
    "{\"model\":\"gpt2\",\"prompt\":\"x\",\"max_new_tokens\":55,"
    "\"temperature\":0.7,\"top_p\":0.9,\"seed\":3}",
    "{\"model\":\"llama3\",\"prompt\":\"the cat sat on\","
    "\"max_new_tokens\":80,\"ablate\":[{\"layer\":1,\"head\":2}]}",
    "{\"model\":\"llama3\",\"prompt\":\"zebra\",\"max_new_tokens\":45,"
    "\"return\":[\"weights\",\"mean_weights\"]}",
    "{\"model\":\"gpt2\",\"prompt\":\"the end is near\","
    "\"max_new_tokens\":45,\"temperature\":1.0,\"seed\":99}",
    "{\"model\":\"bf16\",\"prompt\":\"the cat sat on\","
    "\"max_new_tokens\":60,\"top_candidates\":3}",
    "{\"model\":\"bf16\",\"prompt\":\"why\",\"max_new_tokens\":70,"
    "\"temperature\":0.8,\"seed\":5,\"return\":[\"mean_weights\"]}",
    "{\"model\":\"q4\",\"prompt\":\"the cat sat on the mat and then it "
    "ran far away from the big dog\","
    "\"max_new_tokens\":64,\"top_candidates\":2}",
    "{\"model\":\"q4\",\"prompt\":\"one\",\"max_new_tokens\":50,"
    "\"temperature\":0.9,\"seed\":21}",
    "{\"model\":\"bf16\",\"prompt\":\"the dog\",\"max_new_tokens\":66,"
    "\"products\":\"bfloat16\",\"temperature\":0.8,\"seed\":8}",
    "{\"model\":\"q8\",\"prompt\":\"hello\",\"max_new_tokens\":58,"
    "\"ablate\":[{\"layer\":0,\"head\":1,\"mode\":\"mean\"}]}"};

struct client {
    const char *body;
    const char *path;
    struct stream s;
    long status;
    pthread_barrier_t *go;
};

static void *run_client(void *arg)
{
    struct client *c = arg;
    if (c->go)
        pthread_barrier_wait(c->go);
    c->status = post_stream(&srv, c->path, c->body, NULL, &c->s, NULL, 0);
    return NULL;
}

static int stalled_client(const struct server *s);
static int small_window_post(const struct server *s, const char *path,
                             const char *body);
static void wait_metric(const struct server *s, const char *name, double want);

static double metric(const char *name)
{
    double v = -1;
    assert_true(metric_read(&srv, "127.0.0.1", name, &v));
    return v;
}

/* The server's XF_STEP_TOKENS_QUANT, which this black-box test cannot
 * include: the longest prompt a block-quantized model's steps take. */
enum { QUANT_STEP_TOKENS = 24 };

/* Each stream, served beside the others, is the bytes it is alone (its
 * prompt, but an ablated one, brought to the steps either way). */
static void test_together_as_alone(void **state)
{
    (void)state;
    struct stream alone[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        memset(&alone[i], 0, sizeof alone[i]);
        assert_int_equal(
            post_stream(&srv, "/generate", bodies[i], NULL, &alone[i], NULL, 0),
            200);
        assert_non_null(strstr(alone[i].data, "event: done"));
    }
    // every prompt goes through the steps but the ablated ones and,
    // on the GGUF models' block-quantized weights, those over
    // XF_STEP_TOKENS_QUANT (src/transformer.h; xf_step_tokens()'s bounds
    // for float weights are far above these prompts)
    double prompt_tokens = 0;
    for (int i = 0; i < CLIENTS; i++) {
        const char *at = strstr(alone[i].data, "\"prompt_tokens\":");
        assert_non_null(at);
        const double tokens = atof(at + strlen("\"prompt_tokens\":"));
        const bool quantized = strstr(bodies[i], "\"model\":\"q4\"") ||
                               strstr(bodies[i], "\"model\":\"q8\"");
        if (!strstr(bodies[i], "ablate") &&
            (!quantized || tokens <= QUANT_STEP_TOKENS))
            prompt_tokens += tokens;
    }
    const double steps0 = metric("attnd_decode_steps_total");
    const double rows0 = metric("attnd_decode_step_sequences_total");
    const double prompts0 = metric("attnd_decode_step_prompt_tokens_total");
    // three rounds, so that the clients overlap however the machine is
    // loaded
    bool shared = false;
    int rounds = 0;
    for (int round = 0; round < 3 && !shared; round++, rounds++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, CLIENTS);
        struct client c[CLIENTS];
        pthread_t t[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            c[i] = (struct client){
                .body = bodies[i], .path = "/generate", .go = &go};
            pthread_create(&t[i], NULL, run_client, &c[i]);
        }
        for (int i = 0; i < CLIENTS; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < CLIENTS; i++) {
            assert_int_equal(c[i].status, 200);
            if (c[i].s.len != alone[i].len ||
                memcmp(c[i].s.data, alone[i].data, alone[i].len))
                fail_msg("client %d's stream differs from its own alone:\n"
                         "%.400s\n---\n%.400s",
                         i, c[i].s.data, alone[i].data);
            free(c[i].s.data);
        }
        const double steps = metric("attnd_decode_steps_total") - steps0;
        const double rows = metric("attnd_decode_step_sequences_total") - rows0;
        shared = rows > steps;
    }
    if (!shared)
        fail_msg("no step served more than one sequence in three rounds");
    const double prompts =
        metric("attnd_decode_step_prompt_tokens_total") - prompts0;
    if (prompts != rounds * prompt_tokens)
        fail_msg("the steps brought %g prompt tokens in %d rounds of %g",
                 prompts, rounds, prompt_tokens);
    for (int i = 0; i < CLIENTS; i++)
        free(alone[i].data);
}

/* A stream's text with what differs from one answer to another taken
 * out: each chunk's "id" and "created". */
static void strip_ids(char *text)
{
    static const char *const keys[] = {"\"id\":\"", "\"created\":"};
    for (int k = 0; k < 2; k++)
        for (char *at = strstr(text, keys[k]); at; at = strstr(at, keys[k])) {
            char *v = at + strlen(keys[k]), *end = v;
            while (*end && *end != '"' && *end != ',' && *end != '}')
                end++;
            memmove(v, end, strlen(end) + 1);
            at = v;
        }
}

/* OpenAI completions among generations: a whole answer with
 * log-probabilities, and one streamed with every token's attention row,
 * each what it is alone but for ids and times; steps were shared. */
static void test_completions_among_them(void **state)
{
    (void)state;
    const char *whole = "{\"model\":\"llama3\",\"prompt\":\"the cat\","
                        "\"max_tokens\":40,\"logprobs\":3,\"temperature\":0}";
    const char *streamed = "{\"model\":\"bf16\",\"prompt\":\"Hi there\","
                           "\"max_tokens\":40,\"stream\":true,"
                           "\"logprobs\":2,\"seed\":3,\"temperature\":0.7,"
                           "\"attention\":{\"stream_rows\":true}}";
    struct reply r;
    assert_true(post_json(&srv, "/v1/completions", whole, &r));
    assert_int_equal(r.status, 200);
    char *want = strdup(strstr(r.body, "\"choices\""));
    reply_free(&r);
    struct stream alone = {0};
    assert_int_equal(
        post_stream(&srv, "/v1/completions", streamed, NULL, &alone, NULL, 0),
        200);
    assert_non_null(strstr(alone.data, "attention_row"));
    strip_ids(alone.data);
    const double steps0 = metric("attnd_decode_steps_total");
    const double rows0 = metric("attnd_decode_step_sequences_total");
    struct client c[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        c[i] = (struct client){.body = i < 4 ? bodies[i] : streamed,
                               .path = i < 4 ? "/generate" : "/v1/completions"};
        pthread_create(&t[i], NULL, run_client, &c[i]);
    }
    assert_true(post_json(&srv, "/v1/completions", whole, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(strstr(r.body, "\"choices\""), want);
    reply_free(&r);
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(c[i].status, 200);
        if (i >= 4) {
            strip_ids(c[i].s.data);
            assert_string_equal(c[i].s.data, alone.data);
        }
        free(c[i].s.data);
    }
    const double steps = metric("attnd_decode_steps_total") - steps0;
    const double rows = metric("attnd_decode_step_sequences_total") - rows0;
    if (rows <= steps)
        fail_msg("no step served more than one sequence (%g rows in %g)", rows,
                 steps);
    free(alone.data);
    free(want);
}

/* A client that reads slowly, 4 KiB every 20 ms, a completion streamed
 * with every token's attention row on a 32-layer model (chunks of
 * hundreds of KiB): generations beside it are not held up by it. */
struct slow_reader {
    int fd;
    atomic_bool stop;
    size_t bytes;
};

static void *read_slowly(void *arg)
{
    struct slow_reader *sr = arg;
    char buf[4096];
    while (!sr->stop) {
        const ssize_t n = recv(sr->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0)
            break;
        if (n > 0)
            sr->bytes += (size_t)n;
        pause_ms(20);
    }
    return NULL;
}

static void test_slow_reader_of_rows_holds_back_only_itself(void **state)
{
    (void)state;
    const int fd = small_window_post(
        &srv, "/v1/completions",
        "{\"model\":\"big\",\"prompt\":\"Go on.\",\"max_tokens\":150,"
        "\"stream\":true,\"temperature\":1,"
        "\"attention\":{\"stream_rows\":true}}");
    struct slow_reader sr = {.fd = fd};
    pthread_t t;
    pthread_create(&t, NULL, read_slowly, &sr);
    // until its chunks are large: some seconds of its tokens
    pause_ms(3000);
    double worst = 0;
    for (int i = 0; i < 8; i++) {
        struct stream st = {0};
        const double t0 = clock_seconds();
        assert_int_equal(post_stream(&srv, "/generate",
                                     "{\"model\":\"llama3\",\"prompt\":\"a b\","
                                     "\"max_new_tokens\":30}",
                                     NULL, &st, NULL, 0),
                         200);
        worst = fmax(worst, clock_seconds() - t0);
        free(st.data);
    }
    sr.stop = true;
    pthread_join(t, NULL);
    close(fd);
    // its place given back once the server sees it gone
    wait_metric(&srv, "attnd_generations_in_flight", 0);
    if (worst > 5.0)
        fail_msg("a 30-token generation beside a slow reader took %.1f s",
                 worst);
}

/* A raw connection with a small receive buffer that POSTs body to path
 * and reads nothing: its socket. */
static int sent_post(const struct server *s, const char *path, const char *body)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    const int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)s->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[1024];
    const int n = snprintf(req, sizeof req,
                           "POST %s HTTP/1.1\r\nHost: x\r\n"
                           "Content-Type: application/json\r\n"
                           "Content-Length: %zu\r\n\r\n%s",
                           path, strlen(body), body);
    assert_true(n > 0 && (size_t)n < sizeof req);
    assert_int_equal(send(fd, req, (size_t)n, 0), n);
    return fd;
}

/* The same, the status line (200) read and no more: what the client
 * reads after that is the caller's. */
static int small_window_post(const struct server *s, const char *path,
                             const char *body)
{
    const int fd = sent_post(s, path, body);
    char head[64];
    const ssize_t got = recv(fd, head, sizeof head - 1, 0);
    assert_true(got > 0);
    head[got] = 0;
    if (memcmp(head, "HTTP/1.1 200", 12))
        fail_msg("answered %s", head);
    return fd;
}

/* A raw connection that sends a long generation's request with a small
 * receive buffer, reads its status line and then nothing: its 4000
 * events of twenty candidates, some 4 MB, are more than the server's
 * 1 MiB of unread events and the sockets' buffers hold. Nothing of the
 * finished sequence is asked: its weights at 4001 tokens would pass
 * --max-output. */
static int stalled_client(const struct server *s)
{
    return small_window_post(s, "/generate",
                             "{\"model\":\"llama3\",\"prompt\":\"a\","
                             "\"max_new_tokens\":4000,\"top_candidates\":20,"
                             "\"return\":[]}");
}

/* Until the metric reaches want, at most 20 s. */
static void wait_metric(const struct server *s, const char *name, double want)
{
    const double deadline = clock_seconds() + 20.0;
    double v = -1;
    while (clock_seconds() < deadline) {
        assert_true(metric_read(s, "127.0.0.1", name, &v));
        if (v == want)
            return;
        pause_ms(20);
    }
    fail_msg("%s stayed %g, not %g, for 20 s", name, v, want);
}

struct waiter {
    const struct server *s;
    const char *path, *body;
    struct reply r;
    double took;
};

static void *run_waiter(void *arg)
{
    struct waiter *w = arg;
    const double t0 = clock_seconds();
    assert_true(post_json(w->s, w->path, w->body, &w->r));
    w->took = clock_seconds() - t0;
    return NULL;
}

static void assert_503_retry(const struct reply *r, const char *names)
{
    char retry[16];
    if (r->status != 503 ||
        !reply_header(r, "Retry-After", retry, sizeof retry))
        fail_msg("answered %ld without Retry-After: %.300s", r->status,
                 r->body);
    if (!strstr(r->body, names))
        fail_msg("the refusal does not name %s: %.300s", names, r->body);
}

/* A client that stops reading sits the steps out; the others' tokens go
 * on being made, and it still holds its place until it hangs up. */
static void test_slow_client_holds_back_only_itself(void **state)
{
    (void)state;
    const double in_flight = metric("attnd_generations_in_flight");
    const int fd = stalled_client(&srv);
    wait_metric(&srv, "attnd_generations_in_flight", in_flight + 1);
    // long enough for its buffers to be full: its steps are sat out
    const double t0 = clock_seconds();
    while (clock_seconds() < t0 + 20.0) {
        const double before = metric("attnd_decode_step_sequences_total");
        pause_ms(200);
        if (metric("attnd_decode_step_sequences_total") == before)
            break;
    }
    for (int i = 0; i < 3; i++) {
        struct stream st = {0};
        assert_int_equal(
            post_stream(&srv, "/generate", bodies[i], NULL, &st, NULL, 0), 200);
        assert_non_null(strstr(st.data, "event: done"));
        free(st.data);
    }
    assert_true(metric("attnd_generations_in_flight") == in_flight + 1);
    close(fd);
    wait_metric(&srv, "attnd_generations_in_flight", in_flight);
}

/* One place in the batch and one in line: a generation whose client
 * stops reading holds the place (and nothing else: /attention is still
 * served); the next waits its second and is refused 503 with
 * Retry-After, the one after that at once; an OpenAI completion too.
 * Once the stalled client hangs up its place is free again. */
static void test_places_and_line_are_bounded(void **state)
{
    (void)state;
    const char *args[] = {"--model",
                          "llama3=tests/models/llama3",
                          "--max-batch",
                          "1",
                          "--batch-queue",
                          "1",
                          "--batch-wait-seconds",
                          "1",
                          NULL};
    struct server s;
    assert_true(server_start(&s, args));
    const int fd = stalled_client(&s);
    wait_metric(&s, "attnd_generations_in_flight", 1);
    const char *small =
        "{\"model\":\"llama3\",\"prompt\":\"b\",\"max_new_tokens\":2}";
    struct waiter w = {.s = &s, .path = "/generate", .body = small};
    pthread_t t;
    pthread_create(&t, NULL, run_waiter, &w);
    wait_metric(&s, "attnd_generations_waiting", 1);
    // the line is full: at once
    struct reply r;
    assert_true(post_json(&s, "/generate", small, &r));
    assert_503_retry(&r, "--batch-queue");
    reply_free(&r);
    assert_true(post_json(&s, "/v1/completions",
                          "{\"model\":\"llama3\",\"prompt\":\"b\","
                          "\"max_tokens\":2}",
                          &r));
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "\"error\""));
    reply_free(&r);
    // other work goes on
    assert_true(post_json(&s, "/attention", "{\"sentence\":\"a b c\"}", &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    pthread_join(t, NULL);
    assert_503_retry(&w.r, "--batch-wait-seconds");
    if (w.took < 0.9 || w.took > 10.0)
        fail_msg("the wait took %.2f s; the line's deadline is 1 s", w.took);
    reply_free(&w.r);
    // the stalled client leaves: its place is given back
    close(fd);
    wait_metric(&s, "attnd_generations_in_flight", 0);
    assert_true(post_json(&s, "/generate", small, &r));
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "event: done"));
    reply_free(&r);
    double abandoned = 0;
    assert_true(metric_read(&s, "127.0.0.1",
                            "attnd_generations_abandoned_total", &abandoned));
    assert_true(abandoned >= 1);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* Clients that leave while they wait in line (a generation, an OpenAI
 * stream and a whole completion) give their places back within a look or
 * two (BATCH_LOOK_SECONDS), and none of their prompts is computed: the
 * line takes a new waiter at once, and when the place frees only the one
 * still there is served. A whole completion's client that leaves while
 * its tokens are made is let go as a stream's is; one that leaves from
 * the middle of the line leaves those before and after it their places. */
static void test_waiters_that_leave_give_back_their_places(void **state)
{
    (void)state;
    const char *args[] = {"--model",
                          "llama3=tests/models/llama3",
                          "--max-batch",
                          "1",
                          "--batch-queue",
                          "3",
                          "--batch-wait-seconds",
                          "60",
                          NULL};
    struct server s;
    assert_true(server_start(&s, args));
    const int stalled = stalled_client(&s);
    wait_metric(&s, "attnd_generations_in_flight", 1);
    // its prompt brought: it has made a token
    double made = 0;
    for (double until = clock_seconds() + 20.0;
         made == 0 && clock_seconds() < until; pause_ms(20))
        assert_true(metric_read(&s, "127.0.0.1",
                                "attnd_decode_step_sequences_total", &made));
    assert_true(made > 0);
    double prompts0 = -1;
    assert_true(metric_read(
        &s, "127.0.0.1", "attnd_decode_step_prompt_tokens_total", &prompts0));
    static const char *const paths[3] = {"/generate", "/v1/completions",
                                         "/v1/completions"};
    static const char *const leaving[3] = {
        "{\"model\":\"llama3\",\"prompt\":\"one two three\","
        "\"max_new_tokens\":5}",
        "{\"model\":\"llama3\",\"prompt\":\"one two three\","
        "\"max_tokens\":5,\"stream\":true}",
        "{\"model\":\"llama3\",\"prompt\":\"one two three\","
        "\"max_tokens\":5}"};
    int fds[3];
    for (int i = 0; i < 3; i++)
        fds[i] = sent_post(&s, paths[i], leaving[i]);
    wait_metric(&s, "attnd_generations_waiting", 3);
    // the line is full; its clients leave, and their places come back
    struct reply r;
    const char *small =
        "{\"model\":\"llama3\",\"prompt\":\"b\",\"max_new_tokens\":2}";
    assert_true(post_json(&s, "/generate", small, &r));
    assert_503_retry(&r, "--batch-queue");
    reply_free(&r);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    wait_metric(&s, "attnd_generations_waiting", 0);
    struct waiter w = {.s = &s, .path = "/generate", .body = small};
    pthread_t t;
    pthread_create(&t, NULL, run_waiter, &w);
    wait_metric(&s, "attnd_generations_waiting", 1);
    close(stalled);
    pthread_join(t, NULL);
    assert_int_equal(w.r.status, 200);
    assert_non_null(strstr(w.r.body, "event: done"));
    const char *at = strstr(w.r.body, "\"prompt_tokens\":");
    assert_non_null(at);
    const double served = atof(at + strlen("\"prompt_tokens\":"));
    reply_free(&w.r);
    double prompts = -1;
    assert_true(metric_read(&s, "127.0.0.1",
                            "attnd_decode_step_prompt_tokens_total", &prompts));
    if (prompts - prompts0 != served)
        fail_msg("the steps brought %g prompt tokens; the one served had %g",
                 prompts - prompts0, served);
    wait_metric(&s, "attnd_generations_in_flight", 0);
    // a whole completion's client that leaves while it is generated: its
    // socket reads its end, and the generation is let go
    double abandoned0 = -1, abandoned = -1;
    assert_true(metric_read(&s, "127.0.0.1",
                            "attnd_generations_abandoned_total", &abandoned0));
    const int whole = sent_post(&s, "/v1/completions",
                                "{\"model\":\"llama3\",\"prompt\":\"a\","
                                "\"max_tokens\":4000}");
    wait_metric(&s, "attnd_generations_in_flight", 1);
    close(whole);
    wait_metric(&s, "attnd_generations_abandoned_total", abandoned0 + 1);
    wait_metric(&s, "attnd_generations_in_flight", 0);
    // one that leaves from the middle of the line: those before and after
    // it are still served
    const int holder = stalled_client(&s);
    wait_metric(&s, "attnd_generations_in_flight", 1);
    struct waiter first = {.s = &s, .path = "/generate", .body = small},
                  last = first;
    pthread_t tf, tl;
    pthread_create(&tf, NULL, run_waiter, &first);
    wait_metric(&s, "attnd_generations_waiting", 1);
    const int middle = sent_post(&s, "/generate", leaving[0]);
    wait_metric(&s, "attnd_generations_waiting", 2);
    pthread_create(&tl, NULL, run_waiter, &last);
    wait_metric(&s, "attnd_generations_waiting", 3);
    close(middle);
    wait_metric(&s, "attnd_generations_waiting", 2);
    close(holder);
    pthread_join(tf, NULL);
    pthread_join(tl, NULL);
    assert_int_equal(first.r.status, 200);
    assert_int_equal(last.r.status, 200);
    assert_non_null(strstr(first.r.body, "event: done"));
    assert_non_null(strstr(last.r.body, "event: done"));
    reply_free(&first.r);
    reply_free(&last.r);
    assert_true(metric_read(&s, "127.0.0.1",
                            "attnd_generations_abandoned_total", &abandoned));
    assert_true(abandoned >= abandoned0 + 2); /* the holder too */
    wait_metric(&s, "attnd_generations_in_flight", 0);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* A generation waiting in line when the server is told to stop is
 * answered 503 at once, not left to its deadline. */
static void test_stop_answers_the_line(void **state)
{
    (void)state;
    const char *args[] = {"--model",
                          "llama3=tests/models/llama3",
                          "--max-batch",
                          "1",
                          "--batch-wait-seconds",
                          "60",
                          "--drain-seconds",
                          "1",
                          NULL};
    struct server s;
    assert_true(server_start(&s, args));
    const int fd = stalled_client(&s);
    wait_metric(&s, "attnd_generations_in_flight", 1);
    struct waiter w = {
        .s = &s,
        .path = "/generate",
        .body = "{\"model\":\"llama3\",\"prompt\":\"b\",\"max_new_tokens\":2}"};
    pthread_t t;
    pthread_create(&t, NULL, run_waiter, &w);
    wait_metric(&s, "attnd_generations_waiting", 1);
    const double t0 = clock_seconds();
    kill(s.pid, SIGTERM);
    pthread_join(t, NULL);
    assert_503_retry(&w.r, "stopping");
    if (clock_seconds() - t0 > 5.0)
        fail_msg("the waiting generation was answered after %.1f s",
                 clock_seconds() - t0);
    reply_free(&w.r);
    close(fd);
    assert_int_equal(server_stop(&s, 15.0), 0);
}

/* SIGTERM while generations share the batch: each stream ends (done, or
 * an error event that says the server is stopping), and the server exits
 * cleanly within its drain and the cancel's second. */
static void test_stop_ends_the_batch(void **state)
{
    (void)state;
    const char *args[] = {"--model", "llama3=tests/models/llama3",
                          "--drain-seconds", "1", NULL};
    struct server s;
    assert_true(server_start(&s, args));
    enum { N = 4 };
    pthread_t t[N];
    struct waiter w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct waiter){
            .s = &s,
            .path = "/generate",
            .body = "{\"model\":\"llama3\",\"prompt\":\"a\","
                    "\"max_new_tokens\":4000,\"temperature\":1,\"seed\":2,"
                    "\"return\":[]}"};
        pthread_create(&t[i], NULL, run_waiter, &w[i]);
    }
    wait_metric(&s, "attnd_generations_in_flight", N);
    const double t0 = clock_seconds();
    kill(s.pid, SIGTERM);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].r.status, 200);
        const bool done = strstr(w[i].r.body, "event: done") != NULL;
        const bool stopped = strstr(w[i].r.body, "event: error") &&
                             strstr(w[i].r.body, "stopping");
        if (!done && !stopped)
            fail_msg("stream %d ended with neither done nor a stopping "
                     "error: ...%.200s",
                     i,
                     w[i].r.body + (w[i].r.len > 200 ? w[i].r.len - 200 : 0));
        reply_free(&w[i].r);
    }
    assert_int_equal(server_stop(&s, 15.0), 0);
    if (clock_seconds() - t0 > 8.0)
        fail_msg("the stop took %.1f s; the drain is 1 s",
                 clock_seconds() - t0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_together_as_alone),
        cmocka_unit_test(test_completions_among_them),
        cmocka_unit_test(test_slow_reader_of_rows_holds_back_only_itself),
        cmocka_unit_test(test_slow_client_holds_back_only_itself),
        cmocka_unit_test(test_places_and_line_are_bounded),
        cmocka_unit_test(test_waiters_that_leave_give_back_their_places),
        cmocka_unit_test(test_stop_answers_the_line),
        cmocka_unit_test(test_stop_ends_the_batch),
    };
    return cmocka_run_group_tests_name("batch", tests, setup, teardown);
}
