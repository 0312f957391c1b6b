/*
 * test_generate.c - POST /generate on the real binary: the stream read as
 * a client reads it (Server-Sent Events, and NDJSON), greedy tokens
 * against the float64 reference's for more than one family, seeded
 * sampling, what ends a generation (length, a stop string, an EOS), the
 * finished sequence's answer, what is refused before the stream starts,
 * and a client that goes away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct server srv;
static char eos_dir[] = "/tmp/attnd-eos-XXXXXX";

/* tests/models/llama3 again, with a generation_config.json that makes
 * its greedy first token (after the golden's prompt) an end of
 * sequence. */
static void make_eos_copy(unsigned eos)
{
    char config[128];
    snprintf(config, sizeof config,
             "{\"eos_token_id\": [%u], \"max_length\": 100}\n", eos);
    assert_true(
        model_folder_with("llama3", eos_dir, "generation_config.json", config));
}

static cJSON *golden(const char *variant)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    const long len = ftell(fp);
    rewind(fp);
    char *text = malloc((size_t)len + 1);
    assert_int_equal(fread(text, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    text[len] = '\0';
    cJSON *g = cJSON_Parse(text);
    free(text);
    assert_non_null(g);
    return g;
}

static int setup(void **state)
{
    (void)state;
    cJSON *g = golden("llama3");
    const unsigned first =
        (unsigned)cJSON_GetArrayItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(g, "greedy"), "new"), 0)
            ->valueint;
    cJSON_Delete(g);
    make_eos_copy(first);
    char eos_model[200];
    snprintf(eos_model, sizeof eos_model, "eos=%s", eos_dir);
    const char *const args[] = {"--model", "llama3=tests/models/llama3",
                                "--model", "mistral=tests/models/mistral",
                                "--model", "qwen3=tests/models/qwen3",
                                "--model", "gpt2=tests/models/gpt2",
                                "--model", "gemma2=tests/models/gemma2",
                                "--model", "gemma3=tests/models/gemma3",
                                "--model", "wide=tests/models/llama_16x32",
                                "--model", "bert=tests/models/f32",
                                "--model", eos_model,
                                "--model", "phi35=tests/models/phi3_longrope",
                                NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const int rc = server_stop(&srv, 10.0);
    model_folder_remove(eos_dir);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------ a client */

/* POST body to /generate on server on; the status, the content type and
 * the body. */
static long generate_on(const struct server *on, const char *body,
                        const char *accept, struct stream *s, char *type,
                        size_t type_len)
{
    return post_stream(on, "/generate", body, accept, s, type, type_len);
}

static long generate(const char *body, const char *accept, struct stream *s,
                     char *type, size_t type_len)
{
    return generate_on(&srv, body, accept, s, type, type_len);
}

/* The events of an SSE body: each block's "event:" and its "data:"
 * parsed. */
struct event {
    char kind[16];
    cJSON *data;
};

static size_t parse_sse(char *body, struct event *out, size_t max)
{
    size_t n = 0;
    for (char *block = body; block && *block && n < max;) {
        char *end = strstr(block, "\n\n");
        if (!end)
            fail_msg("an event without its blank line: %.200s", block);
        *end = '\0';
        char *ev = strstr(block, "event: "), *data = strstr(block, "\ndata: ");
        if (!ev || !data || ev != block)
            fail_msg("not an event: %.200s", block);
        *data = '\0';
        snprintf(out[n].kind, sizeof out[n].kind, "%s", ev + 7);
        out[n].data = cJSON_Parse(data + 7);
        if (!out[n].data)
            fail_msg("event %s: its data is not JSON", out[n].kind);
        n++;
        block = end + 2;
    }
    return n;
}

static size_t parse_ndjson(char *body, struct event *out, size_t max)
{
    size_t n = 0;
    for (char *line = body; line && *line && n < max;) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        *end = '\0';
        out[n].data = cJSON_Parse(line);
        assert_non_null(out[n].data);
        const cJSON *kind = cJSON_GetObjectItem(out[n].data, "event");
        assert_true(cJSON_IsString(kind));
        snprintf(out[n].kind, sizeof out[n].kind, "%s", kind->valuestring);
        n++;
        line = end + 1;
    }
    return n;
}

static void free_events(struct event *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(e[i].data);
}

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        fail_msg("no \"%s\"", key);
    return v;
}

/* A body asking for the golden's greedy continuation of variant. */
static char *greedy_body(const cJSON *g, const char *variant, const char *more)
{
    const cJSON *c0 = cJSON_GetArrayItem(get(g, "cases"), 0);
    char *sentence = cJSON_PrintUnformatted(get(c0, "sentence"));
    const int n = cJSON_GetArraySize(get(get(g, "greedy"), "new"));
    char *body = malloc(strlen(sentence) + 256 + (more ? strlen(more) : 0));
    sprintf(body, "{\"model\":\"%s\",\"prompt\":%s,\"max_new_tokens\":%d%s}",
            variant, sentence, n, more ? more : "");
    free(sentence);
    return body;
}

/* ------------------------------------------------------------ tests */

enum { MAX_EVENTS = 64 };

/* Greedy tokens, one event each, are the float64 reference's; the done
 * event holds the whole sequence and its attention as /attention gives
 * it. */
static void test_greedy_streams_the_reference(void **state)
{
    (void)state;
    // Gemma 2's logits soft-capped, Gemma 3's layers of two kinds, each
    // through the cache
    const char *variants[] = {"llama3", "mistral", "qwen3",
                              "gpt2",   "gemma2",  "gemma3"};
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        cJSON *g = golden(variants[v]);
        const cJSON *want = get(get(g, "greedy"), "new");
        const cJSON *prompt = get(get(g, "greedy"), "prompt");
        const int n_new = cJSON_GetArraySize(want);
        const int n_prompt = cJSON_GetArraySize(prompt);
        char *body = greedy_body(g, variants[v], NULL);
        struct stream s = {0};
        char type[128];
        assert_int_equal(generate(body, NULL, &s, type, sizeof type), 200);
        assert_string_equal(type, "text/event-stream");
        struct event e[MAX_EVENTS];
        const size_t n = parse_sse(s.data, e, MAX_EVENTS);
        assert_int_equal(n, (size_t)n_new + 1);
        for (int t = 0; t < n_new; t++) {
            assert_string_equal(e[t].kind, "token");
            assert_int_equal(get(e[t].data, "index")->valueint, t);
            if (get(e[t].data, "token_id")->valueint !=
                cJSON_GetArrayItem(want, t)->valueint)
                fail_msg("%s: token %d is %d, want %d", variants[v], t,
                         get(e[t].data, "token_id")->valueint,
                         cJSON_GetArrayItem(want, t)->valueint);
            const cJSON *top = get(e[t].data, "top");
            assert_int_equal(cJSON_GetArraySize(top), 5);
            // greedy: the first candidate is the token
            assert_int_equal(
                get(cJSON_GetArrayItem(top, 0), "token_id")->valueint,
                get(e[t].data, "token_id")->valueint);
        }
        const cJSON *done = e[n - 1].data;
        assert_string_equal(e[n - 1].kind, "done");
        assert_int_equal(get(done, "prompt_tokens")->valueint, n_prompt);
        assert_string_equal(get(done, "finish_reason")->valuestring, "length");
        const cJSON *ids = get(done, "token_ids");
        assert_int_equal(cJSON_GetArraySize(ids), n_prompt + n_new);
        for (int i = 0; i < n_prompt + n_new; i++)
            assert_int_equal(
                cJSON_GetArrayItem(ids, i)->valueint,
                i < n_prompt
                    ? cJSON_GetArrayItem(prompt, i)->valueint
                    : cJSON_GetArrayItem(want, i - n_prompt)->valueint);
        assert_int_equal(cJSON_GetArraySize(get(done, "tokens")),
                         n_prompt + n_new);
        // [layers][heads][T][T], causal
        const cJSON *w = get(done, "weights");
        const int T = n_prompt + n_new;
        assert_int_equal(cJSON_GetArraySize(w),
                         get(get(done, "config"), "layers")->valueint);
        const cJSON *head = cJSON_GetArrayItem(cJSON_GetArrayItem(w, 0), 0);
        assert_int_equal(cJSON_GetArraySize(head), T);
        const cJSON *last = cJSON_GetArrayItem(head, T - 1);
        assert_int_equal(cJSON_GetArraySize(last), T);
        assert_true(
            cJSON_GetArrayItem(cJSON_GetArrayItem(head, 0), 1)->valuedouble ==
            0.0);
        free_events(e, n);
        free(s.data);
        free(body);
        cJSON_Delete(g);
    }
}

/* Phi-3.5's longrope across its boundary: a prompt of exactly
 * original_max_position_embeddings (12) tokens gives the float64
 * reference's next token with the short factors; the sequence then
 * outgrows the cache, runs again whole with the long factors (as
 * transformers' Phi-3 recomputes it) and goes on through the cache, to
 * the end asked for, with the whole sequence's weights at the end. */
static void test_longrope_outgrows_the_cache(void **state)
{
    (void)state;
    cJSON *g = golden("phi3_longrope");
    const cJSON *c1 = cJSON_GetArrayItem(get(g, "cases"), 1);
    const cJSON *ids = get(c1, "ids"), *logits = get(c1, "logits");
    assert_int_equal(cJSON_GetArraySize(ids), 12);
    int best = 0;
    for (int i = 1; i < cJSON_GetArraySize(logits); i++)
        if (cJSON_GetArrayItem(logits, i)->valuedouble >
            cJSON_GetArrayItem(logits, best)->valuedouble)
            best = i;
    char *sentence = cJSON_PrintUnformatted(get(c1, "sentence"));
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"phi35\",\"prompt\":%s,\"max_new_tokens\":4}",
             sentence);
    free(sentence);
    struct stream s = {0};
    char type[128];
    assert_int_equal(generate(body, NULL, &s, type, sizeof type), 200);
    struct event e[MAX_EVENTS];
    const size_t n = parse_sse(s.data, e, MAX_EVENTS);
    assert_int_equal(n, 5);
    for (size_t t = 0; t < 4; t++)
        assert_string_equal(e[t].kind, "token");
    assert_int_equal(get(e[0].data, "token_id")->valueint, best);
    const cJSON *done = e[4].data;
    assert_string_equal(e[4].kind, "done");
    assert_int_equal(get(done, "prompt_tokens")->valueint, 12);
    assert_string_equal(get(done, "finish_reason")->valuestring, "length");
    assert_int_equal(cJSON_GetArraySize(get(done, "token_ids")), 16);
    free_events(e, n);
    free(s.data);
    cJSON_Delete(g);
    // GET /models says where the switch is
    struct reply r;
    assert_true(http_call(&srv, "GET", "/models", NULL, 0, NULL, &r));
    cJSON *doc = cJSON_Parse(r.body);
    const cJSON *m;
    bool seen = false;
    cJSON_ArrayForEach(m, get(doc, "models"))
    {
        if (strcmp(get(m, "name")->valuestring, "phi35"))
            continue;
        seen = true;
        assert_string_equal(get(m, "family")->valuestring, "phi3");
        assert_string_equal(get(m, "rope_scaling")->valuestring, "longrope");
        assert_int_equal(get(m, "longrope_after")->valueint, 12);
        assert_int_equal(get(m, "rotary_dims")->valueint, 12);
        assert_false(cJSON_IsTrue(get(m, "parallel_residual")));
    }
    assert_true(seen);
    cJSON_Delete(doc);
    reply_free(&r);
}

/* The same objects one per line, each naming its kind. */
static void test_ndjson(void **state)
{
    (void)state;
    cJSON *g = golden("llama3");
    char *body = greedy_body(g, "llama3", ",\"return\":[\"mean_weights\"]");
    struct stream s = {0};
    char type[128];
    assert_int_equal(
        generate(body, "application/x-ndjson", &s, type, sizeof type), 200);
    assert_string_equal(type, "application/x-ndjson");
    struct event e[MAX_EVENTS];
    const size_t n = parse_ndjson(s.data, e, MAX_EVENTS);
    const cJSON *want = get(get(g, "greedy"), "new");
    assert_int_equal(n, (size_t)cJSON_GetArraySize(want) + 1);
    for (size_t t = 0; t + 1 < n; t++)
        assert_int_equal(get(e[t].data, "token_id")->valueint,
                         cJSON_GetArrayItem(want, (int)t)->valueint);
    assert_string_equal(e[n - 1].kind, "done");
    assert_non_null(cJSON_GetObjectItem(e[n - 1].data, "mean_weights"));
    assert_null(cJSON_GetObjectItem(e[n - 1].data, "weights"));
    free_events(e, n);
    free(s.data);
    free(body);
    cJSON_Delete(g);
}

/* The ids of a generation. */
static void generated_ids(const char *body, int *ids, int *count)
{
    struct stream s = {0};
    assert_int_equal(generate(body, "application/x-ndjson", &s, NULL, 0), 200);
    struct event e[MAX_EVENTS];
    const size_t n = parse_ndjson(s.data, e, MAX_EVENTS);
    *count = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].kind, "token"))
            ids[(*count)++] = get(e[i].data, "token_id")->valueint;
    free_events(e, n);
    free(s.data);
}

/* A seed gives the same tokens every time; another seed others. */
static void test_seeded_sampling(void **state)
{
    (void)state;
#define SAMPLED(seed)                                                          \
    "{\"model\":\"qwen3\",\"prompt\":\"The cat\",\"max_new_tokens\":12,"       \
    "\"temperature\":1.5,\"top_k\":50,\"top_p\":0.95,\"seed\":" seed           \
    ",\"return\":[]}"
    int a[16], b[16], c[16], na, nb, nc;
    generated_ids(SAMPLED("7"), a, &na);
    generated_ids(SAMPLED("7"), b, &nb);
    generated_ids(SAMPLED("8"), c, &nc);
    assert_int_equal(na, 12);
    assert_int_equal(nb, 12);
    assert_memory_equal(a, b, sizeof a[0] * 12);
    int differ = 0;
    for (int i = 0; i < 12 && i < nc; i++)
        differ += a[i] != c[i];
    assert_true(differ > 0);
}

/* A stop string, and an id generation_config.json lists, end it. */
static void test_stop_and_eos(void **state)
{
    (void)state;
    cJSON *g = golden("mistral");
    // the text of the first greedy token after the first one that is
    // letters alone (its text then is its bytes), as a stop string
    struct stream s = {0};
    char *body = greedy_body(g, "mistral", ",\"return\":[]");
    assert_int_equal(generate(body, "application/x-ndjson", &s, NULL, 0), 200);
    struct event e[MAX_EVENTS];
    size_t n = parse_ndjson(s.data, e, MAX_EVENTS);
    size_t at = 1;
    while (at + 1 < n && strspn(get(e[at].data, "text")->valuestring,
                                " abcdefghijklmnopqrstuvwxyz") !=
                             strlen(get(e[at].data, "text")->valuestring))
        at++;
    assert_true(at + 1 < n);
    char *stop = cJSON_PrintUnformatted(get(e[at].data, "text"));
    free_events(e, n);
    free(s.data);
    free(body);
    char more[256];
    snprintf(more, sizeof more, ",\"return\":[],\"stop\":[\"zzz\",%s]", stop);
    free(stop);
    body = greedy_body(g, "mistral", more);
    s = (struct stream){0};
    assert_int_equal(generate(body, "application/x-ndjson", &s, NULL, 0), 200);
    n = parse_ndjson(s.data, e, MAX_EVENTS);
    assert_true(n <= at + 2); /* at that token at the latest */
    assert_string_equal(get(e[n - 1].data, "finish_reason")->valuestring,
                        "stop");
    free_events(e, n);
    free(s.data);
    free(body);
    cJSON_Delete(g);

    g = golden("llama3");
    body = greedy_body(g, "eos", ",\"return\":[]");
    s = (struct stream){0};
    assert_int_equal(generate(body, "application/x-ndjson", &s, NULL, 0), 200);
    n = parse_ndjson(s.data, e, MAX_EVENTS);
    assert_int_equal(n, 2); /* the EOS token, then done */
    assert_string_equal(get(e[1].data, "finish_reason")->valuestring, "eos");
    free_events(e, n);
    free(s.data);
    free(body);
    cJSON_Delete(g);
}

/* What is refused is a problem+json answer before any event. */
static void test_refusals(void **state)
{
    (void)state;
    const struct {
        const char *body, *pointer;
    } cases[] = {
        {"{\"model\":\"bert\",\"prompt\":\"the cat\"}", "/model"},
        {"{\"model\":\"llama3\"}", "/prompt"},
        {"{\"prompt\":\"hi\"}", "/model"},
        {"{\"model\":\"llama3\",\"prompt\":\"hi\",\"max_new_tokens\":0}",
         "/max_new_tokens"},
        {"{\"model\":\"gpt2\",\"prompt\":\"hi\",\"max_new_tokens\":100}",
         "/max_new_tokens"},
        {"{\"model\":\"gpt2\",\"prompt\":\"hi\",\"max_new_tokens\":64}",
         "/max_new_tokens"},
        {"{\"model\":\"llama3\",\"prompt\":\"hi\",\"temperature\":-1}",
         "/temperature"},
        {"{\"model\":\"llama3\",\"prompt\":\"hi\",\"top_p\":0}", "/top_p"},
        {"{\"model\":\"llama3\",\"prompt\":\"hi\",\"stop\":[\"\"]}", "/stop/0"},
        {"{\"model\":\"llama3\",\"prompt\":\"hi\",\"layer\":0}", "/layer"},
        {"{\"model\":\"llama3\",\"prompt\":7}", "/prompt"},
        {"{\"model\":\"llama3\",\"prompt\":\"hi\",\"return\":[\"q\"]}",
         "/return/0"},
        // the finished sequence's weights, at its longest: 2 layers x 4
        // heads x 4096 x 4096 numbers, twice --max-output's 2^26
        {"{\"model\":\"llama3\",\"prompt\":\"hi\",\"max_new_tokens\":4093,"
         "\"return\":[\"weights\"]}",
         "/return"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct stream s = {0};
        char type[128];
        const long status =
            generate(cases[i].body, NULL, &s, type, sizeof type);
        if (status != 422)
            fail_msg("%s: %ld %.300s", cases[i].body, status, s.data);
        assert_string_equal(type, "application/problem+json");
        cJSON *p = cJSON_Parse(s.data);
        assert_string_equal(get(p, "pointer")->valuestring, cases[i].pointer);
        cJSON_Delete(p);
        free(s.data);
    }
    // an empty prompt: its detail names the prompt, as its pointer does
    struct stream s = {0};
    assert_int_equal(generate("{\"model\":\"llama3\",\"prompt\":\"\","
                              "\"add_special_tokens\":false}",
                              NULL, &s, NULL, 0),
                     422);
    assert_non_null(strstr(s.data, "\"prompt gives no tokens"));
    free(s.data);
}

/* A body over 1 MiB is refused before it is decoded. */
static void test_body_cap(void **state)
{
    (void)state;
    const size_t big = ((size_t)1 << 20) + 10;
    char *body = malloc(big + 64);
    size_t len = (size_t)sprintf(body, "{\"model\":\"llama3\",\"prompt\":\"");
    memset(body + len, 'a', big);
    strcpy(body + len + big, "\"}");
    struct stream s = {0};
    assert_int_equal(generate(body, NULL, &s, NULL, 0), 413);
    assert_non_null(strstr(s.data, "1 MiB"));
    free(s.data);
    free(body);
}

/* The longest generation the model's positions allow: GPT-2's 64, every
 * position filled, its whole sequence's weights in the done event. */
static void test_largest_allowed(void **state)
{
    (void)state;
    struct stream s = {0};
    // "hi" is two tokens of gpt2's vocabulary
    assert_int_equal(generate("{\"model\":\"gpt2\",\"prompt\":\"hi\","
                              "\"max_new_tokens\":62,\"temperature\":1,"
                              "\"seed\":3}",
                              "application/x-ndjson", &s, NULL, 0),
                     200);
    struct event e[MAX_EVENTS + 8];
    const size_t n = parse_ndjson(s.data, e, MAX_EVENTS + 8);
    const cJSON *done = e[n - 1].data;
    assert_string_equal(e[n - 1].kind, "done");
    const int T = cJSON_GetArraySize(get(done, "token_ids"));
    assert_int_equal(get(done, "prompt_tokens")->valueint, 2);
    if (!strcmp(get(done, "finish_reason")->valuestring, "length"))
        assert_int_equal(T, 64);
    const cJSON *head =
        cJSON_GetArrayItem(cJSON_GetArrayItem(get(done, "weights"), 1), 3);
    assert_int_equal(cJSON_GetArraySize(head), T);
    free_events(e, n);
    free(s.data);
}

static double metric(const char *name)
{
    struct reply r;
    assert_true(http_call(&srv, "GET", "/metrics", NULL, 0, NULL, &r));
    // the sample's line, not its HELP or TYPE line
    char line[128];
    snprintf(line, sizeof line, "\n%s ", name);
    const char *at = strstr(r.body, line);
    const double v = at ? strtod(at + strlen(line), NULL) : -1;
    reply_free(&r);
    return v;
}

/* A client that hangs up after the first token stops the generation:
 * far fewer tokens are made than asked for, and /metrics counts it. */
static void test_disconnect_stops_it(void **state)
{
    (void)state;
    const double before = metric("attnd_generations_abandoned_total");
    const double tokens0 = metric("attnd_generated_token_seconds_count");
    struct stream s = {.stop_after = 1};
    generate("{\"model\":\"wide\",\"prompt\":\"The cat\","
             "\"max_new_tokens\":4000,\"return\":[]}",
             NULL, &s, NULL, 0);
    free(s.data);
    double abandoned = before;
    for (int i = 0; i < 200 && abandoned == before; i++) {
        pause_ms(25);
        abandoned = metric("attnd_generations_abandoned_total");
    }
    assert_true(abandoned == before + 1);
    const double made = metric("attnd_generated_token_seconds_count") - tokens0;
    assert_true(made >= 1 && made < 4000);
    // and the server goes on
    struct stream ok = {0};
    assert_int_equal(generate("{\"model\":\"llama3\",\"prompt\":\"hi\","
                              "\"max_new_tokens\":2,\"return\":[]}",
                              NULL, &ok, NULL, 0),
                     200);
    free(ok.data);
}

struct drained {
    struct server s;
    struct stream body;
    long status;
};

static void *generate_long(void *arg)
{
    struct drained *d = arg;
    d->status = generate_on(&d->s,
                            "{\"model\":\"wide\",\"prompt\":\"The cat\","
                            "\"max_new_tokens\":4000,\"return\":[]}",
                            "application/x-ndjson", &d->body, NULL, 0);
    return NULL;
}

/* SIGTERM lets a generation go on for --drain-seconds, then ends it with
 * an error event; the server then stops cleanly. */
static void test_drain_ends_it(void **state)
{
    (void)state;
    struct drained d = {0};
    const char *const args[] = {"--model", "wide=tests/models/llama_16x32",
                                "--drain-seconds", "1", NULL};
    assert_true(server_start(&d.s, args));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, generate_long, &d), 0);
    pause_ms(300);
    assert_int_equal(server_stop(&d.s, 10.0), 0);
    pthread_join(t, NULL);
    assert_int_equal(d.status, 200);
    struct event e[4096];
    const size_t n = parse_ndjson(d.body.data, e, 4096);
    assert_true(n >= 2 && n < 4000);
    assert_string_equal(e[n - 1].kind, "error");
    assert_int_equal(get(e[n - 1].data, "status")->valueint, 503);
    assert_non_null(
        strstr(get(e[n - 1].data, "detail")->valuestring, "stopping"));
    free_events(e, n);
    free(d.body.data);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_streams_the_reference),
        cmocka_unit_test(test_ndjson),
        cmocka_unit_test(test_longrope_outgrows_the_cache),
        cmocka_unit_test(test_seeded_sampling),
        cmocka_unit_test(test_stop_and_eos),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_largest_allowed),
        cmocka_unit_test(test_body_cap),
        cmocka_unit_test(test_disconnect_stops_it),
        cmocka_unit_test(test_drain_ends_it),
    };
    const int failed = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return failed;
}
