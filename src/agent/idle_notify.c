/* idle_notify.c - the idle module with its notifications: the agent's
 * wiring of derive/ and notify/. The idle module (derive/idle.c) finds idle
 * GPU sessions and knows nothing of notifications; the notify module
 * (notify/notify_module.c) starts the notifier and feeds it the episodes;
 * this module runs the two in that order and hands the idle module the
 * episodes the notifier's state file kept open across a restart. Once the
 * notifier runs, it also registers it as an alert sink (rules/alert.h), so
 * that rule alerts reach the built-in receivers without an Alertmanager. */
#include "module.h"
#include "../core/util.h"
#include "../derive/idle.h"
#include "../derive/idle_config.h"
#include "../notify/notify.h"
#include "../notify/notify_module.h"
#include "../rules/alert.h"

#include <stdlib.h>

typedef struct idle_notify {
    void *idle; /* mw_module_idle's state */
    mw_notify_module *notify;
    mw_notifier *sink; /* the notifier, once registered as an alert sink */
} idle_notify;

static int idle_notify_init(const mw_env *env, void **state)
{
    void *idle = NULL;
    int rc = mw_module_idle.init(env, &idle);
    if (rc != 0) return rc;
    idle_notify *w = mw_xcalloc(1, sizeof(*w));
    w->idle = idle;
    w->notify = mw_notify_module_new(env->cfg);
    mw_notify_module_restore(w->notify, w->idle);
    *state = w;
    return 0;
}

static void idle_notify_derive(void *state, mw_snapshot *snap)
{
    idle_notify *w = state;
    mw_module_idle.derive(w->idle, snap);
    mw_notify_module_emit(w->notify, snap);
}

static void idle_notify_consume(void *state, const mw_snapshot *snap)
{
    (void)snap;
    idle_notify *w = state;
    mw_notify_module_consume(w->notify, w->idle);
    mw_notifier *n = mw_notify_module_notifier(w->notify);
    if (n && !w->sink) {
        mw_alert_sink sink = {.name = "notify", .send = mw_notifier_alerts, .ctx = n};
        if (mw_alert_sink_add(&sink) == 0) w->sink = n;
    }
}

static void idle_notify_destroy(void *state)
{
    idle_notify *w = state;
    if (w->sink) mw_alert_sink_remove(w->sink); /* no batch reaches it from now on */
    mw_notify_module_free(w->notify);           /* its thread first: it reads nothing of idle's */
    mw_module_idle.destroy(w->idle);
    free(w);
}

const mw_module mw_module_idle_notify = {
    .agent_only = 1,
    .name = "idle",
    .options = &mw_idle_options, /* the notifier's and the receivers': agent/options.c */
    .init = idle_notify_init,
    .derive = idle_notify_derive,
    .consume = idle_notify_consume,
    .destroy = idle_notify_destroy,
};
