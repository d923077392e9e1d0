/* rules_test_cmd.c - `mlwatch rules test FILE...`: runs the unit tests of
 * rule files written for `promtool test rules` (rule_files,
 * evaluation_interval, tests of input_series, alert_rule_test and
 * promql_expr_test, group_eval_order) against mlwatch's own evaluator: the input series go
 * into a fresh store in a temporary folder, the rules are evaluated at
 * every evaluation_interval from 0 to the last eval_time as promtool steps
 * them, and the firing alerts (labels and annotations) and the
 * expressions' samples are compared with the file's expectations. The
 * same files pass both (tests/integration/rules_promtool.sh runs both). */
#include "rules_test_cmd.h"
#include "rules_internal.h"
#include "../core/log.h"
#include "../core/util.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

typedef struct tfile {
    const char *path;
    yaml_document_t doc;
    int failures;
} tfile;

static const char *sc(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get(tfile *f, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = sc(yaml_document_get_node(&f->doc, p->key));
        if (k && strcmp(k, key) == 0) return yaml_document_get_node(&f->doc, p->value);
    }
    return NULL;
}

static size_t seq_len(const yaml_node_t *n)
{
    return n && n->type == YAML_SEQUENCE_NODE
               ? (size_t)(n->data.sequence.items.top - n->data.sequence.items.start)
               : 0;
}

static yaml_node_t *seq_at(tfile *f, yaml_node_t *n, size_t i)
{
    return yaml_document_get_node(&f->doc, n->data.sequence.items.start[i]);
}

static void fail(tfile *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(tfile *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  FAILED:\n    ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    f->failures++;
}

static int64_t duration(const char *s, int64_t def)
{
    int64_t ms;
    if (!s || pq_parse_duration(s, &ms) < 0) return def;
    return ms;
}

/* A series selector with equality matchers only, as a sorted label set. */
static int selector_labels(const char *text, mw_alert_pair **out, size_t *n, char *err,
                           size_t errsize)
{
    pq_node *e = pq_parse(text, err, errsize);
    if (!e) return -1;
    if (e->kind != PQ_VSEL) {
        pq_node_free(e);
        snprintf(err, errsize, "not a series: %s", text);
        return -1;
    }
    *out = mw_xcalloc(e->nmatchers + 1, sizeof(**out));
    *n = 0;
    for (size_t i = 0; i < e->nmatchers; i++) {
        (*out)[*n].name = mw_xstrdup(e->matchers[i].name);
        (*out)[*n].value = mw_xstrdup(e->matchers[i].value);
        (*n)++;
    }
    pq_node_free(e);
    for (size_t i = 1; i < *n; i++) /* insertion sort by name */
        for (size_t j = i; j > 0 && strcmp((*out)[j - 1].name, (*out)[j].name) > 0; j--) {
            mw_alert_pair t = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = t;
        }
    return 0;
}

static void pairs_free(mw_alert_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)p[i].name);
        free((char *)p[i].value);
    }
    free(p);
}

static double stale_marker(void)
{
    uint64_t bits = 0x7ff0000000000002ULL;
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

/* promtool's expanding notation: "1 2 _ stale 3+2x4 0x8 _x3 -1-1x2". */
static int expand_values(const char *text, int64_t interval, mw_store_sample **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0, step = 0;
    char *copy = mw_xstrdup(text), *save = NULL;
    for (char *tok = strtok_r(copy, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
        double start = 0, inc = 0;
        long times = 0;
        int skip = 0, stale = 0;
        char *x = strchr(tok, 'x');
        if (x) {
            *x = '\0';
            char *end;
            times = strtol(x + 1, &end, 10);
            if (*end || times < 0 || times > 1000000) goto bad;
        }
        if (strcmp(tok, "_") == 0) {
            skip = 1;
        } else if (strcmp(tok, "stale") == 0) {
            stale = 1;
        } else {
            char *end;
            start = strtod(tok, &end);
            if (end == tok) goto bad;
            if (*end == '+' || *end == '-') {
                char *e2;
                inc = strtod(end, &e2);
                if (*e2 || !x) goto bad;
            } else if (*end) {
                goto bad;
            }
        }
        long count = x ? (skip ? times : times + 1) : 1;
        for (long i = 0; i < count; i++, step++) {
            if (skip) continue;
            if (*n == cap) {
                cap = cap ? cap * 2 : 64;
                *out = mw_xrealloc(*out, cap * sizeof(**out));
            }
            (*out)[(*n)++] = (mw_store_sample){(int64_t)step * interval,
                                               stale ? stale_marker() : start + inc * (double)i};
        }
    }
    free(copy);
    return 0;
bad:
    free(copy);
    free(*out);
    *out = NULL;
    return -1;
}

static int load_series(tfile *f, mw_store *store, yaml_node_t *list, int64_t interval)
{
    for (size_t i = 0; i < seq_len(list); i++) {
        yaml_node_t *it = seq_at(f, list, i);
        const char *series = sc(get(f, it, "series")), *values = sc(get(f, it, "values"));
        char err[512];
        mw_alert_pair *l;
        size_t nl;
        if (!series || selector_labels(series, &l, &nl, err, sizeof(err)) < 0) {
            fail(f, "input_series %zu: %s", i, series ? err : "no series");
            return -1;
        }
        mw_store_sample *s;
        size_t ns;
        if (expand_values(values ? values : "", interval, &s, &ns) < 0) {
            fail(f, "input_series %s: bad values \"%s\"", series, values ? values : "");
            pairs_free(l, nl);
            return -1;
        }
        mw_label *ml = mw_xcalloc(nl + 1, sizeof(*ml));
        for (size_t k = 0; k < nl; k++)
            ml[k] = (mw_label){l[k].name, l[k].value};
        mw_store_ts ts = {ml, nl, s, ns};
        int rc = ns ? mw_store_append(store, &ts, 1, 0, err, sizeof(err)) : 0;
        free(ml);
        free(s);
        pairs_free(l, nl);
        if (rc != 0) {
            fail(f, "input_series %s: not stored: %s", series, err);
            return -1;
        }
    }
    return 0;
}

/* The expected alerts of one alert_rule_test, as mw_rules_firing prints. */
static char *expected_alerts(tfile *f, yaml_node_t *exp, const char *alertname)
{
    size_t n = seq_len(exp);
    char **lines = mw_xcalloc(n + 1, sizeof(*lines));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *a = seq_at(f, exp, i);
        mw_alert_pair *l[2] = {NULL, NULL};
        size_t nl[2] = {0, 0};
        const char *keys[2] = {"exp_labels", "exp_annotations"};
        for (int k = 0; k < 2; k++) {
            yaml_node_t *m = get(f, a, keys[k]);
            size_t cap = m && m->type == YAML_MAPPING_NODE
                             ? (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start)
                             : 0;
            l[k] = mw_xcalloc(cap + 2, sizeof(mw_alert_pair));
            for (size_t j = 0; j < cap; j++) {
                yaml_node_pair_t *p = &m->data.mapping.pairs.start[j];
                const char *kk = sc(yaml_document_get_node(&f->doc, p->key));
                const char *vv = sc(yaml_document_get_node(&f->doc, p->value));
                l[k][nl[k]++] = (mw_alert_pair){kk ? kk : "", vv ? vv : ""};
            }
            if (k == 0) l[0][nl[0]++] = (mw_alert_pair){"alertname", alertname};
            for (size_t x = 1; x < nl[k]; x++)
                for (size_t y = x; y > 0 && strcmp(l[k][y - 1].name, l[k][y].name) > 0; y--) {
                    mw_alert_pair t = l[k][y];
                    l[k][y] = l[k][y - 1];
                    l[k][y - 1] = t;
                }
        }
        lines[i] = mw_rules_alert_line(l[0], nl[0], l[1], nl[1]);
        free(l[0]);
        free(l[1]);
    }
    return mw_rules_sorted_text(lines, n);
}

/* One promql_expr_test: the expression at eval_time against exp_samples. */
static void check_expr(tfile *f, mw_store *store, yaml_node_t *t)
{
    const char *expr = sc(get(f, t, "expr"));
    int64_t at = duration(sc(get(f, t, "eval_time")), 0);
    char err[512];
    pq_node *e = expr ? pq_parse(expr, err, sizeof(err)) : NULL;
    if (!e) {
        fail(f, "expr %s: %s", expr ? expr : "(none)", expr ? err : "missing");
        return;
    }
    pq_limits lim;
    pq_default_limits(&lim);
    pq_result res;
    int rc = pq_eval(store, e, at, at, 0, &lim, &res, err, sizeof(err));
    pq_node_free(e);
    if (rc != 0) {
        fail(f, "expr: \"%s\": %s", expr, err);
        return;
    }
    /* got and expected as "labels value" lines, sorted */
    yaml_node_t *exp = get(f, t, "exp_samples");
    size_t ne = seq_len(exp), ng = res.type == PQ_T_SCALAR ? 1 : res.nseries;
    int ok = ne == ng;
    char **got = mw_xcalloc(ng + 1, sizeof(char *));
    double *gotv = mw_xcalloc(ng + 1, sizeof(double));
    for (size_t i = 0; i < ng; i++) {
        mw_buf b;
        mw_buf_init(&b, 0);
        if (res.type == PQ_T_VECTOR) {
            const pq_series *s = &res.series[i];
            mw_alert_pair *l = mw_xcalloc(s->nlabels + 1, sizeof(*l));
            for (size_t k = 0; k < s->nlabels; k++)
                l[k] = (mw_alert_pair){s->labels[k].name, s->labels[k].value};
            mw_rules_format_labels(&b, l, s->nlabels);
            free(l);
            gotv[i] = s->v[0];
        } else {
            mw_buf_puts(&b, "{}");
            gotv[i] = res.scalar;
        }
        got[i] = mw_buf_steal(&b, NULL);
    }
    for (size_t i = 0; i < ne && ok; i++) {
        yaml_node_t *s = seq_at(f, exp, i);
        const char *ls = sc(get(f, s, "labels"));
        double v = strtod(sc(get(f, s, "value")) ? sc(get(f, s, "value")) : "0", NULL);
        mw_alert_pair *l = NULL;
        size_t nl = 0;
        if (ls && *ls && selector_labels(ls, &l, &nl, err, sizeof(err)) < 0) {
            fail(f, "exp_samples labels %s: %s", ls, err);
            return;
        }
        mw_buf b;
        mw_buf_init(&b, 0);
        mw_rules_format_labels(&b, l, nl);
        pairs_free(l, nl);
        int found = 0;
        for (size_t k = 0; k < ng && !found; k++)
            found = strcmp(got[k], b.data) == 0 &&
                    (gotv[k] == v || fabs(gotv[k] - v) <= 1e-6 * fmax(fabs(v), fabs(gotv[k])) ||
                     (isnan(v) && isnan(gotv[k])));
        ok = found;
        mw_buf_free(&b);
    }
    if (!ok) {
        mw_buf b;
        mw_buf_init(&b, 0);
        for (size_t i = 0; i < ng; i++) {
            char num[40];
            mw_tpl_format_float(gotv[i], num, sizeof(num));
            mw_buf_printf(&b, "%s %s; ", got[i], num);
        }
        fail(f, "expr: \"%s\", time: %lld ms,\n        got: %s", expr, (long long)at,
             b.data ? b.data : "(nothing)");
        mw_buf_free(&b);
    }
    for (size_t i = 0; i < ng; i++)
        free(got[i]);
    free(got);
    free(gotv);
    pq_result_free(&res);
}

static void run_test(tfile *f, yaml_node_t *t, const char *patterns, int64_t eval_interval,
                     yaml_node_t *order)
{
    int64_t interval = duration(sc(get(f, t, "interval")), eval_interval);
    char dir[] = "/tmp/mlwatch-rules-test-XXXXXX";
    if (!mkdtemp(dir)) {
        fail(f, "cannot make a temporary folder: %s", strerror(errno));
        return;
    }
    mw_store_options so = {.dir = dir, .no_sync = 1, .background_ms = -1};
    mw_store_default_limits(&so.limits);
    so.limits.max_future_ms = 0;
    char err[2048];
    mw_store *store = mw_store_open(&so, err, sizeof(err));
    mw_rules *r = store ? mw_rules_new_for_test(patterns, eval_interval, err, sizeof(err)) : NULL;
    int ordered = 1;
    if (r && seq_len(order)) {
        const char *names[256];
        size_t n = 0;
        for (size_t i = 0; i < seq_len(order) && n < 256; i++) {
            const char *g = sc(seq_at(f, order, i));
            if (g) names[n++] = g;
        }
        if (mw_rules_set_eval_order(r, names, n, err, sizeof(err)) < 0) {
            fail(f, "%s", err);
            ordered = 0;
        }
    }
    if (!store || !r) {
        fail(f, "%s", err);
    } else if (ordered && load_series(f, store, get(f, t, "input_series"), interval) == 0) {
        yaml_node_t *alerts = get(f, t, "alert_rule_test"), *exprs = get(f, t, "promql_expr_test");
        int64_t maxt = 0;
        for (size_t i = 0; i < seq_len(alerts); i++) {
            int64_t e = duration(sc(get(f, seq_at(f, alerts, i), "eval_time")), 0);
            if (e > maxt) maxt = e;
        }
        for (size_t i = 0; i < seq_len(exprs); i++) {
            int64_t e = duration(sc(get(f, seq_at(f, exprs, i), "eval_time")), 0);
            if (e > maxt) maxt = e;
        }
        for (int64_t ts = 0; ts <= maxt; ts += eval_interval) {
            mw_rules_eval_all(r, store, ts);
            /* the alert tests whose eval_time falls in [ts, ts + interval) */
            for (size_t i = 0; i < seq_len(alerts); i++) {
                yaml_node_t *a = seq_at(f, alerts, i);
                int64_t e = duration(sc(get(f, a, "eval_time")), 0);
                if (e < ts || e >= ts + eval_interval) continue;
                const char *name = sc(get(f, a, "alertname"));
                char *want = expected_alerts(f, get(f, a, "exp_alerts"), name ? name : "");
                char *have = mw_rules_firing(r, name ? name : "");
                if (strcmp(want, have) != 0)
                    fail(f, "alertname: %s, time: %lld ms,\n        exp:\n%s        got:\n%s",
                         name ? name : "", (long long)e, want, have);
                free(want);
                free(have);
            }
        }
        for (size_t i = 0; i < seq_len(exprs); i++)
            check_expr(f, store, seq_at(f, exprs, i));
        if (mw_rules_errors(r)) printf("  evaluation errors:\n%s", mw_rules_errors(r));
    }
    mw_rules_free(r);
    if (store) mw_store_close(store);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "mlwatch rules test: cannot remove %s\n", dir);
}

static int test_file(const char *path)
{
    printf("Unit Testing:  %s\n", path);
    FILE *in = fopen(path, "rb");
    if (!in) {
        printf("  FAILED:\n    %s: %s\n", path, strerror(errno));
        return 1;
    }
    char *text = mw_xmalloc(MW_RULE_FILE_MAX_BYTES + 1);
    size_t len = fread(text, 1, MW_RULE_FILE_MAX_BYTES, in);
    fclose(in);
    tfile f = {.path = path};
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int loaded = yaml_parser_load(&parser, &f.doc);
    free(text);
    if (!loaded) {
        printf("  FAILED:\n    %s:%zu:%zu: %s\n", path, parser.problem_mark.line + 1,
               parser.problem_mark.column + 1, parser.problem ? parser.problem : "YAML error");
        yaml_parser_delete(&parser);
        return 1;
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = yaml_document_get_root_node(&f.doc);
    int64_t eval_interval = duration(sc(get(&f, root, "evaluation_interval")), 60000);
    /* rule_files are relative to the test file's folder */
    char *copy = mw_xstrdup(path);
    const char *dir = dirname(copy);
    mw_buf pats;
    mw_buf_init(&pats, 8192);
    mw_buf_puts(&pats, "");
    yaml_node_t *files = get(&f, root, "rule_files");
    for (size_t i = 0; i < seq_len(files); i++) {
        const char *p = sc(seq_at(&f, files, i));
        if (!p) continue;
        mw_buf_printf(&pats, "%s%s%s%s\n", p[0] == '/' ? "" : dir, p[0] == '/' ? "" : "/", p, "");
    }
    free(copy);
    yaml_node_t *tests = get(&f, root, "tests");
    for (size_t i = 0; i < seq_len(tests); i++)
        run_test(&f, seq_at(&f, tests, i), pats.data, eval_interval,
                 get(&f, root, "group_eval_order"));
    mw_buf_free(&pats);
    yaml_document_delete(&f.doc);
    if (!f.failures) printf("  SUCCESS\n");
    return f.failures ? 1 : 0;
}

int mw_rules_command(const mw_config *cfg, char **rest, size_t nrest)
{
    (void)cfg;
    if (nrest < 2 || strcmp(rest[0], "test") != 0) {
        fprintf(stderr, "usage: mlwatch rules test FILE...\n");
        return 2;
    }
    mw_log_set_level(MW_LOG_WARN); /* not the temporary stores' openings */
    int rc = 0;
    for (size_t i = 1; i < nrest; i++) {
        if (i > 1) printf("\n");
        rc |= test_file(rest[i]);
    }
    return rc;
}
