/* test_worker.c - the stoppable background thread (src/core/worker.c):
 * passes, interruptible waits, kicks and a prompt stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/util.h"
#include "core/worker.h"

#include <stdint.h>
#include <time.h>

typedef struct job {
    mw_worker w;
    int64_t wait_ms;
    int passes; /* guarded by w.mu */
} job;

static void *run(void *arg)
{
    job *j = arg;
    pthread_mutex_lock(&j->w.mu);
    while (!j->w.stop) {
        j->passes++;
        mw_worker_wait_locked(&j->w, j->wait_ms);
    }
    pthread_mutex_unlock(&j->w.mu);
    return NULL;
}

static int passes(job *j)
{
    pthread_mutex_lock(&j->w.mu);
    int n = j->passes;
    pthread_mutex_unlock(&j->w.mu);
    return n;
}

static void wait_for_passes(job *j, int n)
{
    const struct timespec nap = {0, 5000000};
    for (int i = 0; i < 2000 && passes(j) < n; i++)
        nanosleep(&nap, NULL);
    assert_true(passes(j) >= n);
}

/* A stop during a long wait ends it at once: the join does not wait 60 s. */
static void stop_ends_a_long_wait(void **state)
{
    (void)state;
    job j = {.wait_ms = 60000};
    mw_worker_init(&j.w);
    assert_int_equal(mw_worker_start(&j.w, run, &j), 0);
    wait_for_passes(&j, 1);
    int64_t t0 = mw_now_ms();
    mw_worker_stop(&j.w);
    assert_true(mw_now_ms() - t0 < 10000);
    assert_int_equal(passes(&j), 1);
    assert_int_equal(mw_worker_stopping(&j.w), 1);
    mw_worker_stop(&j.w); /* twice is harmless */
    mw_worker_destroy(&j.w);
}

/* A kick starts the next pass without waiting out the interval. */
static void kick_starts_a_pass(void **state)
{
    (void)state;
    job j = {.wait_ms = 60000};
    mw_worker_init(&j.w);
    assert_int_equal(mw_worker_start(&j.w, run, &j), 0);
    wait_for_passes(&j, 1);
    mw_worker_kick(&j.w);
    wait_for_passes(&j, 2);
    pthread_mutex_lock(&j.w.mu);
    mw_worker_kick_locked(&j.w);
    pthread_mutex_unlock(&j.w.mu);
    wait_for_passes(&j, 3);
    mw_worker_stop(&j.w);
    assert_int_equal(passes(&j), 3);
    mw_worker_destroy(&j.w);
}

/* Short waits time out and the passes go on; sleep says whether to go on. */
static void waits_time_out(void **state)
{
    (void)state;
    job j = {.wait_ms = 1};
    mw_worker_init(&j.w);
    assert_int_equal(mw_worker_start(&j.w, run, &j), 0);
    wait_for_passes(&j, 5);
    mw_worker_stop(&j.w);
    assert_int_equal(mw_worker_sleep(&j.w, 60000), 0); /* stopped: no wait */
    mw_worker_destroy(&j.w);

    mw_worker w;
    mw_worker_init(&w);
    assert_int_equal(mw_worker_sleep(&w, 1), 1);
    assert_int_equal(mw_worker_sleep(&w, -5), 1); /* a negative wait is no wait */
    mw_worker_stop(&w);                           /* never started: nothing to join */
    mw_worker_destroy(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_ends_a_long_wait),
        cmocka_unit_test(kick_starts_a_pass),
        cmocka_unit_test(waits_time_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
