/*
 * test_golden.c - the core against the golden vectors of tests/golden/,
 * computed in float64 by tests/golden/reference.py and cross-checked there
 * against PyTorch. One cmocka test per case file, plus the random streams,
 * embeddings, drawn parameters and tokenizer cases.
 *
 * Tolerances: weights within 1e-5 absolute (docs/math.md "Numerics"); every
 * other array within 1e-5 + 1e-4 * |reference|.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "attention.h"
#include "support.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_TOL 1e-5
#define ATOL 1e-5
#define RTOL 1e-4

static const char *golden_dir(void)
{
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    return dir ? dir : "tests/golden";
}

static cJSON *load_json(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", golden_dir(), name);
    return test_read_json(path);
}

static cJSON *get(const cJSON *obj, const char *key)
{
    cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item)
        fail_msg("golden file lacks \"%s\"", key);
    return item;
}

static size_t get_size(const cJSON *obj, const char *key)
{
    const cJSON *item = get(obj, key);
    assert_true(cJSON_IsNumber(item) && item->valuedouble >= 0);
    return (size_t)item->valuedouble;
}

static bool get_bool(const cJSON *obj, const char *key)
{
    return cJSON_IsTrue(get(obj, key));
}

static uint64_t get_u64(const cJSON *obj, const char *key)
{
    const cJSON *item = get(obj, key);
    assert_true(cJSON_IsString(item));
    return strtoull(item->valuestring, NULL, 10);
}

/* A JSON array of numbers as floats (NULL for null); *n gets the count. */
static float *floats(const cJSON *arr, size_t *n)
{
    if (cJSON_IsNull(arr))
        return NULL;
    assert_true(cJSON_IsArray(arr));
    const size_t count = (size_t)cJSON_GetArraySize(arr);
    float *out = malloc((count ? count : 1) * sizeof *out);
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) out[i++] = (float)v->valuedouble;
    if (n)
        *n = count;
    return out;
}

static double *doubles(const cJSON *arr, size_t *n)
{
    if (!arr || cJSON_IsNull(arr))
        return NULL;
    const size_t count = (size_t)cJSON_GetArraySize(arr);
    double *out = malloc((count ? count : 1) * sizeof *out);
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) out[i++] = v->valuedouble;
    *n = count;
    return out;
}

static uint8_t *bools(const cJSON *arr)
{
    if (cJSON_IsNull(arr))
        return NULL;
    uint8_t *out = malloc((size_t)cJSON_GetArraySize(arr) + 1);
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) out[i++] =
        cJSON_IsTrue(v) || (cJSON_IsNumber(v) && v->valuedouble != 0);
    return out;
}

static attn_residual residual_of(const char *s)
{
    return !strcmp(s, "value")   ? ATTN_RESIDUAL_VALUE
           : !strcmp(s, "input") ? ATTN_RESIDUAL_INPUT
                                 : ATTN_RESIDUAL_NONE;
}

static attn_positional positional_of(const char *s)
{
    return !strcmp(s, "sinusoidal") ? ATTN_POS_SINUSOIDAL
           : !strcmp(s, "rope")     ? ATTN_POS_ROPE
                                    : ATTN_POS_NONE;
}

static struct attn_config config_of(const cJSON *c)
{
    struct attn_config cfg = {
        .mode = !strcmp(get(c, "mode")->valuestring, "basic")
                    ? ATTN_MODE_BASIC
                    : ATTN_MODE_PROJECTED,
        .batch = get_size(c, "batch"),
        .n_query = get_size(c, "n_query"),
        .d_model = get_size(c, "d_model"),
        .n_ctx = get_size(c, "n_ctx"),
        .d_ctx = get_size(c, "d_ctx"),
        .heads = get_size(c, "heads"),
        .kv_heads = get_size(c, "kv_heads"),
        .d_k = get_size(c, "d_k"),
        .d_v = get_size(c, "d_v"),
        .d_out = get_size(c, "d_out"),
        .qkv_bias = get_bool(c, "qkv_bias"),
        .no_out_proj = !get_bool(c, "out_proj"),
        .out_bias = get_bool(c, "out_bias"),
        .residual = residual_of(get(c, "residual")->valuestring),
        .positional = positional_of(get(c, "positional")->valuestring),
        .dropout = (float)get(c, "dropout")->valuedouble,
        .seed = get_u64(c, "seed"),
        .causal = get_bool(c, "causal"),
    };
    cfg.cross = cfg.n_ctx != 0;
    const cJSON *scale = get(c, "scale");
    if (cJSON_IsNumber(scale)) {
        cfg.has_scale = true;
        cfg.scale = (float)scale->valuedouble;
    }
    return cfg;
}

/* Tokenize and embed a sentence case; the golden x must match exactly
 * what the spec's embeddings give, to the last bit of float32. */
static void check_sentence(const cJSON *in, const struct attn_config *cfg,
                           const float *x)
{
    const struct attn_tokenize_options opts = {
        .keep_case = get_bool(in, "keep_case"),
        .special_tokens = get_bool(in, "special_tokens")};
    const char *sentence = get(in, "sentence")->valuestring;
    struct attn_tokens toks;
    struct attn_error err;
    assert_int_equal(
        attn_tokenize(sentence, strlen(sentence), &opts, 0, &toks, &err),
        ATTN_OK);
    const cJSON *want = get(in, "tokens");
    assert_int_equal(toks.count, (size_t)cJSON_GetArraySize(want));
    assert_int_equal(toks.count, cfg->n_query);
    float *row = malloc(cfg->d_model * sizeof *row);
    for (size_t t = 0; t < toks.count; t++) {
        assert_string_equal(toks.text[t],
                            cJSON_GetArrayItem(want, (int)t)->valuestring);
        attn_embed_token(toks.text[t], strlen(toks.text[t]), cfg->seed,
                         cfg->d_model, row);
        for (size_t e = 0; e < cfg->d_model; e++)
            if (row[e] != x[t * cfg->d_model + e])
                fail_msg("embedding of \"%s\"[%zu] is %.9g, expected %.9g",
                         toks.text[t], e, (double)row[e],
                         (double)x[t * cfg->d_model + e]);
    }
    free(row);
    attn_tokens_free(&toks);
}

struct golden_params {
    struct attn_params p;
};

static void params_of(const cJSON *obj, struct attn_params *p)
{
    memset(p, 0, sizeof *p);
    if (cJSON_IsNull(obj))
        return;
    const struct {
        const char *name;
        const float **slot;
    } names[] = {
        {"q_proj.weight", &p->wq},   {"q_proj.bias", &p->bq},
        {"k_proj.weight", &p->wk},   {"k_proj.bias", &p->bk},
        {"v_proj.weight", &p->wv},   {"v_proj.bias", &p->bv},
        {"out_proj.weight", &p->wo}, {"out_proj.bias", &p->bo},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, names[i].name);
        *names[i].slot = t ? floats(t, NULL) : NULL;
    }
}

static void compare(const char *name, const char *array, const float *got,
                    const cJSON *expected, size_t count, bool weights,
                    double dropout)
{
    if (!got)
        return; /* not asked for in this pass */
    size_t n = 0;
    double *want =
        doubles(cJSON_GetObjectItemCaseSensitive(expected, array), &n);
    if (!want)
        return;
    assert_int_equal(n, count);
    if (weights) {
        const double d = max_abs_diff(got, want, n);
        if (!(d <= WEIGHT_TOL / (1.0 - dropout)))
            fail_msg("%s: %s off by %g (tolerance %g)", name, array, d,
                     WEIGHT_TOL);
    } else {
        const double r = max_tol_ratio(got, want, n, ATOL, RTOL);
        if (!(r <= 1.0))
            fail_msg("%s: %s off by %.3g times the tolerance", name, array, r);
    }
    free(want);
}

static void run_case(void **state)
{
    const char *file = *state;
    cJSON *doc = load_json(file);
    const cJSON *in = get(doc, "inputs"), *expected = get(doc, "expected");
    struct attn_config cfg = config_of(get(doc, "config"));
    float *x = floats(get(in, "x"), NULL);
    float *context = floats(get(in, "context"), NULL);
    uint8_t *mask = bools(get(in, "mask"));
    uint8_t *padding = bools(get(in, "key_padding"));
    struct attn_params params;
    params_of(get(in, "params"), &params);
    cfg.mask = mask;
    cfg.mask_batched = get_bool(in, "mask_batched");
    cfg.key_padding = padding;
    cfg.key_padding_batched = get_bool(in, "key_padding_batched");
    cfg.params = params.wq ? &params : NULL;
    if (cJSON_IsString(get(in, "sentence")))
        check_sentence(in, &cfg, x);

    const struct {
        const char *name;
        unsigned bit;
    } arrays[] = {
        {"weights", ATTN_WANT_WEIGHTS},
        {"scores", ATTN_WANT_SCORES},
        {"mean_weights", ATTN_WANT_MEAN_WEIGHTS},
        {"q", ATTN_WANT_Q},
        {"k", ATTN_WANT_K},
        {"v", ATTN_WANT_V},
        {"heads_out", ATTN_WANT_HEADS},
        {"output", ATTN_WANT_OUTPUT},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        const cJSON *e =
            cJSON_GetObjectItemCaseSensitive(expected, arrays[i].name);
        if (e && !cJSON_IsNull(e))
            cfg.want |= arrays[i].bit;
    }
    /* everything at once (full path), then the output alone (streaming) */
    for (int pass = 0; pass < 2; pass++) {
        struct attn_config c = cfg;
        if (pass == 1)
            c.want = ATTN_WANT_OUTPUT | (cfg.want & ATTN_WANT_HEADS);
        struct attn_result r;
        struct attn_error err;
        const attn_status st = attn_forward(&c, x, context, &r, &err);
        if (st != ATTN_OK)
            fail_msg("%s: %s", file, err.message);
        const size_t b = r.batch, n = r.n_query, m = r.n_ctx, h = r.heads,
                     g = r.kv_heads;
        const double p = cfg.dropout;
        compare(file, "weights", r.weights, expected, b * h * n * m, true, p);
        compare(file, "scores", r.scores, expected, b * h * n * m, false, p);
        compare(file, "mean_weights", r.mean_weights, expected, b * n * m, true,
                p);
        compare(file, "q", r.q, expected, b * n * h * r.d_k, false, p);
        compare(file, "k", r.k, expected, b * m * g * r.d_k, false, p);
        compare(file, "v", r.v, expected, b * m * g * r.d_v, false, p);
        compare(file, "heads_out", r.heads_out, expected, b * n * h * r.d_v,
                false, p);
        compare(file, "output", r.output, expected, b * n * r.d_out, false, p);
        const cJSON *fm = get(expected, "fully_masked");
        uint8_t *want_fm = bools(fm);
        for (size_t i = 0; i < b * n; i++)
            if (r.fully_masked[i] != want_fm[i])
                fail_msg("%s: fully_masked[%zu] is %d", file, i,
                         r.fully_masked[i]);
        free(want_fm);
        attn_result_free(&r);
    }
    for (int s = 0; s < 8; s++) {
        const float **slots[] = {&params.wq, &params.bq, &params.wk,
                                 &params.bk, &params.wv, &params.bv,
                                 &params.wo, &params.bo};
        free((void *)*slots[s]);
    }
    free(x);
    free(context);
    free(mask);
    free(padding);
    cJSON_Delete(doc);
}

/* Streams, embeddings and drawn parameters bit for bit. */
static void test_streams_embeddings_params(void **state)
{
    (void)state;
    cJSON *doc = load_json("embeddings.json");
    const cJSON *s;
    cJSON_ArrayForEach(s, get(doc, "streams"))
    {
        const char *label = get(s, "label")->valuestring;
        const uint64_t seed = get_u64(s, "seed");
        assert_true(attn_fnv1a64(label, strlen(label)) ==
                    get_u64(s, "fnv1a64"));
        const uint64_t key = attn_stream_key(seed, label, strlen(label));
        assert_true(key == get_u64(s, "key"));
        const cJSON *d;
        uint64_t n = 0;
        cJSON_ArrayForEach(d, get(s, "draws"))
        {
            assert_true(attn_stream_draw(key, n) ==
                        strtoull(d->valuestring, NULL, 10));
            n++;
        }
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, get(doc, "tokens"))
    {
        const char *text = get(t, "token")->valuestring;
        const size_t d = get_size(t, "d");
        size_t n = 0;
        float *want = floats(get(t, "values"), &n);
        assert_int_equal(n, d);
        float *got = malloc(d * sizeof *got);
        attn_embed_token(text, strlen(text), get_u64(t, "seed"), d, got);
        for (size_t e = 0; e < d; e++)
            if (got[e] != want[e])
                fail_msg(
                    "embedding of \"%s\" (d %zu)[%zu]: %.9g, expected %.9g",
                    text, d, e, (double)got[e], (double)want[e]);
        free(got);
        free(want);
    }
    const cJSON *pd = get(doc, "params");
    struct attn_config cfg = config_of(get(pd, "config"));
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
    struct attn_params drawn;
    assert_int_equal(attn_params_draw(&cfg, &drawn, &err), ATTN_OK);
    struct attn_params want;
    params_of(get(pd, "tensors"), &want);
    const float **g_slots[] = {&drawn.wq, &drawn.bq, &drawn.wk, &drawn.bk,
                         &drawn.wv, &drawn.bv, &drawn.wo, &drawn.bo};
    const float **w_slots[] = {&want.wq, &want.bq, &want.wk, &want.bk,
                         &want.wv, &want.bv, &want.wo, &want.bo};
    const char *names[] = {"q_proj.weight",   "q_proj.bias",   "k_proj.weight",
                           "k_proj.bias",     "v_proj.weight", "v_proj.bias",
                           "out_proj.weight", "out_proj.bias"};
    for (int i = 0; i < 8; i++) {
        const cJSON *arr =
            cJSON_GetObjectItemCaseSensitive(get(pd, "tensors"), names[i]);
        if (!arr || cJSON_IsNull(arr)) {
            assert_null(*g_slots[i]);
            continue;
        }
        assert_non_null(*g_slots[i]);
        const int count = cJSON_GetArraySize(arr);
        for (int e = 0; e < count; e++)
            if ((*g_slots[i])[e] != (*w_slots[i])[e])
                fail_msg("%s[%d]: %.9g, expected %.9g", names[i], e,
                         (double)(*g_slots[i])[e], (double)(*w_slots[i])[e]);
        free((void *)*w_slots[i]);
    }
    attn_params_free(&drawn);
    cJSON_Delete(doc);
}

static void test_tokenizer_cases(void **state)
{
    (void)state;
    cJSON *doc = load_json("tokenizer.json");
    const cJSON *c;
    int count = 0;
    cJSON_ArrayForEach(c, get(doc, "cases"))
    {
        const char *input = get(c, "input")->valuestring;
        const struct attn_tokenize_options opts = {
            .keep_case = get_bool(c, "keep_case"),
            .special_tokens = get_bool(c, "special_tokens")};
        struct attn_tokens toks;
        struct attn_error err;
        if (attn_tokenize(input, strlen(input), &opts, 0, &toks, &err) !=
            ATTN_OK)
            fail_msg("case %d: %s", count, err.message);
        const cJSON *want = get(c, "tokens");
        if (toks.count != (size_t)cJSON_GetArraySize(want))
            fail_msg("case %d (%s): %zu tokens, expected %d", count, input,
                     toks.count, cJSON_GetArraySize(want));
        for (size_t t = 0; t < toks.count; t++)
            if (strcmp(toks.text[t],
                       cJSON_GetArrayItem(want, (int)t)->valuestring))
                fail_msg("case %d (%s): token %zu is \"%s\", expected \"%s\"",
                         count, input, t, toks.text[t],
                         cJSON_GetArrayItem(want, (int)t)->valuestring);
        attn_tokens_free(&toks);
        count++;
    }
    assert_true(count > 0);
    cJSON_Delete(doc);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    DIR *dir = opendir(golden_dir());
    if (!dir) {
        fprintf(stderr, "test_golden: %s: %s\n", golden_dir(), strerror(errno));
        return 1;
    }
    char *files[256];
    size_t n_files = 0;
    struct dirent *ent;
    while ((ent = readdir(dir)) && n_files < 256) {
        const size_t len = strlen(ent->d_name);
        if (len < 6 || strcmp(ent->d_name + len - 5, ".json") ||
            !strcmp(ent->d_name, "embeddings.json") ||
            !strcmp(ent->d_name, "tokenizer.json"))
            continue;
        files[n_files++] = strdup(ent->d_name);
    }
    closedir(dir);
    qsort(files, n_files, sizeof files[0], by_name);

    struct CMUnitTest *tests = calloc(n_files + 2, sizeof *tests);
    tests[0] =
        (struct CMUnitTest)cmocka_unit_test(test_streams_embeddings_params);
    tests[1] = (struct CMUnitTest)cmocka_unit_test(test_tokenizer_cases);
    for (size_t i = 0; i < n_files; i++)
        tests[i + 2] = (struct CMUnitTest){
            .name = files[i], .test_func = run_case, .initial_state = files[i]};
    const int failed =
        _cmocka_run_group_tests("golden", tests, n_files + 2, NULL, NULL);
    for (size_t i = 0; i < n_files; i++)
        free(files[i]);
    free(tests);
    return failed;
}
