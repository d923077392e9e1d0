/* idle.h - idle GPU sessions: the hysteresis rule and the module.
 *
 * A session is one container holding one GPU (processes with GPU memory on
 * it, or on one of its MIG instances). Its utilization is compared with a
 * threshold every cycle:
 *
 *   busy  --(below threshold)-->  below   (below_since = now)
 *   below --(above)----------->   busy
 *   below --(below for window)--> IDLE    (episode opens; idle since below_since)
 *   IDLE  --(above for busy period, without a dip below)--> busy (episode resolved)
 *
 * So entering needs every sample of a whole window below the threshold (like
 * PromQL's max_over_time(u[window]) < threshold), and leaving needs the
 * utilization to stay above it for the busy period: a session hovering
 * around the threshold opens one episode, and its short spikes do not end
 * it. A session that disappears (memory released, pod gone) for a busy
 * period ends its episode too. */
#ifndef MW_IDLE_H
#define MW_IDLE_H

#include <stdint.h>

typedef struct mw_idle_rule {
    double threshold; /* ratio 0..1: idle while utilization < threshold */
    int64_t window_ms, busy_ms;
} mw_idle_rule;

typedef enum { MW_IDLE_BUSY, MW_IDLE_BELOW, MW_IDLE_IDLE } mw_idle_state;

typedef struct mw_idle_track {
    mw_idle_state state;
    int64_t below_since_ms; /* BELOW and IDLE: start of the run below the threshold */
    int64_t above_since_ms; /* IDLE: start of the current run above it, 0 = none */
} mw_idle_track;

enum { MW_IDLE_NONE = 0, MW_IDLE_OPENED = 1, MW_IDLE_CLOSED = 2 };

/* Feed one utilization sample (ratio) taken at now_ms; returns
 * MW_IDLE_OPENED when an episode opens, MW_IDLE_CLOSED when it ends. */
int mw_idle_step(mw_idle_track *t, int64_t now_ms, double util, const mw_idle_rule *r);

#endif
