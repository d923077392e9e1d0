/* test_relabel.c - write_relabel_configs semantics (src/ship/relabel.c), as
 * table tests mirroring Prometheus's relabel_test.go and documented examples. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ship/relabel.h"

#include <stdio.h>
#include <string.h>

/* Table rows leave trailing fields out on purpose (NULL/0 = the default). */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct rule_row {
    const char *action, *src[3], *sep, *regex, *target, *repl;
    uint64_t modulus;
} rule_row;

typedef struct rl_case {
    const char *what;
    const char *in; /* "a=foo,b=bar" */
    rule_row rules[3];
    const char *out; /* sorted "a=foo,b=bar", or NULL: dropped */
} rl_case;

static void parse_set(const char *s, mw_rl_labels *ls, char store[][64])
{
    ls->n = 0;
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s", s);
    int k = 0;
    for (char *tok = strtok(tmp, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        snprintf(store[k], 64, "%s", tok);
        snprintf(store[k + 1], 64, "%s", eq + 1);
        mw_rl_set(ls, store[k], store[k + 1]);
        k += 2;
    }
}

static void format_set(mw_rl_labels *ls, char *out, size_t n)
{
    mw_rl_sort(ls);
    out[0] = 0;
    for (size_t i = 0; i < ls->n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, n - l, "%s%s=%s", i ? "," : "", ls->l[i].name, ls->l[i].value);
    }
}

static const rl_case cases[] = {
    {"keep matching",
     "__name__=up,job=a",
     {{"keep", {"__name__"}, 0, "up|down"}},
     "__name__=up,job=a"},
    {"keep not matching", "__name__=upx,job=a", {{"keep", {"__name__"}, 0, "up|down"}}, NULL},
    {"regex is anchored", "a=ab", {{"drop", {"a"}, 0, "a"}}, "a=ab"},
    {"drop matching", "a=foo", {{"drop", {"a"}, 0, "f.*"}}, NULL},
    {"drop on joined sources", "a=foo,b=bar", {{"drop", {"a", "b"}, 0, "foo;bar"}}, NULL},
    {"custom separator", "a=foo,b=bar", {{"drop", {"a", "b"}, "|", "foo\\|bar"}}, NULL},
    {"missing source is empty", "a=foo", {{"keep", {"a", "zz"}, 0, "foo;"}}, "a=foo"},
    {"replace with groups",
     "a=foo,b=bar",
     {{"replace", {"a", "b"}, 0, "(.*);(.*)", "c", "$2-${1}"}},
     "a=foo,b=bar,c=bar-foo"},
    {"Prometheus: ch$1-ch$1",
     "a=foo",
     {{"replace", {"a"}, 0, "f(.*)", "d", "ch$1-ch$1"}},
     "a=foo,d=choo-choo"},
    {"no match leaves labels", "a=foo", {{"replace", {"a"}, 0, "x(.*)", "d", "$1"}}, "a=foo"},
    {"empty result deletes target",
     "a=foo,d=old",
     {{"replace", {"a"}, 0, "foo()", "d", "$1"}},
     "a=foo"},
    {"$1_x names group 1_x (empty)",
     "a=foo,d=old",
     {{"replace", {"a"}, 0, "(f)oo", "d", "$1_x"}},
     "a=foo"},
    {"${1}_x", "a=foo", {{"replace", {"a"}, 0, "(f)oo", "d", "${1}_x"}}, "a=foo,d=f_x"},
    {"$$ is a dollar", "a=foo", {{"replace", {"a"}, 0, "(.*)", "d", "$$$1"}}, "a=foo,d=$foo"},
    {"target from group",
     "a=foo,b=bar",
     {{"replace", {"a", "b"}, 0, "(.*);(.*)", "lbl_$1", "$2"}},
     "a=foo,b=bar,lbl_foo=bar"},
    {"invalid expanded target",
     "a=f-o,d=x",
     {{"replace", {"a"}, 0, "(.*)", "${1}", "v"}},
     "a=f-o,d=x"},
    {"default regex and replacement", "a=foo", {{NULL, {"a"}, 0, NULL, "b"}}, "a=foo,b=foo"},
    {"\\d", "a=node-17", {{"replace", {"a"}, 0, "node-(\\d+)", "n", "$1"}}, "a=node-17,n=17"},
    {"(?:) is not a group", "a=xy", {{"replace", {"a"}, 0, "(?:x)(y)", "n", "$1"}}, "a=xy,n=y"},
    {"(?i)", "a=FOO", {{"keep", {"a"}, 0, "(?i)foo"}}, "a=FOO"},
    /* RE2 syntax that POSIX lacks (core/regex.h) */
    {"(?i:...) group", "a=FOOx", {{"keep", {"a"}, 0, "(?i:foo)x"}}, "a=FOOx"},
    {"(?i:...) ends its flag", "a=FOOX", {{"keep", {"a"}, 0, "(?i:foo)x"}}, NULL},
    {"non-greedy group",
     "a=aaa",
     {{"replace", {"a"}, 0, "(a+?)(a*)", "g", "${1}-${2}"}},
     "a=aaa,g=a-aa"},
    {"named groups by name",
     "a=node-17",
     {{"replace", {"a"}, 0, "(?P<kind>[a-z]+)-(?P<num>\\d+)", "n", "$num/${kind}/$2"}},
     "a=node-17,n=17/node/17"},
    {"unknown name is empty",
     "a=node-17",
     {{"replace", {"a"}, 0, "(?P<kind>[a-z]+)-\\d+", "n", "x${nope}$kind"}},
     "a=node-17,n=xnode"},
    {"Unicode class", "a=Ünïcödé", {{"keep", {"a"}, 0, "\\pL+"}}, "a=Ünïcödé"},
    {"group in target_label and replacement",
     "a=gpu_0",
     {{"replace", {"a"}, 0, "(?P<k>[a-z]+)_(\\d)", "idx_${k}", "$2"}},
     "a=gpu_0,idx_gpu=0"},
    {"labelmap with named group",
     "meta_x=1",
     {{"labelmap", {0}, 0, "meta_(?P<rest>.+)", NULL, "m_${rest}"}},
     "m_x=1,meta_x=1"},
    {"regex \"\" matches only the empty value",
     "a=,b=x",
     {{"replace", {"a"}, 0, "", "c", "empty"}, {"replace", {"b"}, 0, "", "d", "empty"}},
     "a=,b=x,c=empty"},
    {". matches a newline (Prometheus 3)", "a=x\ny", {{"keep", {"a"}, 0, "x.y"}}, "a=x\ny"},
    {"hashmod (Prometheus's 976)",
     "a=foo,b=bar,c=baz",
     {{"hashmod", {"c"}, 0, NULL, "d", NULL, 1000}},
     "a=foo,b=bar,c=baz,d=976"},
    {"hashmod joined",
     "a=foo,b=bar",
     {{"hashmod", {"a", "b"}, 0, NULL, "h", NULL, 16}},
     "a=foo,b=bar,h=14"},
    {"hashmod then keep a shard",
     "i=node-17",
     {{"hashmod", {"i"}, 0, NULL, "__tmp", NULL, 3},
      {"keep", {"__tmp"}, 0, "1"},
      {"labeldrop", {0}, 0, "__tmp"}},
     "i=node-17"},
    {"labeldrop", "a=1,tmp_x=2,tmp_y=3", {{"labeldrop", {0}, 0, "tmp_.*"}}, "a=1"},
    {"labelkeep", "__name__=m,a=1,b=2", {{"labelkeep", {0}, 0, "__name__|a"}}, "__name__=m,a=1"},
    {"labelmap",
     "meta_x=1,y=2",
     {{"labelmap", {0}, 0, "meta_(.+)", NULL, "$1"}},
     "meta_x=1,x=1,y=2"},
    {"all labels dropped", "a=1", {{"labeldrop", {0}, 0, ".*"}}, NULL},
    {"rules chain in order",
     "__name__=cpu,mode=idle",
     {{"replace", {"mode"}, 0, "idle", "mode", "rest"}, {"drop", {"mode"}, 0, "idle"}},
     "__name__=cpu,mode=rest"},
};

static void table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const rl_case *c = &cases[i];
        mw_relabel rl = {0};
        for (int k = 0; k < 3 && (c->rules[k].action || c->rules[k].target); k++) {
            const rule_row *r = &c->rules[k];
            size_t ns = 0;
            while (ns < 3 && r->src[ns])
                ns++;
            mw_relabel_spec sp = {r->action, r->src,    ns,      r->sep,
                                  r->regex,  r->target, r->repl, r->modulus};
            char why[256];
            if (mw_relabel_add(&rl, &sp, why, sizeof(why)) < 0)
                fail_msg("%s: rule %d refused: %s", c->what, k, why);
        }
        mw_rl_labels ls;
        char store[32][64], got[512];
        parse_set(c->in, &ls, store);
        mw_arena a;
        mw_arena_init(&a, 0);
        int keep = mw_relabel_apply(&rl, &ls, &a);
        format_set(&ls, got, sizeof(got));
        if (!c->out) {
            if (keep) fail_msg("%s: kept as %s, expected dropped", c->what, got);
        } else if (!keep || strcmp(got, c->out) != 0) {
            fail_msg("%s: got %s (%s), expected %s", c->what, got, keep ? "kept" : "dropped",
                     c->out);
        }
        mw_arena_free(&a);
        mw_relabel_free(&rl);
    }
}

static void refused(void **state)
{
    (void)state;
    static const struct {
        mw_relabel_spec sp;
        const char *why;
    } bad[] = {
        {{.action = "keepx"}, "unknown action 'keepx'"},
        {{.action = "hashmod", .target_label = "x"}, "action hashmod needs a modulus > 0"},
        {{.action = "replace"}, "action replace needs target_label"},
        {{.action = "replace", .target_label = "1x"},
         "target_label '1x' is not a valid label name"},
        /* RE2's refusals, in RE2's words */
        {{.action = "keep", .regex = "(a"}, "regex '(a': missing ): (a"},
        {{.action = "keep", .regex = "\\8x"}, "regex '\\8x': invalid escape sequence: \\8"},
        {{.action = "keep", .regex = "a{2}{3}"},
         "regex 'a{2}{3}': bad repetition operator: {2}{3}"},
        {{.action = "keep", .regex = "x{1001}"},
         "regex 'x{1001}': invalid repetition size: {1001}"},
        {{.action = "keep", .regex = "((a){100}){100}"},
         "regex '((a){100}){100}': invalid repetition size: {100}"},
        {{.action = "keep", .regex = "\\pL{1000}"},
         "regex '\\pL{1000}': pattern too large - compile failed: its program would need more "
         "than 8 MiB"},
        {{.action = "labeldrop", .regex = "a", .target_label = "b"},
         "labeldrop and labelkeep take only a regex (config found more)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mw_relabel rl = {0};
        char why[256] = "";
        assert_int_equal(mw_relabel_add(&rl, &bad[i].sp, why, sizeof(why)), -1);
        if (strncmp(why, bad[i].why, strlen(bad[i].why)) != 0)
            fail_msg("case %zu: got '%s', expected '%s'", i, why, bad[i].why);
        assert_int_equal(rl.n, 0);
        mw_relabel_free(&rl);
    }
}

static void hashmod_values(void **state)
{
    (void)state;
    /* Expected values from Python: int.from_bytes(md5(v).digest()[8:], "big") % m */
    assert_int_equal(mw_relabel_hashmod("foo", 1000), 696);
    assert_int_equal(mw_relabel_hashmod("baz", 1000), 976);
    assert_int_equal(mw_relabel_hashmod("", 7), 1);
    assert_int_equal(mw_relabel_hashmod("node-17", 3), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(refused),
        cmocka_unit_test(hashmod_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
