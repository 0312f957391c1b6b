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

/* A text that grows token by token (pieces, ending at ends[]) under the
 * stops: what goes out after each token, never less than before, never
 * a byte of a stop string. Returns what went out in all. */
static size_t stream_text(const char *text, const size_t *ends, size_t n_tokens,
                          const char *const *stops, size_t n_stops)
{
    struct completion c;
    make(&c, "", 0, stops, n_stops);
    size_t before = 0;
    for (size_t t = 0; t < n_tokens; t++) {
        c.decoding.text.len = 0;
        assert_true(buf_append(&c.decoding.text, text, ends[t]));
        c.text_end = ends[t];
        const size_t out = completion_sendable(&c);
        assert_true(out >= c.sent);
        assert_true(out <= ends[t]);
        c.sent = out;
        size_t at;
        if (decoding_find_stop(&c.o.g, text, ends[t], before, &at)) {
            // the generation ends here, its text before the stop
            if (c.sent > at)
                fail_msg("%zu bytes went out, %zu are before the stop", c.sent,
                         at);
            break;
        }
        before = ends[t];
    }
    buf_free(&c.decoding.text);
    return c.sent;
}

/* A stop whose text before it ends with its own start, which went out
 * with an earlier token: the stop's start is not held back then, and the
 * text goes out up to the stop (it had been taken for a start to hold
 * once the stop was whole, below what had gone out). */
static void test_stop_after_its_own_start(void **state)
{
    (void)state;
    const char *const stops[] = {"looks q"};
    const char *text = " looks looks looks quick";
    const size_t ends[] = {6, 12, 18, 24};
    assert_int_equal(stream_text(text, ends, 4, stops, 1), 13);
    // a stop inside a token's text, beside one never whole: up to it
    const char *const two[] = {"ks q", "s qx"};
    assert_int_equal(stream_text(text, ends, 4, two, 2), 16);
}

/* Two stops one token completes: the text ends where the first begins,
 * as the generation's does. */
static void test_first_stop_begins_the_end(void **state)
{
    (void)state;
    const char *const stops[] = {"bcd", "ab"};
    assert_int_equal(sendable("xabcd", 1, stops, 2), 1);
}

/* Random texts of three letters, cut into random tokens, under random
 * stops of the same letters: no byte of a stop goes out, and what goes
 * out never shrinks (stream_text()). */
static void test_stops_random(void **state)
{
    (void)state;
    uint64_t r = 0x2545F4914F6CDD1Du;
    for (int trial = 0; trial < 20000; trial++) {
        char text[48], stop_bytes[3][6];
        const char *stops[3];
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        const size_t len = 1 + r % 40, n_stops = 1 + (r >> 8) % 3;
        for (size_t i = 0; i < len; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            text[i] = (char)('a' + r % 3);
        }
        text[len] = '\0';
        for (size_t i = 0; i < n_stops; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            const size_t n = 1 + r % 5;
            for (size_t k = 0; k < n; k++)
                stop_bytes[i][k] = (char)('a' + (r >> (8 + 2 * k)) % 3);
            stop_bytes[i][n] = '\0';
            stops[i] = stop_bytes[i];
        }
        size_t ends[48], n_tokens = 0;
        for (size_t at = 0; at < len;) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            at += 1 + r % 4;
            ends[n_tokens++] = at < len ? at : len;
        }
        stream_text(text, ends, n_tokens, stops, n_stops);
    }
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
        cmocka_unit_test(test_stop_after_its_own_start),
        cmocka_unit_test(test_first_stop_begins_the_end),
        cmocka_unit_test(test_stops_random),
        cmocka_unit_test(test_characters_never_split),
        cmocka_unit_test(test_characters_counted),
    };
    return cmocka_run_group_tests_name("completion", tests, NULL, NULL);
}
