/*
 * test_jsonin.c - a request body's JSON (request/jsonin.h): a key given
 * twice in any object, at the root, nested, or inside an array, is a 400
 * naming the key by its JSON pointer and its dotted name, as I-JSON
 * (RFC 7493) requires; the same key in two objects is fine; and a body
 * of 200,000 keys is read, its CPU time printed (the check sorts each
 * object's keys once, n log n). A text (a pointer the caller names,
 * "*" for any key or index) keeps every byte, \u0000 and each control
 * character alone and inside words, after escapes of every width; any
 * other string or a key holding a NUL is a 422 naming its pointer and
 * showing the value with the NUL escaped.
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
    cJSON *root = jsonin_parse_body(body, strlen(body), NULL, &pb);
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
    cJSON *root = jsonin_parse_body(body, strlen(body), NULL, &pb);
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

/* body parsed with texts; the string at pointer must be want[0..n). */
static void text_is(const char *body, const char *const *texts,
                    const char *pointer, const char *want, size_t n)
{
    struct problem pb = {0};
    cJSON *root = jsonin_parse_body(body, strlen(body), texts, &pb);
    if (!root)
        fail_msg("%s: refused: %s", body, pb.detail);
    // walk the pointer: keys and indexes, no escapes in these tests
    const cJSON *v = root;
    char path[128];
    snprintf(path, sizeof path, "%s", pointer);
    for (char *seg = strtok(path, "/"); seg && v; seg = strtok(NULL, "/"))
        v = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, atoi(seg))
                             : cJSON_GetObjectItemCaseSensitive(v, seg);
    if (!cJSON_IsString(v))
        fail_msg("%s: no string at %s", body, pointer);
    size_t len;
    const char *got = jsonin_text(v, &len);
    if (len != n || memcmp(got, want, n))
        fail_msg("%s: %s holds %zu bytes, expected %zu", body, pointer, len, n);
    assert_int_equal(got[len], '\0');
    cJSON_Delete(root);
}

static void refused_nul(const char *body, const char *const *texts,
                        const char *pointer, const char *shown)
{
    struct problem pb = {0};
    cJSON *root = jsonin_parse_body(body, strlen(body), texts, &pb);
    if (root)
        fail_msg("%s: accepted", body);
    assert_int_equal(pb.status, 422);
    assert_string_equal(pb.pointer, pointer);
    if (!strstr(pb.detail, shown) || !strstr(pb.detail, "NUL"))
        fail_msg("%s: '%s' does not show %s", body, pb.detail, shown);
}

static const char *const attention_texts[] = {"/sentence", "/context/sentence",
                                              NULL};

static void test_texts_keep_nul(void **state)
{
    (void)state;
    text_is("{\"sentence\":\"a\\u0000b\"}", attention_texts, "/sentence",
            "a\0b", 3);
    text_is("{\"sentence\":\"\\u0000\"}", attention_texts, "/sentence", "\0",
            1);
    text_is("{\"sentence\":\"\\u0000\\u0000\"}", attention_texts, "/sentence",
            "\0\0", 2);
    // escapes of one to four bytes and the plain ones around it
    text_is("{\"sentence\":\"\\u00e9\\u0000\\ud83d\\ude00\\u20ac\\n\\\"\\\\"
            "\\/\\u0000z\"}",
            attention_texts, "/sentence",
            "\xc3\xa9\0\xf0\x9f\x98\x80\xe2\x82\xac\n\"\\/\0z", 16);
    // strings before it, keys, escaped quotes, nesting: read in order
    text_is("{\"a\":\"\\\"\",\"b\":[\"x\",{\"k\":\"\\\\u0000\"}],"
            "\"context\":{\"sentence\":\"\\u0000q\"},\"n\":1}",
            attention_texts, "/context/sentence", "\0q", 2);
    // "\\u0000" is a backslash and five letters, no NUL, anywhere
    text_is("{\"model\":\"\\\\u0000\"}", attention_texts, "/model", "\\u0000",
            6);
    // each control character and DEL, alone and inside a word
    for (unsigned c = 0; c < 0x80; c = c == 0x1f ? 0x7f : c + 1) {
        char body[64], word[4] = {'x', (char)c, 'y', 0};
        snprintf(body, sizeof body, "{\"sentence\":\"x\\u%04xy\"}", c);
        text_is(body, attention_texts, "/sentence", word, 3);
        snprintf(body, sizeof body, "{\"sentence\":\"\\u%04x\"}", c);
        text_is(body, attention_texts, "/sentence", word + 1, 1);
    }
    // "*" is any one key or index
    static const char *const chat[] = {"/messages/*/content", NULL};
    text_is("{\"messages\":[{\"content\":\"a\"},{\"content\":\"\\u0000b\"}]}",
            chat, "/messages/1/content", "\0b", 2);
    assert_true(jsonin_is_text(chat, "/messages/12/content"));
    assert_false(jsonin_is_text(chat, "/messages/12/content/0"));
    assert_false(jsonin_is_text(chat, "/messages/content"));
    assert_false(jsonin_is_text(NULL, "/sentence"));
    // a text made in the server keeps its bytes too
    cJSON *made = jsonin_text_create("p\0q\0", 4);
    assert_non_null(made);
    size_t len;
    const char *bytes = jsonin_text(made, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(bytes, "p\0q\0", 5);
    cJSON_Delete(made);
}

static void test_nul_elsewhere(void **state)
{
    (void)state;
    refused_nul("{\"model\":\"bert\\u0000x\",\"sentence\":\"a\"}",
                attention_texts, "/model", "\"bert\\u0000x\"");
    refused_nul("{\"sentence\":\"a\",\"tokens\":[\"b\",\"\\u0000\"]}",
                attention_texts, "/tokens/1", "\"\\u0000\"");
    refused_nul("{\"messages\":[{\"content\":\"a\\u0001\\u0000\"}]}", NULL,
                "/messages/0/content", "\"a\\u0001\\u0000\"");
    // a key: named as far as it reads, shown whole
    refused_nul("{\"sent\\u0000ence\":\"a\"}", attention_texts, "/sent",
                "\"sent\\u0000ence\"");
    // not a twice-given key, though both read "a" to their NUL
    refused_nul("{\"a\":1,\"a\\u0000b\":2}", NULL, "/a", "\"a\\u0000b\"");
    // a raw control character is still not JSON
    struct problem pb = {0};
    const char raw[] = "{\"sentence\":\"a\x01\"}";
    assert_null(jsonin_parse_body(raw, sizeof raw - 1, attention_texts, &pb));
    assert_int_equal(pb.status, 400);
}

/* A number in a message: the fewest digits that read back as it. */
static void test_numbers_shown_as_sent(void **state)
{
    (void)state;
    const struct {
        double v;
        const char *shown;
    } cases[] = {
        {2.0000001, "2.0000001"},
        {0.1, "0.1"},
        {2, "2"},
        {-1e300, "-1e+300"},
        {0.30000000000000004, "0.30000000000000004"},
        {9007199254740993.0, "9007199254740992"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[32];
        jsonin_show_number(cases[i].v, out, sizeof out);
        assert_string_equal(out, cases[i].shown);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_once),
        cmocka_unit_test(test_numbers_shown_as_sent),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_texts_keep_nul),
        cmocka_unit_test(test_nul_elsewhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
