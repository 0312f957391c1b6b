/*
 * test_completion.c - what of a streamed completion's text may go out
 * (server/completion_json.c): never a stop string, nor what may become
 * one with the next token, nor half a character; and characters counted
 * as vLLM counts text_offset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "completion.h"

#include <stdlib.h>
#include <string.h>

/* A completion whose generated text is text (all of it the
 * completion's), sent up to sent, with the stop strings given. */
static void make(struct completion *c, const char *text, size_t sent,
                 const char *const *stops, size_t n_stops)
{
    memset(c, 0, sizeof *c);
    buf_init(&c->decoding.text, 1 << 16);
    assert_true(buf_append_str(&c->decoding.text, text));
    c->text_end = strlen(text);
    c->sent = sent;
    for (size_t i = 0; i < n_stops; i++)
        strcpy(c->o.g.stop[i], stops[i]);
    c->o.g.n_stop = n_stops;
}

static size_t sendable(const char *text, size_t sent, const char *const *stops,
                       size_t n)
{
    struct completion c;
    make(&c, text, sent, stops, n);
    const size_t end = completion_sendable(&c);
    buf_free(&c.decoding.text);
    return end;
}

static void test_stop_strings_held_back(void **state)
{
    (void)state;
    const char *const stops[] = {"</s>", "END"};
    // nothing that could start a stop: all of it
    assert_int_equal(sendable("The cat", 0, stops, 2), 7);
    // "</" may become "</s>": held
    assert_int_equal(sendable("The cat</", 0, stops, 2), 7);
    assert_int_equal(sendable("The catE", 0, stops, 2), 7);
    assert_int_equal(sendable("The catEN", 3, stops, 2), 7);
    // a whole stop the newest token completed: up to it only
    assert_int_equal(sendable("The cat</s> sat", 5, stops, 2), 7);
    assert_int_equal(sendable("xxEND", 2, stops, 2), 2);
    // a stop that begins before what was sent is still found (the
    // token that completed it began it too)
    assert_int_equal(sendable("abEN", 2, stops, 2), 2);
}

static void test_characters_never_split(void **state)
{
    (void)state;
    // é is C3 A9, 東 is E6 9D B1, 😀 is F0 9F 98 80
    assert_int_equal(sendable("caf\xc3", 0, NULL, 0), 3);
    assert_int_equal(sendable("caf\xc3\xa9", 0, NULL, 0), 5);
    assert_int_equal(sendable("a\xe6\x9d", 0, NULL, 0), 1);
    assert_int_equal(sendable("a\xe6\x9d\xb1", 0, NULL, 0), 4);
    assert_int_equal(sendable("a\xf0\x9f\x98", 0, NULL, 0), 1);
    assert_int_equal(sendable("a\xf0\x9f\x98\x80", 0, NULL, 0), 5);
    // with a stop's start held back first
    const char *const stops[] = {"\xc3\xa9!"};
    assert_int_equal(sendable("caf\xc3\xa9", 0, stops, 1), 3);
}

static void test_characters_counted(void **state)
{
    (void)state;
    assert_int_equal(completion_characters("caf\xc3\xa9 \xe6\x9d\xb1", 9), 6);
    assert_int_equal(completion_characters("", 0), 0);
    // a lone continuation byte is not a character of its own
    assert_int_equal(completion_characters("a\x80", 2), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_strings_held_back),
        cmocka_unit_test(test_characters_never_split),
        cmocka_unit_test(test_characters_counted),
    };
    return cmocka_run_group_tests_name("completion", tests, NULL, NULL);
}
