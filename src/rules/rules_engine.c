/* rules_engine.c - the evaluator's life: its settings, loading the rule
 * files (and the shipped rules, built in), the thread that evaluates each
 * group at its interval, reloading (SIGHUP, POST /-/reload) with the old
 * rules kept when a file is bad, and its metrics. rules_eval.c evaluates,
 * rules_api.c serves. */
#include "rules_internal.h"
#include "../core/hash.h"
#include "../core/log.h"
#include "../core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int check_shipped(const char *v, char *why, size_t whysize)
{
    if (strcmp(v, "auto") == 0 || strcmp(v, "on") == 0 || strcmp(v, "off") == 0) return 0;
    snprintf(why, whysize, "must be auto, on or off, got '%s'", v);
    return -1;
}

static int check_grace(const char *v, char *why, size_t whysize)
{
    int64_t ms;
    if (pq_parse_duration(v, &ms) == 0 && ms >= 0) return 0;
    snprintf(why, whysize, "invalid duration '%s' (examples: 0s, 10m)", v);
    return -1;
}

typedef struct rules_opts {
    mw_rules_settings s;
    char grace[32];
} rules_opts;

/* clang-format off */
static const mw_option rules_rows[] = {
    {.name = "rule-file", .type = MW_OPT_PATH, .offset = offsetof(rules_opts, s.rule_files), .size = sizeof(((rules_opts *)0)->s.rule_files), .def = "", .repeat = 1, .help = "Prometheus rule file to evaluate (repeatable; shell globs); in the config file rule_file: [a.yml, 'rules.d/*.yml'] (docs/rules.md)"},
    MW_OPT(rules_opts, "shipped-rules", MW_OPT_STRING, s.shipped, "auto", check_shipped, "Evaluate the rules shipped with mlwatch (deploy/prometheus/mlwatch-rules.yml, built in): on, off, or auto (a hub, and an agent without --remote-write)"),
    MW_OPT(rules_opts, "rules-evaluation-interval", MW_OPT_DURATION, s.evaluation_interval_ms, "1m", NULL, "Evaluation interval of rule groups that set none"),
    MW_OPT(rules_opts, "rules-resend-delay", MW_OPT_DURATION, s.resend_delay_ms, "1m", NULL, "How often a firing alert is sent again to the alert receivers"),
    MW_OPT(rules_opts, "rules-outage-tolerance", MW_OPT_DURATION, s.outage_tolerance_ms, "1h", NULL, "Longest outage after which the `for` state of alerts is still restored"),
    MW_OPT(rules_opts, "rules-for-grace-period", MW_OPT_STRING, grace, "0s", check_grace, "Least time an alert waits after a restart before it fires again (Prometheus: 10m; 0s: the `for` left when the agent stopped)"),
    MW_OPT(rules_opts, "rules-external-url", MW_OPT_STRING, s.external_url, "", NULL, "URL of this mlwatch as alerts link to it ($externalURL, generatorURL)"),
};
/* clang-format on */
const mw_option_group mw_rules_options =
    MW_OPTION_GROUP("rules and alerts", "src/rules/rules_engine.c", rules_opts, rules_rows, NULL);

/* clang-format off */
MW_METRIC(FAILURES, MW_COUNTER, "mlwatch_rule_evaluation_failures_total", "", "Rule evaluations that failed, by group (the rule's lastError in /api/v1/rules).");
MW_METRIC(DURATION, MW_GAUGE, "mlwatch_rule_group_last_duration_seconds", "seconds", "How long the last evaluation of the group took.");
MW_METRIC(RULES, MW_GAUGE, "mlwatch_rule_group_rules", "", "Rules in the group.");
/* clang-format on */

/* Load the configured files (and the shipped rules) into set. */
static int load(mw_rules *r, mw_rule_set *set, char *err, size_t errsize)
{
    memset(set, 0, sizeof(*set));
    if (r->shipped && mw_rule_set_parse(set, MW_SHIPPED_RULES_NAME, mw_shipped_rules,
                                        mw_shipped_rules_len, err, errsize) < 0)
        return -1;
    if (mw_rule_set_load_files(set, r->set.rule_files, err, errsize) < 0) {
        mw_rule_set_free(set);
        return -1;
    }
    return 0;
}

/* Prometheus's offset of a group within its interval, from its name and
 * file: groups spread over the interval instead of running all at once. */
static int64_t group_offset(const mw_rule_group_def *d, int64_t interval)
{
    uint64_t h = mw_fnv1a64_str(mw_fnv1a64_str(MW_FNV1A64_BASIS, d->name), d->file);
    return (int64_t)(h % (uint64_t)interval);
}

static int64_t next_slot(const group_st *g, int64_t now)
{
    int64_t off = group_offset(g->def, g->interval_ms);
    int64_t base = now - ((now - off) % g->interval_ms + g->interval_ms) % g->interval_ms;
    return base > now ? base : base + (base == now ? 0 : g->interval_ms);
}

/* New groups from defs, taking the state of old groups of the same file
 * and name. */
static void install(mw_rules *r, mw_rule_set *defs)
{
    free(r->eval_order); /* indices of the groups being replaced */
    r->eval_order = NULL;
    group_st *groups = mw_xcalloc(defs->ngroups ? defs->ngroups : 1, sizeof(*groups));
    int64_t now = mw_now_ms();
    for (size_t i = 0; i < defs->ngroups; i++) {
        group_st *g = &groups[i];
        mw_rules_group_init(g, &defs->groups[i], r->set.evaluation_interval_ms);
        g->next_ms = next_slot(g, now);
        for (size_t j = 0; j < r->ngroups; j++) {
            group_st *o = &r->groups[j];
            if (strcmp(o->def->name, g->def->name) == 0 &&
                strcmp(o->def->file, g->def->file) == 0) {
                int64_t next = g->next_ms;
                mw_rules_group_take_state(g, o);
                if (o->interval_ms != g->interval_ms) g->next_ms = next;
                break;
            }
        }
    }
    for (size_t j = 0; j < r->ngroups; j++)
        mw_rules_group_free(&r->groups[j]);
    free(r->groups);
    mw_rule_set_free(&r->defs);
    r->defs = *defs;
    r->groups = groups;
    r->ngroups = defs->ngroups;
}

static void set_external(mw_rules *r, const mw_tpl_kv *ext, size_t n)
{
    r->external = mw_xcalloc(n ? n : 1, sizeof(*r->external));
    for (size_t i = 0; i < n; i++)
        r->external[i] = (mw_tpl_kv){mw_xstrdup(ext[i].name), mw_xstrdup(ext[i].value)};
    r->nexternal = n;
}

mw_rules *mw_rules_new(const mw_rules_settings *set, const mw_rules_context *ctx, int *bad,
                       char *err, size_t errsize)
{
    *bad = 0;
    const rules_opts *o = (const rules_opts *)(const void *)set;
    int shipped = strcmp(set->shipped, "on") == 0 ||
                  (strcmp(set->shipped, "auto") == 0 && (ctx->hub || !ctx->remote_writes));
    if (!shipped && !set->rule_files[0]) return NULL;
    mw_rules *r = mw_xcalloc(1, sizeof(*r));
    mw_worker_init(&r->w);
    r->set = *set;
    pq_parse_duration(o->grace, &r->set.for_grace_period_ms);
    r->ctx = *ctx;
    r->shipped = shipped;
    mw_buf_init(&r->errors, 1 << 20);
    set_external(r, ctx->external_labels, ctx->nexternal);
    r->ctx.external_labels = r->external;
    mw_rule_set defs;
    if (load(r, &defs, err, errsize) < 0) {
        *bad = 1;
        memset(&defs, 0, sizeof(defs));
    }
    install(r, &defs);
    size_t nrules = 0;
    for (size_t i = 0; i < r->ngroups; i++)
        nrules += r->groups[i].def->nrules;
    mw_log(MW_LOG_INFO, "rules", "%zu rules in %zu groups%s", nrules, r->ngroups,
           shipped ? ", the shipped rules among them" : "");
    return r;
}

mw_rules *mw_rules_new_for_test(const char *patterns, int64_t interval_ms, char *err,
                                size_t errsize)
{
    mw_rules *r = mw_xcalloc(1, sizeof(*r));
    mw_worker_init(&r->w);
    mw_strlcpy(r->set.rule_files, patterns, sizeof(r->set.rule_files));
    r->set.evaluation_interval_ms = interval_ms;
    r->set.resend_delay_ms = 60000;
    r->test = 1;
    mw_buf_init(&r->errors, 1 << 20);
    set_external(r, NULL, 0);
    mw_rule_set defs;
    if (load(r, &defs, err, errsize) < 0) {
        mw_rules_free(r);
        return NULL;
    }
    install(r, &defs);
    for (size_t i = 0; i < r->ngroups; i++)
        r->groups[i].should_restore = 0;
    for (size_t i = 0; i < r->ngroups; i++)
        for (size_t j = 0; j < r->groups[i].def->nrules; j++)
            r->groups[i].rules[j].restored = 1; /* promtool writes ALERTS from the start */
    return r;
}

void mw_rules_eval_all(mw_rules *r, mw_store *store, int64_t t)
{
    pthread_mutex_lock(&r->w.mu);
    for (size_t i = 0; i < r->ngroups; i++)
        mw_rules_eval_group(r, &r->groups[r->eval_order ? r->eval_order[i] : i], store, t);
    pthread_mutex_unlock(&r->w.mu);
}

int mw_rules_set_eval_order(mw_rules *r, const char *const *names, size_t n, char *err,
                            size_t errsize)
{
    size_t *order = mw_xcalloc(r->ngroups ? r->ngroups : 1, sizeof(size_t));
    char *placed = mw_xcalloc(r->ngroups ? r->ngroups : 1, 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) {
                snprintf(err, errsize, "group name repeated in evaluation order: %s", names[i]);
                goto fail;
            }
        size_t g = 0;
        while (g < r->ngroups && strcmp(r->groups[g].def->name, names[i]) != 0)
            g++;
        if (g == r->ngroups) continue; /* promtool too ignores a group no file has */
        order[k++] = g;
        placed[g] = 1;
    }
    for (size_t g = 0; g < r->ngroups; g++)
        if (!placed[g]) order[k++] = g;
    free(placed);
    pthread_mutex_lock(&r->w.mu);
    free(r->eval_order);
    r->eval_order = order;
    pthread_mutex_unlock(&r->w.mu);
    return 0;
fail:
    free(order);
    free(placed);
    return -1;
}

const char *mw_rules_errors(mw_rules *r)
{
    return r->errors.len ? r->errors.data : NULL;
}

char *mw_rules_firing(mw_rules *r, const char *alertname)
{
    char **lines = NULL;
    size_t n = 0;
    pthread_mutex_lock(&r->w.mu);
    for (size_t i = 0; i < r->ngroups; i++)
        for (size_t j = 0; j < r->groups[i].def->nrules; j++) {
            rule_st *rs = &r->groups[i].rules[j];
            if (!rs->def->alert || strcmp(rs->def->name, alertname) != 0) continue;
            for (size_t k = 0; k < rs->nalerts; k++) {
                alert_st *a = &rs->alerts[k];
                if (a->state != ST_FIRING) continue;
                lines = mw_xrealloc(lines, (n + 1) * sizeof(*lines));
                lines[n++] =
                    mw_rules_alert_line(a->labels, a->nlabels, a->annotations, a->nannotations);
            }
        }
    pthread_mutex_unlock(&r->w.mu);
    return mw_rules_sorted_text(lines, n);
}

void mw_rules_set_store(mw_rules *r, mw_store *store)
{
    atomic_store(&r->store, store);
    mw_worker_kick(&r->w);
}

int mw_rules_reload(mw_rules *r, char *err, size_t errsize)
{
    mw_rule_set defs;
    if (load(r, &defs, err, errsize) < 0) return -1;
    pthread_mutex_lock(&r->w.mu);
    install(r, &defs);
    pthread_mutex_unlock(&r->w.mu);
    mw_worker_kick(&r->w);
    mw_log(MW_LOG_INFO, "rules", "rules reloaded: %zu groups", defs.ngroups);
    return 0;
}

/* Each pass: evaluate the groups that are due, then sleep until the next
 * one is. A group whose slot has passed by more than its interval (the
 * agent was busy, or the clock stepped) skips to its next slot, as
 * Prometheus counts missed iterations instead of running them all. */
static void *run(void *arg)
{
    mw_rules *r = arg;
    pthread_mutex_lock(&r->w.mu);
    for (;;) {
        int64_t now = mw_now_ms(), wait = 60000;
        mw_store *store = atomic_load(&r->store);
        for (size_t i = 0; i < r->ngroups && store; i++) {
            group_st *g = &r->groups[i];
            if (g->next_ms > now + g->interval_ms)
                g->next_ms = next_slot(g, now); /* clock stepped back */
            if (g->next_ms <= now) {
                int64_t t = g->next_ms;
                if (now - t >= g->interval_ms) t = next_slot(g, now) - g->interval_ms;
                mw_rules_eval_group(r, g, store, t);
                g->next_ms = t + g->interval_ms;
                now = mw_now_ms();
            }
            if (g->next_ms - now < wait) wait = g->next_ms - now;
        }
        if (!mw_worker_wait_locked(&r->w, wait < 1 ? 1 : wait)) break;
    }
    pthread_mutex_unlock(&r->w.mu);
    return NULL;
}

int mw_rules_start(mw_rules *r)
{
    return mw_worker_start(&r->w, run, r);
}

void mw_rules_emit(mw_rules *r, mw_snapshot *snap)
{
    pthread_mutex_lock(&r->w.mu);
    for (size_t i = 0; i < r->ngroups; i++) {
        const group_st *g = &r->groups[i];
        const char *name = g->def->name, *file = g->def->file; /* the snapshot copies them */
        mw_emit(snap, &FAILURES, (double)g->failures, "rule_group", name, "file", file, MW_END);
        mw_emit(snap, &DURATION, g->eval_seconds, "rule_group", name, "file", file, MW_END);
        mw_emit(snap, &RULES, (double)g->def->nrules, "rule_group", name, "file", file, MW_END);
    }
    pthread_mutex_unlock(&r->w.mu);
}

void mw_rules_free(mw_rules *r)
{
    if (!r) return;
    mw_worker_stop(&r->w);
    for (size_t j = 0; j < r->ngroups; j++)
        mw_rules_group_free(&r->groups[j]);
    free(r->groups);
    free(r->eval_order);
    mw_rule_set_free(&r->defs);
    for (size_t i = 0; i < r->nexternal; i++) {
        free((char *)r->external[i].name);
        free((char *)r->external[i].value);
    }
    free(r->external);
    mw_buf_free(&r->errors);
    mw_worker_destroy(&r->w);
    free(r);
}
