/* options.c - the wiring of every owner's settings: gathers the option
 * groups of the collectors, the modules, the notification receivers, the
 * inputs the modules start and the commands, and registers them with
 * core/config.c. The order here is the order of `mlwatch help` and of
 * docs/configuration.md. */
#include "agent.h"
#include "module.h"
#include "run.h"
#include "../collect/collector.h"
#include "../kube/kube.h"
#include "../kube/dra.h"
#include "../kube/node_condition.h"
#include "../kube/podresources.h"
#include "../notify/notify.h"
#include "../notify/receiver.h"
#include "../query/api.h"
#include "../query/query_cmd.h"
#include "../rules/rules.h"
#include "../serve/auth.h"
#include "../serve/http.h"

#include <stdatomic.h>

void mw_options_register_all(void)
{
    static atomic_int done;
    if (atomic_exchange(&done, 1)) return;
    mw_config_register_group(&mw_collector_set_options);
    mw_config_register_group(&mw_metrics_options);
    for (size_t i = 0; i < mw_ncollectors; i++)
        if (mw_collectors[i]->options) mw_config_register_group(mw_collectors[i]->options);
    /* The inputs first, as they run: the kube module's two. */
    mw_config_register_group(&mw_kube_options);
    mw_config_register_group(&mw_podres_options);
    mw_config_register_group(&mw_dra_options);
    mw_config_register_group(&mw_node_condition_options);
    for (size_t i = 0; i < mw_nmodules; i++)
        if (mw_modules[i] && mw_modules[i]->options)
            mw_config_register_group(mw_modules[i]->options);
    /* The notifier, run with the idle module (agent/idle_notify.c). */
    mw_config_register_group(&mw_notify_options);
    for (size_t i = 0; i < mw_nreceivers; i++)
        mw_config_register_group(mw_receivers[i]->options);
    /* The HTTP server: connections, deadlines, the query lane. */
    mw_config_register_group(&mw_http_options);
    /* The PromQL engine, whose API agent/store_query.c serves. */
    mw_config_register_group(&mw_query_options);
    /* The rule evaluator, which agent/store_query.c runs over the store. */
    mw_config_register_group(&mw_rules_options);
    /* Who may use the HTTP server's routes (serve/auth.c). */
    mw_config_register_group(&mw_auth_options);
    /* Commands' own settings. */
    mw_config_register_group(&mw_query_cmd_options);
    mw_config_register_group(&mw_run_options);
}
