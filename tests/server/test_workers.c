/*
 * test_workers.c - the compute pool: jobs run on its own threads, in the
 * order they came, at most `threads` at once; the queue is bounded; a
 * close refuses exactly the jobs still waiting, and every job handed over
 * is run or refused exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

/* A job that runs until it is let go. */
struct held_job {
    struct job job; /* first: the pool hands back this pointer */
    int id;
    atomic_bool started, release, ran, refused;
    double waited;
};

static atomic_int order[64];
static atomic_int order_n;

static void run_held(struct job *job, double waited)
{
    struct held_job *h = (struct held_job *)job;
    h->waited = waited;
    atomic_store(&h->started, true);
    order[atomic_fetch_add(&order_n, 1)] = h->id;
    while (!atomic_load(&h->release))
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    atomic_store(&h->ran, true);
}

static void refuse_held(struct job *job)
{
    struct held_job *h = (struct held_job *)job;
    atomic_store(&h->refused, true);
}

static void held_init(struct held_job *h, int id)
{
    *h = (struct held_job){.id = id};
    h->job.run = run_held;
    h->job.refuse = refuse_held;
}

static void wait_for(atomic_bool *flag)
{
    for (int i = 0; i < 5000 && !atomic_load(flag); i++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    assert_true(atomic_load(flag));
}

static void test_bounded_queue_in_order(void **state)
{
    (void)state;
    atomic_store(&order_n, 0);
    struct workers w;
    assert_true(workers_start(&w, 2, 2));
    struct held_job jobs[5];
    for (int i = 0; i < 5; i++)
        held_init(&jobs[i], i);
    /* two run at once, two wait, the fifth is turned away */
    for (int i = 0; i < 4; i++)
        assert_true(workers_submit(&w, &jobs[i].job));
    wait_for(&jobs[0].started);
    wait_for(&jobs[1].started);
    assert_int_equal(workers_running(&w), 2);
    assert_int_equal(workers_waiting(&w), 2);
    assert_false(workers_submit(&w, &jobs[4].job));
    assert_false(atomic_load(&jobs[2].started));
    /* as slots free, the waiting start in the order they came */
    atomic_store(&jobs[0].release, true);
    wait_for(&jobs[2].started);
    atomic_store(&jobs[1].release, true);
    wait_for(&jobs[3].started);
    assert_int_equal(order[2], 2);
    assert_int_equal(order[3], 3);
    assert_true(jobs[3].waited >= 0);
    atomic_store(&jobs[2].release, true);
    atomic_store(&jobs[3].release, true);
    workers_stop(&w);
    for (int i = 0; i < 4; i++) {
        assert_true(atomic_load(&jobs[i].ran));
        assert_false(atomic_load(&jobs[i].refused));
    }
    assert_false(atomic_load(&jobs[4].ran) || atomic_load(&jobs[4].refused));
}

static void test_close_refuses_the_waiting(void **state)
{
    (void)state;
    atomic_store(&order_n, 0);
    struct workers w;
    assert_true(workers_start(&w, 1, 4));
    struct held_job jobs[3];
    for (int i = 0; i < 3; i++) {
        held_init(&jobs[i], i);
        assert_true(workers_submit(&w, &jobs[i].job));
    }
    wait_for(&jobs[0].started);
    workers_close(&w);
    assert_true(workers_closed(&w));
    /* the waiting are refused at once; the running one goes on */
    assert_true(atomic_load(&jobs[1].refused));
    assert_true(atomic_load(&jobs[2].refused));
    assert_int_equal(workers_waiting(&w), 0);
    struct held_job late;
    held_init(&late, 9);
    assert_false(workers_submit(&w, &late.job));
    atomic_store(&jobs[0].release, true);
    workers_stop(&w);
    assert_true(atomic_load(&jobs[0].ran));
    assert_false(atomic_load(&jobs[0].refused));
    assert_false(atomic_load(&jobs[1].ran) || atomic_load(&jobs[2].ran));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded_queue_in_order),
        cmocka_unit_test(test_close_refuses_the_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
