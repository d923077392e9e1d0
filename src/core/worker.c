/* worker.c - a stoppable background thread with interruptible waits, see
 * worker.h. */
#include "worker.h"

#include <errno.h>
#include <time.h>

void mw_worker_init(mw_worker *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->stop = w->kicked = w->started = 0;
}

int mw_worker_start(mw_worker *w, void *(*fn)(void *), void *arg)
{
    if (pthread_create(&w->thread, NULL, fn, arg) != 0) return -1;
    w->started = 1;
    return 0;
}

/* The CLOCK_MONOTONIC time ms from now. */
static struct timespec deadline_in(int64_t ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    if (ms < 0) ms = 0;
    dl.tv_sec += (time_t)(ms / 1000);
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    return dl;
}

int mw_worker_wait_locked(mw_worker *w, int64_t ms)
{
    if (ms == MW_WORKER_NO_TIMEOUT) {
        while (!w->stop && !w->kicked)
            pthread_cond_wait(&w->cv, &w->mu);
    } else {
        struct timespec dl = deadline_in(ms);
        /* Loop: a spurious wake-up must not end the wait early. */
        while (!w->stop && !w->kicked)
            if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT) break;
    }
    w->kicked = 0;
    return !w->stop;
}

int mw_worker_sleep(mw_worker *w, int64_t ms)
{
    pthread_mutex_lock(&w->mu);
    int go_on = mw_worker_wait_locked(w, ms);
    pthread_mutex_unlock(&w->mu);
    return go_on;
}

int mw_worker_stopping(mw_worker *w)
{
    pthread_mutex_lock(&w->mu);
    int s = w->stop;
    pthread_mutex_unlock(&w->mu);
    return s;
}

void mw_worker_kick_locked(mw_worker *w)
{
    w->kicked = 1;
    pthread_cond_signal(&w->cv);
}

void mw_worker_kick(mw_worker *w)
{
    pthread_mutex_lock(&w->mu);
    mw_worker_kick_locked(w);
    pthread_mutex_unlock(&w->mu);
}

static void ask_to_stop(mw_worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void mw_worker_stop(mw_worker *w)
{
    ask_to_stop(w);
    if (w->started) pthread_join(w->thread, NULL);
    w->started = 0;
}

int mw_worker_stop_within(mw_worker *w, int64_t ms)
{
    ask_to_stop(w);
    if (!w->started) return 0;
    w->started = 0;
    struct timespec dl = deadline_in(ms);
    if (pthread_clockjoin_np(w->thread, NULL, CLOCK_MONOTONIC, &dl) == 0) return 0;
    pthread_detach(w->thread);
    return -1;
}

void mw_worker_destroy(mw_worker *w)
{
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}
