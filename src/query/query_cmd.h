/* query_cmd.h - `mlwatch query`: a PromQL query over HTTP to the local agent
 * or any Prometheus-compatible URL, printed as a table or JSON. */
#ifndef MW_QUERY_CMD_H
#define MW_QUERY_CMD_H

#include "../core/config.h"

#include <stddef.h>

/* `mlwatch query`'s settings; "" = not given. */
typedef struct mw_query_cmd_settings {
    char time[64], start[64], end[64], step[64];
    char url[1024];
} mw_query_cmd_settings;
extern const mw_option_group mw_query_cmd_options;

/* rest: the positional arguments (exactly one: EXPR). Returns the exit
 * status: 0, 1 (the server refused the query or could not be reached), 2
 * (usage). */
int mw_query_command(const mw_config *cfg, char **rest, size_t nrest);

#endif
