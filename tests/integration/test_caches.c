/*
 * test_caches.c - what the server keeps between requests changes no
 * answer: every answer of a server with its caches is byte-identical to
 * that of a server without them, the first time (drawn) and the second
 * (kept), and /metrics shows the caches at work.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const bodies[] = {
    "{\"sentence\":\"the cat sat on the mat\"}",
    "{\"sentence\":\"the cat sat on the mat\",\"seed\":9,"
    "\"return\":[\"weights\",\"output\",\"params\",\"q\",\"k\",\"v\"]}",
    "{\"sentence\":\"a b c d\",\"heads\":4,\"kv_heads\":2,\"d_model\":32,"
    "\"return\":[\"weights\",\"params\"]}",
    "{\"sentence\":\"le chat dort\",\"context\":{\"sentence\":\"the cat "
    "sleeps now\"},\"return\":[\"weights\",\"output\"]}",
    "{\"sentence\":\"one two three\",\"dropout\":0.3,\"seed\":4,"
    "\"return\":[\"weights\",\"mean_weights\"]}",
    "{\"sentence\":\"one two three\",\"bias\":false,\"out_proj\":false}",
    "{\"embeddings\":[[1,2,3,4],[0.5,0.25,1,2]],\"heads\":2,"
    "\"return\":[\"weights\",\"output\",\"params\"]}",
    "{\"sentence\":\"x y\",\"mode\":\"basic\"}",
};
enum { N_BODIES = sizeof bodies / sizeof bodies[0] };

static const char *const gets[] = {
    "/attention?sentence=the+cat+sat&format=png&head=2",
    "/attention?sentence=the+cat+sat&seed=5&heads=4&d_model=32",
};
enum { N_GETS = sizeof gets / sizeof gets[0] };

static bool same_answer(const struct reply *a, const struct reply *b)
{
    return a->status == b->status && a->len == b->len &&
           !memcmp(a->body, b->body, a->len);
}

static double metric(const struct server *s, const char *name)
{
    double v = -1;
    assert_true(metric_read(s, "127.0.0.1", name, &v));
    return v;
}

static void test_answers_identical_with_and_without(void **state)
{
    (void)state;
    struct server cached, plain;
    const char *off[] = {"--drawn-cache", "0", NULL};
    assert_true(server_start(&cached, NULL));
    assert_true(server_start(&plain, off));
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N_BODIES + N_GETS; i++) {
            struct reply a, b;
            if (i < N_BODIES) {
                assert_true(post_json(&cached, "/attention", bodies[i], &a));
                assert_true(post_json(&plain, "/attention", bodies[i], &b));
            } else {
                const char *path = gets[i - N_BODIES];
                assert_true(http_call(&cached, "GET", path, NULL, 0, NULL, &a));
                assert_true(http_call(&plain, "GET", path, NULL, 0, NULL, &b));
            }
            assert_int_equal(a.status, 200);
            if (!same_answer(&a, &b))
                fail_msg("request %d, round %d: the cached answer (%zu "
                         "bytes) differs from the uncached one (%zu bytes)",
                         i, round, a.len, b.len);
            reply_free(&a);
            reply_free(&b);
        }
    }
    /* the second round found what the first drew */
    assert_true(
        metric(&cached, "attnd_drawn_cache_hits_total{kind=\"params\"}") > 0);
    assert_true(
        metric(&cached, "attnd_drawn_cache_hits_total{kind=\"tokens\"}") > 0);
    assert_true(metric(&cached, "attnd_drawn_cache_entries") > 0);
    assert_true(
        metric(&plain, "attnd_drawn_cache_hits_total{kind=\"params\"}") == 0);
    assert_true(metric(&plain, "attnd_drawn_cache_bytes") == 0);
    assert_int_equal(server_stop(&cached, 10.0), 0);
    assert_int_equal(server_stop(&plain, 10.0), 0);
}

/* A small cap holds: the cache forgets, stays within it, and answers do
 * not change. */
static void test_small_cap_is_kept(void **state)
{
    (void)state;
    struct server s;
    const char *args[] = {"--drawn-cache", "100000", NULL};
    assert_true(server_start(&s, args));
    char body[128];
    /* each seed twice: once full, the cache keeps a value on its second
     * draw, forgetting older ones for it */
    for (int seed = 0; seed < 12; seed++)
        for (int draw = 0; draw < 2; draw++) {
            snprintf(body, sizeof body,
                     "{\"sentence\":\"a b c\",\"seed\":%d,"
                     "\"return\":[\"params\"]}",
                     seed);
            struct reply r;
            assert_true(post_json(&s, "/attention", body, &r));
            assert_int_equal(r.status, 200);
            reply_free(&r);
        }
    assert_true(metric(&s, "attnd_drawn_cache_evictions_total") > 0);
    assert_true(metric(&s, "attnd_drawn_cache_passes_total") > 0);
    assert_true(metric(&s, "attnd_drawn_cache_bytes") <= 100000);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_identical_with_and_without),
        cmocka_unit_test(test_small_cap_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
