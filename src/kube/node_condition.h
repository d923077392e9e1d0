/* node_condition.h - the GPUHealthy condition on this agent's Node, so that
 * the cluster's own remediation (cordon, drain, node-problem-detector-style
 * controllers) can act on GPU health. mlwatch never cordons or drains.
 *
 * With --kubernetes and --kubernetes-node-condition (off by default) a
 * thread reads the node's GPU health verdict (collect/node_health.h, published
 * by the GPU collector every cycle) every second and sends
 *   PATCH /api/v1/nodes/NODE/status
 *   Content-Type: application/strategic-merge-patch+json
 *   {"status":{"conditions":[{"type":"GPUHealthy","status":S,"reason":R,
 *     "message":M,"lastHeartbeatTime":T,"lastTransitionTime":T0}]}}
 * as soon as there is a verdict (at most 30 s after the start: Unknown
 * then), when the verdict changes, and otherwise every
 * --kubernetes-node-condition-heartbeat (5m, as node-problem-detector's
 * heartbeat) so that a stale condition shows. The strategic merge replaces
 * only the condition of type GPUHealthy (conditions merge on "type"). S is
 * "True" for healthy and degraded (degraded is no reason to drain),
 * "False" for unhealthy, "Unknown" while there is no verdict. A failed
 * PATCH is retried every 10 s and logged once per quiet period. Needs
 * only the `patch` verb on `nodes/status` (docs/security.md). */
#ifndef MW_NODE_CONDITION_H
#define MW_NODE_CONDITION_H

#include "../collect/node_health.h"
#include "../core/buf.h"
#include "kube.h"

#include <stdint.h>

#define MW_NODE_CONDITION_TYPE "GPUHealthy"
#define MW_NODE_CONDITION_RETRY_MS 10000
/* At start, the first PATCH waits this long for the GPU collector's first
 * verdict (its first poll, seconds) so that a restart does not flap a
 * True condition to Unknown and back. */
#define MW_NODE_CONDITION_FIRST_WAIT_MS 30000

typedef struct mw_node_condition_settings {
    int enabled;
    int64_t heartbeat_ms;
} mw_node_condition_settings;
extern const mw_option_group mw_node_condition_options;

/* What was last sent, to decide the next PATCH. */
typedef struct mw_node_condition_sent {
    int ok;                /* the last PATCH succeeded */
    int64_t sent_ms;       /* when it was sent (monotonic) */
    int64_t transition_ms; /* wall clock of the last change of status */
    mw_node_gpu_state state;
    char status[8], reason[64], message[512];
} mw_node_condition_sent;

/* "True", "False" or "Unknown" for a state. */
const char *mw_node_condition_status(mw_node_gpu_state s);
/* 1 when a PATCH is due at now_ms (monotonic): never sent and a verdict
 * exists (judged) or MW_NODE_CONDITION_FIRST_WAIT_MS passed since
 * started_ms (no judge: Unknown then), the last one failed and
 * MW_NODE_CONDITION_RETRY_MS passed, the verdict differs from what was
 * sent, or the heartbeat is due. */
int mw_node_condition_due(const mw_node_condition_sent *last, int64_t now_ms, int judged,
                          int64_t started_ms, mw_node_gpu_state state, const char *reason,
                          const char *message, int64_t heartbeat_ms);
/* The patch body for the verdict at wall-clock times (ms since the epoch). */
void mw_node_condition_body(mw_node_gpu_state state, const char *reason, const char *message,
                            int64_t heartbeat_wall_ms, int64_t transition_wall_ms, mw_buf *out);

typedef struct mw_node_condition mw_node_condition;
/* Start when enabled and the pod watch runs (k): 0 with *out, 1 when off,
 * -1 when asked for without --kubernetes (logged). */
int mw_node_condition_start(const mw_config *cfg, mw_kube *k, mw_node_health *health,
                            mw_node_condition **out);
void mw_node_condition_stop(mw_node_condition *nc);

#endif
