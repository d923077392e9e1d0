/* test_worker.c - the stoppable background thread (src/core/worker.c):
 * passes, interruptible waits, kicks, waits with no time limit, a prompt
 * stop and a stop that gives up on a stuck thread. */
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

/* A wait with no time limit ends on a kick or a stop, never by itself. */
static void no_timeout_waits_for_a_kick(void **state)
{
    (void)state;
    job j = {.wait_ms = MW_WORKER_NO_TIMEOUT};
    mw_worker_init(&j.w);
    assert_int_equal(mw_worker_start(&j.w, run, &j), 0);
    wait_for_passes(&j, 1);
    const struct timespec nap = {0, 300000000};
    nanosleep(&nap, NULL);
    assert_int_equal(passes(&j), 1); /* no timeout: still waiting */
    mw_worker_kick(&j.w);
    wait_for_passes(&j, 2);
    int64_t t0 = mw_now_ms();
    mw_worker_stop(&j.w);
    assert_true(mw_now_ms() - t0 < 10000);
    assert_int_equal(passes(&j), 2);
    mw_worker_destroy(&j.w);
}

/* A thread that does not heed the stop (a driver call that hangs). */
typedef struct stuck {
    mw_worker w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, released, ended; /* guarded by mu */
} stuck;

static void *hang(void *arg)
{
    stuck *s = arg;
    pthread_mutex_lock(&s->mu);
    s->entered = 1;
    pthread_cond_broadcast(&s->cv);
    while (!s->released)
        pthread_cond_wait(&s->cv, &s->mu);
    s->ended = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* stop_within gives up on a thread that does not end within the limit
 * (-1, detached), and joins one that does (0). */
static void stop_within_gives_up_on_a_stuck_thread(void **state)
{
    (void)state;
    static stuck s; /* outlives the test: the detached thread still uses it */
    mw_worker_init(&s.w);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    assert_int_equal(mw_worker_start(&s.w, hang, &s), 0);
    pthread_mutex_lock(&s.mu);
    while (!s.entered)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    int64_t t0 = mw_mono_ns();
    assert_int_equal(mw_worker_stop_within(&s.w, 200), -1);
    int64_t waited_ms = (mw_mono_ns() - t0) / 1000000;
    assert_true(waited_ms >= 200);
    assert_true(waited_ms < 10000);
    assert_int_equal(mw_worker_stop_within(&s.w, 200), 0); /* detached: nothing to join */
    pthread_mutex_lock(&s.mu); /* let it end, so that the process exits clean */
    s.released = 1;
    pthread_cond_broadcast(&s.cv);
    while (!s.ended)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);

    job j = {.wait_ms = 60000};
    mw_worker_init(&j.w);
    assert_int_equal(mw_worker_start(&j.w, run, &j), 0);
    wait_for_passes(&j, 1);
    t0 = mw_mono_ns();
    assert_int_equal(mw_worker_stop_within(&j.w, 60000), 0);
    assert_true(mw_mono_ns() - t0 < 10000000000LL); /* joined, not the 60 s limit */
    assert_int_equal(passes(&j), 1);
    mw_worker_destroy(&j.w);

    mw_worker never;
    mw_worker_init(&never);
    assert_int_equal(mw_worker_stop_within(&never, 1), 0);
    mw_worker_destroy(&never);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_ends_a_long_wait),
        cmocka_unit_test(kick_starts_a_pass),
        cmocka_unit_test(waits_time_out),
        cmocka_unit_test(no_timeout_waits_for_a_kick),
        cmocka_unit_test(stop_within_gives_up_on_a_stuck_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
