/*
 * test_service.c - everything around the computation, on the real server:
 * PNG heatmaps decoded with libpng, the web root and traversal attempts,
 * health, metrics, the OpenAPI document against real answers, the API
 * key, overload, and a clean stop with a request in flight.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"
#include "decoded_png.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static struct server srv;

static int start(void **state)
{
    (void)state;
    return server_start(&srv, NULL) ? 0 : -1;
}

static int stop(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- PNG */

static double luminance(const unsigned char *p)
{
    return 0.2126 * p[0] + 0.7152 * p[1] + 0.0722 * p[2];
}

/* The weights of head 0 from the JSON answer to the same GET. */
static double *head0_weights(const char *query, size_t *n)
{
    struct reply r;
    char path[512];
    snprintf(path, sizeof path, "/attention?%s", query);
    assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    cJSON *doc = cJSON_Parse(r.body);
    const cJSON *head =
        cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "weights"), 0);
    const size_t rows = (size_t)cJSON_GetArraySize(head);
    double *w = malloc(rows * rows * sizeof *w);
    size_t k = 0;
    const cJSON *row, *v;
    cJSON_ArrayForEach(row, head) cJSON_ArrayForEach(v, row) w[k++] =
        v->valuedouble;
    *n = rows;
    cJSON_Delete(doc);
    reply_free(&r);
    return w;
}

/* With one pixel per weight, colours order the same way as weights. */
static void check_monotonic(const char *colormap)
{
    const char *q = "sentence=The%20cat%20chased%20the%20mouse%20because%20it%"
                    "20was%20hungry"
                    "&heads=2&seed=3";
    size_t n = 0;
    double *w = head0_weights(q, &n);
    char path[512];
    snprintf(path, sizeof path,
             "/attention?%s&format=png&head=0&labels=false&cell=1&colormap=%s",
             q, colormap);
    struct reply r;
    assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "image/png");
    struct decoded_png img;
    decoded_png_read(&r, &img);
    assert_int_equal(img.width, n);
    assert_int_equal(img.height, n);
    /* Colours come from 256-entry tables, and perceived lightness is only
     * approximately the Rec. 709 luminance of sRGB values: compare weights
     * that differ by more than 2% of the largest, except for gray where
     * the order is exact. */
    double max_w = 0;
    for (size_t a = 0; a < n * n; a++)
        max_w = w[a] > max_w ? w[a] : max_w;
    const double margin = strcmp(colormap, "gray") ? 0.02 * max_w : 1e-6;
    for (size_t a = 0; a < n * n; a++)
        for (size_t b = 0; b < n * n; b++) {
            if (!(w[a] < w[b] - margin))
                continue;
            const double la = luminance(img.rgb + a * 3),
                         lb = luminance(img.rgb + b * 3);
            if (la > lb + 1e-9)
                fail_msg("%s: weight %g is brighter (%g) than weight %g (%g)",
                         colormap, w[a], la, w[b], lb);
        }
    if (!strcmp(colormap, "gray"))
        for (size_t a = 0; a < n * n; a++)
            assert_true(img.rgb[a * 3] == img.rgb[a * 3 + 1] &&
                        img.rgb[a * 3 + 1] == img.rgb[a * 3 + 2]);
    decoded_png_free(&img);
    free(w);
    reply_free(&r);
}

static void test_png_colours_follow_weights(void **state)
{
    (void)state;
    check_monotonic("gray");
    check_monotonic("viridis");
    check_monotonic("magma");
}

static void test_png_labels_and_text_chunks(void **state)
{
    (void)state;
    struct reply r;
    assert_true(http_call(
        &srv, "GET",
        "/attention?sentence=The%20cat%20chased%20the%20mouse%20because"
        "%20it%20was%20hungry&format=png&head=3",
        NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    struct decoded_png img;
    decoded_png_read(&r, &img);
    /* small inputs still give an image of at least 300 px */
    assert_true(img.width >= 300 && img.height >= 300);
    assert_non_null(decoded_png_text(&img, "attnd:tokens"));
    assert_non_null(
        strstr(decoded_png_text(&img, "attnd:tokens"), "\"hungry\""));
    assert_string_equal(decoded_png_text(&img, "attnd:head"), "3");
    assert_non_null(decoded_png_text(&img, "attnd:min"));
    assert_non_null(decoded_png_text(&img, "attnd:max"));
    assert_true(atof(decoded_png_text(&img, "attnd:max")) <= 1.0);
    assert_non_null(strstr(decoded_png_text(&img, "Title"), "head 3 of 8"));
    /* labels: dark text pixels in the left margin, where the bare matrix
     * has none */
    size_t dark = 0;
    for (unsigned y = img.height / 4; y < img.height * 3 / 4; y++)
        for (unsigned x = 0; x < img.width / 8; x++)
            dark += luminance(img.rgb + ((size_t)y * img.width + x) * 3) < 100;
    assert_true(dark > 20);
    decoded_png_free(&img);
    reply_free(&r);

    /* the grid of every head is larger than one head; the mean works */
    assert_true(http_call(
        &srv, "GET", "/attention?sentence=the%20cat%20sat&format=png&head=all",
        NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    struct decoded_png grid;
    decoded_png_read(&r, &grid);
    reply_free(&r);
    assert_true(http_call(
        &srv, "GET", "/attention?sentence=the%20cat%20sat&format=png&head=mean",
        NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    struct decoded_png mean;
    decoded_png_read(&r, &mean);
    assert_true(grid.width > mean.width && grid.height > mean.height);
    assert_string_equal(decoded_png_text(&mean, "attnd:head"), "mean");
    decoded_png_free(&grid);
    decoded_png_free(&mean);
    reply_free(&r);

    /* POST with Accept: image/png */
    const char *hdr[] = {"Content-Type: application/json", "Accept: image/png",
                         NULL};
    const char *body = "{\"sentence\":\"a b c\",\"heads\":2}";
    assert_true(http_call(&srv, "POST", "/attention?head=1", body, strlen(body),
                          hdr, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "image/png");
    reply_free(&r);
}

/* --------------------------------------------------------- web root */

static void test_static_files(void **state)
{
    (void)state;
    struct reply r;
    assert_true(http_call(&srv, "GET", "/", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "text/html; charset=utf-8");
    char etag[64];
    assert_true(reply_header(&r, "ETag", etag, sizeof etag));
    reply_free(&r);
    char inm[96];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *hdr[] = {inm, NULL};
    assert_true(http_call(&srv, "GET", "/index.html", NULL, 0, hdr, &r));
    assert_int_equal(r.status, 304);
    reply_free(&r);
    assert_true(http_call(&srv, "HEAD", "/", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 0);
    reply_free(&r);
    const char *outside[] = {
        "/../Makefile",      "/%2e%2e/Makefile",
        "/..%2fMakefile",    "/web/../Makefile",
        "//etc/passwd",      "/%2fetc%2fpasswd",
        "/.git/config",      "/..",
        "/a/../../Makefile", "/%5c..%5cMakefile",
    };
    /* a NUL cuts the path short: only ever a file of the root */
    assert_true(
        http_call(&srv, "GET", "/index.html%00.png", NULL, 0, NULL, &r));
    assert_true(r.status == 404 ||
                (r.status == 200 && strstr(r.body, "<html")));
    reply_free(&r);
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        assert_true(http_call(&srv, "GET", outside[i], NULL, 0, NULL, &r));
        if (r.status != 404 && r.status != 400)
            fail_msg("%s answered %ld", outside[i], r.status);
        assert_null(strstr(r.body, "CORE_LIB"));
        assert_null(strstr(r.body, "root:"));
        reply_free(&r);
    }
}

static void test_symlinks_and_directories(void **state)
{
    (void)state;
    char root[] = "/tmp/attnd-web-XXXXXX";
    assert_non_null(mkdtemp(root));
    char path[256];
    snprintf(path, sizeof path, "%s/index.html", root);
    FILE *fp = fopen(path, "w");
    fputs("<p>hi</p>", fp);
    fclose(fp);
    snprintf(path, sizeof path, "%s/sub", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/sub/a.txt", root);
    fp = fopen(path, "w");
    fputs("a", fp);
    fclose(fp);
    snprintf(path, sizeof path, "%s/leak", root);
    assert_int_equal(symlink("/etc/passwd", path), 0);
    snprintf(path, sizeof path, "%s/etc", root);
    assert_int_equal(symlink("/etc", path), 0);
    struct server s2;
    const char *args[] = {"--web-root", root, NULL};
    assert_true(server_start(&s2, args));
    struct reply r;
    const char *denied[] = {"/leak", "/etc/passwd", "/sub/", "/sub"};
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        assert_true(http_call(&s2, "GET", denied[i], NULL, 0, NULL, &r));
        if (r.status != 404)
            fail_msg("%s answered %ld", denied[i], r.status);
        assert_null(strstr(r.body, "a.txt")); /* no listing */
        reply_free(&r);
    }
    assert_true(http_call(&s2, "GET", "/sub/a.txt", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "text/plain; charset=utf-8");
    reply_free(&r);
    assert_int_equal(server_stop(&s2, 10.0), 0);
    const char *names[] = {"leak", "etc", "sub/a.txt", "sub", "index.html"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, names[i]);
        remove(path);
    }
    rmdir(root);
}

/* ---------------------------------------------- health, metrics, docs */

static void test_health_and_metrics(void **state)
{
    (void)state;
    struct reply r;
    assert_true(http_call(&srv, "GET", "/healthz", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"ok\""));
    reply_free(&r);
    assert_true(
        http_call(&srv, "GET", "/attention?sentence=a%20b", NULL, 0, NULL, &r));
    reply_free(&r);
    assert_true(http_call(&srv, "GET", "/attention?sentence=a%20b&heads=3",
                          NULL, 0, NULL, &r));
    reply_free(&r);
    /* an exchange is counted when it ends, just after its last byte has
     * gone out: look until both are, 2 s at most */
    for (int look = 0;; look++) {
        assert_true(http_call(&srv, "GET", "/metrics", NULL, 0, NULL, &r));
        const bool counted =
            strstr(r.body, "attnd_requests_total{route=\"/attention\","
                           "status=\"422\"}") != NULL;
        if (counted || look == 100)
            break;
        reply_free(&r);
        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.content_type, "text/plain"));
    assert_non_null(strstr(
        r.body, "attnd_requests_total{route=\"/attention\",status=\"200\"}"));
    assert_non_null(strstr(
        r.body, "attnd_requests_total{route=\"/attention\",status=\"422\"}"));
    assert_non_null(strstr(r.body, "attnd_request_duration_seconds_bucket{"
                                   "route=\"/attention\",le=\"+Inf\"}"));
    assert_non_null(strstr(r.body, "attnd_response_bytes_total "));
    assert_non_null(strstr(r.body, "attnd_requests_in_flight "));
    const char *flops = strstr(r.body, "\nattnd_attention_flops_total ");
    assert_non_null(flops);
    assert_true(strtod(flops + strlen("\nattnd_attention_flops_total "), NULL) >
                0);
    reply_free(&r);
}

static bool documented(const cJSON *responses, long status)
{
    char code[8];
    snprintf(code, sizeof code, "%ld", status);
    return cJSON_GetObjectItem(responses, code) != NULL;
}

/* Every request example of the document, sent to the server: the status
 * is the documented one and documented required fields are there. */
static void test_openapi_matches_server(void **state)
{
    (void)state;
    struct reply r;
    assert_true(http_call(&srv, "GET", "/openapi.json", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    cJSON *doc = cJSON_Parse(r.body);
    reply_free(&r);
    assert_non_null(doc);
    assert_string_equal(cJSON_GetObjectItem(doc, "openapi")->valuestring,
                        "3.1.0");
    const cJSON *paths = cJSON_GetObjectItem(doc, "paths");
    const char *routes[][2] = {{"/attention", "post"},   {"/attention", "get"},
                               {"/healthz", "get"},      {"/metrics", "get"},
                               {"/openapi.json", "get"}, {"/", "get"}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!cJSON_GetObjectItem(cJSON_GetObjectItem(paths, routes[i][0]),
                                 routes[i][1]))
            fail_msg("openapi.json lacks %s %s", routes[i][1], routes[i][0]);
    const cJSON *post =
        cJSON_GetObjectItem(cJSON_GetObjectItem(paths, "/attention"), "post");
    const cJSON *responses = cJSON_GetObjectItem(post, "responses");
    const cJSON *schemas =
        cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "components"), "schemas");
    const cJSON *resp_required = cJSON_GetObjectItem(
        cJSON_GetObjectItem(schemas, "AttentionResponse"), "required");
    const cJSON *prob_required = cJSON_GetObjectItem(
        cJSON_GetObjectItem(schemas, "Problem"), "required");
    assert_non_null(resp_required);
    assert_non_null(prob_required);
    const cJSON *examples = cJSON_GetObjectItem(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(post, "requestBody"),
                                "content"),
            "application/json"),
        "examples");
    int sent = 0;
    const cJSON *ex;
    cJSON_ArrayForEach(ex, examples)
    {
        char *body = cJSON_PrintUnformatted(cJSON_GetObjectItem(ex, "value"));
        const cJSON *expect = cJSON_GetObjectItem(ex, "x-expect-status");
        const long want = expect ? (long)expect->valuedouble : 200;
        assert_true(post_json(&srv, "/attention", body, &r));
        if (r.status != want)
            fail_msg("example %s: status %ld, documented %ld: %s", ex->string,
                     r.status, want, r.body);
        assert_true(documented(responses, r.status));
        cJSON *answer = cJSON_Parse(r.body);
        assert_non_null(answer);
        const cJSON *req = r.status == 200 ? resp_required : prob_required;
        const cJSON *name;
        cJSON_ArrayForEach(
            name, req) if (!cJSON_GetObjectItem(answer, name->valuestring))
            fail_msg("example %s: the answer lacks required \"%s\"", ex->string,
                     name->valuestring);
        cJSON_Delete(answer);
        reply_free(&r);
        free(body);
        sent++;
    }
    assert_true(sent >= 5);
    const cJSON *get =
        cJSON_GetObjectItem(cJSON_GetObjectItem(paths, "/attention"), "get");
    const cJSON *queries = cJSON_GetObjectItem(get, "x-examples");
    const cJSON *q;
    int gets = 0;
    cJSON_ArrayForEach(q, queries)
    {
        char path[1024];
        snprintf(path, sizeof path, "/attention%s", q->valuestring);
        assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
        if (r.status != 200)
            fail_msg("GET example %s: status %ld: %s", q->valuestring, r.status,
                     r.body);
        if (strstr(q->valuestring, "format=png"))
            assert_string_equal(r.content_type, "image/png");
        reply_free(&r);
        gets++;
    }
    assert_true(gets >= 3);
    cJSON_Delete(doc);
}

/* ------------------------------------------------------------ API key */

static void test_api_key(void **state)
{
    (void)state;
    struct server s2;
    const char *args[] = {"--api-key", "s3cret-key", NULL};
    assert_true(server_start(&s2, args));
    struct reply r;
    const char *json = "{\"sentence\":\"a b\"}";
    const char *none[] = {"Content-Type: application/json", NULL};
    const char *wrong[] = {"Content-Type: application/json",
                           "Authorization: Bearer nope", NULL};
    const char *right[] = {"Content-Type: application/json",
                           "Authorization: Bearer s3cret-key", NULL};
    assert_true(
        http_call(&s2, "POST", "/attention", json, strlen(json), none, &r));
    assert_int_equal(r.status, 401);
    char www[128];
    assert_true(reply_header(&r, "WWW-Authenticate", www, sizeof www));
    reply_free(&r);
    assert_true(
        http_call(&s2, "POST", "/attention", json, strlen(json), wrong, &r));
    assert_int_equal(r.status, 401);
    reply_free(&r);
    assert_true(
        http_call(&s2, "POST", "/attention", json, strlen(json), right, &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    assert_true(
        http_call(&s2, "GET", "/attention?sentence=a", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 401);
    reply_free(&r);
    const char *open_paths[] = {"/healthz", "/metrics", "/", "/openapi.json"};
    for (size_t i = 0; i < 4; i++) {
        assert_true(http_call(&s2, "GET", open_paths[i], NULL, 0, NULL, &r));
        assert_int_equal(r.status, 200);
        reply_free(&r);
    }
    assert_int_equal(server_stop(&s2, 10.0), 0);
    char *log = read_file(s2.log_path, NULL);
    assert_non_null(log);
    assert_null(strstr(log, "s3cret-key")); /* never logged */
    assert_non_null(strstr(log, "POST /attention 401"));
    free(log);
}

/* ------------------------------------------- overload and stopping */

struct slow_call {
    const struct server *s;
    struct reply r;
    bool ok;
};

/* About 100 GFLOP with a one-number-per-token answer: seconds of work. */
static void *slow_request(void *arg)
{
    struct slow_call *c = arg;
    const size_t words = 3000;
    char *json = malloc(words * 2 + 128);
    size_t n = (size_t)snprintf(json, 64, "{\"sentence\":\"");
    for (size_t i = 0; i < words; i++) {
        json[n++] = 'a';
        json[n++] = ' ';
    }
    snprintf(json + n, 128,
             "\",\"d_model\":1024,\"heads\":8,\"d_out\":1,"
             "\"return\":[\"output\"]}");
    c->ok = post_json(c->s, "/attention", json, &c->r);
    free(json);
    return NULL;
}

static void wait_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000,
                                 .tv_nsec = (ms % 1000) * 1000000L},
              NULL);
}

/* room for the whole of /metrics: a histogram of 16 lines per route */
#define METRICS_TEXT 32768

static size_t keep_text(char *p, size_t size, size_t n, void *cls)
{
    char *text = cls;
    const size_t used = strlen(text), add = size * n;
    const size_t room = METRICS_TEXT - 1 - used;
    memcpy(text + used, p, add < room ? add : room);
    text[used + (add < room ? add : room)] = '\0';
    return add;
}

/* Until a computation holds a compute slot of s (the slow request is being
 * computed, not still on its way), or fail after 30 s. Each look is a new
 * connection given 200 ms: one that a worker about to compute accepted
 * waits for the computation, so the next look goes elsewhere. */
static void wait_computing(const struct server *s)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", s->port);
    for (int i = 0; i < 1000; i++) {
        static char text[METRICS_TEXT];
        text[0] = '\0';
        CURL *curl = curl_easy_init();
        assert_non_null(curl);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 200L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_text);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, text);
        const bool answered = curl_easy_perform(curl) == CURLE_OK;
        curl_easy_cleanup(curl);
        if (answered && strstr(text, "\nattnd_computations_running 1\n"))
            return;
        wait_ms(10);
    }
    fail_msg("the slow request never started computing");
}

static void test_overload_answers_503(void **state)
{
    (void)state;
    struct server s2;
    const char *args[] = {"--threads", "1", "--max-queue", "0", NULL};
    assert_true(server_start(&s2, args));
    struct slow_call slow = {.s = &s2};
    pthread_t tid;
    pthread_create(&tid, NULL, slow_request, &slow);
    wait_computing(&s2);
    /* a large request (small ones are answered on the HTTP threads): 300 tokens
     * 512 wide, about half a GFLOP */
    char large[1024];
    size_t n = (size_t)snprintf(large, sizeof large, "{\"sentence\":\"");
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(large + n, sizeof large - n, "b ");
    snprintf(large + n, sizeof large - n, "\",\"d_model\":512}");
    struct reply r;
    assert_true(post_json(&s2, "/attention", large, &r));
    if (r.status != 503)
        fail_msg("a request beyond capacity answered %ld", r.status);
    char retry[16];
    assert_true(reply_header(&r, "Retry-After", retry, sizeof retry));
    assert_string_equal(r.content_type, "application/problem+json");
    reply_free(&r);
    /* health stays answerable while computing */
    assert_true(http_call(&s2, "GET", "/healthz", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    reply_free(&r);
    pthread_join(tid, NULL);
    assert_true(slow.ok);
    assert_int_equal(slow.r.status, 200);
    reply_free(&slow.r);
    assert_int_equal(server_stop(&s2, 10.0), 0);
}

/* The drain lets the slow request finish however long this build takes
 * over it (0.3 s optimized, 11 s under AddressSanitizer, past the
 * default 8 s drain): the test is about a request in flight being
 * finished, not about how fast. */
static void test_sigterm_finishes_request_in_flight(void **state)
{
    (void)state;
    struct server s2;
    const char *args[] = {"--drain-seconds", "120", NULL};
    assert_true(server_start(&s2, args));
    struct slow_call slow = {.s = &s2};
    pthread_t tid;
    pthread_create(&tid, NULL, slow_request, &slow);
    wait_computing(&s2);
    const int status = server_stop(&s2, 130.0); /* SIGTERM mid-request */
    pthread_join(tid, NULL);
    assert_int_equal(status, 0);
    assert_true(slow.ok);
    assert_int_equal(slow.r.status, 200);
    cJSON *doc = cJSON_Parse(slow.r.body);
    assert_non_null(doc); /* the whole body arrived */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "output")),
                     3000);
    cJSON_Delete(doc);
    reply_free(&slow.r);
    char *log = read_file(s2.log_path, NULL);
    assert_non_null(strstr(log, "SIGTERM"));
    assert_non_null(strstr(log, "stopped"));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_colours_follow_weights),
        cmocka_unit_test(test_png_labels_and_text_chunks),
        cmocka_unit_test(test_static_files),
        cmocka_unit_test(test_symlinks_and_directories),
        cmocka_unit_test(test_health_and_metrics),
        cmocka_unit_test(test_openapi_matches_server),
        cmocka_unit_test(test_api_key),
        cmocka_unit_test(test_overload_answers_503),
        cmocka_unit_test(test_sigterm_finishes_request_in_flight),
    };
    return cmocka_run_group_tests_name("service", tests, start, stop);
}
