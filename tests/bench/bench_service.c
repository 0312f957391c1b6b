/*
 * bench_service.c - the service under load, against a real attnd on a
 * loopback port (tests/integration/harness.c starts it).
 *
 *   bench_service fairness   the latency of 3-token requests on an idle
 *                            server, then while two of the largest
 *                            computations the default limits allow run
 *   bench_service load [SECONDS] [CLIENTS]
 *                            a mixed load (default 120 s, 64 clients),
 *                            generations of the small test decoder
 *                            among the attention requests: counts
 *                            answers by kind and samples the server's
 *                            resident memory
 *
 * Every request differs from the one before (words and seed are drawn),
 * so that no cache of whole answers could serve them. Only loopback, and
 * every phase is bounded in time.
 */
#include "harness.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pause_seconds(double s)
{
    nanosleep(
        &(struct timespec){.tv_sec = (time_t)s,
                           .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)},
        NULL);
}

static int compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of n sorted values. */
static double quantile(const double *sorted, size_t n, double q)
{
    if (!n)
        return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static const char *const words[] = {
    "the",   "cat",    "sat",    "on",      "mat",    "a",      "dog",
    "ran",   "after",  "it",     "because", "was",    "tired",  "bank",
    "river", "money",  "walked", "to",      "store",  "bought", "milk",
    "she",   "he",     "they",   "saw",     "bird",   "flew",   "over",
    "house", "garden", "quick",  "brown",   "fox",    "jumps",  "lazy",
    "old",   "man",    "sea",    "light",   "dark",   "night",  "day",
    "sun",   "moon",   "star",   "tree",    "green",  "blue",   "red",
    "book",  "read",   "wrote",  "letter",  "friend", "city",   "road",
    "car",   "train",  "rain",   "snow",    "cold",   "warm",   "time",
    "work",
};
enum { N_WORDS = sizeof words / sizeof words[0] };

/* n drawn words, space-separated, into out. */
static void draw_sentence(uint64_t *rng, size_t n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && len + 16 < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "",
                                words[next_random(rng) % N_WORDS]);
}

/* ------------------------------------------------------------ a client */

struct client {
    CURL *curl;
    char url[128];
    struct curl_slist *json;
};

/* What a client keeps of an answer: its size, and whether a stream's
 * "event: done" came (looked for across reads with the last bytes of the
 * read before). */
struct taken {
    size_t bytes;
    char tail[16];
    bool done;
};

static size_t discard(char *data, size_t size, size_t n, void *user)
{
    struct taken *t = user;
    const size_t len = size * n;
    t->bytes += len;
    // the tail, then up to 64 new bytes at a time: a name cut between
    // two reads is found
    for (size_t off = 0; off < len && !t->done;) {
        char joined[16 + 64];
        const size_t tail = strlen(t->tail);
        const size_t k = len - off < 64 ? len - off : 64;
        memcpy(joined, t->tail, tail);
        memcpy(joined + tail, data + off, k);
        const size_t total = tail + k;
        for (size_t at = 0; !t->done && at + 11 <= total; at++)
            t->done = !memcmp(joined + at, "event: done", 11);
        const size_t keep = total < 10 ? total : 10;
        memmove(t->tail, joined + total - keep, keep);
        t->tail[keep] = '\0';
        off += k;
    }
    return len;
}

static void client_init(struct client *c, const struct server *s)
{
    c->curl = curl_easy_init();
    snprintf(c->url, sizeof c->url, "http://127.0.0.1:%u", s->port);
    c->json = curl_slist_append(NULL, "Content-Type: application/json");
}

static void client_free(struct client *c)
{
    curl_slist_free_all(c->json);
    curl_easy_cleanup(c->curl);
}

/* One request on the client's kept-alive connection: the status, or -1
 * when none came; *seconds its latency, *got what came. body NULL: a
 * GET. */
static long client_call_taking(struct client *c, const char *path,
                               const char *body, double timeout,
                               double *seconds, struct taken *got)
{
    char url[8192];
    snprintf(url, sizeof url, "%s%s", c->url, path);
    curl_easy_reset(c->curl);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, got);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)(timeout * 1e3));
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->json);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    }
    const double t0 = now_seconds();
    const CURLcode rc = curl_easy_perform(c->curl);
    *seconds = now_seconds() - t0;
    long status = -1;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* The same, what came thrown away. */
static long client_call(struct client *c, const char *path, const char *body,
                        double timeout, double *seconds)
{
    struct taken got = {0};
    return client_call_taking(c, path, body, timeout, seconds, &got);
}

/* ------------------------------------------------------------ fairness */

/* About the largest computation the default limits allow one request:
 * 4096 tokens (--max-tokens), 96 heads of 64 (128 would pass the working
 * memory's cap), 512 wide; about 0.5 TFLOP, half of --max-flops. */
static char *largest_body(void)
{
    const size_t tokens = 4096;
    char *body = malloc(tokens * 2 + 256);
    size_t n = (size_t)snprintf(body, 32, "{\"sentence\":\"");
    for (size_t i = 0; i < tokens; i++)
        body[n++] = (char)('a' + i % 26), body[n++] = ' ';
    snprintf(body + n, 200,
             "\",\"d_model\":512,\"heads\":96,\"d_k\":64,\"d_v\":64,"
             "\"return\":[\"output\"]}");
    return body;
}

struct large_call {
    const struct server *s;
    const char *body;
    long status;
};

static void *post_large(void *arg)
{
    struct large_call *l = arg;
    struct client c;
    client_init(&c, l->s);
    double secs;
    l->status = client_call(&c, "/attention", l->body, 600, &secs);
    client_free(&c);
    return NULL;
}

struct small_clients {
    const struct server *s;
    double until;
    uint64_t seed;
    double *latency; /* [cap] */
    size_t cap, n;
    size_t failed;
};

static void *small_requests(void *arg)
{
    struct small_clients *sc = arg;
    struct client c;
    client_init(&c, sc->s);
    uint64_t rng = sc->seed;
    while (now_seconds() < sc->until && sc->n < sc->cap) {
        char sentence[128], body[256];
        draw_sentence(&rng, 3, sentence, sizeof sentence);
        snprintf(body, sizeof body, "{\"sentence\":\"%s\",\"seed\":%u}",
                 sentence, (unsigned)(next_random(&rng) % 1000000));
        double secs;
        if (client_call(&c, "/attention", body, 10, &secs) == 200)
            sc->latency[sc->n++] = secs;
        else
            sc->failed++;
    }
    client_free(&c);
    return NULL;
}

enum { SMALL_CLIENTS = 4 };

/* 3-token requests from SMALL_CLIENTS clients for `seconds`: their
 * latencies, sorted, into *out (the caller frees it). */
static size_t measure_small(const struct server *s, double seconds,
                            uint64_t seed, double **out, size_t *failed)
{
    struct small_clients sc[SMALL_CLIENTS];
    pthread_t tids[SMALL_CLIENTS];
    const double until = now_seconds() + seconds;
    for (int i = 0; i < SMALL_CLIENTS; i++) {
        sc[i] = (struct small_clients){.s = s,
                                       .until = until,
                                       .seed = seed + (uint64_t)i * 7919,
                                       .cap = 200000};
        sc[i].latency = malloc(sc[i].cap * sizeof(double));
        pthread_create(&tids[i], NULL, small_requests, &sc[i]);
    }
    size_t total = 0;
    *failed = 0;
    for (int i = 0; i < SMALL_CLIENTS; i++) {
        pthread_join(tids[i], NULL);
        total += sc[i].n;
        *failed += sc[i].failed;
    }
    double *all = malloc((total ? total : 1) * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < SMALL_CLIENTS; i++) {
        memcpy(all + k, sc[i].latency, sc[i].n * sizeof(double));
        k += sc[i].n;
        free(sc[i].latency);
    }
    qsort(all, total, sizeof(double), compare_double);
    *out = all;
    return total;
}

static double running_now(const struct server *s)
{
    double running = -1;
    metric_read(s, "127.0.0.1", "attnd_computations_running", &running);
    return running;
}

static int fairness(void)
{
    struct server s;
    const char *args[] = {"--threads", "2",       "--drain-seconds",
                          "0",         "--quiet", NULL};
    if (!server_start(&s, args)) {
        fprintf(stderr, "bench_service: the server did not start\n");
        return 1;
    }
    char core[80];
    server_blas_core(&s, core, sizeof core);
    printf("fairness: 3-token requests from %d keep-alive clients, each a "
           "different sentence and seed (server's OpenBLAS core: %s)\n",
           SMALL_CLIENTS, core);
    double *idle = NULL, *busy = NULL;
    size_t idle_failed = 0, busy_failed = 0;
    const size_t n_idle = measure_small(&s, 3.0, 1, &idle, &idle_failed);
    char *body = largest_body();
    struct large_call large[2] = {{&s, body, 0}, {&s, body, 0}};
    pthread_t tids[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&tids[i], NULL, post_large, &large[i]);
    const double wait_until = now_seconds() + 30;
    while (running_now(&s) < 2 && now_seconds() < wait_until)
        pause_seconds(0.02);
    const double before = running_now(&s);
    const size_t n_busy = measure_small(&s, 8.0, 2, &busy, &busy_failed);
    const double after = running_now(&s);
    printf("  %-38s %8s %9s %9s %9s %7s\n", "", "requests", "p50 ms", "p99 ms",
           "max ms", "failed");
    printf("  %-38s %8zu %9.2f %9.2f %9.2f %7zu\n", "idle server", n_idle,
           quantile(idle, n_idle, 0.5) * 1e3,
           quantile(idle, n_idle, 0.99) * 1e3,
           n_idle ? idle[n_idle - 1] * 1e3 : 0, idle_failed);
    printf("  %-38s %8zu %9.2f %9.2f %9.2f %7zu\n",
           "beside two of the largest computations", n_busy,
           quantile(busy, n_busy, 0.5) * 1e3,
           quantile(busy, n_busy, 0.99) * 1e3,
           n_busy ? busy[n_busy - 1] * 1e3 : 0, busy_failed);
    const bool both = before >= 2 && after >= 2;
    const double p99 = quantile(busy, n_busy, 0.99) * 1e3;
    printf("  large computations running at start and end of the window: "
           "%.0f, %.0f%s\n",
           before, after, both ? "" : " (the window is not valid)");
    printf("  target p99 < 50 ms beside them: %s\n",
           both && busy_failed == 0 && p99 < 50 ? "met" : "NOT met");
    server_stop(&s, 10);
    for (int i = 0; i < 2; i++) {
        pthread_join(tids[i], NULL);
        /* cancelled by the stop: 503 */
        if (large[i].status != 503)
            printf("  a large computation answered %ld\n", large[i].status);
    }
    free(body);
    free(idle);
    free(busy);
    return 0;
}

/* ---------------------------------------------------------------- load */

enum kind {
    K_SMALL,    /* a sentence of 3-12 words, weights as JSON: 200 */
    K_PNG,      /* the same as a PNG by GET: 200 */
    K_MEDIUM,   /* 256 words, 1-8 heads, output only: 200 */
    K_LARGE,    /* 512 words, 4 heads of weights (1 M numbers): 200 */
    K_INVALID,  /* malformed or out of range: 400 or 422 */
    K_HEALTH,   /* /healthz or /metrics: 200 */
    K_GENERATE, /* a streamed generation of 4-48 tokens, greedy or
                   sampled, by the small test decoder: 200 and its done
                   event */
    N_KINDS
};
static const char *const kind_names[N_KINDS] = {
    "small JSON", "small PNG",      "medium",    "large",
    "invalid",    "health/metrics", "generation"};
static const unsigned kind_share[N_KINDS] = {54, 12, 10, 3, 10, 5, 6}; /* % */

enum { MAX_SAMPLES = 1 << 20 };

struct load_stats {
    atomic_size_t sent[N_KINDS], ok[N_KINDS], shed[N_KINDS], errors[N_KINDS];
    double *latency[N_KINDS]; /* [MAX_SAMPLES] of the expected answers */
    atomic_size_t samples[N_KINDS];
};

struct load_client {
    const struct server *s;
    double until;
    uint64_t seed;
    struct load_stats *stats;
};

static enum kind draw_kind(uint64_t *rng)
{
    unsigned r = (unsigned)(next_random(rng) % 100);
    for (int k = 0; k < N_KINDS; k++) {
        if (r < kind_share[k])
            return (enum kind)k;
        r -= kind_share[k];
    }
    return K_SMALL;
}

static char *long_sentence(uint64_t *rng, size_t n)
{
    char *text = malloc(n * 9 + 1);
    draw_sentence(rng, n, text, n * 9 + 1);
    return text;
}

static void *load_client(void *arg)
{
    struct load_client *lc = arg;
    struct client c;
    client_init(&c, lc->s);
    uint64_t rng = lc->seed;
    static const char *const invalid[] = {
        "{\"sentence\":",
        "{\"sentence\":\"a b\",\"heads\":0}",
        "{\"sentence\":\"a b\",\"heads\":7,\"d_model\":64}",
        "{\"embeddings\":[[1,2],[3]]}",
        "{\"sentence\":\"a b\",\"return\":[\"nothing\"]}",
        "[1,2,3]",
        "{\"sentence\":\"a b\",\"dropout\":2}",
    };
    while (now_seconds() < lc->until) {
        const enum kind k = draw_kind(&rng);
        const unsigned seed = (unsigned)(next_random(&rng) % 1000000);
        char sentence[256], small[512], path[1024];
        const char *body = NULL;
        char *owned = NULL;
        const char *where = "/attention";
        draw_sentence(&rng, 3 + next_random(&rng) % 10, sentence,
                      sizeof sentence);
        switch (k) {
        case K_SMALL:
            snprintf(small, sizeof small,
                     "{\"sentence\":\"%s\",\"seed\":%u,\"heads\":%u,"
                     "\"return\":[\"weights\",\"output\"]}",
                     sentence, seed, 1u << (next_random(&rng) % 4));
            body = small;
            break;
        case K_PNG: {
            size_t n = (size_t)snprintf(path, sizeof path,
                                        "/attention?format=png&seed=%u&"
                                        "head=mean&sentence=",
                                        seed);
            for (const char *p = sentence; *p && n + 4 < sizeof path; p++)
                path[n++] = *p == ' ' ? '+' : *p;
            path[n] = '\0';
            where = path;
            break;
        }
        case K_MEDIUM:
        case K_LARGE: {
            const bool large = k == K_LARGE;
            char *text = long_sentence(&rng, large ? 512 : 256);
            const size_t cap = strlen(text) + 256;
            owned = malloc(cap);
            snprintf(owned, cap,
                     "{\"sentence\":\"%s\",\"seed\":%u,\"heads\":%u,"
                     "\"return\":[\"%s\"]}",
                     text, seed, large ? 4u : 1u << (seed % 4),
                     large ? "weights" : "output");
            free(text);
            body = owned;
            break;
        }
        case K_INVALID:
            body = invalid[next_random(&rng) %
                           (sizeof invalid / sizeof invalid[0])];
            break;
        case K_HEALTH: where = seed % 2 ? "/healthz" : "/metrics"; break;
        case K_GENERATE:
            snprintf(small, sizeof small,
                     "{\"model\":\"llama3\",\"prompt\":\"%s\","
                     "\"max_new_tokens\":%u,\"temperature\":%s,\"seed\":%u}",
                     sentence, 4 + (unsigned)(next_random(&rng) % 45),
                     seed % 2 ? "0.8" : "0", seed);
            body = small;
            where = "/generate";
            break;
        case N_KINDS: break;
        }
        double secs;
        struct taken got = {0};
        const long status =
            client_call_taking(&c, where, body, 60, &secs, &got);
        free(owned);
        atomic_fetch_add(&lc->stats->sent[k], 1);
        const bool ok = k == K_INVALID    ? status == 400 || status == 422
                        : k == K_GENERATE ? status == 200 && got.done
                                          : status == 200;
        if (ok) {
            atomic_fetch_add(&lc->stats->ok[k], 1);
            const size_t at = atomic_fetch_add(&lc->stats->samples[k], 1);
            if (at < MAX_SAMPLES)
                lc->stats->latency[k][at] = secs;
        } else if (status == 503)
            atomic_fetch_add(&lc->stats->shed[k], 1);
        else
            atomic_fetch_add(&lc->stats->errors[k], 1);
    }
    client_free(&c);
    return NULL;
}

/* VmRSS of pid in MiB, or 0. */
static double rss_mib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    double kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kib / 1024;
}

static int load(double seconds, int clients)
{
    struct server s;
    const char *args[] = {"--quiet", "--model", "llama3=tests/models/llama3",
                          NULL};
    if (!server_start(&s, args)) {
        fprintf(stderr, "bench_service: the server did not start\n");
        return 1;
    }
    char core[80];
    server_blas_core(&s, core, sizeof core);
    printf("load: %d keep-alive clients for %.0f s (server's OpenBLAS core: "
           "%s), a mix of",
           clients, seconds, core);
    for (int k = 0; k < N_KINDS; k++)
        printf("%s %u%% %s", k ? "," : "", kind_share[k], kind_names[k]);
    printf("\n");
    static struct load_stats stats;
    for (int k = 0; k < N_KINDS; k++)
        stats.latency[k] = malloc(MAX_SAMPLES * sizeof(double));
    struct load_client *lc = calloc((size_t)clients, sizeof *lc);
    pthread_t *tids = calloc((size_t)clients, sizeof *tids);
    const double t0 = now_seconds(), until = t0 + seconds;
    for (int i = 0; i < clients; i++) {
        lc[i] = (struct load_client){&s, until, 1000 + (uint64_t)i * 104729,
                                     &stats};
        pthread_create(&tids[i], NULL, load_client, &lc[i]);
    }
    /* resident memory every 10 s */
    double first = 0, last = 0, peak = 0, settled = 0;
    printf("  RSS (MiB) every 10 s:");
    while (now_seconds() < until) {
        pause_seconds(0.25);
        const double t = now_seconds() - t0;
        static double next = 10;
        if (t >= next) {
            const double mib = rss_mib(s.pid);
            printf(" %.0f", mib);
            fflush(stdout);
            if (!first)
                first = mib;
            if (!settled && t >= seconds / 3)
                settled = mib;
            last = mib;
            peak = mib > peak ? mib : peak;
            next += 10;
        }
    }
    printf("\n");
    for (int i = 0; i < clients; i++)
        pthread_join(tids[i], NULL);
    size_t sent = 0, ok = 0, shed = 0, errors = 0;
    printf("  %-16s %9s %9s %9s %9s %9s %9s\n", "kind", "sent", "expected",
           "503", "errors", "p50 ms", "p99 ms");
    for (int k = 0; k < N_KINDS; k++) {
        size_t n = atomic_load(&stats.samples[k]);
        n = n < MAX_SAMPLES ? n : MAX_SAMPLES;
        qsort(stats.latency[k], n, sizeof(double), compare_double);
        printf("  %-16s %9zu %9zu %9zu %9zu %9.2f %9.2f\n", kind_names[k],
               atomic_load(&stats.sent[k]), atomic_load(&stats.ok[k]),
               atomic_load(&stats.shed[k]), atomic_load(&stats.errors[k]),
               quantile(stats.latency[k], n, 0.5) * 1e3,
               quantile(stats.latency[k], n, 0.99) * 1e3);
        free(stats.latency[k]);
        sent += atomic_load(&stats.sent[k]);
        ok += atomic_load(&stats.ok[k]);
        shed += atomic_load(&stats.shed[k]);
        errors += atomic_load(&stats.errors[k]);
    }
    printf("  %-16s %9zu %9zu %9zu %9zu   (%.0f requests/s)\n", "all", sent, ok,
           shed, errors, (double)sent / seconds);
    printf("  RSS: %.0f MiB at 10 s, %.0f at a third of the run, %.0f at the "
           "end, %.0f at most\n",
           first, settled, last, peak);
    const bool flat = last <= settled + 32;
    printf("  errors: %zu; memory after the first third %s\n", errors,
           flat ? "flat (within 32 MiB)" : "GREW");
    const int stop = server_stop(&s, 15);
    free(lc);
    free(tids);
    return errors == 0 && flat && stop == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = 2;
    if (argc >= 2 && !strcmp(argv[1], "fairness"))
        rc = fairness();
    else if (argc >= 2 && !strcmp(argv[1], "load"))
        rc = load(argc > 2 ? strtod(argv[2], NULL) : 120,
                  argc > 3 ? (int)strtol(argv[3], NULL, 10) : 64);
    else
        fprintf(stderr,
                "usage: bench_service fairness | load [SECONDS] [CLIENTS]\n");
    curl_global_cleanup();
    return rc;
}
