/*
 * test_parity.c - requests as a PyTorch user writes them, against
 * nn.MultiheadAttention's own numbers: tests/golden/parity/ holds, per
 * case, a body (mha.state_dict() pasted as params, masks in PyTorch's
 * forms and conventions) and the module's weights (per head and averaged)
 * and output, in float64, written by tests/golden/generate.py. Each body
 * goes through the server's decoding and compute step as a POST would.
 *
 * Tolerances, absolute: weights and mean weights 1e-5 (divided by 1 - p
 * with dropout), output 5e-5.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "attend.h"
#include "request.h"
#include "request_fields.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_TOL 1e-5
#define OUTPUT_TOL 5e-5

static const struct request_limits lim = {
    .max_tokens = 64, .max_dim = 256, .max_heads = 16, .max_output = 1 << 20};

static const char *parity_dir(void)
{
    static char dir[1024];
    const char *golden = getenv("ATTN_GOLDEN_DIR");
    snprintf(dir, sizeof dir, "%s/parity", golden ? golden : "tests/golden");
    return dir;
}

static cJSON *load_case(const char *file)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", parity_dir(), file);
    return test_read_json(path);
}

static const cJSON *get(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item)
        fail_msg("parity case lacks \"%s\"", key);
    return item;
}

/* Largest |got - want| over an expected array of count numbers. */
static double worst(const char *file, const char *name, const float *got,
                    const cJSON *want, size_t count)
{
    if (!got)
        fail_msg("%s: the answer has no %s", file, name);
    if ((size_t)cJSON_GetArraySize(want) != count)
        fail_msg("%s: %s has %d numbers; the answer %zu", file, name,
                 cJSON_GetArraySize(want), count);
    double d = 0.0;
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, want)
    {
        const double e = fabs((double)got[i++] - v->valuedouble);
        if (!(e <= d))
            d = e; /* NaN is the worst */
    }
    return d;
}

static void run_case(void **state)
{
    const char *file = *state;
    cJSON *doc = load_case(file);
    const cJSON *expected = get(doc, "expected");
    char *body = cJSON_PrintUnformatted(get(doc, "request"));
    assert_non_null(body);

    struct request req;
    struct problem pb;
    request_init(&req);
    memset(&pb, 0, sizeof pb);
    if (!request_parse_json(&req, body, strlen(body), &lim, &pb))
        fail_msg("%s: %d at \"%s\": %s", file, pb.status, pb.pointer,
                 pb.detail);
    struct attn_result res;
    if (!attend_run(&req, 2, NULL, NULL, &res, &pb))
        fail_msg("%s: %d at \"%s\": %s", file, pb.status, pb.pointer,
                 pb.detail);

    /* the shape PyTorch answered with: [B, heads, N, keys, embed_dim] */
    const cJSON *shape = get(expected, "shape");
    size_t dims[5];
    for (int k = 0; k < 5; k++)
        dims[k] = (size_t)cJSON_GetArrayItem(shape, k)->valuedouble;
    const size_t b = dims[0], h = dims[1], n = dims[2], keys = dims[3];
    assert_int_equal(res.batch, b);
    assert_int_equal(res.heads, h);
    assert_int_equal(res.n_query, n);
    assert_int_equal(res.n_keys, keys);
    assert_int_equal(res.d_out, dims[4]);
    assert_int_equal(res.n_fully_masked, 0);

    const double p = req.cfg.dropout, wtol = WEIGHT_TOL / (1.0 - p);
    const struct {
        const char *name;
        const float *got;
        size_t count;
        double tol;
    } arrays[] = {
        {"weights", res.weights, b * h * n * keys, wtol},
        {"mean_weights", res.mean_weights, b * n * keys, wtol},
        {"output", res.output, b * n * dims[4], OUTPUT_TOL / (1.0 - p)},
        {"weights_before_dropout", res.weights_raw, b * h * n * keys,
         WEIGHT_TOL},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        const cJSON *want = get(expected, arrays[i].name);
        if (cJSON_IsNull(want))
            continue;
        const double d =
            worst(file, arrays[i].name, arrays[i].got, want, arrays[i].count);
        if (!(d <= arrays[i].tol))
            fail_msg("%s: %s differs from PyTorch by %.3g (tolerance %.3g)",
                     file, arrays[i].name, d, arrays[i].tol);
    }

    /* what the config echo says of the mask and the keys */
    struct buf echo_text;
    buf_init(&echo_text, 1 << 16);
    assert_true(request_fields_echo(&echo_text, &req));
    cJSON *echo = cJSON_Parse(echo_text.data);
    assert_non_null(echo);
    const cJSON *want;
    cJSON_ArrayForEach(want, get(doc, "echo"))
    {
        const cJSON *got = cJSON_GetObjectItemCaseSensitive(echo, want->string);
        if (!got || !cJSON_Compare(want, got, true)) {
            char *shown = got ? cJSON_PrintUnformatted(got) : NULL;
            fail_msg("%s: the echo's %s is %s", file, want->string,
                     shown ? shown : "absent");
        }
    }
    cJSON_Delete(echo);
    buf_free(&echo_text);
    attn_result_free(&res);
    request_free(&req);
    free(body);
    cJSON_Delete(doc);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    attn_blas_single_thread();
    DIR *dir = opendir(parity_dir());
    if (!dir) {
        fprintf(stderr, "test_parity: %s: %s\n", parity_dir(), strerror(errno));
        return 1;
    }
    char *files[128];
    size_t n_files = 0;
    struct dirent *ent;
    while ((ent = readdir(dir)) && n_files < 128) {
        const size_t len = strlen(ent->d_name);
        if (len > 5 && !strcmp(ent->d_name + len - 5, ".json"))
            files[n_files++] = strdup(ent->d_name);
    }
    closedir(dir);
    if (n_files == 0) {
        fprintf(stderr, "test_parity: no cases in %s\n", parity_dir());
        return 1;
    }
    qsort(files, n_files, sizeof files[0], by_name);
    struct CMUnitTest *tests = calloc(n_files, sizeof *tests);
    for (size_t i = 0; i < n_files; i++)
        tests[i] = (struct CMUnitTest){
            .name = files[i], .test_func = run_case, .initial_state = files[i]};
    const int failed =
        _cmocka_run_group_tests("parity", tests, n_files, NULL, NULL);
    for (size_t i = 0; i < n_files; i++)
        free(files[i]);
    free(tests);
    return failed;
}
