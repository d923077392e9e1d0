/* worker.h - one background thread that sleeps between passes and can be
 * stopped or woken early.
 *
 * Every long-lived helper thread of the agent (Kubernetes watch, kubelet
 * pod-resources poll, carbon-intensity poll, notifications) has the same
 * life: start, do a pass, wait an interval unless told to stop or woken,
 * and be joined at shutdown. The mutex also guards whatever state the
 * owner shares with its thread, so that one lock covers both. Waits use
 * CLOCK_MONOTONIC: a change of the wall clock neither stretches nor cuts
 * them. */
#ifndef MW_WORKER_H
#define MW_WORKER_H

#include <pthread.h>
#include <stdint.h>

typedef struct mw_worker {
    pthread_mutex_t mu; /* guards stop, kicked and the owner's shared state */
    pthread_cond_t cv;
    pthread_t thread;
    int stop;
    int kicked;
    int started;
} mw_worker;

/* The mutex and condition variable; call before anything else. */
void mw_worker_init(mw_worker *w);
/* Start fn(arg) on a new thread. Returns 0, or -1 (nothing started). */
int mw_worker_start(mw_worker *w, void *(*fn)(void *), void *arg);
/* With w->mu held: wait up to ms, or until stopped or kicked (clearing the
 * kick). Returns 1 while the worker should go on, 0 once it is stopping. */
int mw_worker_wait_locked(mw_worker *w, int64_t ms);
/* The same, taking and releasing the lock. */
int mw_worker_sleep(mw_worker *w, int64_t ms);
/* 1 once mw_worker_stop() has been called. */
int mw_worker_stopping(mw_worker *w);
/* Cut the current wait short (new work has arrived). */
void mw_worker_kick(mw_worker *w);
/* The same with w->mu already held. */
void mw_worker_kick_locked(mw_worker *w);
/* Ask the thread to stop, wake it and join it (if it was started). */
void mw_worker_stop(mw_worker *w);
/* Free the mutex and condition variable (after mw_worker_stop). */
void mw_worker_destroy(mw_worker *w);

#endif
