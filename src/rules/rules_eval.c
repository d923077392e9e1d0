/* rules_eval.c - one evaluation of a rule group, with Prometheus's
 * semantics (rules/group.go, alerting.go, recording.go of Prometheus 2.x
 * and 3.x, read for their behaviour): each rule's expression is evaluated
 * at the group's timestamp (minus query_offset); a recording rule's vector
 * is appended to the store under its name; an alerting rule's alerts go
 * inactive -> pending -> firing after `for` and stay firing for
 * keep_firing_for once the expression stops returning them; ALERTS and
 * ALERTS_FOR_STATE are written; series a rule no longer returns get a
 * stale marker; the `for` state is restored from ALERTS_FOR_STATE at the
 * first evaluation after a start; the alerts due are handed to the sinks. */
#include "rules_internal.h"
#include "../core/hash.h"
#include "../core/log.h"
#include "../core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RESOLVED_RETENTION_MS (15 * 60 * 1000)

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int pair_cmp(const void *a, const void *b)
{
    return strcmp(((const mw_alert_pair *)a)->name, ((const mw_alert_pair *)b)->name);
}

static void pairs_free(mw_alert_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)p[i].name);
        free((char *)p[i].value);
    }
    free(p);
}

static uint64_t pairs_hash(const mw_alert_pair *p, size_t n)
{
    uint64_t h = MW_FNV1A64_BASIS;
    for (size_t i = 0; i < n; i++) {
        h = mw_fnv1a64_byte(mw_fnv1a64_str(h, p[i].name), 0xff);
        h = mw_fnv1a64_byte(mw_fnv1a64_str(h, p[i].value), 0xff);
    }
    return h;
}

static int pairs_equal(const mw_alert_pair *a, size_t na, const mw_alert_pair *b, size_t nb)
{
    if (na != nb) return 0;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].name, b[i].name) != 0 || strcmp(a[i].value, b[i].value) != 0) return 0;
    return 1;
}

/* A label set being built: set (replace or add), delete, sort. */
typedef struct lset {
    mw_alert_pair *v;
    size_t n, cap;
} lset;

static void lset_set(lset *l, const char *name, const char *value)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0) {
            free((char *)l->v[i].value);
            if (!*value) { /* an empty value removes the label */
                free((char *)l->v[i].name);
                l->v[i] = l->v[--l->n];
            } else {
                l->v[i].value = mw_xstrdup(value);
            }
            return;
        }
    if (!*value) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = mw_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = (mw_alert_pair){mw_xstrdup(name), mw_xstrdup(value)};
}

char *mw_rules_alert_line(const mw_alert_pair *labels, size_t nlabels,
                          const mw_alert_pair *annotations, size_t nannotations)
{
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_rules_format_labels(&b, labels, nlabels);
    mw_buf_putc(&b, '\t');
    mw_rules_format_labels(&b, annotations, nannotations);
    return mw_buf_steal(&b, NULL);
}

static int line_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *mw_rules_sorted_text(char **lines, size_t n)
{
    if (n) qsort(lines, n, sizeof(*lines), line_cmp);
    mw_buf out;
    mw_buf_init(&out, 0);
    mw_buf_puts(&out, "");
    for (size_t i = 0; i < n; i++) {
        mw_buf_printf(&out, "%s\n", lines[i]);
        free(lines[i]);
    }
    free(lines);
    return mw_buf_steal(&out, NULL);
}

void mw_rules_format_labels(mw_buf *b, const mw_alert_pair *l, size_t n)
{
    mw_buf_putc(b, '{');
    for (size_t i = 0; i < n; i++) {
        mw_buf_printf(b, "%s%s=\"", i ? ", " : "", l[i].name);
        for (const char *p = l[i].value; *p; p++) {
            if (*p == '"' || *p == '\\')
                mw_buf_printf(b, "\\%c", *p);
            else if (*p == '\n')
                mw_buf_puts(b, "\\n");
            else
                mw_buf_putc(b, *p);
        }
        mw_buf_putc(b, '"');
    }
    mw_buf_putc(b, '}');
}

/* ---- queries ---- */

typedef struct qctx {
    mw_store *store;
    int64_t t;
} qctx;

static int run_query(mw_store *store, const pq_node *expr, int64_t t, pq_result *res, char *err,
                     size_t errsize)
{
    pq_limits lim;
    pq_default_limits(&lim);
    memset(res, 0, sizeof(*res));
    if (pq_eval(store, expr, t, t, 0, &lim, res, err, errsize) != 0) return -1;
    if (res->type != PQ_T_VECTOR && res->type != PQ_T_SCALAR) {
        pq_result_free(res);
        snprintf(err, errsize, "rule result is not a vector or scalar");
        return -1;
    }
    return 0;
}

/* query() in templates: the answer at the evaluation time. */
static int tpl_query(void *ctx, const char *expr, mw_arena *a, mw_tpl_sample **out, size_t *n,
                     char *err, size_t errsize)
{
    qctx *q = ctx;
    pq_node *e = pq_parse(expr, err, errsize);
    if (!e) return -1;
    pq_result res;
    int rc = run_query(q->store, e, q->t, &res, err, errsize);
    pq_node_free(e);
    if (rc < 0) return -1;
    size_t count = res.type == PQ_T_SCALAR ? 1 : res.nseries;
    mw_tpl_sample *s = mw_arena_alloc(a, (count ? count : 1) * sizeof(*s));
    if (res.type == PQ_T_SCALAR) {
        s[0] = (mw_tpl_sample){NULL, 0, res.scalar};
    } else {
        for (size_t i = 0; i < count; i++) {
            const pq_series *ps = &res.series[i];
            s[i].nlabels = ps->nlabels;
            s[i].labels = mw_arena_alloc(a, (ps->nlabels ? ps->nlabels : 1) * sizeof(mw_tpl_kv));
            for (size_t j = 0; j < ps->nlabels; j++)
                s[i].labels[j] = (mw_tpl_kv){mw_arena_strdup(a, ps->labels[j].name),
                                             mw_arena_strdup(a, ps->labels[j].value)};
            s[i].value = ps->n ? ps->v[0] : NAN;
        }
    }
    *out = s;
    *n = count;
    pq_result_free(&res);
    return 0;
}

/* Expand a template; an error becomes the value, as in Prometheus. */
static char *expand(mw_rules *r, const mw_tpl *t, const mw_tpl_kv *labels, size_t nlabels,
                    double value, qctx *q, const char *rule, const char *what)
{
    mw_tpl_data d = {.labels = labels,
                     .nlabels = nlabels,
                     .external = r->external,
                     .nexternal = r->nexternal,
                     .value = value,
                     .external_url = r->set.external_url,
                     .query = tpl_query,
                     .query_ctx = q};
    char err[512], *out = NULL;
    if (mw_tpl_expand(t, &d, &out, err, sizeof(err)) == 0) return out;
    char key[256];
    snprintf(key, sizeof(key), "template %s %s", rule, what);
    mw_log_once(MW_LOG_WARN, "rules", key, "alert %s: expanding %s: %s", rule, what, err);
    size_t len = strlen(err) + 40;
    out = mw_xmalloc(len);
    snprintf(out, len, "<error expanding template: %s>", err);
    return out;
}

/* ---- writing series ---- */

typedef struct batch {
    mw_store_ts *ts;
    mw_label **labels;
    mw_store_sample *samples;
    size_t n, cap;
} batch;

static void batch_add(batch *b, const mw_alert_pair *l, size_t nl, const char *name, double v,
                      int64_t t)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        b->ts = mw_xrealloc(b->ts, b->cap * sizeof(*b->ts));
        b->labels = mw_xrealloc(b->labels, b->cap * sizeof(*b->labels));
        b->samples = mw_xrealloc(b->samples, b->cap * sizeof(*b->samples));
    }
    /* copies: the rule's own sets may be freed before the batch is written */
    mw_label *ls = mw_xcalloc(nl + 2, sizeof(*ls));
    size_t k = 0;
    if (name) ls[k++] = (mw_label){mw_xstrdup("__name__"), mw_xstrdup(name)};
    for (size_t i = 0; i < nl; i++)
        if (!name || strcmp(l[i].name, "__name__") != 0)
            ls[k++] = (mw_label){mw_xstrdup(l[i].name), mw_xstrdup(l[i].value)};
    b->labels[b->n] = ls;
    b->samples[b->n] = (mw_store_sample){t, v};
    b->n++;
}

static void batch_flush(batch *b, mw_store *store, const char *group)
{
    for (size_t i = 0; i < b->n; i++) {
        size_t nl = 0;
        while (b->labels[i][nl].name)
            nl++;
        b->ts[i] = (mw_store_ts){b->labels[i], nl, &b->samples[i], 1};
    }
    char msg[512];
    if (b->n && mw_store_append(store, b->ts, b->n, 0, msg, sizeof(msg)) != 0) {
        char key[300];
        snprintf(key, sizeof(key), "append %s", group);
        mw_log_once(MW_LOG_WARN, "rules", key, "group %s: results not stored: %s", group, msg);
    }
    for (size_t i = 0; i < b->n; i++) {
        for (mw_label *l = b->labels[i]; l->name; l++) {
            free((char *)l->name);
            free((char *)l->value);
        }
        free(b->labels[i]);
    }
    free(b->ts);
    free(b->labels);
    free(b->samples);
    memset(b, 0, sizeof(*b));
}

static double stale_nan(void)
{
    uint64_t bits = 0x7ff0000000000002ULL; /* Prometheus's stale marker */
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

/* The series written now (cur), stale markers for those of the last
 * evaluation that are gone, and cur kept as the rule's last. */
static void write_series(rule_st *rs, written *cur, size_t ncur, batch *b, int64_t t)
{
    for (size_t i = 0; i < rs->nprev; i++) {
        int found = 0;
        for (size_t j = 0; j < ncur && !found; j++)
            found =
                cur[j].hash == rs->prev[i].hash &&
                pairs_equal(cur[j].labels, cur[j].nlabels, rs->prev[i].labels, rs->prev[i].nlabels);
        if (!found) batch_add(b, rs->prev[i].labels, rs->prev[i].nlabels, NULL, stale_nan(), t);
    }
}

static void written_free(written *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pairs_free(w[i].labels, w[i].nlabels);
    free(w);
}

static void written_add(written **w, size_t *n, lset *l)
{
    qsort(l->v, l->n, sizeof(*l->v), pair_cmp);
    *w = mw_xrealloc(*w, (*n + 1) * sizeof(**w));
    (*w)[*n] = (written){l->v, l->n, pairs_hash(l->v, l->n)};
    (*n)++;
    memset(l, 0, sizeof(*l));
}

static void rule_fail(rule_st *rs, group_st *g, const char *msg)
{
    rs->health = H_ERR;
    mw_strlcpy(rs->last_error, msg, sizeof(rs->last_error));
    g->failures++;
}

/* ---- recording rules ---- */

static void eval_recording(mw_rules *r, group_st *g, rule_st *rs, mw_store *store, int64_t t,
                           batch *b)
{
    (void)r;
    const mw_rule_def *d = rs->def;
    pq_result res;
    char err[512];
    if (run_query(store, d->expr, t - g->def->query_offset_ms, &res, err, sizeof(err)) < 0) {
        rule_fail(rs, g, err);
        return;
    }
    size_t n = res.type == PQ_T_SCALAR ? 1 : res.nseries;
    written *cur = NULL;
    size_t ncur = 0;
    double *vals = mw_xcalloc(n ? n : 1, sizeof(double));
    int failed = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        lset l = {0};
        if (res.type == PQ_T_VECTOR)
            for (size_t j = 0; j < res.series[i].nlabels; j++)
                lset_set(&l, res.series[i].labels[j].name, res.series[i].labels[j].value);
        lset_set(&l, "__name__", d->name);
        for (size_t j = 0; j < d->nlabels; j++)
            lset_set(&l, d->labels[j].name, d->labels[j].value);
        vals[ncur] = res.type == PQ_T_SCALAR ? res.scalar : res.series[i].v[0];
        written_add(&cur, &ncur, &l);
        for (size_t j = 0; j + 1 < ncur; j++)
            if (cur[j].hash == cur[ncur - 1].hash &&
                pairs_equal(cur[j].labels, cur[j].nlabels, cur[ncur - 1].labels,
                            cur[ncur - 1].nlabels)) {
                rule_fail(rs, g,
                          "vector contains metrics with the same labelset after applying rule "
                          "labels");
                failed = 1;
            }
    }
    pq_result_free(&res);
    if (!failed && g->def->limit > 0 && (int64_t)ncur > g->def->limit) {
        char msg[128];
        snprintf(msg, sizeof(msg), "exceeded limit of %lld with %zu series",
                 (long long)g->def->limit, ncur);
        rule_fail(rs, g, msg);
        failed = 1;
    }
    if (failed) {
        written_free(cur, ncur);
        free(vals);
        return;
    }
    for (size_t i = 0; i < ncur; i++)
        batch_add(b, cur[i].labels, cur[i].nlabels, NULL, vals[i], t);
    write_series(rs, cur, ncur, b, t);
    written_free(rs->prev, rs->nprev);
    rs->prev = cur;
    rs->nprev = ncur;
    rs->health = H_OK;
    rs->last_error[0] = '\0';
    free(vals);
}

/* ---- alerting rules ---- */

static alert_st *find_alert(rule_st *rs, uint64_t h, const mw_alert_pair *l, size_t n)
{
    for (size_t i = 0; i < rs->nalerts; i++)
        if (rs->alerts[i].hash == h &&
            pairs_equal(rs->alerts[i].labels, rs->alerts[i].nlabels, l, n))
            return &rs->alerts[i];
    return NULL;
}

static void alert_free(alert_st *a)
{
    pairs_free(a->labels, a->nlabels);
    pairs_free(a->annotations, a->nannotations);
}

static void eval_alerting(mw_rules *r, group_st *g, rule_st *rs, mw_store *store, int64_t t,
                          batch *b)
{
    const mw_rule_def *d = rs->def;
    pq_result res;
    char err[512];
    int64_t qt = t - g->def->query_offset_ms;
    if (run_query(store, d->expr, qt, &res, err, sizeof(err)) < 0) {
        rule_fail(rs, g, err);
        return;
    }
    qctx q = {store, qt};
    size_t n = res.type == PQ_T_SCALAR ? 1 : res.nseries;
    /* The alerts of this evaluation, before they meet the active ones. */
    alert_st *now = mw_xcalloc(n ? n : 1, sizeof(*now));
    size_t nnow = 0;
    int failed = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        mw_tpl_kv *sl = NULL;
        size_t nsl = 0;
        double v = res.type == PQ_T_SCALAR ? res.scalar : res.series[i].v[0];
        if (res.type == PQ_T_VECTOR) {
            nsl = res.series[i].nlabels;
            sl = mw_xcalloc(nsl ? nsl : 1, sizeof(*sl));
            for (size_t j = 0; j < nsl; j++)
                sl[j] = (mw_tpl_kv){res.series[i].labels[j].name, res.series[i].labels[j].value};
        }
        lset l = {0};
        for (size_t j = 0; j < nsl; j++)
            if (strcmp(sl[j].name, "__name__") != 0) lset_set(&l, sl[j].name, sl[j].value);
        for (size_t j = 0; j < d->nlabels; j++) {
            char *val = expand(r, d->label_tpls[j], sl, nsl, v, &q, d->name, d->labels[j].name);
            lset_set(&l, d->labels[j].name, val);
            free(val);
        }
        lset_set(&l, "alertname", d->name);
        qsort(l.v, l.n, sizeof(*l.v), pair_cmp);
        alert_st *a = &now[nnow++];
        a->labels = l.v;
        a->nlabels = l.n;
        a->hash = pairs_hash(l.v, l.n);
        a->annotations = mw_xcalloc(d->nannotations ? d->nannotations : 1, sizeof(mw_alert_pair));
        for (size_t j = 0; j < d->nannotations; j++) {
            a->annotations[j].name = mw_xstrdup(d->annotations[j].name);
            a->annotations[j].value =
                expand(r, d->annotation_tpls[j], sl, nsl, v, &q, d->name, d->annotations[j].name);
        }
        a->nannotations = d->nannotations;
        qsort(a->annotations, a->nannotations, sizeof(mw_alert_pair), pair_cmp);
        a->value = v;
        a->active_at = t;
        a->state = ST_PENDING;
        free(sl);
        for (size_t j = 0; j + 1 < nnow; j++)
            if (now[j].hash == a->hash &&
                pairs_equal(now[j].labels, now[j].nlabels, a->labels, a->nlabels)) {
                rule_fail(rs, g,
                          "vector contains metrics with the same labelset after applying alert "
                          "labels");
                failed = 1;
            }
    }
    pq_result_free(&res);
    if (failed) {
        for (size_t i = 0; i < nnow; i++)
            alert_free(&now[i]);
        free(now);
        return;
    }
    /* An active alert takes the new value and annotations; a new one (or
     * one inactive since it resolved) starts pending. */
    char *in_result = mw_xcalloc(rs->nalerts + nnow + 1, 1);
    for (size_t i = 0; i < nnow; i++) {
        alert_st *old = find_alert(rs, now[i].hash, now[i].labels, now[i].nlabels);
        if (old && old->state != ST_INACTIVE) {
            old->value = now[i].value;
            pairs_free(old->annotations, old->nannotations);
            old->annotations = now[i].annotations;
            old->nannotations = now[i].nannotations;
            pairs_free(now[i].labels, now[i].nlabels);
            in_result[old - rs->alerts] = 1;
            continue;
        }
        if (old) {
            alert_free(old);
            *old = now[i];
            in_result[old - rs->alerts] = 1;
            continue;
        }
        rs->alerts = mw_xrealloc(rs->alerts, (rs->nalerts + 1) * sizeof(*rs->alerts));
        rs->alerts[rs->nalerts] = now[i];
        in_result[rs->nalerts++] = 1;
    }
    free(now);
    written *cur = NULL;
    size_t ncur = 0;
    size_t active = 0;
    for (size_t i = 0; i < rs->nalerts;) {
        alert_st *a = &rs->alerts[i];
        if (!in_result[i]) {
            int keep = 0;
            if (a->state == ST_FIRING && d->keep_firing_for_ms > 0) {
                if (!a->keep_firing_since) a->keep_firing_since = t;
                if (t - a->keep_firing_since < d->keep_firing_for_ms) keep = 1;
            }
            /* Resolved alerts stay 15 minutes, to be sent as resolved. */
            if (a->state == ST_PENDING ||
                (a->resolved_at && t - a->resolved_at > RESOLVED_RETENTION_MS)) {
                alert_free(a);
                rs->alerts[i] = rs->alerts[--rs->nalerts];
                in_result[i] = in_result[rs->nalerts];
                continue;
            }
            if (a->state != ST_INACTIVE && !keep) {
                a->state = ST_INACTIVE;
                a->resolved_at = t;
            }
            if (!keep) {
                i++;
                continue;
            }
        } else {
            a->keep_firing_since = 0;
        }
        active++;
        if (a->state == ST_PENDING && t - a->active_at >= d->for_ms) {
            a->state = ST_FIRING;
            a->fired_at = t;
        }
        if (rs->restored) {
            lset l = {0};
            for (size_t j = 0; j < a->nlabels; j++)
                lset_set(&l, a->labels[j].name, a->labels[j].value);
            lset_set(&l, "__name__", "ALERTS");
            lset_set(&l, "alertstate", a->state == ST_FIRING ? "firing" : "pending");
            written_add(&cur, &ncur, &l);
            batch_add(b, cur[ncur - 1].labels, cur[ncur - 1].nlabels, NULL, 1, t);
            for (size_t j = 0; j < a->nlabels; j++)
                lset_set(&l, a->labels[j].name, a->labels[j].value);
            lset_set(&l, "__name__", "ALERTS_FOR_STATE");
            written_add(&cur, &ncur, &l);
            batch_add(b, cur[ncur - 1].labels, cur[ncur - 1].nlabels, NULL,
                      (double)(a->active_at / 1000), t);
        }
        i++;
    }
    free(in_result);
    if (g->def->limit > 0 && (int64_t)active > g->def->limit) {
        for (size_t i = 0; i < rs->nalerts; i++)
            alert_free(&rs->alerts[i]);
        rs->nalerts = 0;
        written_free(cur, ncur);
        char msg[128];
        snprintf(msg, sizeof(msg), "exceeded limit of %lld with %zu alerts",
                 (long long)g->def->limit, active);
        rule_fail(rs, g, msg);
        return;
    }
    if (rs->restored) {
        write_series(rs, cur, ncur, b, t);
        written_free(rs->prev, rs->nprev);
        rs->prev = cur;
        rs->nprev = ncur;
    } else {
        written_free(cur, ncur);
    }
    rs->health = H_OK;
    rs->last_error[0] = '\0';
}

/* ---- the `for` state after a restart (Prometheus's RestoreForState) ---- */

static void restore_rule(mw_rules *r, rule_st *rs, mw_store *store, int64_t t)
{
    int64_t hold = rs->def->for_ms, grace = r->set.for_grace_period_ms;
    rs->restored = 1;
    if (hold < grace || !rs->nalerts) return; /* it waits its `for` again */
    mw_matcher m[2];
    char err[256];
    if (mw_matcher_init(&m[0], MW_MATCH_EQ, "__name__", "ALERTS_FOR_STATE", err, sizeof(err)) < 0)
        return;
    if (mw_matcher_init(&m[1], MW_MATCH_EQ, "alertname", rs->def->name, err, sizeof(err)) < 0) {
        mw_matcher_free(&m[0]);
        return;
    }
    mw_select_result sel;
    int rc =
        mw_store_select(store, m, 2, t - r->set.outage_tolerance_ms, t, 0, &sel, err, sizeof(err));
    mw_matcher_free(&m[0]);
    mw_matcher_free(&m[1]);
    if (rc != 0) {
        mw_log(MW_LOG_WARN, "rules", "alert %s: cannot restore its `for` state: %s", rs->def->name,
               err);
        return;
    }
    for (size_t i = 0; i < rs->nalerts; i++) {
        alert_st *a = &rs->alerts[i];
        for (size_t s = 0; s < sel.nseries; s++) {
            const mw_series_data *sd = &sel.series[s];
            /* the series' labels without __name__ are the alert's */
            size_t k = 0, match = 1;
            for (size_t j = 0; j < sd->nlabels && match; j++) {
                if (strcmp(sd->labels[j].name, "__name__") == 0) continue;
                match = k < a->nlabels && strcmp(sd->labels[j].name, a->labels[k].name) == 0 &&
                        strcmp(sd->labels[j].value, a->labels[k].value) == 0;
                k++;
            }
            if (!match || k != a->nlabels || !sd->n) continue;
            double v = sd->v[sd->n - 1];
            uint64_t bits;
            memcpy(&bits, &v, sizeof(bits));
            if (bits == 0x7ff0000000000002ULL || isnan(v)) break; /* it had resolved */
            int64_t down_at = sd->t[sd->n - 1] / 1000 * 1000;
            int64_t restored = (int64_t)v * 1000;
            int64_t remaining = hold - (down_at - restored);
            if (remaining <= 0) {
                /* it was firing: it fires again at the next evaluation */
            } else if (remaining < grace) {
                restored = t + grace - hold;
            } else {
                restored += t - down_at; /* the time it was down does not count */
            }
            a->active_at = restored;
            break;
        }
    }
    mw_select_result_free(&sel);
}

/* ---- sending ---- */

/* Prometheus's TableLinkForExpression. */
static char *generator_url(mw_rules *r, const char *expr)
{
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_buf_printf(&b, "%s/graph?g0.expr=", r->set.external_url);
    for (const unsigned char *p = (const unsigned char *)expr; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~')
            mw_buf_putc(&b, (char)*p);
        else if (*p == ' ')
            mw_buf_putc(&b, '+');
        else
            mw_buf_printf(&b, "%%%02X", *p);
    }
    mw_buf_puts(&b, "&g0.tab=1");
    return mw_buf_steal(&b, NULL);
}

static void send_due(mw_rules *r, group_st *g, int64_t t)
{
    mw_alert *out = NULL;
    char **urls = NULL;
    size_t n = 0, nurls = 0;
    int64_t delta =
        r->set.resend_delay_ms > g->interval_ms ? r->set.resend_delay_ms : g->interval_ms;
    for (size_t i = 0; i < g->def->nrules; i++) {
        rule_st *rs = &g->rules[i];
        if (!rs->def->alert) continue;
        char *url = NULL;
        for (size_t k = 0; k < rs->nalerts; k++) {
            alert_st *a = &rs->alerts[k];
            if (a->state == ST_PENDING) continue;
            int due =
                a->resolved_at > a->last_sent_at || a->last_sent_at + r->set.resend_delay_ms < t;
            if (!due) continue;
            a->last_sent_at = t;
            a->valid_until = t + 4 * delta;
            if (!url) {
                url = generator_url(r, rs->def->query);
                urls = mw_xrealloc(urls, (nurls + 1) * sizeof(*urls));
                urls[nurls++] = url;
            }
            out = mw_xrealloc(out, (n + 1) * sizeof(*out));
            out[n++] = (mw_alert){.labels = a->labels,
                                  .nlabels = a->nlabels,
                                  .annotations = a->annotations,
                                  .nannotations = a->nannotations,
                                  .starts_at_ms = a->fired_at,
                                  .ends_at_ms = a->resolved_at ? a->resolved_at : a->valid_until,
                                  .resolved = a->resolved_at != 0,
                                  .generator_url = url};
        }
    }
    if (n) mw_alert_sinks_send(out, n, t);
    for (size_t i = 0; i < nurls; i++)
        free(urls[i]);
    free(urls);
    free(out);
}

void mw_rules_eval_group(mw_rules *r, group_st *g, mw_store *store, int64_t t)
{
    double start = mono_s();
    batch b = {0};
    for (size_t i = 0; i < g->def->nrules; i++) {
        rule_st *rs = &g->rules[i];
        double rstart = mono_s();
        if (rs->def->alert)
            eval_alerting(r, g, rs, store, t, &b);
        else
            eval_recording(r, g, rs, store, t, &b);
        rs->last_eval_ms = t;
        rs->eval_seconds = mono_s() - rstart;
        if (rs->health == H_ERR && r->test)
            mw_buf_printf(&r->errors, "group %s, rule %s at %lld: %s\n", g->def->name,
                          rs->def->name, (long long)t, rs->last_error);
        /* Later rules of the group see what earlier ones recorded. */
        batch_flush(&b, store, g->def->name);
    }
    if (g->should_restore) {
        for (size_t i = 0; i < g->def->nrules; i++)
            if (g->rules[i].def->alert) restore_rule(r, &g->rules[i], store, t);
        g->should_restore = 0;
    }
    if (!r->test) send_due(r, g, t);
    g->last_eval_ms = t;
    g->eval_seconds = mono_s() - start;
}

void mw_rules_group_init(group_st *g, const mw_rule_group_def *def, int64_t default_interval_ms)
{
    memset(g, 0, sizeof(*g));
    g->def = def;
    g->interval_ms = def->interval_ms ? def->interval_ms : default_interval_ms;
    g->rules = mw_xcalloc(def->nrules ? def->nrules : 1, sizeof(*g->rules));
    for (size_t i = 0; i < def->nrules; i++)
        g->rules[i].def = &def->rules[i];
    g->should_restore = 1;
}

static void rule_state_free(rule_st *rs)
{
    for (size_t i = 0; i < rs->nalerts; i++)
        alert_free(&rs->alerts[i]);
    free(rs->alerts);
    rs->alerts = NULL;
    rs->nalerts = 0;
    written_free(rs->prev, rs->nprev);
    rs->prev = NULL;
    rs->nprev = 0;
}

void mw_rules_group_free(group_st *g)
{
    if (!g->rules) return;
    for (size_t i = 0; i < g->def->nrules; i++)
        rule_state_free(&g->rules[i]);
    free(g->rules);
    g->rules = NULL;
}

void mw_rules_group_take_state(group_st *g, group_st *old)
{
    g->failures = old->failures;
    g->last_eval_ms = old->last_eval_ms;
    g->eval_seconds = old->eval_seconds;
    g->next_ms = old->next_ms;
    g->should_restore = old->should_restore;
    for (size_t i = 0; i < g->def->nrules; i++) {
        rule_st *rs = &g->rules[i];
        for (size_t j = 0; j < old->def->nrules; j++) {
            rule_st *o = &old->rules[j];
            if (!o->def || o->def->alert != rs->def->alert ||
                strcmp(o->def->name, rs->def->name) != 0 ||
                strcmp(o->def->query, rs->def->query) != 0)
                continue;
            rs->alerts = o->alerts;
            rs->nalerts = o->nalerts;
            rs->prev = o->prev;
            rs->nprev = o->nprev;
            rs->restored = o->restored;
            rs->health = o->health;
            memcpy(rs->last_error, o->last_error, sizeof(rs->last_error));
            rs->last_eval_ms = o->last_eval_ms;
            rs->eval_seconds = o->eval_seconds;
            o->alerts = NULL;
            o->nalerts = 0;
            o->prev = NULL;
            o->nprev = 0;
            o->def = NULL; /* taken: a second rule of the same name starts afresh */
            break;
        }
    }
}
