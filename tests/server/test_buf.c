/*
 * test_buf.c - the JSON array of strings that labels, text chunks and
 * tokens are written as: escapes as buf_append_json_string() writes them,
 * its cap, and a failed append that leaves nothing owned; and bytes of a
 * given length, NULs and all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "buf.h"

#include <stdlib.h>
#include <string.h>

static void test_json_strings(void **state)
{
    (void)state;
    const char *const items[] = {"a", "say \"hi\"", "tab\there", "\xff"};
    char *text = buf_json_strings(items, 4, 1024);
    assert_non_null(text);
    assert_string_equal(
        text, "[\"a\",\"say \\\"hi\\\"\",\"tab\\there\",\"\xEF\xBF\xBD\"]");
    free(text);
    text = buf_json_strings(items, 0, 1024);
    assert_non_null(text);
    assert_string_equal(text, "[]");
    free(text);
    /* past the cap: nothing */
    assert_null(buf_json_strings(items, 4, 8));
}

/* Appended after what the buffer holds, as one array. */
static void test_append_json_strings(void **state)
{
    (void)state;
    const char *const items[] = {"x", "y"};
    struct buf b;
    buf_init(&b, 1024);
    assert_true(buf_append_str(&b, "\"tokens\":"));
    assert_true(buf_append_json_strings(&b, items, 2));
    assert_string_equal(b.data, "\"tokens\":[\"x\",\"y\"]");
    buf_free(&b);
}

/* Bytes of a given length: a NUL in them as \u0000, and a character
 * that the length cuts short as U+FFFD, even when its bytes go on past
 * the length in memory. */
static void test_json_bytes(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1024);
    assert_true(buf_append_json_bytes(&b, "x\0yz", 4));
    assert_string_equal(b.data, "\"x\\u0000yz\"");
    b.len = 0;
    // "caf\xc3\xa9" cut after its \xc3
    assert_true(buf_append_json_bytes(&b, "caf\xc3\xa9", 4));
    assert_string_equal(b.data, "\"caf\xEF\xBF\xBD\"");
    b.len = 0;
    assert_true(buf_append_json_bytes(&b, "caf\xc3\xa9", 5));
    assert_string_equal(b.data, "\"caf\xc3\xa9\"");
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_strings),
        cmocka_unit_test(test_append_json_strings),
        cmocka_unit_test(test_json_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
