/* rw_config.h - remote-write endpoints from --remote-write and the config file.
 *
 *   external_labels: {node: gpu-01}          # every endpoint
 *   remote_write:
 *     - url: https://mimir.example/api/v1/push
 *       name: mimir                           # [A-Za-z0-9_.-], unique
 *       remote_timeout: 30s
 *       basic_auth: {username: agent, password_file: /etc/mlwatch/pw}
 *       bearer_token_file: /var/run/secrets/token   # or basic_auth, not both
 *       tls_config: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem,
 *                    insecure_skip_verify: false, server_name: NAME}
 *       external_labels: {cluster: a}         # over the global ones
 *       queue_config: {max_shards: 2, max_samples_per_send: 2000,
 *                      batch_send_deadline: 5s, capacity: 512MiB,
 *                      min_backoff: 30ms, max_backoff: 5s}
 *       write_relabel_configs: [{source_labels: [__name__], regex: "x.*",
 *                                action: keep}]
 *
 * Secrets are read from files only (an inline password is refused), when
 * the shipper starts; they never appear in logs, metrics or errors. */
#ifndef MW_RW_CONFIG_H
#define MW_RW_CONFIG_H

#include "../core/config.h"
#include "relabel.h"

#include <stdint.h>

#define MW_RW_MAX_ENDPOINTS 8
#define MW_RW_MAX_EXTERNAL 16

typedef struct mw_rw_endpoint_cfg {
    char url[1024];
    char display_url[1024]; /* without credentials, query or fragment */
    char name[64];          /* configured name, or "" */
    char dirname[96];       /* queue folder under data-dir/remote-write/ */
    char basic_username[256];
    char basic_password_file[PATH_MAX];
    char bearer_token_file[PATH_MAX];
    char ca_file[PATH_MAX];
    char cert_file[PATH_MAX];
    char key_file[PATH_MAX];
    int insecure_skip_verify;
    char server_name[256]; /* the name the certificate is checked against, "" the URL's host */
    int64_t timeout_ms;
    char ext_names[MW_RW_MAX_EXTERNAL][128];
    char ext_values[MW_RW_MAX_EXTERNAL][256];
    size_t next;
    int max_shards;
    uint64_t max_samples_per_send;
    int64_t batch_send_deadline_ms;
    uint64_t capacity; /* bytes on disk for all shards together */
    int64_t min_backoff_ms, max_backoff_ms;
    mw_relabel relabel;
} mw_rw_endpoint_cfg;

typedef struct mw_rw_config {
    mw_rw_endpoint_cfg *ep;
    size_t n;
} mw_rw_config;

/* Labels added to every series an endpoint ships (values expanded). */
typedef struct mw_rw_labels {
    char names[MW_RW_MAX_EXTERNAL][128];
    char values[MW_RW_MAX_EXTERNAL][256];
    size_t n;
} mw_rw_labels;

/* Remote write's settings (rw_config.c): --remote-write URL, the file's
 * remote_write list as endpoints (parsed and checked once, when the file is
 * loaded) and its global external_labels. The list lives on the heap and is
 * never changed after the load, so copies of the configuration (an
 * assignment) share it; rw_config.c keeps every list it made until
 * mw_rw_forget_lists(). */
typedef struct mw_rw_settings {
    char url[1024];
    const mw_rw_config *list; /* NULL: the file has no remote_write list */
    mw_rw_labels external;
} mw_rw_settings;
extern const mw_option_group mw_rw_options;

/* The endpoints cfg asks for (--remote-write first, then the list), with
 * global external labels merged in. Returns 0 (n may be 0) or -1. */
int mw_rw_config_build(const mw_config *cfg, mw_rw_config *out, char *err, size_t errsize);
void mw_rw_config_free(mw_rw_config *rc);

/* Free every endpoint list the config files loaded so far made: for a
 * process that loads configurations over and over (the fuzzer), once no
 * mw_config loaded before is used again. */
void mw_rw_forget_lists(void);

/* Strip user:password@, ?query and #fragment from a URL for display. */
void mw_rw_display_url(const char *url, char *out, size_t n);

#endif
