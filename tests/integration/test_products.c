/*
 * test_products.c - "products": "bfloat16" on the real binary: a BF16
 * checkpoint's hidden states with bfloat16 activations through the CPU's
 * bfloat16 dot products, against the float64 goldens of transformers'
 * modeling code. Bound: every hidden state within 1e-2 of the largest
 * |value| of the golden's (measured: 3.6e-3 for LLaMA 2's and 3.3e-3 for
 * Qwen2's test checkpoints), where float32 is within 1e-5 (measured
 * 3e-7); and further off than float32 (the path is taken). The config
 * says which products were computed; GET takes the field too; a value
 * other than the two is a 422 naming it; /generate passes it to the
 * prompt's pass and the finished sequence's. Skipped where the CPU lacks
 * the instructions (the config then says float32, also tested).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct server srv;

static int setup(void **state)
{
    (void)state;
    const char *const args[] = {"--model", "llama2=tests/models/llama2",
                                "--model", "qwen2=tests/models/qwen2", NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

/* Does the server's CPU have the instructions? It says so by answering
 * a bfloat16 request's config with "bfloat16". */
static bool server_has_bf16(void)
{
    struct reply r;
    assert_true(post_json(&srv, "/attention",
                          "{\"model\":\"llama2\",\"sentence\":\"a\","
                          "\"return\":[],\"products\":\"bfloat16\"}",
                          &r));
    assert_int_equal(r.status, 200);
    const bool has = strstr(r.body, "\"products\":\"bfloat16\"") != NULL;
    if (!has)
        assert_non_null(strstr(r.body, "\"products\":\"float32\""));
    reply_free(&r);
    return has;
}

/* The numbers of a nested array, in order, appended to out (n so far). */
static void flatten(const cJSON *a, double *out, size_t cap, size_t *n)
{
    if (cJSON_IsNumber(a)) {
        assert_true(*n < cap);
        out[(*n)++] = a->valuedouble;
        return;
    }
    for (const cJSON *x = a ? a->child : NULL; x; x = x->next)
        flatten(x, out, cap, n);
}

/* The largest |a - b| over two arrays of the same numbers (nested or
 * flat), and the largest |b|. */
static void compare(const cJSON *a, const cJSON *b, double *diff, double *top)
{
    enum { CAP = 1 << 16 };
    static double x[CAP], y[CAP];
    size_t nx = 0, ny = 0;
    flatten(a, x, CAP, &nx);
    flatten(b, y, CAP, &ny);
    assert_int_equal(nx, ny);
    assert_true(ny > 0);
    for (size_t i = 0; i < ny; i++) {
        *diff = fmax(*diff, fabs(x[i] - y[i]));
        *top = fmax(*top, fabs(y[i]));
    }
}

static cJSON *golden_case(const char *variant)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    char *text = read_file(path, NULL);
    assert_non_null(text);
    cJSON *g = cJSON_Parse(text);
    free(text);
    assert_non_null(g);
    return g;
}

/* Both checkpoints' hidden states, each way, against the golden. */
static void test_hidden_states_bound(void **state)
{
    (void)state;
    if (!server_has_bf16())
        skip();
    static const char *const variants[] = {"llama2", "qwen2"};
    for (size_t v = 0; v < 2; v++) {
        cJSON *g = golden_case(variants[v]);
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "cases"), 0);
        const char *sentence = cJSON_GetObjectItem(c, "sentence")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "hidden_states");
        double off[2];
        for (int k = 0; k < 2; k++) {
            cJSON *body = cJSON_CreateObject();
            cJSON_AddStringToObject(body, "model", variants[v]);
            cJSON_AddStringToObject(body, "sentence", sentence);
            cJSON *ret = cJSON_AddArrayToObject(body, "return");
            cJSON_AddItemToArray(ret, cJSON_CreateString("hidden_states"));
            cJSON_AddStringToObject(body, "products",
                                    k ? "bfloat16" : "float32");
            char *json = cJSON_PrintUnformatted(body);
            struct reply r;
            assert_true(post_json(&srv, "/attention", json, &r));
            assert_int_equal(r.status, 200);
            cJSON *got = cJSON_Parse(r.body);
            assert_string_equal(
                cJSON_GetObjectItem(cJSON_GetObjectItem(got, "config"),
                                    "products")
                    ->valuestring,
                k ? "bfloat16" : "float32");
            double diff = 0, top = 0;
            compare(cJSON_GetObjectItem(got, "hidden_states"), want, &diff,
                    &top);
            off[k] = diff / top;
            cJSON_Delete(got);
            reply_free(&r);
            free(json);
            cJSON_Delete(body);
        }
        if (off[0] > 1e-5 || off[1] > 1e-2 || off[1] <= off[0])
            fail_msg("%s: float32 %.3g and bfloat16 %.3g of the largest "
                     "hidden value off the float64 golden",
                     variants[v], off[0], off[1]);
        cJSON_Delete(g);
    }
}

/* GET takes it as the body does; a bad value is a 422 naming it. */
static void test_query_and_refusal(void **state)
{
    (void)state;
    const bool has = server_has_bf16();
    struct reply r;
    assert_true(http_call(&srv, "GET",
                          "/attention?model=llama2&sentence=a+b&products="
                          "bfloat16&return=hidden_states",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, has ? "\"products\":\"bfloat16\""
                                       : "\"products\":\"float32\""));
    reply_free(&r);
    assert_true(post_json(&srv, "/attention",
                          "{\"model\":\"llama2\",\"sentence\":\"a\","
                          "\"products\":\"float16\"}",
                          &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"/products\""));
    assert_non_null(strstr(r.body, "float16"));
    reply_free(&r);
    // only with a model: random weights have no bfloat16 to speak of
    assert_true(post_json(&srv, "/attention",
                          "{\"sentence\":\"a\",\"products\":\"bfloat16\"}",
                          &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "/products"));
    reply_free(&r);
}

/* /generate: the field reaches the prompt's pass and the done event's. */
static void test_generate(void **state)
{
    (void)state;
    const bool has = server_has_bf16();
    struct stream s = {0};
    assert_int_equal(post_stream(&srv, "/generate",
                                 "{\"model\":\"qwen2\",\"prompt\":\"one two\","
                                 "\"max_new_tokens\":5,\"products\":"
                                 "\"bfloat16\"}",
                                 NULL, &s, NULL, 0),
                     200);
    assert_non_null(strstr(s.data, "event: done"));
    assert_non_null(strstr(s.data, has ? "\"products\":\"bfloat16\""
                                       : "\"products\":\"float32\""));
    free(s.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hidden_states_bound),
        cmocka_unit_test(test_query_and_refusal),
        cmocka_unit_test(test_generate),
    };
    return cmocka_run_group_tests_name("products", tests, setup, teardown);
}
