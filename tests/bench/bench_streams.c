/*
 * bench_streams.c - concurrent generations on a real attnd: 1, 2, 4, 8
 * and 16 greedy streams at once on a decoder checkpoint (make bench: the
 * Llama-3.2-1B-sized BF16 one), each a POST /generate read as its events
 * come.
 *
 *   bench_streams DIR [--rounds R] [--tokens T] [--products P] [--answer]
 *                 [--json FILE]
 *
 * Each round runs every stream count once, in order, and every request
 * has a prompt of its own (4 to 11 words drawn afresh, as a chat's turn),
 * so that nothing could be served from a cache; 128 tokens a stream by
 * default. For each count: the total tokens/s (all
 * streams' tokens over the time from the first request to the last
 * answer, prompts included) and the decoding rate alone (each stream's
 * tokens after its first over the time they took, summed over the
 * streams), each stream's median and p99 time per token (between
 * consecutive token events), and the median stream's time from its
 * request to its first token (its prompt's). Medians over the rounds; the
 * speed-up is each count's total tokens/s over one stream's, measured in the
 * same rounds. The server's OpenBLAS core is printed; it runs with the defaults
 * (--threads: the cores, --max-batch 16). --products bfloat16 asks every
 * request for the CPU's bfloat16 dot products (the API's "products"); the
 * default is the exact float32 products. Every request asks "return": [], so
 * that its last event holds the generation (its text and tokens) and no answer
 * about the finished sequence: that answer (by default every layer's weights
 * over all its tokens, 11.5 M numbers for this model at 150 tokens) is a pass
 * of its own after the generation, not a part of generating. --answer leaves
 * "return" out, so that each stream ends with that default answer, as a request
 * that names nothing else gets. Loopback only.
 */
#include "harness.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_STREAMS = 16, MAX_TOKENS = 1024, MAX_ROUNDS = 15 };
static const int counts[] = {1, 2, 4, 8, 16};
enum { N_COUNTS = sizeof counts / sizeof counts[0] };

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of n values, sorted in place. */
static double quantile(double *v, size_t n, double q)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, compare_double);
    const size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static uint64_t next_random(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static const char *const words[] = {
    "the",   "river", "carried", "a",     "small", "boat",   "past",
    "old",   "mills", "while",   "birds", "sang",  "over",   "green",
    "hills", "and",   "quiet",   "towns", "where", "people", "slept"};

/* One stream: its request, and when each token event came. */
struct timed_stream {
    const struct server *s;
    char body[1024];
    double sent, token_at[MAX_TOKENS], done;
    size_t tokens;
    long status;
    char tail[16]; /* the last bytes seen, to find "event: token" across
                      reads */
};

/* The bytes of a read: each "event: token" in them, with the last bytes
 * of the read before (an event name may be cut between two reads; 11
 * bytes cannot hold a whole one, so none is counted twice). */
static size_t take(char *data, size_t size, size_t n, void *user)
{
    struct timed_stream *st = user;
    const size_t len = size * n, tail = strlen(st->tail);
    const double t = now_seconds();
    char *joined = malloc(tail + len);
    if (!joined)
        return 0;
    memcpy(joined, st->tail, tail);
    memcpy(joined + tail, data, len);
    const size_t total = tail + len;
    for (size_t at = 0; at + 12 <= total; at++)
        if (!memcmp(joined + at, "event: token", 12) && st->tokens < MAX_TOKENS)
            st->token_at[st->tokens++] = t;
    const size_t keep = total < 11 ? total : 11;
    memcpy(st->tail, joined + total - keep, keep);
    st->tail[keep] = '\0';
    free(joined);
    return len;
}

static void *run_stream(void *arg)
{
    struct timed_stream *st = arg;
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/generate", st->s->port);
    struct curl_slist *h =
        curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, st->body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, st);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    st->sent = now_seconds();
    st->status = curl_easy_perform(c) == CURLE_OK ? 0 : -1;
    if (st->status == 0)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st->status);
    st->done = now_seconds();
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return NULL;
}

/* What one count measured in one round. */
struct measure {
    double total_rate;  /* tokens/s, prompts included */
    double decode_rate; /* tokens/s after each stream's first */
    double median[MAX_STREAMS], p99[MAX_STREAMS]; /* s per token */
    double first[MAX_STREAMS]; /* s from the request to its first token */
};

static const char *products = "float32";
/* "return": [] in every request, or (--answer) nothing said: the
 * default answer about the finished sequence */
static bool answer = false;

static bool run_count(const struct server *s, int n, size_t tokens,
                      uint64_t *rng, struct measure *m)
{
    static struct timed_stream st[MAX_STREAMS];
    pthread_t t[MAX_STREAMS];
    for (int i = 0; i < n; i++) {
        memset(&st[i], 0, sizeof st[i]);
        st[i].s = s;
        size_t len = (size_t)snprintf(st[i].body, sizeof st[i].body,
                                      "{\"model\":\"llama\",\"prompt\":\"");
        const size_t prompt_words = 4 + next_random(rng) % 8;
        for (size_t w = 0; w < prompt_words; w++)
            len += (size_t)snprintf(
                st[i].body + len, sizeof st[i].body - len, "%s%s", w ? " " : "",
                words[next_random(rng) % (sizeof words / sizeof *words)]);
        snprintf(st[i].body + len, sizeof st[i].body - len,
                 "\",\"max_new_tokens\":%zu,\"products\":\"%s\"%s}", tokens,
                 products, answer ? "" : ",\"return\":[]");
    }
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, run_stream, &st[i]);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    double first = st[0].sent, last = st[0].done, decode = 0;
    size_t all = 0;
    for (int i = 0; i < n; i++) {
        if (st[i].status != 200 || st[i].tokens != tokens) {
            fprintf(stderr,
                    "bench_streams: stream %d of %d: status %ld, %zu of %zu "
                    "tokens\n",
                    i, n, st[i].status, st[i].tokens, tokens);
            return false;
        }
        first = st[i].sent < first ? st[i].sent : first;
        last = st[i].done > last ? st[i].done : last;
        all += st[i].tokens;
        double gaps[MAX_TOKENS];
        for (size_t k = 1; k < st[i].tokens; k++)
            gaps[k - 1] = st[i].token_at[k] - st[i].token_at[k - 1];
        decode += (double)(st[i].tokens - 1) /
                  (st[i].token_at[st[i].tokens - 1] - st[i].token_at[0]);
        m->first[i] = st[i].token_at[0] - st[i].sent;
        m->median[i] = quantile(gaps, st[i].tokens - 1, 0.5);
        m->p99[i] = quantile(gaps, st[i].tokens - 1, 0.99);
    }
    m->total_rate = (double)all / (last - first);
    m->decode_rate = decode;
    return true;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *json = NULL;
    int rounds = 3;
    size_t tokens = 128;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            tokens = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--products") && i + 1 < argc)
            products = argv[++i];
        else if (!strcmp(argv[i], "--answer"))
            answer = true;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (argv[i][0] != '-')
            dir = argv[i];
    }
    if (!dir || rounds < 1 || rounds > MAX_ROUNDS || tokens < 2 ||
        tokens > MAX_TOKENS) {
        fprintf(stderr,
                "usage: %s DIR [--rounds R (1-%d)] [--tokens T (2-%d)] "
                "[--products float32|bfloat16] [--answer] [--json FILE]\n",
                argv[0], MAX_ROUNDS, MAX_TOKENS);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char model[1024];
    snprintf(model, sizeof model, "llama=%s", dir);
    const char *args[] = {"--quiet", "--model", model, NULL};
    struct server s;
    if (!server_start(&s, args)) {
        fprintf(stderr, "bench_streams: the server did not start\n");
        return 1;
    }
    char core[80];
    server_blas_core(&s, core, sizeof core);
    printf("streams: %s, %zu greedy tokens a stream after a prompt of 4-11 "
           "words, %s products, %s, %d rounds (server's OpenBLAS core: %s)\n",
           dir, tokens, products,
           answer ? "each ending with the default answer on the finished "
                    "sequence"
                  : "\"return\": [] (the generation alone)",
           rounds, core);
    uint64_t rng = 20261128;
    static struct measure m[MAX_ROUNDS][N_COUNTS];
    // one untimed stream: the weights into memory
    struct measure warm;
    bool ok = run_count(&s, 1, 8, &rng, &warm);
    for (int r = 0; ok && r < rounds; r++)
        for (int c = 0; ok && c < N_COUNTS; c++)
            ok = run_count(&s, counts[c], tokens, &rng, &m[r][c]);
    const int stop = server_stop(&s, 30);
    if (!ok)
        return 1;
    printf("  %7s %12s %10s %13s %17s %17s %16s\n", "streams", "tokens/s",
           "vs one", "decoding t/s", "median ms/token", "p99 ms/token",
           "first token ms");
    FILE *out = json ? fopen(json, "w") : NULL;
    if (out)
        fprintf(out,
                "{\"checkpoint\":\"%s\",\"tokens\":%zu,\"rounds\":%d,"
                "\"products\":\"%s\",\"answer\":%s,\"blas_core\":\"%s\","
                "\"counts\":[",
                dir, tokens, rounds, products, answer ? "true" : "false", core);
    double one = 0;
    for (int c = 0; c < N_COUNTS; c++) {
        const int n = counts[c];
        double total[MAX_ROUNDS], decode[MAX_ROUNDS], ratio[MAX_ROUNDS];
        double med[MAX_ROUNDS * MAX_STREAMS], p99[MAX_ROUNDS * MAX_STREAMS],
            first[MAX_ROUNDS * MAX_STREAMS];
        size_t k = 0;
        for (int r = 0; r < rounds; r++) {
            total[r] = m[r][c].total_rate;
            decode[r] = m[r][c].decode_rate;
            ratio[r] = m[r][c].total_rate / m[r][0].total_rate;
            for (int i = 0; i < n; i++, k++) {
                med[k] = m[r][c].median[i];
                p99[k] = m[r][c].p99[i];
                first[k] = m[r][c].first[i];
            }
        }
        const double t = quantile(total, (size_t)rounds, 0.5);
        const double d = quantile(decode, (size_t)rounds, 0.5);
        const double x = quantile(ratio, (size_t)rounds, 0.5);
        // each stream's median and p99: their medians, and the worst
        const double med_mid = quantile(med, k, 0.5);
        const double med_max = k ? med[k - 1] : 0;
        const double p99_mid = quantile(p99, k, 0.5);
        const double p99_max = k ? p99[k - 1] : 0;
        // time to the first token (the prompt's): the median stream's
        const double first_mid = quantile(first, k, 0.5);
        one = c == 0 ? t : one;
        printf("  %7d %12.2f %9.2fx %13.2f %8.1f (max %5.1f) %8.1f (max "
               "%5.1f) %16.0f\n",
               n, t, x, d, med_mid * 1e3, med_max * 1e3, p99_mid * 1e3,
               p99_max * 1e3, first_mid * 1e3);
        if (out)
            fprintf(out,
                    "%s{\"streams\":%d,\"tokens_per_s\":%.3f,\"vs_one\":%.3f,"
                    "\"decoding_tokens_per_s\":%.3f,\"median_ms\":%.2f,"
                    "\"median_ms_worst\":%.2f,\"p99_ms\":%.2f,"
                    "\"p99_ms_worst\":%.2f,\"first_token_ms\":%.1f}",
                    c ? "," : "", n, t, x, d, med_mid * 1e3, med_max * 1e3,
                    p99_mid * 1e3, p99_max * 1e3, first_mid * 1e3);
    }
    (void)one;
    double eight[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        eight[r] = m[r][3].total_rate / m[r][0].total_rate;
    const double x8 = quantile(eight, (size_t)rounds, 0.5);
    printf("  8 streams: %.2fx the tokens/s of one (target >= 4): %s\n", x8,
           x8 >= 4.0 ? "met" : "NOT MET");
    if (out) {
        fprintf(out, "],\"eight_vs_one\":%.3f}\n", x8);
        fclose(out);
    }
    curl_global_cleanup();
    return stop == 0 ? 0 : 1;
}
