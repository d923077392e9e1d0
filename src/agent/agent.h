/* agent.h - the long-running agent and the one-shot collection. */
#ifndef MW_AGENT_H
#define MW_AGENT_H

#include "../core/config.h"

#include <stdio.h>

/* Collect every interval and serve until SIGINT/SIGTERM. Returns the
 * process exit status. */
int mw_agent_run(const mw_config *cfg);
/* Collect once and write the exposition to out. Returns the exit status. */
int mw_metrics_once(const mw_config *cfg, FILE *out);

#endif
