/* test_promql.c - runs the PromQL test files tests/promql/ test files against the
 * evaluator over a real store in a temporary folder, and checks the parser's
 * errors. The language, in the spirit of Prometheus' promqltest:
 *
 *   load 1m                       samples every 1m from t=0
 *     metric{a="b"} 0+10x5 _ stale 3 1e3 NaN
 *   eval instant at 10m EXPR      expected series lines follow:
 *     {a="b"} 50                  (a scalar result: one line with the value)
 *   eval_ordered instant at ...   the same, in this order
 *   eval range from 0 to 10m step 1m EXPR
 *     {a="b"} 1 2 _ 4             one value per step, _ = no value
 *   eval_fail instant at 0 EXPR   must fail; an optional line
 *     error SUBSTRING             checks the message
 *   clear                         empty the store
 *   delayed_name_removal on       the evals after it with Prometheus 3's
 *                                 delayed name removal (off: without)
 *   expect warn msg: TEXT         (in an eval) annotations: promql_expect.h
 *
 * `a+bxN` expands to a, a+b, ..., a+N*b (N+1 values), `_` skips a step,
 * `stale` writes a staleness marker. Values compare within 1e-9 relative. */
#include "query/promql.h"
#include "query/qinternal.h"

#include "promql_expect.h"
#include "promql_hist.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct tfile {
    char path[1024];
} tfile;

typedef struct runner {
    mw_store *store;
    char dir[256];
    const char *file;
    int line;
    int failures;
    int delayed_name_removal; /* `delayed_name_removal on`, until `off` */
} runner;

static void store_open(runner *r)
{
    snprintf(r->dir, sizeof(r->dir), "/tmp/mw-promql-XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    mw_store_options o = {.dir = r->dir, .no_sync = 1, .background_ms = -1};
    mw_store_default_limits(&o.limits);
    char err[256];
    r->store = mw_store_open(&o, err, sizeof(err));
    if (!r->store) fail_msg("store: %s", err);
}

static void store_close(runner *r)
{
    mw_store_close(r->store);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
    if (system(cmd) != 0) fail_msg("cannot remove %s", r->dir);
}

static void failf(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(runner *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", r->file, r->line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    r->failures++;
}

/* {a="b",c="d"} or name{...} or name; labels in out (sorted), n returned;
 * *end after it. -1 on a syntax error. */
typedef struct lset {
    char names[16][64], values[16][256];
    size_t n;
} lset;

static int cmp_lbl(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static int parse_labels(const char *s, lset *l, const char **end)
{
    l->n = 0;
    while (*s == ' ' || *s == '\t')
        s++;
    const char *p = s;
    while (*p && *p != '{' && *p != ' ')
        p++;
    if (p > s) {
        snprintf(l->names[0], 64, "__name__");
        snprintf(l->values[0], 256, "%.*s", (int)(p - s), s);
        l->n = 1;
    }
    s = p;
    if (*s == '{') {
        s++;
        while (*s && *s != '}') {
            while (*s == ' ' || *s == ',')
                s++;
            if (*s == '}') break;
            if (*s == '"') { /* Prometheus 3's quoted names: {"a.b"="c"}, {"my.metric"} */
                const char *q = strchr(s + 1, '"');
                if (!q || l->n >= 16) return -1;
                if (q[1] != '=') {
                    snprintf(l->names[l->n], 64, "__name__");
                    snprintf(l->values[l->n], 256, "%.*s", (int)(q - s - 1), s + 1);
                    l->n++;
                    s = q + 1;
                    continue;
                }
                const char *v = strchr(q + 3, '"');
                if (q[2] != '"' || !v) return -1;
                snprintf(l->names[l->n], 64, "%.*s", (int)(q - s - 1), s + 1);
                snprintf(l->values[l->n], 256, "%.*s", (int)(v - q - 3), q + 3);
                l->n++;
                s = v + 1;
                continue;
            }
            const char *eq = strchr(s, '=');
            if (!eq || eq[1] != '"' || l->n >= 16) return -1;
            snprintf(l->names[l->n], 64, "%.*s", (int)(eq - s), s);
            const char *q = strchr(eq + 2, '"');
            if (!q) return -1;
            snprintf(l->values[l->n], 256, "%.*s", (int)(q - eq - 2), eq + 2);
            l->n++;
            s = q + 1;
        }
        if (*s != '}') return -1;
        s++;
    }
    /* sort by name: names and values move together */
    for (size_t i = 0; i < l->n; i++)
        for (size_t j = i + 1; j < l->n; j++)
            if (cmp_lbl(l->names[j], l->names[i]) < 0) {
                char tn[64], tv[256];
                memcpy(tn, l->names[i], 64);
                memcpy(tv, l->values[i], 256);
                memcpy(l->names[i], l->names[j], 64);
                memcpy(l->values[i], l->values[j], 256);
                memcpy(l->names[j], tn, 64);
                memcpy(l->values[j], tv, 256);
            }
    *end = s;
    return 0;
}

/* Expand a value list; absent = NaN with *present 0; stale marker. */
#define MAXV 4096
static size_t parse_values(const char *s, double *v, int *present)
{
    size_t n = 0;
    char tok[128];
    int off;
    while (n < MAXV) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!strncmp(s, "{{", 2)) { /* a native histogram: promql_hist.h */
            if (th_parse_item(&s, v, present, &n, MAXV) < 0) break;
            continue;
        }
        if (sscanf(s, "%127s%n", tok, &off) != 1) break;
        s += off;
        if (!strcmp(tok, "_")) {
            present[n] = 0;
            v[n++] = NAN;
            continue;
        }
        if (!strcmp(tok, "stale")) {
            uint64_t b = 0x7ff0000000000002ULL;
            present[n] = 1;
            memcpy(&v[n++], &b, 8);
            continue;
        }
        char *x = strchr(tok + 1, 'x');
        double a, d = 0;
        long cnt = 0;
        char *e;
        if (x) {
            *x = '\0';
            cnt = strtol(x + 1, NULL, 10);
            char *sign = tok + 1;
            while (*sign && *sign != '+' && *sign != '-')
                sign++;
            /* skip exponents like 1e-3 */
            while (*sign && (sign[-1] == 'e' || sign[-1] == 'E')) {
                sign++;
                while (*sign && *sign != '+' && *sign != '-')
                    sign++;
            }
            d = strtod(sign, NULL);
            *sign = '\0';
        }
        a = strtod(tok, &e);
        for (long i = 0; i <= cnt && n < MAXV; i++) {
            present[n] = 1;
            v[n++] = a + d * (double)i;
        }
    }
    return n;
}

static int64_t dur(const char *s)
{
    int64_t ms;
    if (pq_parse_duration(s, &ms) < 0) return -1;
    return ms;
}

static int same(double a, double b)
{
    if (isnan(a) && isnan(b)) return 1;
    if (a == b) return 1;
    /* Infinite and finite differ: the relative bound below, infinite
     * itself, would take 1 for +Inf. */
    if (isinf(a) || isinf(b)) return 0;
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

static int labels_equal(const pq_series *s, const lset *l)
{
    if (s->nlabels != l->n) return 0;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(s->labels[i].name, l->names[i]) || strcmp(s->labels[i].value, l->values[i]))
            return 0;
    return 1;
}

static void print_result(const pq_result *res)
{
    for (size_t i = 0; i < res->nseries; i++) {
        fprintf(stderr, "    got {");
        for (size_t j = 0; j < res->series[i].nlabels; j++)
            fprintf(stderr, "%s%s=\"%s\"", j ? "," : "", res->series[i].labels[j].name,
                    res->series[i].labels[j].value);
        fprintf(stderr, "}");
        for (size_t k = 0; k < res->series[i].n; k++) {
            const mw_histogram *h = pq_result_histogram(res, res->series[i].v[k]);
            if (!h) {
                fprintf(stderr, " %lld:%.17g", (long long)res->series[i].t[k], res->series[i].v[k]);
                continue;
            }
            fprintf(stderr, " %lld:", (long long)res->series[i].t[k]);
            th_print(h);
        }
        fprintf(stderr, "\n");
    }
    if (res->type == PQ_T_SCALAR) fprintf(stderr, "    got scalar %.17g\n", res->scalar);
}

typedef struct evalcase {
    int fail, ordered, range;
    int64_t start, end, step;
    char expr[2048];
    char lines[64][1024];
    int nlines, line;
} evalcase;

static void run_eval(runner *r, evalcase *ec)
{
    char err[512];
    th_reset();
    static char expects[MAX_EXPECTS][1024];
    int nexp = take_expects(ec->lines, &ec->nlines, expects);
    pq_node *n = pq_parse(ec->expr, err, sizeof(err));
    pq_result res = {0};
    pq_limits lim;
    pq_default_limits(&lim);
    lim.delayed_name_removal = r->delayed_name_removal;
    int rc = n ? pq_eval(r->store, n, ec->start, ec->end, ec->range ? ec->step : 0, &lim, &res, err,
                         sizeof(err))
               : 400;
    r->line = ec->line;
    if (ec->fail) {
        if (rc == 0)
            failf(r, "expected an error for %s", ec->expr);
        else if (ec->nlines && !strstr(err, ec->lines[0] + strspn(ec->lines[0], " \t") + 6))
            failf(r, "error \"%s\" does not contain \"%s\"", err, ec->lines[0]);
        goto done;
    }
    if (rc != 0) {
        failf(r, "%s: %s", ec->expr, err);
        goto done;
    }
    if (check_expects(&res, ec->expr, expects, nexp, err, sizeof(err)) < 0) {
        failf(r, "%s: %s", ec->expr, err);
        goto done;
    }
    if (res.type == PQ_T_SCALAR) {
        double v[4];
        int p[4];
        if (ec->nlines != 1 || parse_values(ec->lines[0], v, p) != 1 || !same(v[0], res.scalar))
            failf(r, "%s: scalar %.17g, expected %s", ec->expr, res.scalar,
                  ec->nlines ? ec->lines[0] : "nothing");
        goto done;
    }
    if ((size_t)ec->nlines != res.nseries) {
        failf(r, "%s: %zu series, expected %d", ec->expr, res.nseries, ec->nlines);
        print_result(&res);
        goto done;
    }
    for (int i = 0; i < ec->nlines; i++) {
        lset l;
        const char *rest;
        if (parse_labels(ec->lines[i], &l, &rest) < 0) {
            failf(r, "bad series line: %s", ec->lines[i]);
            continue;
        }
        const pq_series *s = NULL;
        if (ec->ordered) {
            if (labels_equal(&res.series[i], &l)) s = &res.series[i];
        } else {
            for (size_t j = 0; j < res.nseries && !s; j++)
                if (labels_equal(&res.series[j], &l)) s = &res.series[j];
        }
        if (!s) {
            failf(r, "%s: no series %s%s", ec->expr, ec->lines[i],
                  ec->ordered ? " at this position" : "");
            print_result(&res);
            continue;
        }
        static double v[MAXV];
        static int p[MAXV];
        size_t nv = parse_values(rest, v, p);
        size_t k = 0, ok = 1;
        for (size_t j = 0; j < nv; j++) {
            if (!p[j]) continue;
            int64_t t = ec->range ? ec->start + (int64_t)j * ec->step : ec->start;
            int hs = 0;
            const mw_histogram *eh = th_get(v[j], &hs);
            if (k >= s->n || s->t[k] != t) {
                ok = 0;
            } else if (eh || pq_result_histogram(&res, s->v[k])) {
                if (!eh || !th_same(eh, hs, pq_result_histogram(&res, s->v[k]))) ok = 0;
            } else if (!same(s->v[k], v[j])) {
                ok = 0;
            }
            k++;
        }
        if (k != s->n) ok = 0;
        if (!ok) {
            failf(r, "%s: series %s differs", ec->expr, ec->lines[i]);
            print_result(&res);
        }
    }
done:
    pq_result_free(&res);
    pq_node_free(n);
}

static void load(runner *r, int64_t interval, char lines[][1024], int nlines)
{
    for (int i = 0; i < nlines; i++) {
        lset l;
        const char *rest;
        if (parse_labels(lines[i], &l, &rest) < 0) {
            failf(r, "bad series line: %s", lines[i]);
            continue;
        }
        static double v[MAXV];
        static int p[MAXV];
        static mw_store_sample smp[MAXV];
        size_t nv = parse_values(rest, v, p), ns = 0;
        for (size_t j = 0; j < nv; j++) {
            if (!p[j]) continue;
            smp[ns].t = (int64_t)j * interval;
            smp[ns++].v = v[j];
            const mw_histogram *h = th_get(v[j], NULL);
            char herr[200];
            if (h && mw_store_put_histogram(r->store, h, &smp[ns - 1].v, herr, sizeof(herr)) < 0)
                failf(r, "load: %s", herr);
        }
        th_reset();
        mw_label ml[16];
        for (size_t j = 0; j < l.n; j++)
            ml[j] = (mw_label){l.names[j], l.values[j]};
        mw_store_ts ts = {.labels = ml, .nlabels = l.n, .samples = smp, .nsamples = ns};
        char msg[256];
        if (mw_store_append(r->store, &ts, 1, 0, msg, sizeof(msg)) != 0) failf(r, "load: %s", msg);
    }
}

static void run_file(void **state)
{
    const tfile *tf = *state;
    runner r = {.file = tf->path};
    store_open(&r);
    FILE *f = fopen(tf->path, "r");
    assert_non_null(f);
    static char lines[64][1024];
    char buf[1000];
    int lineno = 0;
    enum { NONE, LOAD, EVAL } mode = NONE;
    int nlines = 0;
    int64_t interval = 0;
    static evalcase ec;
    for (;;) {
        char *got = fgets(buf, sizeof(buf), f);
        lineno++;
        if (got) buf[strcspn(buf, "\n")] = '\0';
        int indented = got && (buf[0] == ' ' || buf[0] == '\t');
        int blank = got && buf[strspn(buf, " \t")] == '\0';
        if (got && buf[strspn(buf, " \t")] == '#') continue;
        if (got && indented && !blank) {
            if (mode == LOAD && nlines < 64) snprintf(lines[nlines++], 1024, "%s", buf);
            if (mode == EVAL && ec.nlines < 64) snprintf(ec.lines[ec.nlines++], 1024, "%s", buf);
            continue;
        }
        /* end of a block */
        if (mode == LOAD) load(&r, interval, lines, nlines);
        if (mode == EVAL) run_eval(&r, &ec);
        mode = NONE;
        nlines = 0;
        if (!got) break;
        if (blank) continue;
        r.line = lineno;
        char a[64], b[64], c[64];
        int off = 0;
        if (sscanf(buf, "load %63s", a) == 1) {
            interval = dur(a);
            mode = LOAD;
        } else if (!strcmp(buf, "delayed_name_removal on") ||
                   !strcmp(buf, "delayed_name_removal off")) {
            r.delayed_name_removal = !strcmp(buf, "delayed_name_removal on");
        } else if (!strcmp(buf, "clear")) {
            store_close(&r);
            store_open(&r);
        } else if (!strncmp(buf, "eval", 4)) {
            memset(&ec, 0, sizeof(ec));
            ec.line = lineno;
            ec.fail = !strncmp(buf, "eval_fail", 9);
            ec.ordered = !strncmp(buf, "eval_ordered", 12);
            const char *p = buf + strcspn(buf, " ");
            if (sscanf(p, " instant at %63s %n", a, &off) == 1 && off) {
                ec.start = ec.end = dur(a);
            } else if (sscanf(p, " range from %63s to %63s step %63s %n", a, b, c, &off) == 3 &&
                       off) {
                ec.range = 1;
                ec.start = dur(a);
                ec.end = dur(b);
                ec.step = dur(c);
            } else {
                failf(&r, "bad eval line: %s", buf);
                continue;
            }
            snprintf(ec.expr, sizeof(ec.expr), "%s", p + off);
            mode = EVAL;
        } else {
            failf(&r, "unknown command: %s", buf);
        }
    }
    fclose(f);
    store_close(&r);
    if (r.failures) fail_msg("%s: %d failure(s)", tf->path, r.failures);
}

/* Parser errors name the position. */
static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *q, *err;
    } cases[] = {
        {"sum(rate(x[5m])", "1:16: parse error: unexpected end of input"},
        {"x{a=\"b\"", "1:8: parse error: unexpected end of input in label matching"},
        {"foo(1)", "1:1: parse error: unknown function with name \"foo\""},
        {"rate(x)", "1:6: parse error: expected type range vector in call to function \"rate\", "
                    "got instant vector"},
        {"1 > 2", "1:3: parse error: comparisons between scalars must use BOOL modifier"},
        {"x[5m] + 1",
         "1:7: parse error: binary expression must contain only scalar and instant vector types"},
        {"{a=~\".*\"}",
         "1:1: parse error: vector selector must contain at least one non-empty matcher"},
        {"x @ 1 @ 2", "1:7: parse error: @ <timestamp> may not be set multiple times"},
        {"", "1:1: parse error: no expression found in input"},
        {"x and 1", "1:3: parse error: set operator not allowed in binary scalar expression"},
        {"sum(x) by (a) (y)", "1:15: parse error: unexpected \"(\""},
        {"1 +\n  )", "2:3: parse error: unexpected \")\""},
        /* RE2's refusals, in RE2's words (core/regex.h) */
        {"x{a=~\"b++\"}", "1:3: parse error: error parsing regexp: bad repetition operator: ++"},
        {"x{a=~\"(b{999}){9}\"}",
         "1:3: parse error: error parsing regexp: invalid repetition size: {9}"},
        {"x{a=~\"((ab){100}){100}\"}",
         "1:3: parse error: error parsing regexp: invalid repetition size: {100}"},
        /* a program over RE2's max_mem (MW_REGEX_MAX_MEM) */
        {"x{a=~\"\\\\pL{1000}\"}",
         "1:3: parse error: error parsing regexp: pattern too large - compile failed: its "
         "program would need more than 8 MiB"},
        /* an unbalanced ")" is refused, not read as closing an anchoring group */
        {"x{a=~\"a|b){1000}(\"}", "1:3: parse error: error parsing regexp: unexpected ): "
                                  "a|b){1000}("},
        {"x{a=~\"(a|b\"}", "1:3: parse error: error parsing regexp: missing ): (a|b"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[512] = "";
        pq_node *n = pq_parse(cases[i].q, err, sizeof(err));
        if (n) fail_msg("%s parsed", cases[i].q);
        if (strncmp(err, cases[i].err, strlen(cases[i].err)) != 0)
            fail_msg("%s: got \"%s\", expected \"%s\"", cases[i].q, err, cases[i].err);
    }
    /* precedence and associativity, by evaluating scalars */
    static const struct {
        const char *q;
        double v;
    } vals[] = {{"2 ^ 3 ^ 2", 512}, {"-2 ^ 2", -4},   {"1 + 2 * 3", 7},     {"(1 + 2) * 3", 9},
                {"10 - 2 - 3", 5},  {"2 * 3 % 4", 2}, {"1 == bool 1", 1},   {"0x10 + 1e1", 26},
                {"-(1) * 2", -2},   {"2 ^ -1", 0.5},  {"1 < bool 2 + 1", 1}};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char err[512];
        pq_node *n = pq_parse(vals[i].q, err, sizeof(err));
        if (!n) fail_msg("%s: %s", vals[i].q, err);
        pq_result res;
        pq_limits lim;
        pq_default_limits(&lim);
        assert_int_equal(pq_eval(NULL, n, 0, 0, 0, &lim, &res, err, sizeof(err)), 0);
        if (res.scalar != vals[i].v)
            fail_msg("%s = %g, expected %g", vals[i].q, res.scalar, vals[i].v);
        pq_result_free(&res);
        pq_node_free(n);
    }
}

static void test_format(void **state)
{
    (void)state;
    char b[64];
    pq_format_value(1e21, b, sizeof(b));
    assert_string_equal(b, "1000000000000000000000");
    pq_format_value(0.1, b, sizeof(b));
    assert_string_equal(b, "0.1");
    pq_format_value(-1.5e-7, b, sizeof(b));
    assert_string_equal(b, "-0.00000015");
    pq_format_value(1.0 / 3, b, sizeof(b));
    assert_string_equal(b, "0.3333333333333333");
    pq_format_value(INFINITY, b, sizeof(b));
    assert_string_equal(b, "+Inf");
    pq_format_value(NAN, b, sizeof(b));
    assert_string_equal(b, "NaN");
    /* The trim operators print as Prometheus's String(): "</", ">/"
     * (`<` then `/` would not parse back). */
    char err[256];
    pq_node *n = pq_parse("h</2>/on(k)t", err, sizeof(err));
    if (!n) fail_msg("%s", err);
    char *text = pq_format(n);
    assert_string_equal(text, "h </ 2 >/ on (k) t");
    free(text);
    pq_node_free(n);
}

/* The sample budget answers 422 and the deadline 503, as Prometheus. */
/* An operand that fails (here label_replace's regular expression, after
 * `up` selected nothing) leaves nothing to negate: the error comes back, no
 * crash (found by fuzz_promql; fuzz/corpus/promql/neg-of-failed-operand). */
static void test_negated_failure(void **state)
{
    (void)state;
    char err[512];
    pq_node *n =
        pq_parse("-2 ^label_replace(up, \"host\",  \"$1\", \"instan\", \"(-4 ^ .a.*)*)0 :.*\")",
                 err, sizeof(err));
    if (!n) fail_msg("%s", err);
    pq_limits lim;
    pq_default_limits(&lim);
    pq_result res;
    assert_int_equal(pq_eval(NULL, n, 0, 0, 0, &lim, &res, err, sizeof(err)), 422);
    assert_string_equal(err, "invalid regular expression in label_replace(): (-4 ^ .a.*)*)0 :.*");
    pq_node_free(n);
}

static void test_limits(void **state)
{
    (void)state;
    runner r = {.file = "limits"};
    store_open(&r);
    static char lines[4][1024] = {"a{i=\"1\"} 0+1x1000", "a{i=\"2\"} 0+1x1000"};
    load(&r, 1000, lines, 2);
    assert_int_equal(r.failures, 0);
    char err[512];
    pq_limits lim;
    pq_default_limits(&lim);
    lim.max_samples = 1000; /* the window holds 601 samples of each of 2 series */
    pq_result res;
    pq_node *n = pq_parse("sum(rate(a[10m]))", err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(pq_eval(r.store, n, 1000000, 1000000, 0, &lim, &res, err, sizeof(err)), 422);
    assert_non_null(strstr(err, "query processing would load too many samples into memory"));
    /* within the budget */
    lim.max_samples = 3000;
    assert_int_equal(pq_eval(r.store, n, 1000000, 1000000, 0, &lim, &res, err, sizeof(err)), 0);
    assert_int_equal(res.nseries, 1);
    assert_true(fabs(res.series[0].v[0] - 2) < 1e-12);
    pq_result_free(&res);
    /* a range query whose grid is over the budget */
    lim.max_samples = 100;
    pq_node_free(n);
    n = pq_parse("vector(1)", err, sizeof(err));
    assert_int_equal(pq_eval(r.store, n, 0, 1000000, 1000, &lim, &res, err, sizeof(err)), 422);
    pq_node_free(n);
    /* a deadline of 1 ms against a subquery of a million steps (seconds of
     * work in any build): the deadline, not the machine's speed, ends it */
    pq_default_limits(&lim);
    lim.timeout_ms = 1;
    n = pq_parse("max_over_time(sum(rate(a[10m]))[1000s:1ms])", err, sizeof(err));
    assert_non_null(n);
    int rc = pq_eval(r.store, n, 1000000, 1000000, 0, &lim, &res, err, sizeof(err));
    assert_int_equal(rc, 503);
    assert_string_equal(err, "query timed out in query execution");
    pq_node_free(n);
    store_close(&r);
}

/* A selection large enough to be read by two threads (the store splits
 * 512 series and more), with chunks cut to the chunk files: every series
 * and sample comes back, aggregations over it are exact, and the sample
 * budget still ends it with 422. */
static void test_large_selection(void **state)
{
    (void)state;
    runner r = {.file = "large"};
    store_open(&r);
    enum { NS = 1200 };
    static char lines[NS][1024];
    for (int i = 0; i < NS; i++)
        snprintf(lines[i], sizeof(lines[i]), "c{i=\"%04d\", g=\"%d\"} 0+%dx400", i, i % 3,
                 i % 7 + 1);
    load(&r, 15000, lines, NS);
    assert_int_equal(r.failures, 0);
    char err[512];
    pq_limits lim;
    pq_default_limits(&lim);
    pq_result res;
    /* the raw series over a range: 1200 series, every step present */
    pq_node *n = pq_parse("c", err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(pq_eval(r.store, n, 3000000, 6000000, 60000, &lim, &res, err, sizeof(err)), 0);
    assert_int_equal(res.nseries, NS);
    for (size_t i = 0; i < res.nseries; i++) {
        assert_int_equal(res.series[i].n, 51);
        assert_string_equal(res.series[i].labels[2].name, "i"); /* sorted: __name__ g i */
        int idx = atoi(res.series[i].labels[2].value);
        assert_int_equal(atoi(res.series[i].labels[1].value), idx % 3);
        /* sorted by labels: g first, then i */
        assert_int_equal(idx, (int)(i % (NS / 3)) * 3 + (int)(i / (NS / 3)));
        /* at t the value is (t / 15 s) times the step of the series */
        assert_true(res.series[i].v[0] == 200.0 * (idx % 7 + 1));
        assert_true(res.series[i].v[50] == 400.0 * (idx % 7 + 1));
    }
    pq_result_free(&res);
    pq_node_free(n);
    /* sum by (g) of increase over 5m: each series grows by its step per
     * 15 s, 20 intervals in a 5m window fully inside the data */
    n = pq_parse("sum by (g) (increase(c[5m]))", err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(pq_eval(r.store, n, 3000000, 3000000, 0, &lim, &res, err, sizeof(err)), 0);
    assert_int_equal(res.nseries, 3);
    for (size_t i = 0; i < 3; i++) {
        double want = 0;
        for (int k = 0; k < NS; k++)
            if (k % 3 == (int)i) want += 20.0 * (k % 7 + 1);
        assert_true(fabs(res.series[i].v[0] - want) < 1e-9 * want);
    }
    pq_result_free(&res);
    pq_node_free(n);
    /* topk over the range: the largest step is 7, the series i % 7 == 6 */
    n = pq_parse("count(topk(3, c))", err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(pq_eval(r.store, n, 3000000, 6000000, 60000, &lim, &res, err, sizeof(err)), 0);
    assert_int_equal(res.nseries, 1);
    assert_int_equal(res.series[0].n, 51);
    assert_true(res.series[0].v[0] == 3);
    pq_result_free(&res);
    pq_node_free(n);
    /* over the budget while two threads read */
    lim.max_samples = 100000; /* the selection needs 1200 x 121 */
    n = pq_parse("sum(rate(c[30m]))", err, sizeof(err));
    assert_int_equal(pq_eval(r.store, n, 3000000, 3000000, 0, &lim, &res, err, sizeof(err)), 422);
    assert_non_null(strstr(err, "query processing would load too many samples into memory"));
    pq_node_free(n);
    store_close(&r);
}

/* Every row of the function table (func_table.c) is complete for its
 * family, is the row its name finds, and is called by some eval of the
 * test files: adding a function without its test fails here. */
static void test_function_table(void **state)
{
    (void)state;
    const char *src = getenv("MLWATCH_SRC");
    char dirpath[512];
    snprintf(dirpath, sizeof(dirpath), "%s/tests/promql", src ? src : ".");
    DIR *d = opendir(dirpath);
    assert_non_null(d);
    static char tests[1 << 20];
    size_t used = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".test")) continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dirpath, e->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        used += fread(tests + used, 1, sizeof(tests) - 1 - used, f);
        fclose(f);
    }
    closedir(d);
    tests[used] = '\0';
    size_t rows = 0;
    for (const pq_func *f; (f = pq_func_at(rows)); rows++) {
        assert_true(f->name && *f->name && f->call);
        if (pq_func_lookup(f->name) != f) fail_msg("%s: another row has its name", f->name);
        /* Optional arguments past args[nargs] repeat its type. */
        int optional = f->variadic != 0;
        if (f->nargs + optional > (int)(sizeof(f->args) / sizeof(f->args[0])))
            fail_msg("%s: more arguments than args[] has types for", f->name);
        int matrices = 0;
        for (int i = 0; i < f->nargs + optional; i++)
            matrices += f->args[i] == PQ_T_MATRIX;
        int range = f->call == pq_call_range || f->call == pq_call_absent_over_time;
        if (range != (matrices == 1))
            fail_msg("%s: a range function has one range argument, others none", f->name);
        if (range != (f->window != NULL))
            fail_msg("%s: range functions have a window operation, others none", f->name);
        if (f->call == pq_call_math ? (f->unary != NULL) == (f->math != NULL)
                                    : f->unary != NULL || f->math != NULL)
            fail_msg("%s: an element-wise function has one operation, others none", f->name);
        if (f->call == pq_call_math && f->nargs == 0 && !f->unary)
            fail_msg("%s: without its argument it is applied to time(): needs unary", f->name);
        if (f->flags && !range) fail_msg("%s: flags are for range functions", f->name);
        char call[64];
        int tested = 0;
        snprintf(call, sizeof(call), "%s(", f->name);
        for (const char *p = tests; !tested && (p = strstr(p, call)); p++)
            tested = p == tests || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (!tested) fail_msg("%s: no eval in tests/promql calls it", f->name);
    }
    assert_true(rows >= 51); /* the functions of Prometheus 2.42 that mlwatch has */
}

/* sort() and sort_desc() evaluated at once by several threads, as HTTP
 * threads do, over one store: each result is in its own order (a flag
 * shared by the comparators once let one query sort the other's result
 * in its direction). */
enum { SORT_SERIES = 400, SORT_THREADS = 6, SORT_ROUNDS = 150 };
typedef struct sort_job {
    mw_store *store;
    int desc;
    int wrong; /* results out of order or of the wrong size */
    int failed;
} sort_job;

static void *sort_rounds(void *arg)
{
    sort_job *j = arg;
    char err[512];
    pq_node *n = pq_parse(j->desc ? "sort_desc(s)" : "sort(s)", err, sizeof(err));
    if (!n) {
        j->failed++;
        return NULL;
    }
    pq_limits lim;
    pq_default_limits(&lim);
    for (int round = 0; round < SORT_ROUNDS; round++) {
        pq_result res;
        if (pq_eval(j->store, n, 60000, 60000, 0, &lim, &res, err, sizeof(err)) != 0) {
            j->failed++;
            continue;
        }
        /* series k holds the value (k * 7) % SORT_SERIES: a permutation of
         * 0..SORT_SERIES-1, so the sorted values are 0, 1, 2... */
        int ok = res.nseries == SORT_SERIES;
        for (size_t i = 0; ok && i < res.nseries; i++) {
            double want = j->desc ? (double)(SORT_SERIES - 1 - i) : (double)i;
            ok = res.series[i].n == 1 && res.series[i].v[0] == want;
        }
        if (!ok) j->wrong++;
        pq_result_free(&res);
    }
    pq_node_free(n);
    return NULL;
}

static void test_concurrent_sort(void **state)
{
    (void)state;
    runner r = {.file = "concurrent_sort"};
    store_open(&r);
    static char lines[SORT_SERIES][1024];
    for (int k = 0; k < SORT_SERIES; k++)
        snprintf(lines[k], sizeof(lines[k]), "s{k=\"%03d\"} %d %d", k, (k * 7) % SORT_SERIES,
                 (k * 7) % SORT_SERIES);
    load(&r, 60000, lines, SORT_SERIES);
    assert_int_equal(r.failures, 0);
    sort_job jobs[SORT_THREADS];
    pthread_t th[SORT_THREADS];
    for (int t = 0; t < SORT_THREADS; t++) {
        jobs[t] = (sort_job){.store = r.store, .desc = t % 2};
        assert_int_equal(pthread_create(&th[t], NULL, sort_rounds, &jobs[t]), 0);
    }
    int wrong = 0, failed = 0;
    for (int t = 0; t < SORT_THREADS; t++) {
        pthread_join(th[t], NULL);
        wrong += jobs[t].wrong;
        failed += jobs[t].failed;
    }
    store_close(&r);
    if (wrong || failed)
        fail_msg("%d of %d results out of order, %d evaluations failed", wrong,
                 SORT_THREADS * SORT_ROUNDS, failed);
}

int main(void)
{
    const char *src = getenv("MLWATCH_SRC");
    char dirpath[512];
    snprintf(dirpath, sizeof(dirpath), "%s/tests/promql", src ? src : ".");
    DIR *d = opendir(dirpath);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", dirpath);
        return 1;
    }
    static tfile files[64];
    static char names[64][300];
    static struct CMUnitTest tests[71];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".test")) continue;
        snprintf(files[n].path, sizeof(files[n].path), "%s/%s", dirpath, e->d_name);
        snprintf(names[n], sizeof(names[n]), "%s", e->d_name);
        tests[n] = (struct CMUnitTest){names[n], run_file, NULL, NULL, &files[n]};
        n++;
    }
    closedir(d);
    tests[n++] = (struct CMUnitTest){"parse_errors", test_parse_errors, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"format", test_format, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"limits", test_limits, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"negated_failure", test_negated_failure, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"large_selection", test_large_selection, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"concurrent_sort", test_concurrent_sort, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"function_table", test_function_table, NULL, NULL, NULL};
    return _cmocka_run_group_tests("promql", tests, n, NULL, NULL);
}
