/*
 * test_problem.c - the drawing library's statuses as HTTP problems: an
 * image too big is the client's (422 at "/cell"), no memory is a 503 to
 * retry, everything else is the server's own failure (500).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "problem.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

/* The problem+json body of pb, parsed; the caller frees it. */
static cJSON *body_of(const struct problem *pb)
{
    size_t len = 0;
    char *body = problem_body(pb, &len);
    assert_non_null(body);
    cJSON *doc = cJSON_ParseWithLength(body, len);
    free(body);
    assert_non_null(doc);
    return doc;
}

static void test_too_big_is_the_request(void **state)
{
    (void)state;
    struct problem pb;
    const char *msg =
        "heatmap: image of 90 x 90 = 8100 px exceeds max_pixels 8099";
    assert_false(problem_from_draw(&pb, DRAW_E_TOO_BIG, msg));
    assert_int_equal(pb.status, 422);
    assert_string_equal(pb.pointer, "/cell");
    assert_string_equal(pb.detail, msg);
    assert_int_equal(pb.retry_after, 0);
    cJSON *doc = body_of(&pb);
    assert_int_equal(cJSON_GetObjectItem(doc, "status")->valueint, 422);
    assert_string_equal(cJSON_GetObjectItem(doc, "pointer")->valuestring,
                        "/cell");
    cJSON_Delete(doc);
}

static void test_no_memory_is_retried(void **state)
{
    (void)state;
    struct problem pb;
    assert_false(problem_from_draw(&pb, DRAW_E_NOMEM,
                                   "heatmap: out of memory for 900 x 900 px"));
    assert_int_equal(pb.status, 503);
    assert_string_equal(pb.pointer, "");
    assert_int_equal(pb.retry_after, 1);
    assert_string_equal(pb.detail, "the heatmap could not be drawn: heatmap: "
                                   "out of memory for 900 x 900 px");
    cJSON *doc = body_of(&pb);
    assert_null(cJSON_GetObjectItem(doc, "pointer"));
    cJSON_Delete(doc);
}

static void test_the_rest_is_the_server(void **state)
{
    (void)state;
    const draw_status ours[] = {DRAW_E_FONT, DRAW_E_PNG, DRAW_E_INVALID};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++) {
        struct problem pb;
        memset(&pb, 0x55, sizeof pb);
        assert_false(problem_from_draw(&pb, ours[i], "label font not loaded"));
        assert_int_equal(pb.status, 500);
        assert_string_equal(pb.pointer, "");
        assert_int_equal(pb.retry_after, 0);
        assert_string_equal(pb.detail, "the heatmap could not be drawn: "
                                       "label font not loaded");
        cJSON *doc = body_of(&pb);
        assert_int_equal(cJSON_GetObjectItem(doc, "status")->valueint, 500);
        assert_null(cJSON_GetObjectItem(doc, "pointer"));
        cJSON_Delete(doc);
    }
    /* a status the mapping does not know is the server's too */
    struct problem pb;
    assert_false(problem_from_draw(&pb, (draw_status)77, NULL));
    assert_int_equal(pb.status, 500);
    assert_string_equal(pb.detail, "the heatmap could not be drawn: ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_big_is_the_request),
        cmocka_unit_test(test_no_memory_is_retried),
        cmocka_unit_test(test_the_rest_is_the_server),
    };
    return cmocka_run_group_tests_name("problem", tests, NULL, NULL);
}
