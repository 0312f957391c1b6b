/*
 * test_head_stats.c - the per-head measures (src/head_stats.h) on
 * weights worked out by hand, and through a model's pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "head_stats.h"

#include <math.h>

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-7)
        fail_msg("%s: %.9g, want %.9g", what, got, want);
}

/* A causal head over four tokens, the first and third the same token,
 * the second and fourth too. */
static void test_by_hand(void **state)
{
    (void)state;
    const float w[16] = {1,    0,    0,    0, 0.5f, 0.5f, 0,    0,
                         0.2f, 0.3f, 0.5f, 0, 0.1f, 0.2f, 0.3f, 0.4f};
    const uint32_t ids[4] = {5, 7, 5, 7};
    double s[XF_HEAD_STATS];
    size_t scratch[8], earlier[4];
    head_stats_earlier(ids, 4, scratch, earlier);
    assert_true(earlier[0] == HEAD_NONE && earlier[1] == HEAD_NONE);
    assert_int_equal(earlier[2], 0);
    assert_int_equal(earlier[3], 1);
    head_stats(w, 4, true, 0, earlier, s);
    const double h2 = -(0.2 * log(0.2) + 0.3 * log(0.3) + 0.5 * log(0.5)),
                 h3 = -(0.1 * log(0.1) + 0.2 * log(0.2) + 0.3 * log(0.3) +
                        0.4 * log(0.4));
    // row 0 sees one key: it does not count
    near(s[XF_STAT_ENTROPY], (1.0 + h2 / log(3.0) + h3 / log(4.0)) / 3,
         "entropy");
    near(s[XF_STAT_SINK], (0.5 + 0.2 + 0.1) / 3, "sink");
    near(s[XF_STAT_PREVIOUS], (0.5 + 0.3 + 0.3) / 4, "previous_token");
    // token 2 repeats token 0, token 3 token 1
    near(s[XF_STAT_DUPLICATE], (0.2 + 0.2) / 4, "duplicate_token");
    near(s[XF_STAT_INDUCTION], (0.3 + 0.3) / 4, "induction");
    near(s[XF_STAT_SELF], (1 + 0.5 + 0.5 + 0.4) / 4, "self");
    near(s[XF_STAT_DISTANCE], (0.5 + (0.4 + 0.3) + (0.3 + 0.4 + 0.3)) / 4,
         "distance");
    // what each key receives from the queries that see it
    double got[4];
    head_received(w, 4, true, 0, got);
    near(got[0], (1 + 0.5 + 0.2 + 0.1) / 4, "key 0");
    near(got[1], (0.5 + 0.3 + 0.2) / 3, "key 1");
    near(got[3], 0.4, "key 3");
    // a window of 2: row 2 sees keys 1 and 2, row 3 keys 2 and 3
    const float win[16] = {1, 0,     0,     0, 0.5f, 0.5f, 0,    0,
                           0, 0.25f, 0.75f, 0, 0,    0,    0.5f, 0.5f};
    head_stats(win, 4, true, 2, earlier, s);
    const double h = -(0.25 * log(0.25) + 0.75 * log(0.75)) / log(2.0);
    near(s[XF_STAT_ENTROPY], (1.0 + h + 1.0) / 3, "windowed entropy");
    // key 1 is seen by queries 1 and 2 only
    head_received(win, 4, true, 2, got);
    near(got[1], (0.5 + 0.25) / 2, "windowed key 1");
    // a full (encoder) row is normalised by the log of every key
    const float full[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    const uint32_t two[2] = {1, 2};
    head_stats_earlier(two, 2, scratch, earlier);
    head_stats(full, 2, false, 0, earlier, s);
    near(s[XF_STAT_ENTROPY], 1.0, "full rows");
    assert_string_equal(xf_head_stat_name(XF_STAT_INDUCTION), "induction");
    assert_null(xf_head_stat_name(XF_HEAD_STATS));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
