/* test_rules.c - the rule evaluator (src/rules): templates (Go's
 * text/template subset and Prometheus's functions, answers as Go and
 * Prometheus give them), rule-file errors with their file:line:col, and
 * the alert state machine with what it hands the sinks (alert.h): pending,
 * firing, resolved, resend delay, 15 minutes of resolved sends, ValidUntil. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/log.h"
#include "rules/alert.h"
#include "rules/rulefile.h"
#include "rules/rules.h"
#include "rules/template.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* query() for templates: "up" has two samples, anything else none. */
static int fake_query(void *ctx, const char *expr, mw_arena *a, mw_tpl_sample **out, size_t *n,
                      char *err, size_t errsize)
{
    (void)ctx;
    if (strcmp(expr, "bad(") == 0) {
        snprintf(err, errsize, "1:5: parse error: unclosed left parenthesis");
        return -1;
    }
    *n = 0;
    *out = mw_arena_alloc(a, 2 * sizeof(mw_tpl_sample));
    if (strcmp(expr, "up") != 0) return 0;
    mw_tpl_kv *l = mw_arena_alloc(a, 4 * sizeof(mw_tpl_kv));
    l[0] = (mw_tpl_kv){"instance", "b"};
    l[1] = (mw_tpl_kv){"job", "x"};
    l[2] = (mw_tpl_kv){"instance", "a"};
    l[3] = (mw_tpl_kv){"job", "x"};
    (*out)[0] = (mw_tpl_sample){l, 2, 0.5};
    (*out)[1] = (mw_tpl_sample){l + 2, 2, 1};
    *n = 2;
    return 0;
}

static char *expand(const char *text, double value)
{
    static const mw_tpl_kv labels[] = {{"a", "x"}, {"gpu", "3"}, {"node", "n1"}};
    static const mw_tpl_kv ext[] = {{"cluster", "c1"}};
    char err[512];
    mw_tpl *t = mw_tpl_parse(text, err, sizeof(err));
    if (!t) {
        char *e = malloc(600);
        snprintf(e, 600, "PARSE: %s", err);
        return e;
    }
    mw_tpl_data d = {labels, 3, ext, 1, value, "http://mlwatch:9100", fake_query, NULL};
    char *out = NULL;
    if (mw_tpl_expand(t, &d, &out, err, sizeof(err)) < 0) {
        out = malloc(600);
        snprintf(out, 600, "ERROR: %s", err);
    }
    mw_tpl_free(t);
    return out;
}

#define EXPECT(text, value, want)                                                                  \
    do {                                                                                           \
        char *got_ = expand(text, value);                                                          \
        assert_string_equal(got_, want);                                                           \
        free(got_);                                                                                \
    } while (0)

static void template_basics(void **state)
{
    (void)state;
    EXPECT("plain", 0, "plain");
    EXPECT("{{ $labels.gpu }} on {{ .Labels.node }}", 0, "3 on n1");
    EXPECT("[{{ $labels.missing }}]", 0, "[]");
    EXPECT("{{ $externalLabels.cluster }} {{ $externalURL }}", 0, "c1 http://mlwatch:9100");
    EXPECT("{{ $value }}|{{ .Value }}", 1860, "1860|1860");
    EXPECT("{{ $value }}", 1234567, "1.234567e+06");
    EXPECT("{{ $value }}", 0.0001, "0.0001");
    EXPECT("{{ $value }}", 0.00001, "1e-05");
    EXPECT("{{ $value }}", NAN, "NaN");
    EXPECT("{{ $value }}", -INFINITY, "-Inf");
    EXPECT("a {{- \" b \" -}} c", 0, "a b c");
    EXPECT("x{{/* a comment */}}y", 0, "xy");
    EXPECT("{{ $x := \"v\" }}{{ $x }}{{ $x = \"w\" }}{{ $x }}", 0, "vw");
    EXPECT("{{ if eq $labels.a \"y\" }}1{{ else if eq $labels.a \"x\" }}2{{ else }}3{{ end }}", 0,
           "2");
    EXPECT("{{ if gt $value 5.0 }}big{{ else }}small{{ end }}", 7, "big");
    EXPECT("{{ with $labels.missing }}has{{ else }}none{{ end }}", 0, "none");
    EXPECT("{{ with $labels.gpu }}GPU {{ . }}{{ end }}", 0, "GPU 3");
    EXPECT("{{ range $k, $v := $labels }}{{ $k }}={{ $v }},{{ end }}", 0, "a=x,gpu=3,node=n1,");
    EXPECT("{{ $labels }}", 0, "map[a:x gpu:3 node:n1]");
    EXPECT("{{ and 1 0 }} {{ or 0 \"\" \"z\" }} {{ not true }} {{ len \"abc\" }}", 0,
           "0 z false 3");
    EXPECT("{{ index $labels \"node\" }} {{ print 1 2 \"a\" }}", 0, "n1 1 2a");
}

static void template_functions(void **state)
{
    (void)state;
    EXPECT("{{ humanize 1234567 }} {{ humanize 0.001234 }} {{ humanize 0 }} {{ humanize 999 }}", 0,
           "1.235M 1.234m 0 999");
    EXPECT("{{ humanize1024 1048576 }} {{ humanize1024 1 }} {{ humanize1024 1536 }}", 0,
           "1Mi 1 1.5ki");
    EXPECT("{{ humanizeDuration 1860 }} {{ humanizeDuration 90061 }} {{ humanizeDuration 3.5 }}", 0,
           "31m 0s 1d 1h 1m 1s 3.5s");
    EXPECT("{{ humanizeDuration 0.25 }} {{ humanizeDuration 0 }} {{ humanizeDuration -61 }}", 0,
           "250ms 0s -1m 1s");
    EXPECT("{{ humanizePercentage 0.1234 }} {{ humanizeTimestamp 1700000000 }}", 0,
           "12.34% 2023-11-14 22:13:20 +0000 UTC");
    EXPECT("{{ $value | humanize }} {{ \"2048\" | humanize1024 }}", 2500, "2.5k 2ki");
    EXPECT(
        "{{ printf \"%.2f\" $value }} {{ printf \"%d-%s\" 3 \"x\" }} {{ printf \"%5.1f|\" 2.25 }}",
        1.005, "1.00 3-x   2.2|");
    EXPECT("{{ printf \"%d\" $value }}", 1.5, "%!d(float64=1.5)");
    EXPECT("{{ printf \"%s %s\" \"a\" }}", 0, "a %!s(MISSING)");
    EXPECT("{{ printf \"%s\" \"a\" 3 }}", 0, "a%!(EXTRA int=3)");
    EXPECT("{{ printf \"%v %q %x %t %%\" 2.5 \"q\" 255 true }}", 0, "2.5 \"q\" ff true %");
    EXPECT("{{ toUpper \"gpu\" }} {{ toLower \"GPU\" }} {{ title \"idle gpu-node\" }}", 0,
           "GPU gpu Idle Gpu-Node");
    EXPECT("{{ reReplaceAll \"(a+)b\" \"<$1>\" \"aab xab b\" }}", 0, "<aa> x<a> b");
    EXPECT("{{ reReplaceAll \"^n\" \"N\" $labels.node }}", 0, "N1");
    /* Go's Regexp.ReplaceAllString expansion: named groups, ${1} before a
     * letter ($1x names a group "1x": empty), $0, $$. */
    EXPECT("{{ reReplaceAll \"(?P<host>[a-z0-9]+):(?P<port>[0-9]+)\" \"${port}/$host\" "
           "\"node1:9100\" }}",
           0, "9100/node1");
    EXPECT("{{ reReplaceAll \"(a)(b)\" \"${2}x$1x|$2\" \"ab\" }}", 0, "bx|b");
    EXPECT("{{ reReplaceAll \"[0-9]+\" \"<$0>\" \"gpu12 gpu3\" }} {{ reReplaceAll \"a\" \"$$\" "
           "\"aXa\" }}",
           0, "gpu<12> gpu<3> $X$");
    /* Prometheus's formats: %.4g with SI prefixes, whole seconds from a
     * minute on (the shipped idle alert's $value), NaN and Inf as %.4g. */
    EXPECT(
        "{{ humanize \"NaN\" }} {{ humanize \"+Inf\" }} {{ humanizeDuration 66.001 }} "
        "{{ humanizeDuration 0.0012 }} {{ humanizeDuration 7.001 }} {{ humanizePercentage 0.5 }}",
        0, "NaN +Inf 1m 6s 1.2ms 7.001s 50%");
    /* NaN and infinities keep each humanizer's own suffix. */
    EXPECT("{{ humanizePercentage \"NaN\" }} {{ humanizePercentage \"-Inf\" }} "
           "{{ humanize1024 \"+Inf\" }} {{ humanizeDuration \"NaN\" }} {{ humanize1024 2048 }}",
           0, "NaN% -Inf% +Inf NaN 2ki");
    EXPECT("{{ match \"^n[0-9]$\" $labels.node }} {{ match \"z\" \"abc\" }}", 0, "true false");
    EXPECT("{{ stripPort \"host:9100\" }} {{ stripPort \"[::1]:80\" }}", 0, "host ::1");
    EXPECT(
        "{{ with query \"up\" }}{{ . | first | value }} {{ label \"instance\" (first .) }}{{ end "
        "}}",
        0, "0.5 b");
    EXPECT("{{ range query \"up\" }}{{ .Labels.instance }}={{ .Value }};{{ end }}", 0,
           "b=0.5;a=1;");
    EXPECT("{{ range sortByLabel \"instance\" (query \"up\") }}{{ .Labels.instance }}{{ end }}", 0,
           "ab");
    EXPECT("{{ range query \"none\" }}x{{ else }}empty{{ end }}", 0, "empty");
    EXPECT("{{ query \"none\" | first }}", 0,
           "ERROR: error calling first: first() called on vector with no elements");
    EXPECT("{{ query \"bad(\" }}", 0,
           "ERROR: error calling query: 1:5: parse error: unclosed left parenthesis");
}

static void template_parse_errors(void **state)
{
    (void)state;
    EXPECT("{{ foo }}", 0, "PARSE: line 1: function \"foo\" not defined");
    EXPECT("a\nb {{ $value | nope }}", 0, "PARSE: line 2: function \"nope\" not defined");
    EXPECT("{{ if true }}x", 0, "PARSE: line 1: unexpected EOF");
    EXPECT("x {{ end }}", 0, "PARSE: line 1: unexpected {{end}}");
    EXPECT("{{ \"abc }}", 0, "PARSE: line 1: unterminated quoted string");
    EXPECT("{{ $labels.a", 0, "PARSE: line 1: unclosed action");
    EXPECT("{{ define \"x\" }}{{ end }}", 0,
           "PARSE: line 1: \"define\" is not supported in rule templates");
    EXPECT("{{ $labels.a 3 }}", 0, "PARSE: line 1: can't give argument to non-function variable");
    EXPECT("{{ $nope }}", 0, "ERROR: undefined variable: $nope");
}

/* ---- rule files ---- */

static const char *parse_error(const char *text)
{
    static char err[1024];
    mw_rule_set set = {0};
    if (mw_rule_set_parse(&set, "r.yml", text, strlen(text), err, sizeof(err)) == 0) {
        mw_rule_set_free(&set);
        return "OK";
    }
    assert_int_equal(set.ngroups, 0);
    return err;
}

static void rule_file_errors(void **state)
{
    (void)state;
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - record: a:b\n"
                                    "        expr: sum(x)\n"),
                        "OK");
    assert_string_equal(parse_error(""), "OK");
    assert_string_equal(
        parse_error("groups:\n  - name: g\n    rules:\n      - record: a\n"
                    "        expr: sum(x\n"),
        "r.yml:5:15: could not parse expression: 1:6: parse error: unexpected end of "
        "input in aggregation, expected \",\" or \")\"");
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - alert: A\n"
                                    "        expr: up\n        fr: 5m\n"),
                        "r.yml:6:9: field fr not found in type rulefmt.Rule");
    assert_string_equal(parse_error("groups:\n  - name: g\n  - name: g\n"),
                        "r.yml:3:5: groupname: \"g\" is repeated in the same file");
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - alert: A\n"
                                    "        expr: up\n        labels:\n          bad-name: x\n"),
                        "r.yml:7:11: invalid label name: bad-name");
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - alert: A\n"
                                    "        expr: up\n        annotations:\n"
                                    "          summary: '{{ humanise $value }}'\n"),
                        "r.yml:7:20: annotation summary: template: line 1: function \"humanise\" "
                        "not defined");
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - record: a\n"
                                    "        expr: up\n        for: 1m\n"),
                        "r.yml:6:14: invalid field 'for' in recording rule");
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - record: 'a b'\n"
                                    "        expr: up\n"),
                        "r.yml:4:17: invalid recording rule name: a b");
    assert_string_equal(parse_error("groups:\n  - name: g\n    interval: 5q\n"),
                        "r.yml:3:15: interval: not a valid duration string: \"5q\"");
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - expr: up\n"),
                        "r.yml:4:9: one of 'record' or 'alert' must be set");
    assert_string_equal(parse_error("groups:\n  - name: g\n    rules:\n      - alert: A\n"
                                    "        expr: up[5m]\n"),
                        "r.yml:5:15: invalid expression type \"range vector\" for alerting rule, "
                        "must be vector or scalar");
    assert_string_equal(parse_error("groups: [\n"),
                        "r.yml:2:1: YAML syntax error: did not find expected node content");
    assert_string_equal(parse_error("rules: []\n"),
                        "r.yml:1:1: field rules not found in type rulefmt.RuleGroups");
}

/* ---- the state machine and what the sinks get ---- */

typedef struct sent {
    long t_min;
    int resolved;
    long starts_min, ends_min;
    char labels[128];
} sent;
static sent sends[64];
static size_t nsends;

static void record_send(void *ctx, const mw_alert *alerts, size_t n, int64_t now_ms)
{
    (void)ctx;
    for (size_t i = 0; i < n && nsends < 64; i++) {
        sent *s = &sends[nsends++];
        s->t_min = (long)(now_ms / 60000);
        s->resolved = alerts[i].resolved;
        s->starts_min = (long)(alerts[i].starts_at_ms / 60000);
        s->ends_min = (long)(alerts[i].ends_at_ms / 60000);
        s->labels[0] = '\0';
        for (size_t k = 0; k < alerts[i].nlabels; k++)
            snprintf(s->labels + strlen(s->labels), sizeof(s->labels) - strlen(s->labels), "%s=%s,",
                     alerts[i].labels[k].name, alerts[i].labels[k].value);
    }
}

/* For tests: the rules of text, evaluated with sending on (rules_internal.h). */
#include "rules/rules_internal.h"

static void state_machine_and_sends(void **state)
{
    (void)state;
    mw_log_set_level(MW_LOG_ERROR);
    char dir[] = "/tmp/test-rules-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/r.yml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("groups:\n  - name: g\n    rules:\n"
          "      - alert: Up\n        expr: up > 0\n        for: 2m\n"
          "        labels: {severity: page}\n",
          f);
    fclose(f);
    mw_store_options so = {.dir = dir, .no_sync = 1, .background_ms = -1};
    mw_store_default_limits(&so.limits);
    so.limits.max_future_ms = 0;
    char err[512];
    mw_store *store = mw_store_open(&so, err, sizeof(err));
    assert_non_null(store);
    /* up = 1 from 0 to 5m, then 0 */
    mw_store_sample s[30];
    for (int i = 0; i < 30; i++)
        s[i] = (mw_store_sample){(int64_t)i * 60000, i <= 5 ? 1 : 0};
    mw_label l[] = {{"__name__", "up"}, {"job", "j"}};
    mw_store_ts ts = {l, 2, s, 30};
    assert_int_equal(mw_store_append(store, &ts, 1, 0, err, sizeof(err)), 0);
    mw_rules *r = mw_rules_new_for_test(path, 60000, err, sizeof(err));
    assert_non_null(r);
    r->test = 0; /* send, as the agent does */
    mw_alert_sink sink = {"test", record_send, &nsends};
    assert_int_equal(mw_alert_sink_add(&sink), 0);
    const char *states[30];
    for (int m = 0; m < 25; m++) {
        mw_rules_eval_all(r, store, (int64_t)m * 60000);
        rule_st *rs = &r->groups[0].rules[0];
        states[m] = rs->nalerts == 0                    ? "-"
                    : rs->alerts[0].state == ST_FIRING  ? "F"
                    : rs->alerts[0].state == ST_PENDING ? "P"
                                                        : "I";
    }
    char line[64] = "";
    for (int m = 0; m < 25; m++)
        strcat(line, states[m]);
    /* pending 0-1, firing 2-5, resolved at 6, kept while at most 15 minutes old, gone at 22 */
    assert_string_equal(line, "PPFFFFIIIIIIIIIIIIIIII---");
    /* Firing sends at 2 and every resend delay after (LastSentAt + 1m
     * before now: every second minute), valid until now + 4 min; resolved
     * at 6 at once, then again each resend delay until 21. */
    char got[512] = "";
    for (size_t i = 0; i < nsends; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%ld%c%ld-%ld ", sends[i].t_min,
                 sends[i].resolved ? 'R' : 'F', sends[i].starts_min, sends[i].ends_min);
    assert_string_equal(got, "2F2-6 4F2-8 6R2-6 8R2-6 10R2-6 12R2-6 14R2-6 16R2-6 18R2-6 20R2-6 ");
    assert_string_equal(sends[0].labels, "alertname=Up,job=j,severity=page,");
    mw_alert_sink_remove(&nsends);
    mw_rules_free(r);
    mw_store_close(store);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void sink_registry(void **state)
{
    (void)state;
    int ctx[MW_ALERT_MAX_SINKS + 1];
    for (int i = 0; i < MW_ALERT_MAX_SINKS; i++) {
        mw_alert_sink s = {"s", record_send, &ctx[i]};
        assert_int_equal(mw_alert_sink_add(&s), 0);
    }
    mw_alert_sink extra = {"s", record_send, &ctx[MW_ALERT_MAX_SINKS]};
    assert_int_equal(mw_alert_sink_add(&extra), -1);
    for (int i = 0; i < MW_ALERT_MAX_SINKS; i++)
        mw_alert_sink_remove(&ctx[i]);
    assert_int_equal(mw_alert_sink_add(&extra), 0);
    mw_alert_sink_remove(&ctx[MW_ALERT_MAX_SINKS]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(template_basics),         cmocka_unit_test(template_functions),
        cmocka_unit_test(template_parse_errors),   cmocka_unit_test(rule_file_errors),
        cmocka_unit_test(state_machine_and_sends), cmocka_unit_test(sink_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
