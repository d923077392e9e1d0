/* worker.h - one background thread that sleeps between passes and can be
 * stopped or woken early: the one way the agent runs a long-lived thread.
 *
 * Every long-lived helper thread has the same life: start, do a pass, wait
 * an interval unless told to stop or woken, and be joined at shutdown.
 * The mutex also guards whatever state the owner shares with its thread,
 * so that one lock covers both. Waits use CLOCK_MONOTONIC: a step of the
 * wall clock (NTP, a VM resumed) neither stretches nor cuts them; the wall
 * clock is for sample timestamps and logs only.
 *
 * The threads that exist, and why each is a worker:
 * - store (store/store.c): the maintenance thread flushes the WAL every
 *   second (samples appended without waiting become durable), snapshots the
 *   head and compacts; appends kick it when the WAL buffer grows large.
 * - remote write (ship/remote_write.c), per endpoint: a writer that moves
 *   the in-memory inbox to the shards' disk queues (its mutex guards the
 *   inbox; it waits with no time limit until consume() kicks it), and one
 *   sender per shard that waits for data, for the batch deadline or for a
 *   retry's backoff (the writer kicks it when its queue grows).
 * - GPU poller (collect/gpu/gpu_collector.c): polls the vendor libraries
 *   every interval; a sync request kicks it. A driver call can hang for
 *   good, so it is stopped with mw_worker_stop_within().
 * - Kubernetes pod watch (kube/kube.c), kubelet pod-resources poll
 *   (kube/podresources.c), carbon-intensity poll (derive/carbon.c) and the
 *   idle-session notifier (notify/notify.c): a pass, then the interval or a
 *   backoff.
 * - Alertmanager sender (notify/am_sender.c), one per Alertmanager: waits
 *   with no time limit until the evaluator's alerts kick it, or for a
 *   retry's backoff.
 * - HTTP server (serve/http.c): the reaper, which closes connections past
 *   their deadlines every 250 ms, and the query lane's threads, which wait
 *   for queued requests on the server's own condition variable (the worker
 *   gives them their start and join) and run at nice +10.
 * Not workers: the short-lived helpers that split one computation and are
 * joined before it returns (store.c's head_read_part during a select,
 * query/funcs_range.c's range-function halves); libmicrohttpd's own
 * threads; the agent's main thread, which waits for its next cycle and for
 * signals with sigtimedwait() (agent/agent.c). */
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

/* A wait with no time limit: only a kick or a stop ends it. */
#define MW_WORKER_NO_TIMEOUT INT64_MAX

/* The mutex and condition variable; call before anything else. */
void mw_worker_init(mw_worker *w);
/* Start fn(arg) on a new thread. Returns 0, or -1 (nothing started). */
int mw_worker_start(mw_worker *w, void *(*fn)(void *), void *arg);
/* With w->mu held: wait up to ms (MW_WORKER_NO_TIMEOUT: no limit; a
 * negative wait is no wait), or until stopped or kicked (clearing the
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
/* The same, waiting at most ms for the thread to end: 0 once it is joined
 * (or was never started); -1 when it is still running (stuck in a call
 * that never returns): it is then detached, and the owner must leave w and
 * everything the thread uses to the exiting process. */
int mw_worker_stop_within(mw_worker *w, int64_t ms);
/* Free the mutex and condition variable (after mw_worker_stop). */
void mw_worker_destroy(mw_worker *w);

#endif
