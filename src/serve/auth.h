/* auth.h - who may use which route of the HTTP server (docs/security.md).
 *
 * Each route has a role (serve/http.h). A role is either guarded by bearer
 * tokens, read from its token file (--ROLE-token-file; one token a line,
 * re-read when the file changes, compared in constant time, never logged),
 * or open. Without a token file, metrics and read stay open, and write and
 * admin are open only when the server listens on a loopback address: on
 * any other address they are refused (403) until a token file is given.
 * Routes of the write and admin roles also refuse the Content-Types that a
 * browser page may post without a CORS preflight (415), and write accepts
 * only application/x-protobuf. With --tls-client-ca-file, every guarded
 * route also needs a client certificate signed by that CA. */
#ifndef MW_AUTH_H
#define MW_AUTH_H

#include "../core/options.h"
#include "http.h"

#include <limits.h>

typedef struct mw_auth_settings {
    char token_file[MW_HTTP_NROLES][PATH_MAX]; /* by mw_http_role; PUBLIC unused */
    char tls_cert_file[PATH_MAX];
    char tls_key_file[PATH_MAX];
    char tls_client_ca_file[PATH_MAX];
    /* Namespace-scoped reads (docs/security.md): the policy binding tokens,
     * users and groups to namespaces; the proxies whose identity headers are
     * believed (comma-separated CIDRs) and those headers' names. */
    char access_policy[PATH_MAX];
    char trusted_proxy[1024];
    char proxy_user_header[64];
    char proxy_groups_header[64];
} mw_auth_settings;

extern const mw_option_group mw_auth_options;

typedef struct mw_auth mw_auth;

/* Reads the token files; listen (ADDR:PORT) decides the default of the
 * write and admin roles. NULL with a message naming the file and line
 * (never a token) when a file is missing, empty or malformed. */
mw_auth *mw_auth_open(const mw_auth_settings *s, const char *listen, char *err, size_t errsize);
/* Guards http's routes with a and, with a certificate, serves HTTPS.
 * Before mw_http_start(); a outlives http. */
void mw_auth_attach(mw_auth *a, mw_http_server *http);
void mw_auth_free(mw_auth *a);
/* Whether the server serves HTTPS. */
int mw_auth_tls(const mw_auth *a);

/* The guard for mw_http_set_guard (ctx: the mw_auth). */
int mw_auth_guard(void *ctx, mw_http_role role, const mw_http_request *req, mw_http_response *resp);

/* Whether ADDR:PORT listens only on a loopback address (127.0.0.0/8, ::1,
 * localhost). An empty ADDR (all interfaces) is not. */
int mw_auth_listen_is_loopback(const char *listen);

/* For tests: whether token (of len bytes) is one of the set's, in time
 * independent of where it differs. */
int mw_auth_token_has_role(mw_auth *a, const char *token, size_t len, mw_http_role role);

#endif
