/* rules_internal.h - the evaluator's state, shared by rules_engine.c (life,
 * thread, reload), rules_eval.c (evaluation) and rules_api.c (HTTP). */
#ifndef MW_RULES_INTERNAL_H
#define MW_RULES_INTERNAL_H

#include "../core/buf.h"
#include "../core/worker.h"
#include "alert.h"
#include "rulefile.h"
#include "rules.h"

#include <stdatomic.h>

enum { ST_INACTIVE, ST_PENDING, ST_FIRING };
enum { H_UNKNOWN, H_OK, H_ERR };

/* One alert of an alerting rule (Prometheus's rules.Alert). Times are ms;
 * 0 is Go's zero time. */
typedef struct alert_st {
    mw_alert_pair *labels; /* sorted by name, alertname among them; owned */
    size_t nlabels;
    mw_alert_pair *annotations;
    size_t nannotations;
    uint64_t hash;
    int state;
    double value;
    int64_t active_at, fired_at, resolved_at, last_sent_at, valid_until, keep_firing_since;
} alert_st;

/* A series a rule wrote at its last evaluation, for its stale marker when
 * it is gone at the next. */
typedef struct written {
    mw_alert_pair *labels; /* __name__ included */
    size_t nlabels;
    uint64_t hash;
} written;

typedef struct rule_st {
    const mw_rule_def *def;
    alert_st *alerts;
    size_t nalerts;
    int restored; /* the `for` state was looked up in the store */
    int health;
    char last_error[512];
    int64_t last_eval_ms;
    double eval_seconds;
    written *prev;
    size_t nprev;
} rule_st;

typedef struct group_st {
    const mw_rule_group_def *def;
    rule_st *rules;
    int64_t interval_ms;
    int64_t next_ms; /* wall-clock time of the next evaluation */
    int64_t last_eval_ms;
    double eval_seconds;
    uint64_t failures;
    int should_restore;
} group_st;

struct mw_rules {
    mw_worker w; /* w.mu guards everything below */
    mw_store *_Atomic store;
    mw_rules_settings set;
    mw_rules_context ctx;
    mw_tpl_kv *external;
    size_t nexternal;
    int shipped; /* the shipped rules are loaded */
    int test;    /* mw_rules_new_for_test: no sending, no restoration */
    mw_rule_set defs;
    group_st *groups;
    size_t ngroups;
    size_t *eval_order; /* test runs: group_eval_order (NULL: file order) */
    mw_buf errors;      /* test runs: evaluation errors */
};

/* Evaluate group g at t (wall-clock ms) on store: rules in order, ALERTS,
 * ALERTS_FOR_STATE and recorded series appended, the `for` state restored
 * at the first evaluation, alerts due handed to the sinks. w.mu held. */
void mw_rules_eval_group(mw_rules *r, group_st *g, mw_store *store, int64_t t);
/* The state of one group's rules from defs, with nothing evaluated yet. */
void mw_rules_group_init(group_st *g, const mw_rule_group_def *def, int64_t default_interval_ms);
void mw_rules_group_free(group_st *g);
/* Move the alerts and health of the rules of old into g where a rule of
 * the same name and query is found (a reload keeps what is pending). */
void mw_rules_group_take_state(group_st *g, group_st *old);
/* Prometheus's %s of a label set: {a="b", c="d"}. */
void mw_rules_format_labels(mw_buf *b, const mw_alert_pair *l, size_t n);
/* One alert as mw_rules_firing and `mlwatch rules test` print it: its
 * labels, a tab, its annotations (malloc'd). */
char *mw_rules_alert_line(const mw_alert_pair *labels, size_t nlabels,
                          const mw_alert_pair *annotations, size_t nannotations);
/* The n lines (malloc'd, in a malloc'd array; both freed) sorted, each
 * ending in '\n': one malloc'd text ("" for none). */
char *mw_rules_sorted_text(char **lines, size_t n);

/* The shipped rules (deploy/prometheus/mlwatch-rules.yml), embedded at
 * build time (scripts/embed_rules.cmake). */
extern const char mw_shipped_rules[];
extern const size_t mw_shipped_rules_len;
#define MW_SHIPPED_RULES_NAME "builtin:deploy/prometheus/mlwatch-rules.yml"

#endif
