/*
 * test_interventions.c - ablation, direct logit attribution and POST
 * /patch on the real binary: the answers against the float64 reference
 * (tests/models/golden/interventions/) where a text gives its ids, the
 * invariants of a causal model where it does not (a position before the
 * one the texts differ at carries nothing to patch), the two endpoints
 * against each other, the progress stream, the image, every refusal
 * naming its field, the largest patch the limits allow, and a client
 * that goes away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decoded_png.h"
#include "harness.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct server srv;

/* Texts of llama3's tokenizer that differ in one token, at position 4
 * (after its BOS): " cat" and " dog" are each one token. */
#define CLEAN "the cat sat on the mat"
#define CORRUPTED "the dog sat on the mat"
#define DIFFER_AT 3

static int setup(void **state)
{
    (void)state;
    const char *const args[] = {
        "--model", "llama3=tests/models/llama3",
        "--model", "gpt2=tests/models/gpt2",
        "--model", "qwen3=tests/models/qwen3",
        "--model", "wide=tests/models/llama_32x32",
        "--model", "bert=tests/models/f32",
        "--model", "phi3_longrope=tests/models/phi3_longrope",
        NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10) == 0 ? 0 : -1;
}

static cJSON *golden(const char *path)
{
    size_t len;
    char *text = read_file(path, &len);
    assert_non_null(text);
    cJSON *g = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(g);
    return g;
}

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        fail_msg("no \"%s\" in the answer", key);
    return v;
}

/* POST a body to path; the answer parsed (status 200 expected). */
static cJSON *post_ok(const char *path, const char *body)
{
    struct reply r;
    assert_true(post_json(&srv, path, body, &r));
    if (r.status != 200)
        fail_msg("%s: %ld %s", path, r.status, r.body);
    cJSON *j = cJSON_ParseWithLength(r.body, r.len);
    reply_free(&r);
    assert_non_null(j);
    return j;
}

/* POST a body that must be refused with status, its problem's pointer
 * and a word of its detail. */
static void refused(const char *path, const char *body, long status,
                    const char *pointer, const char *word)
{
    struct reply r;
    assert_true(post_json(&srv, path, body, &r));
    cJSON *j = cJSON_ParseWithLength(r.body, r.len);
    if (r.status != status || !j ||
        strcmp(get(j, "pointer")->valuestring, pointer) ||
        !strstr(get(j, "detail")->valuestring, word))
        fail_msg("%s %s: want %ld at %s with \"%s\", got %ld %s", path, body,
                 status, pointer, word, r.status, r.body);
    cJSON_Delete(j);
    reply_free(&r);
}

/* A variant's goldens: the model's (its sentences) in *g, the
 * interventions' in *gi. */
static void goldens_of(const char *variant, cJSON **g, cJSON **gi)
{
    char path[128];
    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    *g = golden(path);
    snprintf(path, sizeof path, "tests/models/golden/interventions/%s.json",
             variant);
    *gi = golden(path);
}

/* ------------------------------------------------------------- ablation */

/* The golden case whose ids are the greedy prompt's. */
static const cJSON *case_of_prompt(const cJSON *g, const cJSON *prompt)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, get(g, "cases"))
    {
        if (cJSON_Compare(get(c, "ids"), prompt, true))
            return c;
    }
    fail_msg("no case has the greedy prompt's ids");
    return NULL;
}

/* Each token event's candidates against softmax of the reference's
 * logits at that step (a longrope golden's: the tokens alone need not
 * show which factors made them), each log-probability within 1e-2. */
static void check_step_probabilities(const char *variant, const char *body,
                                     const cJSON *logits, int steps)
{
    const int vocab = cJSON_GetArraySize(logits) / steps;
    int step = 0;
    for (const char *line = body; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        cJSON *e = cJSON_Parse(line);
        assert_non_null(e);
        if (strcmp(get(e, "event")->valuestring, "token")) {
            cJSON_Delete(e);
            continue;
        }
        assert_true(step < steps);
        const cJSON *row = NULL;
        double top = -INFINITY, sum = 0.0;
        for (int v = 0; v < vocab; v++) {
            row = cJSON_GetArrayItem(logits, step * vocab + v);
            top = row->valuedouble > top ? row->valuedouble : top;
        }
        for (int v = 0; v < vocab; v++)
            sum +=
                exp(cJSON_GetArrayItem(logits, step * vocab + v)->valuedouble -
                    top);
        const cJSON *c;
        cJSON_ArrayForEach(c, get(e, "top"))
        {
            const int id = get(c, "token_id")->valueint;
            row = cJSON_GetArrayItem(logits, step * vocab + id);
            const double want = exp(row->valuedouble - top) / sum;
            const double p = get(c, "p")->valuedouble;
            // the candidates past the first are 1e-8 to 1e-11 likely:
            // their logs, as the logits, within float32's rounding
            if (!(p > 0 && fabs(log(p) - log(want)) <= 1e-2))
                fail_msg("%s: step %d, token %d: p %.9g, want %.9g", variant,
                         step, id, p, want);
        }
        step++;
        cJSON_Delete(e);
    }
    assert_int_equal(step, steps);
}

/* /generate with a golden's ablation makes the reference's greedy tokens
 * (each step at least 1e-3 from a tie): the prompt, then each token
 * through the KV cache, a mean the prompt's. Phi-3.5's prompt is of
 * its original length: the second token takes the sequence past it, and
 * the whole sequence runs again with the long factors, its means the
 * prompt's again; there each step's probabilities are held too. */
static void test_generate_ablated(void **state)
{
    (void)state;
    static const char *const variants[] = {"llama3", "gpt2", "qwen3",
                                           "phi3_longrope"};
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        cJSON *g, *gi;
        goldens_of(variants[v], &g, &gi);
        const cJSON *greedy = get(gi, "greedy_ablated");
        const cJSON *want = get(greedy, "new");
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "model", variants[v]);
        cJSON_AddStringToObject(
            body, "prompt",
            get(case_of_prompt(g, get(greedy, "prompt")), "sentence")
                ->valuestring);
        cJSON_AddNumberToObject(body, "precision", 9);
        cJSON_AddNumberToObject(body, "max_new_tokens",
                                cJSON_GetArraySize(want));
        cJSON_AddItemToObject(body, "ablate",
                              cJSON_Duplicate(get(greedy, "ablate"), true));
        cJSON_AddItemToObject(body, "return", cJSON_CreateArray());
        char *text = cJSON_PrintUnformatted(body);
        const char *const headers[] = {"Content-Type: application/json",
                                       "Accept: application/x-ndjson", NULL};
        struct reply r;
        assert_true(http_call(&srv, "POST", "/generate", text, strlen(text),
                              headers, &r));
        assert_int_equal(r.status, 200);
        // the last line is the done event, with the whole sequence
        char *last = r.body + r.len - 1;
        while (last > r.body && last[-1] != '\n')
            last--;
        cJSON *done = cJSON_Parse(last);
        assert_non_null(done);
        const cJSON *ids = get(done, "token_ids");
        const int prompt = get(done, "prompt_tokens")->valueint;
        assert_int_equal(prompt, cJSON_GetArraySize(get(greedy, "prompt")));
        if (cJSON_GetObjectItem(greedy, "logits"))
            check_step_probabilities(variants[v], r.body, get(greedy, "logits"),
                                     cJSON_GetArraySize(want));
        for (int i = 0; i < cJSON_GetArraySize(want); i++)
            if (cJSON_GetArrayItem(ids, prompt + i)->valueint !=
                cJSON_GetArrayItem(want, i)->valueint)
                fail_msg("%s: ablated token %d is %d, want %d", variants[v], i,
                         cJSON_GetArrayItem(ids, prompt + i)->valueint,
                         cJSON_GetArrayItem(want, i)->valueint);
        // the echo: head and positions filled in
        const cJSON *echo = get(get(done, "config"), "ablate");
        assert_int_equal(cJSON_GetArraySize(echo),
                         cJSON_GetArraySize(get(greedy, "ablate")));
        assert_string_equal(
            get(cJSON_GetArrayItem(echo, 0), "positions")->valuestring, "all");
        cJSON_Delete(done);
        reply_free(&r);
        free(text);
        cJSON_Delete(body);
        cJSON_Delete(gi);
        cJSON_Delete(g);
    }
}

/* An ablated head leaves its own layer's weights as they were (they come
 * before its values) and moves the next layer's; an empty ablation
 * changes nothing. */
static void test_ablation_moves_later_layers(void **state)
{
    (void)state;
    cJSON *plain = post_ok("/attention", "{\"model\":\"llama3\",\"sentence\":"
                                         "\"" CLEAN "\"}");
    cJSON *ablated = post_ok(
        "/attention",
        "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"ablate\":"
        "[{\"layer\":0,\"head\":1,\"mode\":\"zero\",\"positions\":[2,5]}]}");
    const cJSON *w0 = get(plain, "weights"), *w1 = get(ablated, "weights");
    char *l0a = cJSON_PrintUnformatted(cJSON_GetArrayItem(w0, 0));
    char *l0b = cJSON_PrintUnformatted(cJSON_GetArrayItem(w1, 0));
    char *l1a = cJSON_PrintUnformatted(cJSON_GetArrayItem(w0, 1));
    char *l1b = cJSON_PrintUnformatted(cJSON_GetArrayItem(w1, 1));
    assert_string_equal(l0a, l0b);
    assert_string_not_equal(l1a, l1b);
    const cJSON *echo =
        cJSON_GetArrayItem(get(get(ablated, "config"), "ablate"), 0);
    assert_int_equal(get(echo, "head")->valueint, 1);
    assert_string_equal(get(echo, "mode")->valuestring, "zero");
    assert_int_equal(cJSON_GetArraySize(get(echo, "positions")), 2);
    assert_null(cJSON_GetObjectItem(get(plain, "config"), "ablate"));
    free(l0a);
    free(l0b);
    free(l1a);
    free(l1b);
    cJSON_Delete(plain);
    cJSON_Delete(ablated);
}

/* ------------------------------------------------------------------ dla */

/* dla on the golden's text: every part within 1e-4 of the reference, and
 * the parts add up to the logit difference. */
static void test_dla_matches_the_reference(void **state)
{
    (void)state;
    static const char *const variants[] = {"llama3", "gpt2"};
    for (size_t v = 0; v < 2; v++) {
        cJSON *g, *gi;
        goldens_of(variants[v], &g, &gi);
        const cJSON *want = cJSON_GetArrayItem(get(gi, "dla"), 0);
        const cJSON *target = get(want, "target");
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"model\":\"%s\",\"sentence\":\"%s\",\"return\":[\"dla\"],"
                 "\"dla_target\":[%d,%d]}",
                 variants[v],
                 get(cJSON_GetArrayItem(get(g, "cases"), 0), "sentence")
                     ->valuestring,
                 cJSON_GetArrayItem(target, 0)->valueint,
                 cJSON_GetArrayItem(target, 1)->valueint);
        cJSON *a = post_ok("/attention", body);
        const cJSON *dla = get(a, "dla");
        const cJSON *heads = get(dla, "heads"), *wheads = get(want, "heads");
        double sum =
            get(dla, "embed")->valuedouble + get(dla, "bias")->valuedouble;
        const int H = cJSON_GetArraySize(cJSON_GetArrayItem(heads, 0));
        for (int l = 0; l < cJSON_GetArraySize(heads); l++) {
            for (int h = 0; h < H; h++) {
                const double got =
                    cJSON_GetArrayItem(cJSON_GetArrayItem(heads, l), h)
                        ->valuedouble;
                const double ref =
                    cJSON_GetArrayItem(wheads, l * H + h)->valuedouble;
                if (!(fabs(got - ref) <= 1e-4))
                    fail_msg("%s dla head %d.%d: %.9g, want %.9g", variants[v],
                             l, h, got, ref);
                sum += got;
            }
            sum += cJSON_GetArrayItem(get(dla, "mlp"), l)->valuedouble;
            const cJSON *bias = cJSON_GetObjectItem(dla, "attn_bias");
            if (bias)
                sum += cJSON_GetArrayItem(bias, l)->valuedouble;
        }
        const double logit = get(dla, "logit")->valuedouble;
        assert_true(fabs(logit - get(want, "logit")->valuedouble) <= 1e-4);
        assert_true(fabs(sum - logit) <= 1e-4 * fmax(1.0, fabs(logit)));
        // GPT-2's output biases have their parts; LLaMA has none
        assert_int_equal(cJSON_GetObjectItem(dla, "attn_bias") != NULL,
                         !strcmp(variants[v], "gpt2"));
        cJSON_Delete(a);
        cJSON_Delete(gi);
        cJSON_Delete(g);
    }
}

/* ---------------------------------------------------------------- patch */

static const char *patch_body(const char *model, const char *over,
                              const char *direction, char *out, size_t cap)
{
    snprintf(out, cap,
             "{\"model\":\"%s\",\"clean\":\"" CLEAN
             "\",\"corrupted\":\"" CORRUPTED
             "\",\"metric\":{\"kind\":\"logit_diff\",\"correct\":5,"
             "\"incorrect\":7},\"over\":\"%s\",\"direction\":\"%s\"}",
             model, over, direction);
    return out;
}

static double number_at(const cJSON *arr, int i, int j)
{
    const cJSON *row = cJSON_GetArrayItem(arr, i);
    return cJSON_GetArrayItem(row, j)->valuedouble;
}

/* Under a causal model a position before the one the texts differ at is
 * the same in both runs at every layer: patching it does nothing (0
 * denoising, 1 noising). The residual at layer 0 where they differ is
 * the whole difference: 1 denoising, 0 noising. Each over's shape. */
static void test_patch_invariants(void **state)
{
    (void)state;
    static const char *const overs[] = {"heads", "heads_positions", "residual",
                                        "layers"};
    static const char *const dirs[] = {"denoise", "noise"};
    for (int o = 0; o < 4; o++)
        for (int d = 0; d < 2; d++) {
            char body[512];
            cJSON *a = post_ok("/patch", patch_body("llama3", overs[o], dirs[d],
                                                    body, sizeof body));
            const double idle = d ? 1.0 : 0.0;
            const cJSON *e = get(a, "effects");
            assert_int_equal(get(a, "runs")->valueint, o == 0   ? 8
                                                       : o == 1 ? 64
                                                       : o == 2 ? 16
                                                                : 32);
            assert_string_equal(get(a, "over")->valuestring, overs[o]);
            const int n = cJSON_GetArraySize(get(get(a, "clean"), "token_ids"));
            assert_int_equal(n, 8);
            if (o == 2) {
                for (int l = 0; l < 2; l++)
                    for (int i = 0; i < DIFFER_AT; i++)
                        assert_true(fabs(number_at(e, l, i) - idle) <= 1e-5);
                assert_true(fabs(number_at(e, 0, DIFFER_AT) - (1 - idle)) <=
                            1e-5);
            } else if (o == 1) {
                for (int l = 0; l < 2; l++)
                    for (int h = 0; h < 4; h++)
                        for (int i = 0; i < DIFFER_AT; i++)
                            assert_true(
                                fabs(cJSON_GetArrayItem(
                                         cJSON_GetArrayItem(
                                             cJSON_GetArrayItem(e, l), h),
                                         i)
                                         ->valuedouble -
                                     idle) <= 1e-5);
            } else if (o == 3) {
                for (int l = 0; l < 2; l++)
                    for (int i = 0; i < DIFFER_AT; i++) {
                        assert_true(fabs(number_at(get(e, "attn"), l, i) -
                                         idle) <= 1e-5);
                        assert_true(fabs(number_at(get(e, "mlp"), l, i) -
                                         idle) <= 1e-5);
                    }
            } else {
                assert_int_equal(cJSON_GetArraySize(e), 2);
                assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(e, 0)),
                                 4);
            }
            assert_int_equal(cJSON_GetArraySize(get(a, "warnings")), 0);
            cJSON_Delete(a);
        }
}

/* The metric of the two runs is the logit difference direct logit
 * attribution adds up to on the same text. */
static void test_patch_metric_is_the_logit_difference(void **state)
{
    (void)state;
    char body[512];
    cJSON *a = post_ok(
        "/patch", patch_body("gpt2", "heads", "denoise", body, sizeof body));
    const cJSON *metric = get(a, "metric");
    for (int k = 0; k < 2; k++) {
        snprintf(body, sizeof body,
                 "{\"model\":\"gpt2\",\"sentence\":\"%s\",\"return\":[\"dla\"],"
                 "\"dla_target\":[5,7]}",
                 k ? CORRUPTED : CLEAN);
        cJSON *d = post_ok("/attention", body);
        const double logit = get(get(d, "dla"), "logit")->valuedouble;
        const double m = get(metric, k ? "corrupted" : "clean")->valuedouble;
        if (!(fabs(logit - m) <= 1e-4 * fmax(1.0, fabs(m))))
            fail_msg("%s: patch's metric %.9g, dla's logit %.9g",
                     k ? "corrupted" : "clean", m, logit);
        cJSON_Delete(d);
    }
    cJSON_Delete(a);
}

/* The same texts both ways: nothing to normalise by, effects null, a
 * warning says why. */
static void test_patch_without_a_difference(void **state)
{
    (void)state;
    cJSON *a = post_ok(
        "/patch",
        "{\"model\":\"llama3\",\"clean\":\"" CLEAN "\",\"corrupted\":"
        "\"" CLEAN "\",\"metric\":{\"kind\":\"logprob\",\"target\":5}}");
    assert_true(cJSON_IsNull(get(a, "effects")));
    const cJSON *w = cJSON_GetArrayItem(get(a, "warnings"), 0);
    assert_string_equal(get(w, "code")->valuestring, "no_effect");
    cJSON_Delete(a);
}

static long patch_stream(const char *body, struct stream *s)
{
    return post_stream(&srv, "/patch", body, "text/event-stream", s, NULL, 0);
}

/* With Accept: text/event-stream: progress events counting up to every
 * run, then the result, the JSON answer itself. */
static void test_patch_streams_progress(void **state)
{
    (void)state;
    char body[512];
    patch_body("llama3", "heads_positions", "denoise", body, sizeof body);
    struct stream s = {0};
    assert_int_equal(patch_stream(body, &s), 200);
    long last = 0, of = 0;
    int progress = 0;
    char *result = NULL;
    for (char *block = s.data; block && *block;) {
        char *end = strstr(block, "\n\n");
        assert_non_null(end);
        *end = '\0';
        char *data = strstr(block, "\ndata: ");
        assert_non_null(data);
        cJSON *j = cJSON_Parse(data + 7);
        assert_non_null(j);
        if (!strncmp(block, "event: progress", 15)) {
            const long done = (long)get(j, "done")->valuedouble;
            of = (long)get(j, "of")->valuedouble;
            assert_true(done > last && done <= of);
            last = done;
            progress++;
        } else {
            assert_true(!strncmp(block, "event: result", 13));
            result = data + 7;
            assert_int_equal(get(j, "runs")->valueint, of);
        }
        cJSON_Delete(j);
        block = end + 2;
    }
    assert_true(progress >= 1);
    assert_int_equal(last, 64);
    assert_non_null(result);
    // the same answer as without the stream
    struct reply r;
    assert_true(post_json(&srv, "/patch", body, &r));
    assert_int_equal(r.status, 200);
    r.body[r.len - 1] = '\0'; /* its newline */
    assert_string_equal(result, r.body);
    reply_free(&r);
    free(s.data);
}

static double metric(const char *name)
{
    double v = -1;
    assert_true(metric_read(&srv, "127.0.0.1", name, &v));
    return v;
}

/* A long patch: 32 layers of 32 heads at every position of some 30
 * tokens, tens of thousands of runs. */
#define LONG_PATCH                                                             \
    "{\"model\":\"wide\",\"over\":\"heads_positions\",\"metric\":{\"kind\":"   \
    "\"logprob\",\"target\":5},\"clean\":\"the cat the cat the cat the cat "   \
    "the cat the cat the cat the cat the cat \",\"corrupted\":\"the dog the "  \
    "dog the dog the dog the dog the dog the dog the dog the dog \"}"

/* A client that hangs up after the first progress event stops the work:
 * /metrics counts the patch abandoned, with fewer runs made than it
 * had; the server goes on. */
static void test_disconnect_stops_the_patch(void **state)
{
    (void)state;
    const double before = metric("attnd_patches_abandoned_total");
    const double runs0 = metric("attnd_patched_runs_total");
    const char *body = LONG_PATCH;
    struct stream s = {.stop_after = 1};
    patch_stream(body, &s);
    const char *of = strstr(s.data, "\"of\":");
    assert_non_null(of);
    const double runs = strtod(of + 5, NULL);
    free(s.data);
    double abandoned = before;
    for (int i = 0; i < 400 && abandoned == before; i++) {
        pause_ms(25);
        abandoned = metric("attnd_patches_abandoned_total");
    }
    assert_true(abandoned == before + 1);
    const double made = metric("attnd_patched_runs_total") - runs0;
    assert_true(made >= 1 && made < runs);
    cJSON *a = post_ok("/patch", patch_body("llama3", "heads", "denoise",
                                            (char[512]){0}, 512));
    cJSON_Delete(a);
}

/* The same without a stream: the server sees the client close its side
 * of the waiting connection after a batch, stops, and counts it. */
static void test_disconnect_stops_a_waiting_patch(void **state)
{
    (void)state;
    const char *body = LONG_PATCH;
    // its runs, from a stream's first event
    struct stream first = {.stop_after = 1};
    patch_stream(body, &first);
    const char *of = strstr(first.data, "\"of\":");
    assert_non_null(of);
    const double runs = strtod(of + 5, NULL);
    free(first.data);
    double abandoned = metric("attnd_patches_abandoned_total");
    for (int i = 0; i < 400; i++) { /* the stream's counted first */
        pause_ms(25);
        const double now = metric("attnd_patches_abandoned_total");
        if (now > abandoned) {
            abandoned = now;
            break;
        }
    }
    const double runs0 = metric("attnd_patched_runs_total");
    // a client that gives up a moment after sending it
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/patch", srv.port);
    struct curl_slist *h =
        curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 300L);
    assert_int_equal(curl_easy_perform(c), CURLE_OPERATION_TIMEDOUT);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    double now = abandoned;
    for (int i = 0; i < 400 && now == abandoned; i++) {
        pause_ms(25);
        now = metric("attnd_patches_abandoned_total");
    }
    assert_true(now == abandoned + 1);
    const double made = metric("attnd_patched_runs_total") - runs0;
    assert_true(made < runs);
}

/* format=png: the effects drawn, a real PNG in the diverging map (red
 * for positive effects, blue for negative ones); svg the same as text. */
static void test_patch_image(void **state)
{
    (void)state;
    char body[512];
    patch_body("llama3", "layers", "noise", body, sizeof body);
    const char *const headers[] = {"Content-Type: application/json", NULL};
    struct reply r;
    assert_true(http_call(&srv, "POST", "/patch?format=png&cell=20", body,
                          strlen(body), headers, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "image/png");
    struct decoded_png img;
    decoded_png_read(&r, &img);
    assert_true(img.width > 100 && img.height > 40);
    size_t red = 0, blue = 0;
    for (size_t i = 0; i < (size_t)img.width * img.height; i++) {
        const unsigned char *px = img.rgb + 3 * i;
        red += px[0] > 150 && px[2] < 110;
        blue += px[2] > 150 && px[0] < 110;
    }
    assert_true(red > 0 && blue > 0);
    decoded_png_free(&img);
    reply_free(&r);
    assert_true(http_call(&srv, "POST", "/patch?format=svg", body, strlen(body),
                          headers, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "image/svg+xml");
    assert_non_null(strstr(r.body, "<svg"));
    reply_free(&r);
    refused("/patch?format=gif", body, 422, "/format", "json, png or svg");
}

/* Every refusal names its field. */
static void test_refusals(void **state)
{
    (void)state;
    refused("/patch",
            "{\"model\":\"llama3\",\"clean\":\"" CLEAN "\",\"corrupted\":\"the "
            "dog sat on a big mat\",\"metric\":{\"kind\":\"logprob\","
            "\"target\":5}}",
            422, "/corrupted", "the same length");
    refused("/patch",
            "{\"model\":\"bert\",\"clean\":\"a\",\"corrupted\":\"b\","
            "\"metric\":{\"kind\":\"logprob\",\"target\":5}}",
            422, "/model", "no output head");
    refused("/patch",
            "{\"model\":\"llama3\",\"clean\":\"" CLEAN
            "\",\"corrupted\":\"" CORRUPTED
            "\",\"metric\":{\"kind\":\"logit_diff\",\"correct\":\"the cat\","
            "\"incorrect\":7}}",
            422, "/metric/correct", "tokens of the model");
    refused("/patch",
            "{\"model\":\"llama3\",\"clean\":\"" CLEAN
            "\",\"corrupted\":\"" CORRUPTED
            "\",\"metric\":{\"kind\":\"logit_diff\",\"correct\":5}}",
            422, "/metric/incorrect", "missing");
    refused("/patch",
            "{\"model\":\"llama3\",\"clean\":\"" CLEAN
            "\",\"corrupted\":\"" CORRUPTED
            "\",\"metric\":{\"kind\":\"logprob\",\"target\":999999}}",
            422, "/metric/target", "");
    refused("/patch",
            "{\"model\":\"llama3\",\"clean\":\"" CLEAN
            "\",\"corrupted\":\"" CORRUPTED
            "\",\"metric\":{\"kind\":\"logprob\",\"target\":5},\"over\":"
            "\"neurons\"}",
            422, "/over", "");
    refused("/patch",
            "{\"model\":\"llama3\",\"clean\":\"" CLEAN
            "\",\"corrupted\":\"" CORRUPTED
            "\",\"metric\":{\"kind\":\"logprob\",\"target\":5},\"seed\":1}",
            422, "/seed", "unknown field");
    refused("/patch",
            "{\"model\":\"llama3\",\"clean\":\"" CLEAN
            "\",\"corrupted\":\"" CORRUPTED
            "\",\"metric\":{\"kind\":\"logprob\",\"target\":5,\"correct\":1}}",
            422, "/metric/correct", "not a key");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"ablate\":"
            "[{\"layer\":2}]}",
            422, "/ablate/0/layer", "2 layers");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"ablate\":"
            "[{\"layer\":1,\"head\":4}]}",
            422, "/ablate/0/head", "4 heads");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"ablate\":"
            "[{\"layer\":1,\"positions\":[8]}]}",
            422, "/ablate/0/positions/0", "8 tokens");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"ablate\":"
            "[{\"layer\":1,\"mode\":\"resample\"}]}",
            422, "/ablate/0/mode", "");
    refused("/attention",
            "{\"model\":\"bert\",\"sentence\":\"a\",\"return\":[\"dla\"],"
            "\"dla_target\":5}",
            422, "/return/0", "no output head");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"return\":"
            "[\"dla\"]}",
            422, "/dla_target", "needs dla_target");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN
            "\",\"dla_target\":5}",
            422, "/dla_target", "add \"dla\" to return");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"return\":"
            "[\"dla\"],\"dla_target\":5,\"dla_position\":8}",
            422, "/dla_position", "8 tokens");
    refused("/attention",
            "{\"sentence\":\"" CLEAN "\",\"ablate\":[{\"layer\":0}]}", 422,
            "/ablate", "only with \"model\"");
    refused("/generate",
            "{\"model\":\"llama3\",\"prompt\":\"hi\",\"return\":[\"dla\"]}",
            422, "/return", "/attention's");
    // a size past 2^64 (which rounds to it as a double) is out of range,
    // not 0
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"ablate\":"
            "[{\"layer\":18446744073709551616}]}",
            422, "/ablate/0/layer", "");
    refused("/attention",
            "{\"model\":\"llama3\",\"sentence\":\"" CLEAN "\",\"layer\":"
            "18446744073709551615}",
            422, "/layer", "");
    // one document, its texts whole
    struct reply t;
    char trailing[512 + 2];
    snprintf(trailing, sizeof trailing, "%s{}",
             patch_body("llama3", "heads", "denoise", (char[512]){0}, 512));
    assert_true(post_json(&srv, "/patch", trailing, &t));
    assert_int_equal(t.status, 400);
    assert_non_null(strstr(t.body, "unexpected data"));
    reply_free(&t);
    // a NUL would cut a name short: refused, naming where it stands (a
    // text keeps it: test_nul.c)
    assert_true(post_json(&srv, "/patch",
                          "{\"model\":\"llama3\\u0000x\",\"clean\":\"a\","
                          "\"corrupted\":\"b\",\"metric\":{\"kind\":"
                          "\"logprob\",\"target\":5}}",
                          &t));
    assert_int_equal(t.status, 422);
    assert_non_null(strstr(t.body, "\"pointer\":\"/model\""));
    assert_non_null(strstr(t.body, "holds a NUL character (\\\\u0000)"));
    reply_free(&t);
    assert_true(http_call(
        &srv, "GET", "/attention?model=llama3&sentence=a%00b&return=", NULL, 0,
        NULL, &t));
    assert_int_equal(t.status, 200);
    reply_free(&t);
    // the diverging map is /patch's: weights are never negative
    struct reply r;
    assert_true(http_call(
        &srv, "GET", "/attention?sentence=hi&format=png&colormap=diverging",
        NULL, 0, NULL, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"pointer\":\"/colormap\""));
    reply_free(&r);
}

/* Past --max-flops a patch is refused before any work, naming over and
 * the reason; the largest the limits allow is answered. */
static void test_limits(void **state)
{
    (void)state;
    struct server small;
    const char *const args[] = {"--model", "gpt2=tests/models/gpt2",
                                "--max-flops", "200000000", NULL};
    assert_true(server_start(&small, args));
    // GPT-2 takes 64 positions: every head at every one of them
    char body[4096];
    int len = snprintf(body, sizeof body,
                       "{\"model\":\"gpt2\",\"over\":\"heads_positions\","
                       "\"metric\":{\"kind\":\"logprob\",\"target\":5},"
                       "\"clean\":\"");
    for (int i = 0; i < 64; i++)
        len += snprintf(body + len, sizeof body - len, "a");
    len += snprintf(body + len, sizeof body - len, "\",\"corrupted\":\"b");
    for (int i = 1; i < 64; i++)
        len += snprintf(body + len, sizeof body - len, "a");
    snprintf(body + len, sizeof body - len, "\"}");
    struct reply r;
    assert_true(post_json(&small, "/patch", body, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"pointer\":\"/over\""));
    assert_non_null(strstr(r.body, "--max-flops"));
    reply_free(&r);
    assert_int_equal(server_stop(&small, 10), 0);
    // without the cap: 2 layers x 4 heads x 64 positions
    assert_true(post_json(&srv, "/patch", body, &r));
    if (r.status != 200)
        fail_msg("%ld %s", r.status, r.body);
    cJSON *a = cJSON_Parse(r.body);
    assert_int_equal(get(a, "runs")->valueint, 512);
    cJSON_Delete(a);
    reply_free(&r);
}

/* The largest ablation the limits allow, 4096 items naming 65536 head
 * positions, is answered; one position more is refused before any of
 * it is allocated. */
static void test_largest_ablation(void **state)
{
    (void)state;
    // more than 16 tokens of llama3's tokenizer: 16 positions an item
    // (0 to 15) make 65536
    const char *words =
        "the cat sat on the mat the cat sat on the mat the cat sat on it";
    size_t cap = 4096 * 96 + 512, len = 0;
    char *body = malloc(cap);
    len += (size_t)snprintf(body + len, cap - len,
                            "{\"model\":\"llama3\",\"sentence\":\"%s\","
                            "\"return\":[\"mean_weights\"],\"layer\":1,"
                            "\"ablate\":[",
                            words);
    for (int k = 0; k < 4096; k++) {
        len += (size_t)snprintf(body + len, cap - len,
                                "%s{\"layer\":%d,\"head\":%d,\"mode\":\"%s\","
                                "\"positions\":[",
                                k ? "," : "", k % 2, k % 4,
                                k % 3 ? "zero" : "mean");
        for (int i = 0; i < 16; i++)
            len += (size_t)snprintf(body + len, cap - len, "%s%d", i ? "," : "",
                                    i);
        len += (size_t)snprintf(body + len, cap - len, "]}");
    }
    snprintf(body + len, cap - len, "]}");
    struct reply r;
    assert_true(post_json(&srv, "/attention", body, &r));
    if (r.status != 200)
        fail_msg("%ld %s", r.status, r.body);
    cJSON *a = cJSON_Parse(r.body);
    assert_int_equal(cJSON_GetArraySize(get(get(a, "config"), "ablate")), 4096);
    cJSON_Delete(a);
    reply_free(&r);
    // the last item's positions one longer: 65537
    body[len - 2] = '\0';
    char *more = malloc(len + 16);
    snprintf(more, len + 16, "%s,16]}]}", body);
    assert_true(post_json(&srv, "/attention", more, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "65537"));
    assert_non_null(strstr(r.body, "\"pointer\":\"/ablate\""));
    reply_free(&r);
    free(more);
    free(body);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_ablated),
        cmocka_unit_test(test_ablation_moves_later_layers),
        cmocka_unit_test(test_dla_matches_the_reference),
        cmocka_unit_test(test_patch_invariants),
        cmocka_unit_test(test_patch_metric_is_the_logit_difference),
        cmocka_unit_test(test_patch_without_a_difference),
        cmocka_unit_test(test_patch_streams_progress),
        cmocka_unit_test(test_disconnect_stops_the_patch),
        cmocka_unit_test(test_disconnect_stops_a_waiting_patch),
        cmocka_unit_test(test_patch_image),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_largest_ablation),
    };
    const int failed = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return failed;
}
