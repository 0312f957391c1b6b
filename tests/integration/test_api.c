/*
 * test_api.c - POST/GET /attention against the real server: golden
 * numbers from the float64 reference (tests/golden/), cross-attention,
 * batches, explicit PyTorch-layout parameters, GET = POST, determinism,
 * and every error class with its status and pointer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"
#include "sparse_rows.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct server srv;

static int start(void **state)
{
    (void)state;
    const char *args[] = {"--max-body", "4000000", "--max-tokens", "512", NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int stop(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

/* --------------------------------------------------------- JSON helpers */

static cJSON *load_golden(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/golden/%s.json", name);
    size_t len = 0;
    char *text = read_file(path, &len);
    assert_non_null(text);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(doc);
    return doc;
}

static size_t num(const cJSON *obj, const char *key)
{
    return (size_t)cJSON_GetObjectItemCaseSensitive(obj, key)->valuedouble;
}

/* A flat JSON array of numbers reshaped to the given dims (rank 1-3). */
static cJSON *reshape(const cJSON *flat, const size_t *dims, int rank)
{
    const cJSON *v = flat->child;
    cJSON *root = cJSON_CreateArray();
    size_t outer = rank == 3 ? dims[0] : 1,
           mid = rank >= 2 ? dims[rank - 2] : 1;
    for (size_t a = 0; a < outer; a++) {
        cJSON *plane = rank == 3 ? cJSON_CreateArray() : root;
        for (size_t b = 0; b < (rank == 1 ? 1 : mid); b++) {
            cJSON *row = rank == 1 ? root : cJSON_CreateArray();
            for (size_t c = 0; c < dims[rank - 1]; c++, v = v->next)
                cJSON_AddItemToArray(row, cJSON_CreateNumber(v->valuedouble));
            if (rank != 1)
                cJSON_AddItemToArray(plane, row);
        }
        if (rank == 3)
            cJSON_AddItemToArray(root, plane);
    }
    return root;
}

/* Every number of a nested array, in order. */
static size_t flatten(const cJSON *v, double *out, size_t cap, size_t at)
{
    if (cJSON_IsNumber(v)) {
        if (at < cap)
            out[at] = v->valuedouble;
        return at + 1;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, v) at = flatten(c, out, cap, at);
    return at;
}

static int depth(const cJSON *v)
{
    return cJSON_IsArray(v) ? 1 + depth(v->child) : 0;
}

/* Compare response array `name` with golden expected[gname]. */
static void expect_numbers(const cJSON *resp, const char *name,
                           const cJSON *expected, const char *gname,
                           double atol, double rtol)
{
    const cJSON *got = cJSON_GetObjectItemCaseSensitive(resp, name);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(expected, gname);
    if (!got)
        fail_msg("response lacks \"%s\"", name);
    const size_t n = (size_t)cJSON_GetArraySize(want);
    double *g = calloc(n + 1, sizeof *g);
    const size_t count = flatten(got, g, n, 0);
    if (count != n)
        fail_msg("%s has %zu numbers; expected %zu", name, count, n);
    size_t i = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, want)
    {
        const double d = fabs(g[i] - w->valuedouble);
        if (d > atol + rtol * fabs(w->valuedouble))
            fail_msg("%s[%zu] is %.9g; the float64 reference says %.9g", name,
                     i, g[i], w->valuedouble);
        i++;
    }
    free(g);
}

static cJSON *post_ok(const char *path, const cJSON *body)
{
    char *text = cJSON_PrintUnformatted(body);
    struct reply r;
    assert_true(post_json(&srv, path, text, &r));
    free(text);
    if (r.status != 200)
        fail_msg("status %ld: %s", r.status, r.body);
    assert_string_equal(r.content_type, "application/json");
    cJSON *doc = cJSON_Parse(r.body);
    assert_non_null(doc);
    reply_free(&r);
    return doc;
}

/* A request body with the options of a golden config. */
static cJSON *body_from_config(const cJSON *cfg)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(b, "heads", (double)num(cfg, "heads"));
    cJSON_AddNumberToObject(b, "kv_heads", (double)num(cfg, "kv_heads"));
    cJSON_AddNumberToObject(b, "d_k", (double)num(cfg, "d_k"));
    cJSON_AddNumberToObject(b, "d_v", (double)num(cfg, "d_v"));
    cJSON_AddNumberToObject(b, "d_out", (double)num(cfg, "d_out"));
    cJSON_AddBoolToObject(b, "bias",
                          cJSON_IsTrue(cJSON_GetObjectItem(cfg, "qkv_bias")));
    cJSON_AddBoolToObject(b, "out_bias",
                          cJSON_IsTrue(cJSON_GetObjectItem(cfg, "out_bias")));
    cJSON_AddItemToObject(b, "seed",
                          cJSON_Duplicate(cJSON_GetObjectItem(cfg, "seed"), 1));
    cJSON_AddBoolToObject(b, "mask", 0);
    cJSON_DeleteItemFromObject(b, "mask");
    if (cJSON_IsTrue(cJSON_GetObjectItem(cfg, "causal")))
        cJSON_AddStringToObject(b, "mask", "causal");
    const cJSON *scale = cJSON_GetObjectItem(cfg, "scale");
    if (cJSON_IsNumber(scale))
        cJSON_AddNumberToObject(b, "scale", scale->valuedouble);
    cJSON_AddItemToObject(
        b, "residual",
        cJSON_Duplicate(cJSON_GetObjectItem(cfg, "residual"), 1));
    cJSON *ret = cJSON_CreateArray();
    const char *names[] = {"weights", "mean_weights", "q",      "k",
                           "v",       "heads_output", "output", "scores"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cJSON_AddItemToArray(ret, cJSON_CreateString(names[i]));
    cJSON_AddItemToObject(b, "return", ret);
    return b;
}

static void expect_all_arrays(const cJSON *resp, const cJSON *expected)
{
    expect_numbers(resp, "weights", expected, "weights", 1e-5, 0);
    expect_numbers(resp, "mean_weights", expected, "mean_weights", 1e-5, 0);
    expect_numbers(resp, "scores", expected, "scores", 1e-5, 1e-4);
    expect_numbers(resp, "q", expected, "q", 1e-5, 1e-4);
    expect_numbers(resp, "k", expected, "k", 1e-5, 1e-4);
    expect_numbers(resp, "v", expected, "v", 1e-5, 1e-4);
    expect_numbers(resp, "heads_output", expected, "heads_out", 1e-5, 1e-4);
    expect_numbers(resp, "output", expected, "output", 1e-5, 1e-4);
}

/* ------------------------------------------------------------- golden */

static void test_sentence_matches_reference(void **state)
{
    (void)state;
    cJSON *g = load_golden("default_sentence");
    const cJSON *cfg = cJSON_GetObjectItem(g, "config");
    cJSON *body = body_from_config(cfg);
    cJSON_AddStringToObject(body, "sentence",
                            "The cat chased the mouse because it was hungry");
    cJSON *resp = post_ok("/attention", body);
    const cJSON *tokens = cJSON_GetObjectItem(resp, "tokens");
    assert_int_equal(cJSON_GetArraySize(tokens), 9);
    assert_string_equal(cJSON_GetArrayItem(tokens, 1)->valuestring, "cat");
    expect_all_arrays(resp, cJSON_GetObjectItem(g, "expected"));
    /* weights of a sentence: [heads][N][N], no batch dimension */
    assert_int_equal(depth(cJSON_GetObjectItem(resp, "weights")), 3);
    const cJSON *config = cJSON_GetObjectItem(resp, "config");
    assert_int_equal(num(config, "d_k"), 8);
    assert_string_equal(cJSON_GetObjectItem(config, "mode")->valuestring,
                        "projected");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(resp, "warnings")),
                     0);
    cJSON_Delete(resp);
    cJSON_Delete(body);
    cJSON_Delete(g);
}

static void test_cross_attention_batch_matches_reference(void **state)
{
    (void)state;
    cJSON *g = load_golden("cross_attention");
    const cJSON *cfg = cJSON_GetObjectItem(g, "config"),
                *in = cJSON_GetObjectItem(g, "inputs");
    cJSON *body = body_from_config(cfg);
    const size_t xd[3] = {num(cfg, "batch"), num(cfg, "n_query"),
                          num(cfg, "d_model")};
    const size_t cd[3] = {num(cfg, "batch"), num(cfg, "n_ctx"),
                          num(cfg, "d_ctx")};
    cJSON_AddItemToObject(body, "embeddings",
                          reshape(cJSON_GetObjectItem(in, "x"), xd, 3));
    cJSON *ctx = cJSON_CreateObject();
    cJSON_AddItemToObject(ctx, "embeddings",
                          reshape(cJSON_GetObjectItem(in, "context"), cd, 3));
    cJSON_AddItemToObject(body, "context", ctx);
    cJSON *resp = post_ok("/attention", body);
    expect_all_arrays(resp, cJSON_GetObjectItem(g, "expected"));
    /* a batch keeps its dimension: [B][heads][N][M] */
    assert_int_equal(depth(cJSON_GetObjectItem(resp, "weights")), 4);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(resp, "tokens")));
    assert_int_equal(num(cJSON_GetObjectItem(resp, "config"), "context_tokens"),
                     7);
    cJSON_Delete(resp);
    cJSON_Delete(body);
    cJSON_Delete(g);
}

static void test_causal_key_padding_batch(void **state)
{
    (void)state;
    cJSON *g = load_golden("causal_key_padding");
    const cJSON *cfg = cJSON_GetObjectItem(g, "config"),
                *in = cJSON_GetObjectItem(g, "inputs");
    cJSON *body = body_from_config(cfg);
    const size_t xd[3] = {num(cfg, "batch"), num(cfg, "n_query"),
                          num(cfg, "d_model")};
    cJSON_AddItemToObject(body, "embeddings",
                          reshape(cJSON_GetObjectItem(in, "x"), xd, 3));
    /* key padding as booleans, one row per sequence */
    cJSON *kp = cJSON_CreateArray();
    const cJSON *flat = cJSON_GetObjectItem(in, "key_padding")->child;
    for (size_t b = 0; b < xd[0]; b++) {
        cJSON *row = cJSON_CreateArray();
        for (size_t j = 0; j < xd[1]; j++, flat = flat->next)
            cJSON_AddItemToArray(row, cJSON_CreateBool(flat->valuedouble != 0));
        cJSON_AddItemToArray(kp, row);
    }
    cJSON_AddItemToObject(body, "key_padding", kp);
    cJSON *resp = post_ok("/attention", body);
    expect_all_arrays(resp, cJSON_GetObjectItem(g, "expected"));
    cJSON_Delete(resp);
    cJSON_Delete(body);
    cJSON_Delete(g);
}

/* The tutorial's shapes with its own parameters, pasted in PyTorch's
 * layout: nested modules, then nn.MultiheadAttention's fused form. */
static void test_explicit_pytorch_params(void **state)
{
    (void)state;
    cJSON *g = load_golden("vit_heads4");
    const cJSON *cfg = cJSON_GetObjectItem(g, "config"),
                *in = cJSON_GetObjectItem(g, "inputs"),
                *p = cJSON_GetObjectItem(in, "params");
    const size_t dm = num(cfg, "d_model"),
                 hk = num(cfg, "heads") * num(cfg, "d_k"),
                 dout = num(cfg, "d_out");
    for (int form = 0; form < 2; form++) {
        cJSON *body = body_from_config(cfg);
        cJSON_DeleteItemFromObject(body, "seed");
        cJSON_DeleteItemFromObject(body, "bias");
        cJSON_DeleteItemFromObject(body, "out_bias");
        const size_t xd[3] = {num(cfg, "batch"), num(cfg, "n_query"), dm};
        cJSON_AddItemToObject(body, "embeddings",
                              reshape(cJSON_GetObjectItem(in, "x"), xd, 3));
        cJSON *params = cJSON_CreateObject();
        const size_t wq[2] = {hk, dm}, wo[2] = {dout, hk}, bq[1] = {hk},
                     bo[1] = {dout};
        const char *mods[] = {"q_proj", "k_proj", "v_proj"};
        if (form == 0) {
            for (int m = 0; m < 3; m++) {
                char wname[32], bname[32];
                snprintf(wname, sizeof wname, "%s.weight", mods[m]);
                snprintf(bname, sizeof bname, "%s.bias", mods[m]);
                cJSON *mod = cJSON_CreateObject();
                cJSON_AddItemToObject(
                    mod, "weight",
                    reshape(cJSON_GetObjectItem(p, wname), wq, 2));
                cJSON_AddItemToObject(
                    mod, "bias", reshape(cJSON_GetObjectItem(p, bname), bq, 1));
                cJSON_AddItemToObject(params, mods[m], mod);
            }
        } else {
            /* in_proj_weight = cat(W_q, W_k, W_v) */
            cJSON *w = cJSON_CreateArray(), *b = cJSON_CreateArray();
            for (int m = 0; m < 3; m++) {
                char wname[32], bname[32];
                snprintf(wname, sizeof wname, "%s.weight", mods[m]);
                snprintf(bname, sizeof bname, "%s.bias", mods[m]);
                cJSON *rows = reshape(cJSON_GetObjectItem(p, wname), wq, 2);
                while (rows->child)
                    cJSON_AddItemToArray(
                        w, cJSON_DetachItemViaPointer(rows, rows->child));
                cJSON_Delete(rows);
                const cJSON *v;
                cJSON_ArrayForEach(v, cJSON_GetObjectItem(p, bname))
                    cJSON_AddItemToArray(b, cJSON_CreateNumber(v->valuedouble));
            }
            cJSON_AddItemToObject(params, "in_proj_weight", w);
            cJSON_AddItemToObject(params, "in_proj_bias", b);
        }
        cJSON_AddItemToObject(
            params, "out_proj.weight",
            reshape(cJSON_GetObjectItem(p, "out_proj.weight"), wo, 2));
        cJSON_AddItemToObject(
            params, "out_proj.bias",
            reshape(cJSON_GetObjectItem(p, "out_proj.bias"), bo, 1));
        cJSON_AddItemToObject(body, "params", params);
        cJSON *resp = post_ok("/attention", body);
        expect_all_arrays(resp, cJSON_GetObjectItem(g, "expected"));
        const cJSON *config = cJSON_GetObjectItem(resp, "config");
        assert_string_equal(cJSON_GetObjectItem(config, "params")->valuestring,
                            "given");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(config, "bias")));
        cJSON_Delete(resp);
        cJSON_Delete(body);
    }
    cJSON_Delete(g);
}

/* The parameters a seed stands for come back in the layout the params
 * option takes, and sending them back gives the same answer. */
static void test_params_round_trip(void **state)
{
    (void)state;
    const char *req = "{\"sentence\":\"the cat sat on the mat\",\"d_model\":16,"
                      "\"heads\":4,\"bias\":true,\"seed\":5,"
                      "\"return\":[\"weights\",\"output\",\"params\"]}";
    struct reply a;
    assert_true(post_json(&srv, "/attention", req, &a));
    assert_int_equal(a.status, 200);
    cJSON *first = cJSON_Parse(a.body);
    cJSON *again = cJSON_CreateObject();
    cJSON_AddStringToObject(again, "sentence", "the cat sat on the mat");
    cJSON_AddNumberToObject(again, "d_model", 16);
    cJSON_AddNumberToObject(again, "heads", 4);
    cJSON_AddNumberToObject(again, "seed", 5);
    cJSON_AddItemToObject(
        again, "params",
        cJSON_Duplicate(cJSON_GetObjectItem(first, "params"), 1));
    cJSON *ret = cJSON_CreateArray();
    cJSON_AddItemToArray(ret, cJSON_CreateString("weights"));
    cJSON_AddItemToArray(ret, cJSON_CreateString("output"));
    cJSON_AddItemToObject(again, "return", ret);
    cJSON *second = post_ok("/attention", again);
    char *w1 = cJSON_PrintUnformatted(cJSON_GetObjectItem(first, "weights"));
    char *w2 = cJSON_PrintUnformatted(cJSON_GetObjectItem(second, "weights"));
    char *o1 = cJSON_PrintUnformatted(cJSON_GetObjectItem(first, "output"));
    char *o2 = cJSON_PrintUnformatted(cJSON_GetObjectItem(second, "output"));
    assert_string_equal(w1, w2);
    assert_string_equal(o1, o2);
    free(w1);
    free(w2);
    free(o1);
    free(o2);
    cJSON_Delete(first);
    cJSON_Delete(second);
    cJSON_Delete(again);
    reply_free(&a);
}

/* ---------------------------------------------------- GET, determinism */

static void test_get_equals_post_and_is_deterministic(void **state)
{
    (void)state;
    const char *json = "{\"sentence\":\"The cat chased the mouse\",\"heads\":4,"
                       "\"seed\":7,\"mask\":\"causal\",\"positional\":\"rope\","
                       "\"return\":[\"weights\",\"output\"]}";
    struct reply p1, p2, g1;
    assert_true(post_json(&srv, "/attention", json, &p1));
    assert_true(post_json(&srv, "/attention", json, &p2));
    assert_true(
        http_call(&srv, "GET",
                  "/attention?sentence=The%20cat%20chased%20the%20mouse&heads=4"
                  "&seed=7&mask=causal&positional=rope&return=weights,output",
                  NULL, 0, NULL, &g1));
    assert_int_equal(p1.status, 200);
    assert_int_equal(g1.status, 200);
    assert_int_equal(p1.len, p2.len);
    assert_memory_equal(p1.body, p2.body, p1.len);
    assert_int_equal(p1.len, g1.len);
    assert_memory_equal(p1.body, g1.body, p1.len);
    char timing[256], etag[64], cache[64];
    assert_true(reply_header(&p1, "Server-Timing", timing, sizeof timing));
    assert_non_null(strstr(timing, "compute;dur="));
    /* milliseconds to three decimals: "parse;dur=0.091, compute;dur=1.250" */
    double parse_ms = -1, compute_ms = -1;
    int at_dot = 0, end = 0;
    assert_int_equal(sscanf(timing, "parse;dur=%lf, compute;dur=%lf", &parse_ms,
                            &compute_ms),
                     2);
    assert_true(parse_ms >= 0 && compute_ms >= 0 && compute_ms < 60e3);
    assert_int_equal(sscanf(strstr(timing, "compute;dur="),
                            "compute;dur=%*[0-9]%n.%*[0-9]%n", &at_dot, &end),
                     0);
    assert_int_equal(end - at_dot, 4);
    assert_null(strstr(p1.body, "dur")); /* timing never in the body */
    assert_true(reply_header(&g1, "ETag", etag, sizeof etag));
    assert_true(reply_header(&g1, "Cache-Control", cache, sizeof cache));
    assert_non_null(strstr(cache, "max-age"));
    /* a revalidation answers 304 without recomputing */
    char inm[96];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *hdr[] = {inm, NULL};
    struct reply g2;
    assert_true(
        http_call(&srv, "GET",
                  "/attention?sentence=The%20cat%20chased%20the%20mouse&heads=4"
                  "&seed=7&mask=causal&positional=rope&return=weights,output",
                  NULL, 0, hdr, &g2));
    assert_int_equal(g2.status, 304);
    /* causal: weights above the diagonal are exactly 0 */
    cJSON *doc = cJSON_Parse(p1.body);
    const cJSON *w = cJSON_GetObjectItem(doc, "weights");
    const cJSON *head0 = cJSON_GetArrayItem(w, 0);
    assert_true(
        cJSON_GetArrayItem(cJSON_GetArrayItem(head0, 0), 1)->valuedouble ==
        0.0);
    cJSON_Delete(doc);
    reply_free(&p1);
    reply_free(&p2);
    reply_free(&g1);
    reply_free(&g2);
}

static void test_basic_mode_and_precision(void **state)
{
    (void)state;
    cJSON *g = load_golden("tutorial_basic");
    const cJSON *cfg = cJSON_GetObjectItem(g, "config"),
                *in = cJSON_GetObjectItem(g, "inputs");
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "mode", "basic");
    const size_t xd[2] = {num(cfg, "n_query"), num(cfg, "d_model")};
    cJSON_AddItemToObject(body, "embeddings",
                          reshape(cJSON_GetObjectItem(in, "x"), xd, 2));
    cJSON *ret = cJSON_CreateArray();
    cJSON_AddItemToArray(ret, cJSON_CreateString("weights"));
    cJSON_AddItemToArray(ret, cJSON_CreateString("output"));
    cJSON_AddItemToObject(body, "return", ret);
    cJSON *resp = post_ok("/attention", body);
    expect_numbers(resp, "weights", cJSON_GetObjectItem(g, "expected"),
                   "weights", 1e-5, 0);
    expect_numbers(resp, "output", cJSON_GetObjectItem(g, "expected"), "output",
                   1e-5, 1e-4);
    assert_int_equal(num(cJSON_GetObjectItem(resp, "config"), "heads"), 1);
    cJSON_Delete(resp);
    /* precision: 3 significant digits */
    cJSON_AddNumberToObject(body, "precision", 3);
    char *text = cJSON_PrintUnformatted(body);
    struct reply r;
    assert_true(post_json(&srv, "/attention", text, &r));
    free(text);
    assert_int_equal(r.status, 200);
    const char *wts = strstr(r.body, "\"weights\":");
    assert_non_null(wts);
    /* no number in the weights has more than 3 significant digits */
    for (const char *p = wts + 10; *p && *p != '"'; p++) {
        if (*p < '0' || *p > '9')
            continue;
        int digits = 0, started = 0;
        while ((*p >= '0' && *p <= '9') || *p == '.') {
            if (*p != '.' && (*p != '0' || started)) {
                started = 1;
                digits++;
            }
            p++;
        }
        if (*p == 'e')
            while (*p && *p != ',' && *p != ']')
                p++;
        assert_true(digits <= 3);
    }
    reply_free(&r);
    cJSON_Delete(body);
    cJSON_Delete(g);
}

static void test_fully_masked_rows_warn(void **state)
{
    (void)state;
    const char *json = "{\"embeddings\":[[1,0],[0,1],[1,1]],\"heads\":1,"
                       "\"mask\":[[1,1,1],[0,0,0],[1,0,1]],"
                       "\"return\":[\"weights\",\"heads_output\"]}";
    struct reply r;
    assert_true(post_json(&srv, "/attention", json, &r));
    assert_int_equal(r.status, 200);
    cJSON *doc = cJSON_Parse(r.body);
    const cJSON *warnings = cJSON_GetObjectItem(doc, "warnings");
    assert_int_equal(cJSON_GetArraySize(warnings), 1);
    const cJSON *w0 = cJSON_GetArrayItem(warnings, 0);
    assert_string_equal(cJSON_GetObjectItem(w0, "code")->valuestring,
                        "fully_masked_rows");
    assert_int_equal(
        cJSON_GetArrayItem(cJSON_GetObjectItem(w0, "rows"), 0)->valuedouble, 1);
    const cJSON *row1 = cJSON_GetArrayItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "weights"), 0), 1);
    const cJSON *v;
    cJSON_ArrayForEach(v, row1) assert_true(v->valuedouble == 0.0);
    assert_null(strstr(r.body, "NaN"));
    assert_null(strstr(strstr(r.body, "\"weights\""), "null"));
    cJSON_Delete(doc);
    reply_free(&r);
}

static double item2(const cJSON *a, int i, int j)
{
    return cJSON_GetArrayItem(cJSON_GetArrayItem(a, i), j)->valuedouble;
}

/* Head measures without a model: one per head (per sequence of a batch),
 * read back from the same answer's weights; the patterns find repeated
 * tokens; under cross-attention the positional ones are null; weights
 * computed only for them are not returned. */
static void test_head_stats_without_model(void **state)
{
    (void)state;
    struct reply r;
    assert_true(post_json(&srv, "/attention",
                          "{\"sentence\":\"a b a b c\",\"heads\":2,"
                          "\"d_model\":8,\"mask\":\"causal\","
                          "\"return\":[\"weights\",\"head_stats\"]}",
                          &r));
    assert_int_equal(r.status, 200);
    cJSON *doc = cJSON_Parse(r.body);
    const cJSON *w = cJSON_GetObjectItem(doc, "weights");
    const cJSON *hs = cJSON_GetObjectItem(doc, "head_stats");
    for (int a = 0; a < 2; a++) {
        const cJSON *A = cJSON_GetArrayItem(w, a);
        double prev = 0;
        for (int i = 1; i < 5; i++)
            prev += item2(A, i, i - 1);
        // "a" at 2 repeats 0, "b" at 3 repeats 1
        const double dup = (item2(A, 2, 0) + item2(A, 3, 1)) / 5;
        const double ind = (item2(A, 2, 1) + item2(A, 3, 2)) / 5;
        const cJSON *m = cJSON_GetObjectItem(hs, "previous_token");
        assert_int_equal(cJSON_GetArraySize(m), 2);
        assert_true(fabs(cJSON_GetArrayItem(m, a)->valuedouble - prev / 5) <
                    1e-6);
        m = cJSON_GetObjectItem(hs, "duplicate_token");
        assert_true(dup > 0);
        assert_true(fabs(cJSON_GetArrayItem(m, a)->valuedouble - dup) < 1e-6);
        m = cJSON_GetObjectItem(hs, "induction");
        assert_true(fabs(cJSON_GetArrayItem(m, a)->valuedouble - ind) < 1e-6);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(
                             cJSON_GetObjectItem(hs, "key_received"), a)),
                         5);
    }
    cJSON_Delete(doc);
    reply_free(&r);

    // a batch: [batch][heads]; dropout: the weights it needs are not shown
    assert_true(post_json(&srv, "/attention",
                          "{\"embeddings\":[[[1,2],[3,4],[1,2]],"
                          "[[1,1],[2,2],[3,3]]],\"heads\":2,"
                          "\"dropout\":0.5,\"return\":[\"head_stats\"]}",
                          &r));
    assert_int_equal(r.status, 200);
    doc = cJSON_Parse(r.body);
    hs = cJSON_GetObjectItem(doc, "head_stats");
    const cJSON *e = cJSON_GetObjectItem(hs, "entropy");
    assert_int_equal(cJSON_GetArraySize(e), 2);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(e, 0)), 2);
    assert_null(cJSON_GetObjectItem(doc, "weights_before_dropout"));
    assert_non_null(strstr(r.body, "\"return\":[\"head_stats\"]"));
    // the first sequence repeats its first row, the second does not
    assert_true(item2(cJSON_GetObjectItem(hs, "duplicate_token"), 0, 0) > 0);
    assert_true(item2(cJSON_GetObjectItem(hs, "duplicate_token"), 1, 0) == 0);
    cJSON_Delete(doc);
    reply_free(&r);

    // cross-attention: no positions shared, so null
    assert_true(post_json(&srv, "/attention",
                          "{\"sentence\":\"a b c\",\"heads\":2,"
                          "\"d_model\":8,\"context\":{\"sentence\":\"x y\"},"
                          "\"return\":[\"head_stats\"]}",
                          &r));
    assert_int_equal(r.status, 200);
    doc = cJSON_Parse(r.body);
    hs = cJSON_GetObjectItem(doc, "head_stats");
    assert_true(cJSON_IsNull(
        cJSON_GetArrayItem(cJSON_GetObjectItem(hs, "previous_token"), 0)));
    assert_true(cJSON_IsNumber(
        cJSON_GetArrayItem(cJSON_GetObjectItem(hs, "entropy"), 0)));
    cJSON_Delete(doc);
    reply_free(&r);
}

/* sparse_weights without a model: per sequence of a batch, per head, each
 * row's top keys as the dense weights of the same answer order them; a
 * causal row lists only the keys it sees. */
static void test_sparse_weights(void **state)
{
    (void)state;
    struct reply r;
    assert_true(post_json(&srv, "/attention",
                          "{\"embeddings\":[[[1,2,0],[3,4,1],[1,2,0],[0,1,1],"
                          "[2,2,2]],[[1,1,1],[2,2,0],[3,3,1],[0,0,1],[1,0,0]]],"
                          "\"heads\":3,\"mask\":\"causal\",\"sparse_k\":3,"
                          "\"return\":[\"weights\",\"sparse_weights\"]}",
                          &r));
    assert_int_equal(r.status, 200);
    cJSON *doc = cJSON_Parse(r.body);
    const cJSON *sp = cJSON_GetObjectItem(doc, "sparse_weights");
    assert_int_equal(cJSON_GetObjectItem(sp, "k")->valuedouble, 3);
    const cJSON *w = cJSON_GetObjectItem(doc, "weights");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(sp, "keys")), 2);
    for (int b = 0; b < 2; b++)
        sparse_rows_check(
            cJSON_GetArrayItem(w, b),
            cJSON_GetArrayItem(cJSON_GetObjectItem(sp, "keys"), b),
            cJSON_GetArrayItem(cJSON_GetObjectItem(sp, "weights"), b), 3);
    // row 0 sees key 0 alone
    assert_int_equal(
        cJSON_GetArraySize(cJSON_GetArrayItem(
            cJSON_GetArrayItem(
                cJSON_GetArrayItem(cJSON_GetObjectItem(sp, "keys"), 0), 0),
            0)),
        1);
    assert_non_null(strstr(r.body, "\"sparse_k\":3"));
    cJSON_Delete(doc);
    reply_free(&r);
    // sparse_k out of its range, named
    assert_true(post_json(&srv, "/attention",
                          "{\"sentence\":\"a b\",\"sparse_k\":300,"
                          "\"return\":[\"sparse_weights\"]}",
                          &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"/sparse_k\""));
    reply_free(&r);
}

/* "w w w ... " : n copies of word and a space; the caller frees it. */
static char *repeat_words(const char *word, size_t n)
{
    const size_t len = strlen(word);
    char *s = malloc(n * (len + 1) + 1);
    for (size_t i = 0; i < n; i++) {
        memcpy(s + i * (len + 1), word, len);
        s[i * (len + 1) + len] = ' ';
    }
    s[n * (len + 1)] = '\0';
    return s;
}

/* sparse_weights whose JSON could not fit an answer's text: refused
 * before any work, naming sparse_k. */
static void test_sparse_weights_too_large(void **state)
{
    (void)state;
    char *words = repeat_words("a", 500);
    char *body = malloc(strlen(words) + 128);
    snprintf(body, strlen(words) + 128,
             "{\"sentence\":\"%s\",\"heads\":32,\"d_model\":64,"
             "\"sparse_k\":256,"
             "\"return\":[\"sparse_weights\"]}",
             words);
    struct reply r;
    const double t0 = clock_seconds();
    assert_true(post_json(&srv, "/attention", body, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"/sparse_k\""));
    assert_non_null(strstr(r.body, "MiB of JSON"));
    assert_true(clock_seconds() - t0 < 2.0);
    reply_free(&r);
    free(body);
    free(words);
}

static void test_large_weights_stream(void **state)
{
    (void)state;
    /* 12 heads x 400 x 400 weights: streamed, complete and parseable */
    char *sentence = repeat_words("cat dog", 200);
    char *json = malloc(strlen(sentence) + 200);
    snprintf(json, strlen(sentence) + 200,
             "{\"sentence\":\"%s\",\"heads\":12,\"d_model\":96}", sentence);
    struct reply r;
    assert_true(post_json(&srv, "/attention", json, &r));
    assert_int_equal(r.status, 200);
    cJSON *doc = cJSON_Parse(r.body);
    assert_non_null(doc);
    double *all = malloc(12 * 400 * 400 * sizeof *all);
    assert_int_equal(
        flatten(cJSON_GetObjectItem(doc, "weights"), all, 12 * 400 * 400, 0),
        12 * 400 * 400);
    double row = 0;
    for (int j = 0; j < 400; j++)
        row += all[j];
    assert_true(fabs(row - 1.0) < 1e-5);
    free(all);
    cJSON_Delete(doc);
    reply_free(&r);
    free(json);
    free(sentence);
}

/* PyTorch's options over HTTP: a state_dict with bias_k and bias_v,
 * add_zero_attn and an additive mask with "-inf" and -1e31, answered with
 * nn.MultiheadAttention's numbers (tests/golden/parity/). */
static void test_pytorch_parity_over_http(void **state)
{
    (void)state;
    const char *names[] = {"parity/bias_kv_zero_attn_additive",
                           "parity/bool_block_per_head"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        cJSON *g = load_golden(names[k]);
        const cJSON *expected = cJSON_GetObjectItem(g, "expected");
        cJSON *resp = post_ok("/attention", cJSON_GetObjectItem(g, "request"));
        expect_numbers(resp, "weights", expected, "weights", 1e-5, 0);
        expect_numbers(resp, "mean_weights", expected, "mean_weights", 1e-5, 0);
        expect_numbers(resp, "output", expected, "output", 5e-5, 0);
        const cJSON *config = cJSON_GetObjectItem(resp, "config");
        const cJSON *echo = cJSON_GetObjectItem(g, "echo");
        const cJSON *want;
        cJSON_ArrayForEach(want, echo)
        {
            if (!cJSON_Compare(want, cJSON_GetObjectItem(config, want->string),
                               true))
                fail_msg("%s: config.%s differs", names[k], want->string);
        }
        cJSON_Delete(resp);
        cJSON_Delete(g);
    }
}

/* -------------------------------------------------------------- errors */

struct bad_case {
    const char *body;
    long status;
    const char *pointer; /* NULL: no pointer expected */
    const char *detail;  /* a substring of the detail */
};

static void expect_problem(const struct reply *r, long status,
                           const char *pointer, const char *detail,
                           const char *what)
{
    if (r->status != status)
        fail_msg("%s: status %ld, expected %ld (%s)", what, r->status, status,
                 r->body);
    assert_string_equal(r->content_type, "application/problem+json");
    cJSON *doc = cJSON_Parse(r->body);
    assert_non_null(doc);
    assert_int_equal((long)cJSON_GetObjectItem(doc, "status")->valuedouble,
                     status);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(doc, "title")));
    const char *d = cJSON_GetObjectItem(doc, "detail")->valuestring;
    if (detail && !strstr(d, detail))
        fail_msg("%s: detail \"%s\" lacks \"%s\"", what, d, detail);
    const cJSON *p = cJSON_GetObjectItem(doc, "pointer");
    if (pointer && (!p || strcmp(p->valuestring, pointer)))
        fail_msg("%s: pointer %s, expected %s", what,
                 p ? p->valuestring : "(none)", pointer);
    cJSON_Delete(doc);
}

static void test_invalid_requests(void **state)
{
    (void)state;
    const struct bad_case cases[] = {
        {"{\"sentence\": \"hi\"", 400, NULL, "byte"},
        {"[1,2]", 422, NULL, "expected a JSON object"},
        {"{\"sentence\":\"a b\"} {}", 400, NULL, "byte"},
        {"{}", 422, NULL, "one of \"sentence\""},
        {"{\"sentence\":\"a\",\"tokens\":[\"a\"]}", 422, NULL, "exactly one"},
        {"{\"sentence\":\"the cat\",\"heads\":6}", 422, "/heads",
         "heads (6) must divide d_model (64) when d_k is not given"},
        {"{\"sentence\":\"the cat\",\"heads\":\"8\"}", 422, "/heads",
         "a string"},
        {"{\"sentence\":\"the cat\",\"heads\":2.5}", 422, "/heads", "integer"},
        {"{\"sentence\":\"the cat\",\"heads\":0}", 422, "/heads", "between 1"},
        {"{\"sentence\":\"the cat\",\"colour\":1}", 422, "/colour",
         "unknown field"},
        {"{\"sentence\":\"the cat\",\"mode\":\"fancy\"}", 422, "/mode",
         "\"fancy\""},
        {"{\"sentence\":\"the cat\",\"positional\":\"alibi\"}", 422,
         "/positional", "alibi"},
        {"{\"sentence\":\"the cat\",\"return\":[\"weights\",\"attn\"]}", 422,
         "/return/1", "attn"},
        {"{\"sentence\":\"the cat\",\"dropout\":1}", 422, "/dropout",
         "below 1"},
        {"{\"sentence\":\"the cat\",\"seed\":-1}", 422, "/seed", "-1"},
        {"{\"sentence\":\"   \"}", 422, "/sentence", "no tokens"},
        {"{\"embeddings\":[[1,2,3],[4,5]]}", 422, "/embeddings/1",
         "has 2 numbers; expected 3"},
        {"{\"embeddings\":[[1,2],[3,\"x\"]],\"heads\":1}", 422,
         "/embeddings/1/1", "a string"},
        {"{\"embeddings\":[[1,2],[3,1e39]],\"heads\":1}", 422,
         "/embeddings/1/1", "float32"},
        {"{\"embeddings\":[]}", 422, "/embeddings", "empty"},
        {"{\"embeddings\":[[]]}", 422, "/embeddings/0", "empty"},
        {"{\"embeddings\":[1,2,3]}", 422, "/embeddings", "1 dimension"},
        {"{\"embeddings\":[[1,2],[3,4]],\"d_model\":3,\"heads\":1}", 422,
         "/d_model", "width"},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"mask\":[[1,0]]}", 422,
         "/mask", "expected 2 x 2"},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"mask\":\"diagonal\"}",
         422, "/mask", "diagonal"},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"key_padding\":[true]}",
         422, "/key_padding", "one per key"},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"key_padding\":[true,"
         "\"no\"]}",
         422, "/key_padding/1", "a string"},
        {"{\"sentence\":\"a b\",\"context\":{\"sentence\":\"x\",\"foo\":1}}",
         422, "/context/foo", "unknown"},
        {"{\"sentence\":\"a b\",\"residual\":\"value\",\"d_out\":7}", 422,
         "/d_out", "residual"},
        {"{\"sentence\":\"a b\",\"kv_heads\":3}", 422, "/kv_heads",
         "must divide heads"},
        {"{\"sentence\":\"a b\",\"d_model\":5000}", 422, "/d_model",
         "between 1 and 4096"},
        {"{\"sentence\":\"a "
         "b\",\"heads\":1,\"d_model\":4,\"params\":{\"q_proj.weight\":[[1,2,3,"
         "4]]}}",
         422, "/params/q_proj.weight",
         "is [1][4]; this configuration needs [4][4] ([heads x d_k][d_model])"},
        {"{\"sentence\":\"a "
         "b\",\"heads\":1,\"d_model\":2,\"params\":{\"w\":[[1]]}}",
         422, "/params/w", "unknown parameter"},
        {"{\"sentence\":\"a\\u00ff\\ud800\"}", 400, NULL, "byte"},
        /* PyTorch's options */
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"mask_type\":\"float\"}",
         422, "/mask_type", "\"float\""},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"mask_convention\":"
         "\"deny\"}",
         422, "/mask_convention", "\"deny\""},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"add_zero_attn\":1}", 422,
         "/add_zero_attn", "true or false"},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"mask\":[[0,\"-Infinity\"]"
         ","
         "[0,0]]}",
         422, "/mask/0/1", "\"-inf\""},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"mask\":[[0,0.5],[1,1]],"
         "\"mask_type\":\"boolean\"}",
         422, "/mask/0/1", "neither 0 nor 1"},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":2,\"mask\":[[[[1,1],[1,1]]]]"
         "}",
         422, "/mask", "expected [B][heads][N][M] = 1 x 2 x 2 x 2"},
        {"{\"embeddings\":[[1,2],[3,4]],\"heads\":1,\"params\":{"
         "\"in_proj_weight\":[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]],"
         "\"out_proj.weight\":[[1,0],[0,1]],\"bias_v\":[1,2]}}",
         422, "/params", "lacks bias_k"},
        {"{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":[[1,2,3]]},"
         "\"heads\":1,\"params\":{\"q_proj_weight\":[[1,0],[0,1]],"
         "\"k_proj_weight\":[[1,0,0],[0,1,0]],\"v_proj_weight\":[[1,0],"
         "[0,1]]}}",
         422, "/params/v_proj_weight",
         "is [2][2]; this configuration needs [2][3]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct reply r;
        assert_true(post_json(&srv, "/attention", cases[i].body, &r));
        expect_problem(&r, cases[i].status, cases[i].pointer, cases[i].detail,
                       cases[i].body);
        reply_free(&r);
    }
}

static void test_too_many_tokens_and_output(void **state)
{
    (void)state;
    /* --max-tokens is 512 for this server */
    char *words = repeat_words("a", 600);
    char *json = malloc(strlen(words) + 32);
    snprintf(json, strlen(words) + 32, "{\"sentence\":\"%s\"}", words);
    free(words);
    struct reply r;
    assert_true(post_json(&srv, "/attention", json, &r));
    expect_problem(&r, 422, "/sentence", "more than 512 tokens", "600 tokens");
    reply_free(&r);
    free(json);
}

static void test_transport_errors(void **state)
{
    (void)state;
    struct reply r;
    /* 415: not JSON */
    const char *text[] = {"Content-Type: text/plain", NULL};
    assert_true(http_call(&srv, "POST", "/attention", "{}", 2, text, &r));
    expect_problem(&r, 415, NULL, "text/plain", "415");
    reply_free(&r);
    /* 413: over --max-body (4000000) */
    const size_t big = 4100000;
    char *body = malloc(big);
    memset(body, ' ', big);
    body[0] = '{';
    body[big - 1] = '}';
    const char *json[] = {"Content-Type: application/json", NULL};
    assert_true(http_call(&srv, "POST", "/attention", body, big, json, &r));
    expect_problem(&r, 413, NULL, "limit", "413");
    reply_free(&r);
    free(body);
    /* 405 with Allow */
    assert_true(http_call(&srv, "DELETE", "/attention", NULL, 0, NULL, &r));
    expect_problem(&r, 405, NULL, "DELETE", "405");
    char allow[64];
    assert_true(reply_header(&r, "Allow", allow, sizeof allow));
    assert_non_null(strstr(allow, "POST"));
    assert_non_null(strstr(allow, "GET"));
    reply_free(&r);
    assert_true(http_call(&srv, "POST", "/healthz", "", 0, json, &r));
    expect_problem(&r, 405, NULL, NULL, "405 healthz");
    reply_free(&r);
    /* 404 */
    assert_true(http_call(&srv, "GET", "/no/such/page", NULL, 0, NULL, &r));
    expect_problem(&r, 404, NULL, "no such", "404");
    reply_free(&r);
    assert_true(http_call(&srv, "POST", "/nothing", "{}", 2, json, &r));
    expect_problem(&r, 404, NULL, NULL, "404 post");
    reply_free(&r);
    /* GET errors point at the parameter */
    assert_true(http_call(&srv, "GET", "/attention?sentence=hi&heads=abc", NULL,
                          0, NULL, &r));
    expect_problem(&r, 422, NULL, "heads", "GET heads");
    reply_free(&r);
    assert_true(http_call(&srv, "GET", "/attention?sentence=hi&bogus=1", NULL,
                          0, NULL, &r));
    expect_problem(&r, 422, NULL, "bogus", "GET unknown");
    reply_free(&r);
    assert_true(http_call(&srv, "GET",
                          "/attention?sentence=the%20cat&format=png&head=9",
                          NULL, 0, NULL, &r));
    expect_problem(&r, 422, "/head", "head (9) is out of range", "head range");
    reply_free(&r);
    assert_true(http_call(
        &srv, "GET", "/attention?sentence=the%20cat&format=png&colormap=jet",
        NULL, 0, NULL, &r));
    expect_problem(&r, 422, "/colormap", "jet", "colormap");
    reply_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sentence_matches_reference),
        cmocka_unit_test(test_cross_attention_batch_matches_reference),
        cmocka_unit_test(test_causal_key_padding_batch),
        cmocka_unit_test(test_explicit_pytorch_params),
        cmocka_unit_test(test_params_round_trip),
        cmocka_unit_test(test_get_equals_post_and_is_deterministic),
        cmocka_unit_test(test_basic_mode_and_precision),
        cmocka_unit_test(test_fully_masked_rows_warn),
        cmocka_unit_test(test_head_stats_without_model),
        cmocka_unit_test(test_sparse_weights),
        cmocka_unit_test(test_sparse_weights_too_large),
        cmocka_unit_test(test_large_weights_stream),
        cmocka_unit_test(test_pytorch_parity_over_http),
        cmocka_unit_test(test_invalid_requests),
        cmocka_unit_test(test_too_many_tokens_and_output),
        cmocka_unit_test(test_transport_errors),
    };
    return cmocka_run_group_tests_name("api", tests, start, stop);
}
