/* alert_send.c - rule alerts to Alertmanagers: the agent's wiring of the
 * rule evaluator (rules/alert.h, the producer) to the Alertmanager sender
 * (notify/am_sender.h, the consumer), which know nothing of each other.
 * With --alertmanager-url set it starts the sender, registers it as an
 * alert sink and adds its self-metrics each cycle; it runs in the agent and
 * in the hub, wherever rules are evaluated. */
#include "module.h"
#include "../core/log.h"
#include "../notify/am_sender.h"
#include "../rules/alert.h"

static int alert_send_init(const mw_env *env, void **state)
{
    char err[512];
    mw_am_sender *s = NULL;
    int rc = mw_am_sender_new(mw_config_group(env->cfg, &mw_am_options), &s, err, sizeof(err));
    if (rc < 0) mw_log(MW_LOG_ERROR, "alertmanager", "rule alerts not sent: %s", err);
    if (rc != 0) return MW_COLLECTOR_ABSENT;
    mw_alert_sink sink = {.name = "alertmanager", .send = mw_am_sender_send, .ctx = s};
    if (mw_alert_sink_add(&sink) < 0) {
        mw_log(MW_LOG_ERROR, "alertmanager", "rule alerts not sent: too many alert sinks");
        mw_am_sender_free(s);
        return MW_COLLECTOR_ABSENT;
    }
    *state = s;
    return 0;
}

static void alert_send_derive(void *state, mw_snapshot *snap)
{
    mw_am_sender_emit(state, snap);
}

static void alert_send_destroy(void *state)
{
    mw_alert_sink_remove(state); /* no batch reaches it from now on */
    mw_am_sender_free(state);
}

const mw_module mw_module_alert_send = {
    .agent_only = 1,
    .name = "alertmanager",
    .options = &mw_am_options,
    .init = alert_send_init,
    .derive = alert_send_derive,
    .destroy = alert_send_destroy,
};
