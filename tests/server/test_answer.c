/*
 * test_answer.c - the kinds of request and their operations: decoding
 * decides the kind once, the table gives each kind its own complete set of
 * operations, and a request goes plan, run, answer through them alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "model_fixture.h"

#include "answer.h"
#include "heatmap.h"
#include "jsonnum.h"
#include "models.h"
#include "response.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void decode(struct request *req, const char *body, const char *format)
{
    const struct request_param png[] = {{"format", format}};
    struct problem pb;
    request_init(req);
    if (!request_parse_image(req, png, 1, IMAGE_JSON, &pb) ||
        !request_parse_json(req, body, strlen(body), &fixture_limits, &pb))
        fail_msg("%s refused: %d %s", body, pb.status, pb.detail);
}

/* Every kind has a row, each row every operation, and no two kinds share
 * a row. */
static void test_each_kind_has_its_operations(void **state)
{
    (void)state;
    static const char *const names[REQUEST_KINDS] = {
        [REQUEST_RANDOM] = "random", [REQUEST_MODEL] = "model"};
    for (int k = 0; k < REQUEST_KINDS; k++) {
        const struct answer_ops *ops = answer_ops((enum request_kind)k);
        assert_non_null(ops);
        assert_string_equal(ops->name, names[k]);
        assert_non_null(ops->plan);
        assert_non_null(ops->run);
        assert_non_null(ops->encode_json);
        assert_non_null(ops->draw_png);
        assert_non_null(ops->result_free);
        assert_non_null(ops->tag);
        assert_non_null(ops->count);
        assert_ptr_equal(answer_ops((enum request_kind)k), ops); /* one row */
    }
    assert_ptr_not_equal(answer_ops(REQUEST_RANDOM), answer_ops(REQUEST_MODEL));
}

/* Decoding decides the kind: "model" makes a request on a checkpoint,
 * anything else one on random weights. */
static void test_decoding_decides_the_kind(void **state)
{
    (void)state;
    struct request req;
    decode(&req, "{\"sentence\":\"the cat sat\"}", "json");
    assert_int_equal(req.kind, REQUEST_RANDOM);
    request_free(&req);
    decode(&req, "{\"model\":\"f32\",\"sentence\":\"the cat sat\"}", "json");
    assert_int_equal(req.kind, REQUEST_MODEL);
    request_free(&req);
}

/* Plan, run and answer of one request, by its kind's operations alone;
 * the result says its kind, and the JSON answer parses. */
/* Decode body, plan it and run it through its kind's operations, which
 * it returns. */
static const struct answer_ops *
plan_and_run(const char *body, const char *format, struct request *req,
             struct answer_plan *plan, struct answer_result *res)
{
    decode(req, body, format);
    const struct answer_ops *ops = answer_ops(req->kind);
    struct problem pb;
    memset(res, 0, sizeof *res);
    assert_true(ops->plan(req, plan, &pb));
    assert_true(ops->run(req, 1, NULL, NULL, res, &pb));
    return ops;
}

static void answer_through_ops(const char *body, const char *format,
                               enum request_kind kind)
{
    struct request req;
    struct answer_plan plan;
    struct answer_result res;
    struct problem pb;
    const struct answer_ops *ops =
        plan_and_run(body, format, &req, &plan, &res);
    assert_true(plan.flops > 0);
    assert_true(plan.run_bytes > 0);
    assert_true(plan.answer_bytes > 0);
    if (req.png.format != IMAGE_JSON)
        assert_true(req.png.width > 0 && req.png.height > 0);
    assert_int_equal(res.kind, kind);
    if (req.png.format != IMAGE_JSON) {
        unsigned char *png = NULL;
        size_t len = 0;
        assert_true(
            ops->draw_png(&req, &res, (size_t)64 << 20, &png, &len, &pb));
        assert_true(len > 8 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
        free(png);
    } else {
        struct response_stream *s = ops->encode_json(&req, &res);
        assert_non_null(s);
        char *text = malloc(plan.answer_bytes);
        assert_non_null(text);
        const size_t len = response_stream_read(s, text, plan.answer_bytes);
        cJSON *doc = cJSON_ParseWithLength(text, len);
        assert_non_null(doc);
        cJSON_Delete(doc);
        free(text);
        response_stream_free(s);
    }
    answer_result_free(&res);
    assert_int_equal(res.kind, REQUEST_RANDOM); /* left empty */
    request_free(&req);
}

/* A weights array of 3 x 60 x 60 numbers, more than a stage of the
 * stream holds, read back in reads of odd sizes: its text parses, its
 * nesting is the array's shape, and every number reads back as the
 * float it was, through the stage's ends in the middle of a row and at
 * its end. */
static void test_large_array_read_in_pieces(void **state)
{
    (void)state;
    enum { HEADS = 3, N = 60 };
    char body[1024];
    size_t at = (size_t)snprintf(body, sizeof body, "{\"sentence\":\"");
    for (int i = 0; i < N; i++)
        at += (size_t)snprintf(body + at, sizeof body - at, "%sw%d",
                               i ? " " : "", i % 7);
    snprintf(body + at, sizeof body - at,
             "\",\"heads\":%d,\"d_model\":12,\"return\":[\"weights\"]}", HEADS);
    struct request req;
    struct answer_plan plan;
    struct answer_result res;
    const struct answer_ops *ops =
        plan_and_run(body, "json", &req, &plan, &res);
    struct response_stream *s = ops->encode_json(&req, &res);
    assert_non_null(s);
    /* the stream holds answer_bytes; its numbers go through, not held */
    const size_t cap = plan.answer_bytes + HEADS * N * N * (JSONNUM_MAX + 4);
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = 0, got;
    static const size_t reads[] = {1, 7, 4093, 65536, 333};
    for (size_t r = 0;
         (got = response_stream_read(s, text + len,
                                     reads[r % 5] < cap - len ? reads[r % 5]
                                                              : cap - len)) > 0;
         r++)
        len += got;
    assert_true(len < cap);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    assert_non_null(doc);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(doc, "weights");
    assert_int_equal(cJSON_GetArraySize(w), HEADS);
    const float *want = res.attn.weights;
    size_t k = 0;
    for (const cJSON *h = w->child; h; h = h->next) {
        assert_int_equal(cJSON_GetArraySize(h), N);
        for (const cJSON *row = h->child; row; row = row->next) {
            assert_int_equal(cJSON_GetArraySize(row), N);
            for (const cJSON *v = row->child; v; v = v->next, k++)
                assert_true((float)v->valuedouble == want[k]);
        }
    }
    assert_int_equal(k, HEADS * N * N);
    cJSON_Delete(doc);
    free(text);
    response_stream_free(s);
    answer_result_free(&res);
    request_free(&req);
}

static void test_one_path_for_every_kind(void **state)
{
    (void)state;
    answer_through_ops("{\"sentence\":\"the cat sat\"}", "json",
                       REQUEST_RANDOM);
    answer_through_ops("{\"sentence\":\"the cat sat\"}", "png", REQUEST_RANDOM);
    answer_through_ops("{\"model\":\"f32\",\"sentence\":\"the cat sat\"}",
                       "json", REQUEST_MODEL);
    answer_through_ops("{\"model\":\"f32\",\"sentence\":\"the cat sat\","
                       "\"layer\":0}",
                       "png", REQUEST_MODEL);
}

/* Nothing computed, nothing planned for the computation. */
static void test_plan_of_no_computation(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"sentence\":\"a b\",\"return\":[]}",
        "{\"model\":\"f32\",\"sentence\":\"a b\",\"return\":[]}"};
    for (size_t i = 0; i < 2; i++) {
        struct request req;
        struct answer_plan plan;
        struct problem pb;
        decode(&req, bodies[i], "json");
        assert_true(answer_ops(req.kind)->plan(&req, &plan, &pb));
        assert_true(plan.flops == 0);
        assert_int_equal(plan.run_bytes, 0);
        assert_true(plan.answer_bytes > 0);
        request_free(&req);
    }
}

/* What a cached GET answer depends on beside its URL: nothing for the
 * random weights, the checkpoint for a model. */
static void test_tags(void **state)
{
    (void)state;
    struct request req;
    struct buf text;
    buf_init(&text, 1024);
    decode(&req, "{\"sentence\":\"a\"}", "json");
    assert_true(answer_ops(req.kind)->tag(&req, &text));
    assert_int_equal(text.len, 0);
    request_free(&req);
    decode(&req, "{\"model\":\"f32\",\"sentence\":\"a\"}", "json");
    assert_true(answer_ops(req.kind)->tag(&req, &text));
    char want[24];
    snprintf(want, sizeof want, "m%016llx",
             (unsigned long long)fixture_limits.models->entry[0].fingerprint);
    assert_string_equal(text.data, want);
    request_free(&req);
    buf_free(&text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_kind_has_its_operations),
        cmocka_unit_test(test_decoding_decides_the_kind),
        cmocka_unit_test(test_one_path_for_every_kind),
        cmocka_unit_test(test_large_array_read_in_pieces),
        cmocka_unit_test(test_plan_of_no_computation),
        cmocka_unit_test(test_tags),
    };
    return cmocka_run_group_tests(tests, model_fixture_setup,
                                  model_fixture_teardown);
}
