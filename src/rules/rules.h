/* rules.h - the rule evaluator: recording and alerting rules of
 * Prometheus's rule files evaluated on the embedded store, with
 * Prometheus's semantics (docs/rules.md), their state served as
 * /api/v1/rules and /api/v1/alerts, and the alerts due for sending handed
 * to the sinks of alert.h.
 *
 * The agent's wiring (agent/store_query.c) makes one with the settings,
 * gives it the store once open, registers its routes, starts its thread
 * and reloads it on SIGHUP; `mlwatch rules test` drives the same
 * evaluation step by step (rules_test_cmd.c). */
#ifndef MW_RULES_H
#define MW_RULES_H

#include "../core/options.h"
#include "../core/snapshot.h"
#include "../serve/http.h"
#include "../store/store.h"
#include "template.h"

#include <stddef.h>
#include <stdint.h>

/* The evaluator's settings (rules_engine.c's option table). */
typedef struct mw_rules_settings {
    char rule_files[8192]; /* patterns, one per line (--rule-file, repeatable) */
    char shipped[8];       /* auto, on, off: the rules built in (docs/rules.md) */
    int64_t evaluation_interval_ms;
    int64_t resend_delay_ms;
    int64_t outage_tolerance_ms;
    int64_t for_grace_period_ms;
    char external_url[512];
} mw_rules_settings;
extern const mw_option_group mw_rules_options;

typedef struct mw_rules mw_rules;

/* Where it runs, for the default of --shipped-rules=auto: a hub loads the
 * shipped rules, so does an agent that ships to no one (a machine on its
 * own); a node agent that remote-writes to a hub does not. */
typedef struct mw_rules_context {
    int hub;
    int remote_writes;
    const mw_tpl_kv *external_labels; /* $externalLabels; copied */
    size_t nexternal;
} mw_rules_context;

/* Load the rule files. NULL when no rules are configured at all. When a
 * file is bad, the evaluator starts without rules (a reload once the file
 * is fixed loads them), *bad is set and err has the first problem
 * ("FILE:LINE:COL: message"). */
mw_rules *mw_rules_new(const mw_rules_settings *set, const mw_rules_context *ctx, int *bad,
                       char *err, size_t errsize);
/* The store to evaluate on (NULL: evaluation waits for it). */
void mw_rules_set_store(mw_rules *r, mw_store *store);
/* GET /api/v1/rules, GET /api/v1/alerts (read), POST /-/reload (admin). */
void mw_rules_routes(mw_rules *r, mw_http_server *http);
/* Start the evaluation thread: 0, or -1. */
int mw_rules_start(mw_rules *r);
/* Read the files again: 0, or -1 with the problem in err, and the rules
 * in force are kept (logged by the caller). */
int mw_rules_reload(mw_rules *r, char *err, size_t errsize);
/* Its metrics: failures per group, the last evaluation's duration. */
void mw_rules_emit(mw_rules *r, mw_snapshot *snap);
void mw_rules_free(mw_rules *r);

/* For `mlwatch rules test`: the groups of files (no shipped rules) with a
 * given interval, evaluated at t in file and group order; no thread, no
 * restoration of the `for` state, nothing sent. */
mw_rules *mw_rules_new_for_test(const char *patterns, int64_t interval_ms, char *err,
                                size_t errsize);
void mw_rules_eval_all(mw_rules *r, mw_store *store, int64_t t);
/* promtool's group_eval_order: the groups named evaluate first, in this
 * order, at each evaluation time; the others after them, in file order; a
 * name no file has is ignored (as promtool does). -1 with promtool's
 * message for a name given twice. */
int mw_rules_set_eval_order(mw_rules *r, const char *const *names, size_t n, char *err,
                            size_t errsize);
/* The firing alerts of rule alertname: labels and annotations, each alert
 * "labels\tannotations" (both {a="b", ...} sorted), one per line, sorted;
 * malloc'd. */
char *mw_rules_firing(mw_rules *r, const char *alertname);
/* The rules' evaluation errors so far, one per line (NULL: none). */
const char *mw_rules_errors(mw_rules *r);

#endif
