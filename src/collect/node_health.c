/* node_health.c - the node's GPU health verdict behind a mutex (see
 * node_health.h). */
#include "node_health.h"
#include "../core/util.h"

void mw_node_health_init(mw_node_health *h)
{
    pthread_mutex_init(&h->mu, NULL);
    h->state = MW_NODE_GPU_UNKNOWN;
    h->judged = 0;
    mw_strlcpy(h->reason, "NoHealthSource", sizeof(h->reason));
    mw_strlcpy(h->message, "mlwatch has no GPU health verdict for this node yet",
               sizeof(h->message));
}

void mw_node_health_destroy(mw_node_health *h)
{
    pthread_mutex_destroy(&h->mu);
}

void mw_node_health_publish(mw_node_health *h, mw_node_gpu_state state, const char *reason,
                            const char *message)
{
    pthread_mutex_lock(&h->mu);
    h->state = state;
    mw_strlcpy(h->reason, reason ? reason : "", sizeof(h->reason));
    mw_strlcpy(h->message, message ? message : "", sizeof(h->message));
    h->judged = 1;
    pthread_mutex_unlock(&h->mu);
}

int mw_node_health_judged(mw_node_health *h)
{
    pthread_mutex_lock(&h->mu);
    int j = h->judged;
    pthread_mutex_unlock(&h->mu);
    return j;
}

void mw_node_health_get(mw_node_health *h, mw_node_gpu_state *state, char *reason, size_t rsize,
                        char *message, size_t msize)
{
    pthread_mutex_lock(&h->mu);
    *state = h->state;
    mw_strlcpy(reason, h->reason, rsize);
    mw_strlcpy(message, h->message, msize);
    pthread_mutex_unlock(&h->mu);
}

const char *mw_node_gpu_state_name(mw_node_gpu_state s)
{
    switch (s) {
    case MW_NODE_GPU_HEALTHY:
        return "healthy";
    case MW_NODE_GPU_DEGRADED:
        return "degraded";
    case MW_NODE_GPU_UNHEALTHY:
        return "unhealthy";
    default:
        return "unknown";
    }
}
