/* rulefile.h - rule files in Prometheus's format (rulefmt), parsed and
 * validated: groups (name, interval, limit, query_offset, labels) of
 * recording and alerting rules (record or alert, expr, for,
 * keep_firing_for, labels, annotations). Every problem is one line
 * "FILE:LINE:COL: message" (docs/rules.md). */
#ifndef MW_RULES_RULEFILE_H
#define MW_RULES_RULEFILE_H

#include "../query/promql.h"
#include "template.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mw_rule_def {
    int alert;       /* 1: alerting rule; 0: recording */
    char *name;      /* record: the metric name; alert: alertname */
    char *expr_text; /* as written */
    char *query;     /* pq_format(expr): what /api/v1/rules shows */
    pq_node *expr;
    int64_t for_ms, keep_firing_for_ms;
    mw_tpl_kv *labels; /* values are templates for alerts */
    mw_tpl **label_tpls;
    size_t nlabels;
    mw_tpl_kv *annotations;
    mw_tpl **annotation_tpls;
    size_t nannotations;
} mw_rule_def;

typedef struct mw_rule_group_def {
    char *name, *file;
    int64_t interval_ms; /* 0: the default evaluation interval */
    int64_t limit;       /* 0: none */
    int64_t query_offset_ms;
    mw_rule_def *rules;
    size_t nrules;
} mw_rule_group_def;

typedef struct mw_rule_set {
    mw_rule_group_def *groups;
    size_t ngroups;
} mw_rule_set;

/* The bounds of one file: its size, its groups and rules. */
#define MW_RULE_FILE_MAX_BYTES (4u << 20)
#define MW_RULES_MAX_GROUPS 1000
#define MW_RULES_MAX_RULES 10000

/* Parse one file's text (name: for messages and the groups' file) and add
 * its groups to set. 0, or -1 with "NAME:LINE:COL: message" in err; set is
 * then unchanged. */
int mw_rule_set_parse(mw_rule_set *set, const char *name, const char *text, size_t len, char *err,
                      size_t errsize);
/* Read and parse every file that the patterns (one per line, shell
 * globs) name. A pattern that matches nothing is an error unless it has a
 * glob character (Prometheus's rule_files). */
int mw_rule_set_load_files(mw_rule_set *set, const char *patterns, char *err, size_t errsize);
void mw_rule_set_free(mw_rule_set *set);

/* Label names [a-zA-Z_][a-zA-Z0-9_]*; metric names also take ':'. */
int mw_rules_valid_label_name(const char *s);
int mw_rules_valid_metric_name(const char *s);

#endif
