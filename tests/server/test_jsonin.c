/*
 * test_jsonin.c - a request body's JSON (request/jsonin.h): a key given
 * twice in any object, at the root, nested, or inside an array, is a 400
 * naming the key by its JSON pointer and its dotted name, as I-JSON
 * (RFC 7493) requires; the same key in two objects is fine; and a body
 * of 200,000 keys is read, its CPU time printed (the check sorts each
 * object's keys once, n log n).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "jsonin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void refused(const char *body, const char *pointer, const char *name)
{
    struct problem pb = {0};
    cJSON *root = jsonin_parse_body(body, strlen(body), &pb);
    if (root)
        fail_msg("%s: accepted", body);
    assert_int_equal(pb.status, 400);
    assert_string_equal(pb.pointer, pointer);
    if (!strstr(pb.detail, name) || !strstr(pb.detail, "twice"))
        fail_msg("%s: '%s' does not name %s", body, pb.detail, name);
}

static void accepted(const char *body)
{
    struct problem pb = {0};
    cJSON *root = jsonin_parse_body(body, strlen(body), &pb);
    if (!root)
        fail_msg("%s: refused: %s", body, pb.detail);
    cJSON_Delete(root);
}

static void test_keys_once(void **state)
{
    (void)state;
    refused("{\"sentence\":\"a\",\"sentence\":\"b\"}", "/sentence", "sentence");
    refused("{\"model\":\"m\",\"ablate\":[{\"layer\":0,\"head\":1,"
            "\"layer\":1}]}",
            "/ablate/0/layer", "ablate[0].layer");
    refused("{\"a\":{\"b\":{\"c\":1,\"d\":2,\"c\":3}}}", "/a/b/c", "a.b.c");
    refused("[{\"x\":1},{\"y\":1,\"y\":2}]", "/1/y", "[1].y");
    refused("{\"a/b\":1,\"a/b\":2}", "/a~1b", "a/b");
    // case matters, and so does every byte
    accepted("{\"Sentence\":\"a\",\"sentence\":\"b\"}");
    accepted("{\"a\":{\"k\":1},\"b\":{\"k\":2},\"c\":[{\"k\":1},{\"k\":2}]}");
    accepted("{}");
    accepted("[]");
}

static void test_many_keys(void **state)
{
    (void)state;
    enum { KEYS = 200000 };
    char *body = malloc((size_t)KEYS * 16 + 64);
    assert_non_null(body);
    size_t at = 0;
    body[at++] = '{';
    for (int i = 0; i < KEYS; i++)
        at += (size_t)sprintf(body + at, "%s\"k%d\":%d", i ? "," : "", i, i);
    const size_t distinct = at;
    strcpy(body + at, "}");
    const clock_t t0 = clock();
    accepted(body);
    // the last key again
    at = distinct;
    at += (size_t)sprintf(body + at, ",\"k%d\":0}", KEYS - 1);
    char name[16];
    snprintf(name, sizeof name, "k%d", KEYS - 1);
    char pointer[17];
    snprintf(pointer, sizeof pointer, "/%s", name);
    refused(body, pointer, name);
    const double seconds = (double)(clock() - t0) / CLOCKS_PER_SEC;
    print_message("two bodies of %d keys read in %.3f s of CPU\n", KEYS,
                  seconds);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_once),
        cmocka_unit_test(test_many_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
