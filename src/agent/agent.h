/* agent.h - the long-running agent and the one-shot collection. */
#ifndef MW_AGENT_H
#define MW_AGENT_H

#include "../core/config.h"

#include <stdio.h>

/* Register the settings of every part (options.c) with core/config.c:
 * once, before the first mw_config_defaults. */
void mw_options_register_all(void);

/* Collect every interval and serve until SIGINT/SIGTERM. Returns the
 * process exit status. hub: `mlwatch hub`, the same loop with the collect
 * stage off (no collector, no deriver): the store, its query API, the UI
 * and remote write, for what node agents remote-write to it. */
int mw_agent_run(const mw_config *cfg, int hub);
/* `mlwatch metrics`'s settings: --format, text or openmetrics. */
typedef struct mw_metrics_settings {
    char format[32];
} mw_metrics_settings;
extern const mw_option_group mw_metrics_options;

/* Collect once and write the exposition to out. Returns the exit status. */
int mw_metrics_once(const mw_config *cfg, FILE *out);

#endif
