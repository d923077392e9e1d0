/* kube_module.c - the "kube" module: starts the Kubernetes pod watch and
 * the kubelet pod-resources poller, the DRA lists and the GPUHealthy Node
 * condition at init and stops them at the end,
 * publishing them in the agent's environment (mw_env.kube) for the stages
 * after it (derive/idle.c joins workload labels and allocations). Runs in
 * the agent only: one-shot commands make no network calls. */
#include "kube_module.h"
#include "../agent/module.h"
#include "../core/log.h"
#include "../core/sources.h"

static int kube_init(const mw_env *env, void **state)
{
    mw_kube_inputs *in = env->kube;
    if (!in) return MW_COLLECTOR_ABSENT; /* an environment without the slot (tests) */
    char err[512];
    int rc = mw_kube_start(env->cfg, &in->pods, err, sizeof(err));
    if (rc < 0) {
        mw_log(MW_LOG_WARN, "idle", "no Kubernetes workload labels: %s", err);
        mw_source_note("kubernetes", MW_SOURCE_ABSENT, "no Kubernetes workload labels: %s", err);
    } else if (rc > 0) {
        mw_source_note("kubernetes", MW_SOURCE_OFF,
                       "the Kubernetes API is not asked (--kubernetes=false): pods are named from "
                       "their cgroups and the kubelet's logs, without workload labels");
    } else {
        mw_source_note("kubernetes", MW_SOURCE_SEEN, "watching pods through the Kubernetes API");
    }
    mw_dra_start(env->cfg, in->pods, &in->dra);
    mw_podres_start(env->cfg, mw_dra_resolver(in->dra), &in->podres);
    if (in->podres) mw_dra_on_change(in->dra, mw_podres_kick, in->podres);
    mw_node_condition_start(env->cfg, in->pods, env->node_health, &in->node_condition);
    *state = in;
    return 0;
}

static void kube_destroy(void *state)
{
    mw_kube_inputs *in = state;
    /* The users of the pod watch's connection first. */
    mw_node_condition_stop(in->node_condition);
    mw_dra_on_change(in->dra, NULL, NULL);
    mw_podres_stop(in->podres);
    mw_dra_stop(in->dra);
    mw_kube_stop(in->pods);
    in->pods = NULL;
    in->podres = NULL;
    in->dra = NULL;
    in->node_condition = NULL;
}

const mw_module mw_module_kube = {
    .agent_only = 1,
    .name = "kube",
    .options = &mw_kube_options, /* and the other kube groups: agent/options.c */
    .init = kube_init,
    .destroy = kube_destroy,
};
