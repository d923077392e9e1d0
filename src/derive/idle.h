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

#include <stddef.h>
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

/* One idle episode: what the notifications say (notify/notify.h calls it
 * mw_notify_episode). */
typedef struct mw_idle_episode {
    char key[400]; /* namespace/pod/container/gpu */
    char ns[64], pod[254], container[64], gpu[16];
    char model[96], uuid[96], node[254];
    char workload_kind[32], workload[254], owner[254];
    int64_t idle_since_ms;  /* the episode's identity with key */
    int64_t ended_ms;       /* 0 while open */
    char end_reason[16];    /* "busy" or "ended" */
    double memory_bytes;    /* GPU memory held */
    double gpu_seconds;     /* idle GPU-seconds so far */
    double energy_joules;   /* GPU energy spent while idle */
    double co2_grams;       /* < 0: unknown (no carbon intensity) */
    double threshold_ratio; /* the rule's threshold */
} mw_idle_episode;

/* ---- the module (idle.c) and what it offers the consumers after it ----
 * Its Kubernetes inputs come from the agent's environment (mw_env.kube);
 * the notifier (notify/notify_module.c) takes its episodes, and the agent
 * wires the two (agent/idle_notify.c). state is what init returned. */
typedef struct mw_module mw_module; /* agent/module.h */
extern const mw_module mw_module_idle;

/* Go on with an episode that was open when the agent stopped (from the
 * notifier's state file), so that a restart neither notifies it again nor
 * loses its cost so far; before the first derive. An episode that ended, or
 * whose session is known already, is skipped (0). Returns 0, or -1 when the
 * session table is full. */
int mw_idle_restore(void *state, const mw_idle_episode *ep, int64_t now_ms);
/* The episodes that ended in the last derive. */
size_t mw_idle_ended(void *state, const mw_idle_episode **out);
/* Calls fn for each open episode, with its figures as of the last derive. */
void mw_idle_each_open(void *state, void (*fn)(void *ctx, const mw_idle_episode *ep), void *ctx);

#endif
