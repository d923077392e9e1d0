/* node_health.h - the node's GPU health as one value, for whoever acts on
 * it (today: the GPUHealthy condition on the Node, kube/node_condition.c).
 *
 * A producer that judges GPU health (per GPU, then the node) publishes its
 * verdict with mw_node_health_publish() whenever it changes or each cycle;
 * consumers read it with mw_node_health_get() from any thread. Until
 * someone publishes, the state is MW_NODE_GPU_UNKNOWN with reason
 * "NoHealthSource": mlwatch never claims a node healthy without a judge.
 * The agent keeps one for its lifetime and offers it as mw_env.node_health
 * (NULL in one-shot commands and tests). */
#ifndef MW_NODE_HEALTH_H
#define MW_NODE_HEALTH_H

#include <pthread.h>
#include <stddef.h>

typedef enum {
    MW_NODE_GPU_UNKNOWN = 0,
    MW_NODE_GPU_HEALTHY,
    MW_NODE_GPU_DEGRADED,  /* usable, something to watch (no action on its own) */
    MW_NODE_GPU_UNHEALTHY, /* take the node out of service */
} mw_node_gpu_state;

typedef struct mw_node_health {
    pthread_mutex_t mu;
    mw_node_gpu_state state;
    char reason[64];   /* CamelCase, as Kubernetes condition reasons are */
    char message[512]; /* for people: what and which GPU, the recommended action */
    int judged;        /* a producer has published */
} mw_node_health;

void mw_node_health_init(mw_node_health *h);
void mw_node_health_destroy(mw_node_health *h);
/* Set the verdict (reason and message are cut to their fields). */
void mw_node_health_publish(mw_node_health *h, mw_node_gpu_state state, const char *reason,
                            const char *message);
/* Read the verdict. */
void mw_node_health_get(mw_node_health *h, mw_node_gpu_state *state, char *reason, size_t rsize,
                        char *message, size_t msize);
/* 1 once a producer has published a verdict (the Node condition waits a
 * little for one at start rather than send Unknown first). */
int mw_node_health_judged(mw_node_health *h);
/* "healthy", "degraded", "unhealthy", "unknown". */
const char *mw_node_gpu_state_name(mw_node_gpu_state s);

#endif
