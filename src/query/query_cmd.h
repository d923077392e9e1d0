/* query_cmd.h - `mlwatch query`: a PromQL query over HTTP to the local agent
 * or any Prometheus-compatible URL, printed as a table or JSON. */
#ifndef MW_QUERY_CMD_H
#define MW_QUERY_CMD_H

#include "../core/config.h"
#include "../core/http_client.h"

#include <stddef.h>

/* `mlwatch query`'s settings; "" = not given. */
typedef struct mw_query_cmd_settings {
    char time[64], start[64], end[64], step[64];
    char url[1024];
    char token_file[4096], ca_file[4096], server_name[256];
} mw_query_cmd_settings;
extern const mw_option_group mw_query_cmd_options;

/* What `mlwatch query` and `mlwatch doctor` send with each request to the
 * agent or --url: the bearer token of --token-file, the CA of --ca-file and,
 * with --tls-server-name, the name the certificate is checked against
 * (the URL then names it, and connect_to says where to connect). */
typedef struct mw_query_client {
    char url[1400];
    char connect_to[1400];
    char token[4096];
} mw_query_client;

/* The base URL (no trailing slash) with path appended: --url, else the
 * agent on --listen (https:// when --ca-file or --tls-server-name is
 * given); the token read; call's url, bearer_token, tls.ca_file and
 * connect_to set to qc's. Returns 0, or -1 with why (a token file that
 * cannot be read, --listen without a port). */
int mw_query_client_prepare(const mw_config *cfg, const char *path, mw_query_client *qc,
                            mw_http_call *call, char *why, size_t whysize);

/* rest: the positional arguments (exactly one: EXPR). Returns the exit
 * status: 0, 1 (the server refused the query or could not be reached), 2
 * (usage). */
int mw_query_command(const mw_config *cfg, char **rest, size_t nrest);

#endif
