/* modules.c - the registry of post-collection modules and their runner.
 *
 * Order matters: the Kubernetes inputs come first (the derivers read them);
 * a module that derives samples from another's output comes after it
 * (energy before carbon before idle sessions before findings); the store
 * and the shippers come last so they see every derived sample. Modules of
 * agent/ (store_query.c, idle_notify.c) are wiring: they join a producer
 * to its consumer, which know nothing of each other. */
#include "module.h"
#include "../core/log.h"
#include "../core/util.h"

#include <stdlib.h>
#include <string.h>

extern const mw_module mw_module_alert_send;  /* src/agent/alert_send.c: rules to Alertmanager */
extern const mw_module mw_doctor_module;      /* src/derive/doctor.c: findings */
extern const mw_module mw_module_energy;      /* src/derive/energy_module.c: energy, CO2 */
extern const mw_module mw_module_gpu_health;  /* src/derive/gpu_events.c: GPU events, readiness */
extern const mw_module mw_module_gpu_alloc;   /* src/derive/gpu_alloc.c: GPU fractions */
extern const mw_module mw_module_idle_notify; /* src/agent/idle_notify.c: idle sessions, notices */
extern const mw_module mw_module_kube;        /* src/kube/kube_module.c: pod watch, pod-resources */
extern const mw_module mw_module_remote_write; /* src/ship/remote_write.c: shipper */
extern const mw_module mw_module_store_query;  /* src/agent/store_query.c: store + PromQL API */
extern const mw_module mw_module_ui;           /* src/serve/ui.c: web UI, routes only */

/* Add modules here, in the order they must run. */
const mw_module *const mw_modules[] = {
    NULL,            /* placeholder so the array is never empty; skipped below */
    &mw_module_kube, /* inputs first: the derivers read them (mw_env.kube) */
    &mw_module_gpu_alloc, &mw_module_energy, &mw_module_idle_notify, &mw_doctor_module,
    &mw_module_gpu_health,
    /* Rule alerts to Alertmanagers, a sink of the rule evaluator: before the
     * store module that runs the evaluator, so that it is destroyed after
     * the evaluator stopped (modules are destroyed in reverse order). */
    &mw_module_alert_send,
    &mw_module_store_query,  /* the store, its PromQL API, the rules: after the derivers */
    &mw_module_remote_write, /* shippers last: they see every derived sample */
    &mw_module_ui,           /* routes only (web UI); before the agent's catch-all / */
};
const size_t mw_nmodules = sizeof(mw_modules) / sizeof(mw_modules[0]);

/* A hub (`mlwatch hub`) collects nothing: the derivers (kube inputs,
 * energy, idle sessions, findings) would see an empty host, so it runs only
 * these, which work on what agents remote-write to it. */
static const mw_module *const hub_modules[] = {
    &mw_module_alert_send,
    &mw_module_store_query,
    &mw_module_remote_write,
    &mw_module_ui,
};

static int runs_in_hub(const mw_module *m)
{
    for (size_t i = 0; i < sizeof(hub_modules) / sizeof(hub_modules[0]); i++)
        if (hub_modules[i] == m) return 1;
    return 0;
}

typedef struct active_module {
    const mw_module *m;
    void *state;
} active_module;

struct mw_module_set {
    active_module *items;
    size_t n;
};

mw_module_set *mw_module_set_new(const mw_env *env, int mode)
{
    mw_module_set *set = mw_xcalloc(1, sizeof(*set));
    set->items = mw_xcalloc(mw_nmodules, sizeof(active_module));
    for (size_t i = 0; i < mw_nmodules; i++) {
        const mw_module *m = mw_modules[i];
        if (!m || (mode == MW_MODULES_ONESHOT && m->agent_only)) continue;
        if (mode == MW_MODULES_HUB && !runs_in_hub(m)) continue;
        void *state = NULL;
        if (m->init) {
            int rc = m->init(env, &state);
            if (rc == MW_COLLECTOR_ABSENT) continue;
            if (rc < 0) {
                mw_log(MW_LOG_WARN, m->name, "module disabled: initialisation failed (%s)",
                       strerror(-rc));
                continue;
            }
        }
        set->items[set->n++] = (active_module){m, state};
    }
    return set;
}

void mw_module_set_routes(mw_module_set *set, mw_http_server *http)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->items[i].m->routes) set->items[i].m->routes(set->items[i].state, http);
}

void mw_module_set_derive(mw_module_set *set, mw_snapshot *snap)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->items[i].m->derive) set->items[i].m->derive(set->items[i].state, snap);
}

void mw_module_set_consume(mw_module_set *set, const mw_snapshot *snap)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->items[i].m->consume) set->items[i].m->consume(set->items[i].state, snap);
}

void mw_module_set_reload(mw_module_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->items[i].m->reload) set->items[i].m->reload(set->items[i].state);
}

int mw_module_set_ready(mw_module_set *set, char *why, size_t size)
{
    for (size_t i = 0; i < set->n; i++) {
        const mw_module *m = set->items[i].m;
        char reason[512];
        if (!m->ready || m->ready(set->items[i].state, reason, sizeof(reason)) == 0) continue;
        snprintf(why, size, "%s: %s", m->name, reason);
        return -1;
    }
    return 0;
}

void mw_module_set_free(mw_module_set *set)
{
    if (!set) return;
    /* Reverse order: later modules may hold references into earlier ones. */
    for (size_t i = set->n; i-- > 0;)
        if (set->items[i].m->destroy) set->items[i].m->destroy(set->items[i].state);
    free(set->items);
    free(set);
}
