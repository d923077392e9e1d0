/* access_policy.h - the access policy file (--access-policy): which read
 * identities see which namespaces (docs/security.md "Namespace-scoped
 * access"). Parsing only; serve/auth.c matches requests against it.
 *
 *   bindings:
 *     - token_file: /etc/mlwatch/team-a.tokens  # or user: NAME, or group: NAME
 *       namespaces: [team-a, team-a-dev]
 *       node_series: hidden                     # or visible; default hidden
 */
#ifndef MW_ACCESS_POLICY_H
#define MW_ACCESS_POLICY_H

#include <stddef.h>

typedef enum { MW_BIND_TOKEN_FILE, MW_BIND_USER, MW_BIND_GROUP } mw_binding_kind;

typedef struct mw_binding {
    mw_binding_kind kind;
    char *subject; /* the token file's path, the user or the group */
    char **namespaces;
    size_t nnamespaces;
    int node_series; /* 1: series without a namespace label are visible */
    int line;        /* in the file, for messages */
} mw_binding;

typedef struct mw_access_policy {
    mw_binding *b;
    size_t n;
} mw_access_policy;

#define MW_POLICY_FILE_MAX (1 << 20)
#define MW_POLICY_MAX_BINDINGS 1024
#define MW_POLICY_MAX_NAMESPACES 1024 /* per binding */

/* Parse the policy's text (name: its path, for messages). 0, or -1 with
 * "PATH:LINE:COL: what is wrong" in err and *out untouched. */
int mw_access_policy_parse(const char *name, const char *text, size_t len, mw_access_policy *out,
                           char *err, size_t errsize);
/* Read and parse a file; errors as above, or "PATH: reason". */
int mw_access_policy_load(const char *path, mw_access_policy *out, char *err, size_t errsize);
void mw_access_policy_free(mw_access_policy *p);

#endif
