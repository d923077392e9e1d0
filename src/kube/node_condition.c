/* node_condition.c - the GPUHealthy Node condition (see node_condition.h):
 * what to send and when (pure functions, unit-tested), and the thread that
 * sends it with the pod watch's credentials. */
#include "node_condition.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *mw_node_condition_status(mw_node_gpu_state s)
{
    switch (s) {
    case MW_NODE_GPU_HEALTHY:
    case MW_NODE_GPU_DEGRADED:
        return "True";
    case MW_NODE_GPU_UNHEALTHY:
        return "False";
    default:
        return "Unknown";
    }
}

int mw_node_condition_due(const mw_node_condition_sent *last, int64_t now_ms, int judged,
                          int64_t started_ms, mw_node_gpu_state state, const char *reason,
                          const char *message, int64_t heartbeat_ms)
{
    if (!last->sent_ms) return judged || now_ms - started_ms >= MW_NODE_CONDITION_FIRST_WAIT_MS;
    if (!last->ok) return now_ms - last->sent_ms >= MW_NODE_CONDITION_RETRY_MS;
    if (state != last->state || strcmp(reason, last->reason) || strcmp(message, last->message))
        return 1;
    return now_ms - last->sent_ms >= heartbeat_ms;
}

static void rfc3339(int64_t ms, char *out, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void mw_node_condition_body(mw_node_gpu_state state, const char *reason, const char *message,
                            int64_t heartbeat_wall_ms, int64_t transition_wall_ms, mw_buf *out)
{
    char hb[32], tr[32];
    rfc3339(heartbeat_wall_ms, hb, sizeof(hb));
    rfc3339(transition_wall_ms, tr, sizeof(tr));
    json_t *cond = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", MW_NODE_CONDITION_TYPE, "status",
                             mw_node_condition_status(state), "reason", reason, "message", message,
                             "lastHeartbeatTime", hb, "lastTransitionTime", tr);
    json_t *body = json_pack("{s:{s:[o]}}", "status", "conditions", cond);
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    mw_buf_clear(out);
    if (text) mw_buf_puts(out, text);
    free(text);
    json_decref(body);
}

struct mw_node_condition {
    mw_worker w;
    mw_kube *kube;
    mw_node_health *health;
    int64_t heartbeat_ms;
    int64_t started_ms; /* monotonic */
    mw_node_condition_sent last;
};

static void tick(mw_node_condition *nc)
{
    mw_node_gpu_state state;
    char reason[64], message[512];
    mw_node_health_get(nc->health, &state, reason, sizeof(reason), message, sizeof(message));
    int64_t now = mw_mono_ns() / 1000000;
    if (!mw_node_condition_due(&nc->last, now, mw_node_health_judged(nc->health), nc->started_ms,
                               state, reason, message, nc->heartbeat_ms))
        return;
    int64_t wall = mw_now_ms();
    const char *status = mw_node_condition_status(state);
    /* Kubernetes' lastTransitionTime: when status last changed (from this
     * agent's point of view: its first report is a transition). */
    int64_t transition =
        nc->last.transition_ms && !strcmp(status, nc->last.status) ? nc->last.transition_ms : wall;
    mw_buf body;
    mw_buf_init(&body, 1u << 16);
    mw_node_condition_body(state, reason, message, wall, transition, &body);
    char path[400], err[768];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", mw_kube_node(nc->kube));
    long code = mw_kube_call(nc->kube, "PATCH", path, "application/strategic-merge-patch+json",
                             body.data ? body.data : "{}", 1u << 20, NULL, err, sizeof(err));
    mw_buf_free(&body);
    nc->last.sent_ms = now ? now : 1;
    nc->last.ok = code == 200;
    if (code < 0)
        mw_log_once(MW_LOG_WARN, "node-condition", "patch", "setting %s on node %s: %s",
                    MW_NODE_CONDITION_TYPE, mw_kube_node(nc->kube), err);
    else if (code != 200)
        mw_log_once(MW_LOG_WARN, "node-condition", "patch", "setting %s on node %s: HTTP %ld%s",
                    MW_NODE_CONDITION_TYPE, mw_kube_node(nc->kube), code,
                    code == 403 ? " (the service account needs patch on nodes/status: apply "
                                  "deploy/kubernetes/components/node-condition)"
                                : "");
    if (!nc->last.ok) return;
    if (nc->last.state != state || !nc->last.transition_ms)
        mw_log(MW_LOG_INFO, "node-condition", "node %s: %s=%s (%s)", mw_kube_node(nc->kube),
               MW_NODE_CONDITION_TYPE, status, reason);
    nc->last.state = state;
    nc->last.transition_ms = transition;
    mw_strlcpy(nc->last.status, status, sizeof(nc->last.status));
    mw_strlcpy(nc->last.reason, reason, sizeof(nc->last.reason));
    mw_strlcpy(nc->last.message, message, sizeof(nc->last.message));
}

static void *run(void *arg)
{
    mw_node_condition *nc = arg;
    do {
        tick(nc);
    } while (mw_worker_sleep(&nc->w, 1000));
    return NULL;
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_node_condition_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option rows[] = {
    OPT("kubernetes-node-condition", MW_OPT_BOOL, enabled, "false", NULL, "With --kubernetes, set the GPUHealthy condition on this node (PATCH nodes/NAME/status; never cordons): needs deploy/kubernetes/components/node-condition"),
    OPT("kubernetes-node-condition-heartbeat", MW_OPT_DURATION, heartbeat_ms, "5m", NULL, "Send the GPUHealthy condition again after this long without a change"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_node_condition_options =
    MW_OPTION_GROUP("Kubernetes node condition", "src/kube/node_condition.c",
                    mw_node_condition_settings, rows, NULL);

int mw_node_condition_start(const mw_config *cfg, mw_kube *k, mw_node_health *health,
                            mw_node_condition **out)
{
    *out = NULL;
    const mw_node_condition_settings *s = mw_config_group(cfg, &mw_node_condition_options);
    if (!s->enabled) return 1;
    if (!k || !health) {
        mw_log(MW_LOG_WARN, "node-condition",
               "--kubernetes-node-condition needs --kubernetes (and its credentials): no %s "
               "condition",
               MW_NODE_CONDITION_TYPE);
        return -1;
    }
    mw_node_condition *nc = mw_xcalloc(1, sizeof(*nc));
    nc->kube = k;
    nc->health = health;
    nc->heartbeat_ms = s->heartbeat_ms;
    nc->started_ms = mw_mono_ns() / 1000000;
    mw_worker_init(&nc->w);
    if (mw_worker_start(&nc->w, run, nc) < 0) {
        mw_log(MW_LOG_WARN, "node-condition", "cannot start a thread");
        mw_worker_destroy(&nc->w);
        free(nc);
        return -1;
    }
    *out = nc;
    return 0;
}

void mw_node_condition_stop(mw_node_condition *nc)
{
    if (!nc) return;
    mw_worker_stop(&nc->w);
    mw_worker_destroy(&nc->w);
    free(nc);
}
