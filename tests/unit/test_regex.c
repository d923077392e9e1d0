/* test_regex.c - the RE2 shim (src/core/regex.cc): Prometheus's anchoring
 * and flags, RE2 syntax POSIX lacks, RE2's error text, the memory bound,
 * linear time on a pattern that backtracking engines take exponential time
 * on, and Go's regexp.Expand for replacement templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mw_regex *compile_ok(const char *pattern)
{
    char err[256] = "";
    mw_regex *re = mw_regex_compile(pattern, err, sizeof(err));
    if (!re) fail_msg("'%s' refused: %s", pattern, err);
    return re;
}

/* Whether pattern matches subject, for table rows. */
static int matches(const char *pattern, const char *subject)
{
    mw_regex *re = compile_ok(pattern);
    int m = mw_regex_match(re, subject);
    mw_regex_free(re);
    return m;
}

static void syntax_and_anchoring(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *subject;
        int match;
    } cases[] = {
        /* fully anchored, as Prometheus's matchers: ^(?s:RE)$ */
        {"b", "ab", 0},
        {"b", "ba", 0},
        {".*b", "ab", 1},
        {"a|ab", "ab", 1}, /* anchoring covers every alternative */
        {"a|ab", "abc", 0},
        {"", "", 1},
        {"", "x", 0},
        {".*", "", 1},
        {".*", "anything at all", 1},
        {"foo$|bar", "bar", 1},
        /* "." matches a newline (Prometheus 3's (?s)); (?-s) turns it off */
        {"a.b", "a\nb", 1},
        {"(?-s)a.b", "a\nb", 0},
        {"[^x]", "\n", 1},
        /* flags */
        {"(?i)foo", "FoO", 1},
        {"(?i:foo)bar", "FOObar", 1},
        {"(?i:foo)bar", "FOOBAR", 0},
        {"foo(?i)bar", "fooBAR", 1},
        {"foo(?i)bar", "FOObar", 0},
        /* non-greedy repetition is accepted (it only changes groups) */
        {"a.*?b", "axxbyyb", 1},
        {"a+?", "aaa", 1},
        /* Perl classes and Unicode */
        {"\\d+", "0123456789", 1},
        {"\\d", "x", 0},
        {"\\D\\w\\s\\S\\W", "x_ y-", 1},
        {"\\pL+", "Ünïcödé", 1},
        {"\\pL", "1", 0},
        {"\\p{Greek}+", "αβ", 1},
        {"\\PL", "1", 1},
        {"[[:alpha:]]+x", "abcx", 1},
        {"\\bfoo\\b", "foo", 1},
        {"\\Qa.b\\E", "a.b", 1},
        {"\\Qa.b\\E", "axb", 0},
        {"x{2,3}", "xxx", 1},
        {"x{2,3}", "xxxx", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (matches(cases[i].pattern, cases[i].subject) != cases[i].match)
            fail_msg("'%s' on '%s': expected %d", cases[i].pattern, cases[i].subject,
                     cases[i].match);
}

static void errors(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *err;
    } cases[] = {
        {"(a", "missing ): (a"},
        {"a)|(b", "unexpected ): a)|(b"}, /* not read as closing a wrapping group */
        {"[a", "missing ]: [a"},
        {"a**", "bad repetition operator: **"},
        {"x{1001}", "invalid repetition size: {1001}"},
        {"((a){100}){100}", "invalid repetition size: {100}"},
        {"\\8", "invalid escape sequence: \\8"},
        {"(?z)", "invalid perl operator: (?z"},
        /* one line even when the pattern has a newline */
        {"(\na", "missing ): ( a"},
        /* the memory bound: RE2's max_mem */
        {"\\pL{1000}", "pattern too large - compile failed: its program would need more than "
                       "8 MiB"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        mw_regex *re = mw_regex_compile(cases[i].pattern, err, sizeof(err));
        if (re) fail_msg("'%s' compiled", cases[i].pattern);
        assert_string_equal(err, cases[i].err);
    }
    /* a short buffer gets a cut, terminated message */
    char small[8];
    assert_null(mw_regex_compile("(a", small, sizeof(small)));
    assert_string_equal(small, "missing");
}

/* (a+)+b on a run of a's without the b: a backtracking engine tries every
 * way of splitting the run, 2^n of them; RE2 answers in time linear in n.
 * The assertion is on the answers: a backtracking engine would not finish
 * within the test's timeout. */
static void linear_time(void **state)
{
    (void)state;
    enum { N = 100000 };
    char *subject = malloc(N + 2);
    memset(subject, 'a', N);
    subject[N] = '!';
    subject[N + 1] = 0;
    mw_regex *re = compile_ok("(a+)+b");
    assert_int_equal(mw_regex_match(re, subject), 0);
    mw_regex_span spans[2];
    assert_int_equal(mw_regex_capture(re, subject, spans, 2), 0);
    subject[N] = 'b';
    assert_int_equal(mw_regex_capture(re, subject, spans, 2), 1);
    assert_int_equal(spans[0].start, 0);
    assert_int_equal(spans[0].end, N + 1);
    mw_regex_free(re);
    /* (x|x)*y, the other classic: 2^n paths through the alternatives */
    memset(subject, 'x', N);
    subject[N] = 'z';
    re = compile_ok("(x|x)*y");
    assert_int_equal(mw_regex_match(re, subject), 0);
    mw_regex_free(re);
    free(subject);
}

static void captures(void **state)
{
    (void)state;
    mw_regex *re = compile_ok("(a|ab)(c|bcd)(d*)");
    assert_int_equal(mw_regex_ngroups(re), 3);
    mw_regex_span sp[5];
    assert_int_equal(mw_regex_capture(re, "abcd", sp, 5), 1);
    /* leftmost-first, as Go and Prometheus: a, bcd, "" */
    assert_int_equal(sp[1].start, 0);
    assert_int_equal(sp[1].end, 1);
    assert_int_equal(sp[2].start, 1);
    assert_int_equal(sp[2].end, 4);
    assert_int_equal(sp[3].start, 4);
    assert_int_equal(sp[3].end, 4);
    assert_int_equal(sp[4].start, -1); /* past the pattern's groups */
    assert_int_equal(mw_regex_capture(re, "abcdx", sp, 5), 0);
    assert_int_equal(sp[0].start, -1);
    mw_regex_free(re);
    /* a group that does not take part is -1 */
    re = compile_ok("(x)|(y)");
    assert_int_equal(mw_regex_capture(re, "y", sp, 3), 1);
    assert_int_equal(sp[1].start, -1);
    assert_int_equal(sp[1].end, -1);
    assert_int_equal(sp[2].start, 0);
    mw_regex_free(re);
    /* non-greedy */
    re = compile_ok("(a+?)(a*)");
    assert_int_equal(mw_regex_capture(re, "aaa", sp, 3), 1);
    assert_int_equal(sp[1].end, 1);
    assert_int_equal(sp[2].start, 1);
    assert_int_equal(sp[2].end, 3);
    mw_regex_free(re);
}

/* tmpl expanded against a match of pattern on subject. */
static void expect_expand(const char *pattern, const char *subject, const char *tmpl,
                          const char *want)
{
    mw_regex *re = compile_ok(pattern);
    size_t n = mw_regex_ngroups(re) + 1;
    mw_regex_span *sp = calloc(n, sizeof(*sp));
    if (!mw_regex_capture(re, subject, sp, n)) fail_msg("'%s' on '%s' no match", pattern, subject);
    char out[128];
    size_t len = mw_regex_expand(re, tmpl, subject, sp, n, out, sizeof(out));
    if (strcmp(out, want) != 0 || len != strlen(want))
        fail_msg("'%s' with '%s' on '%s': got '%s' (%zu), expected '%s'", tmpl, pattern, subject,
                 out, len, want);
    free(sp);
    mw_regex_free(re);
}

static void expand(void **state)
{
    (void)state;
    const char *re = "(?P<kind>[a-z]+)-(\\d+)";
    expect_expand(re, "node-17", "$1", "node");
    expect_expand(re, "node-17", "${1}", "node");
    expect_expand(re, "node-17", "$2", "17");
    expect_expand(re, "node-17", "$0", "node-17");
    expect_expand(re, "node-17", "$kind", "node");
    expect_expand(re, "node-17", "${kind}", "node");
    expect_expand(re, "node-17", "<${kind}:$2>", "<node:17>");
    expect_expand(re, "node-17", "$$1", "$1");
    expect_expand(re, "node-17", "$$$1", "$node");
    /* Go reads the longest name: "$1x" is the group named "1x", empty */
    expect_expand(re, "node-17", "$1x", "");
    expect_expand(re, "node-17", "$2_suffix", "");
    expect_expand(re, "node-17", "${2}_suffix", "17_suffix");
    expect_expand(re, "node-17", "$kinds", "");
    /* a group that does not exist, by number or name, is empty */
    expect_expand(re, "node-17", "[$3][$99][${nope}][$123456789]", "[][][][]");
    /* leading zeros are still a number, as in Go */
    expect_expand(re, "node-17", "$01", "node");
    /* not a reference: the "$" stays */
    expect_expand(re, "node-17", "a$", "a$");
    expect_expand(re, "node-17", "$-x", "$-x");
    expect_expand(re, "node-17", "${}", "${}");
    expect_expand(re, "node-17", "${1", "${1");
    expect_expand(re, "node-17", "${k-}", "${k-}");
    expect_expand(re, "node-17", "no refs", "no refs");
    expect_expand(re, "node-17", "", "");
    /* more groups than the shim keeps on its stack */
    expect_expand("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)(m)(n)(o)(p)(q)(r)(s)(t)",
                  "abcdefghijklmnopqrst", "$20${17}$1", "tqa");
    /* a group that took no part is empty */
    expect_expand("(x)|(y)", "y", "[$1][$2]", "[][y]");
    /* snprintf's contract: the whole length, a cut and terminated copy */
    mw_regex *r = compile_ok("(.*)");
    mw_regex_span sp[2];
    assert_int_equal(mw_regex_capture(r, "abcdef", sp, 2), 1);
    assert_int_equal(mw_regex_expand(r, "$1$1", "abcdef", sp, 2, NULL, 0), 12);
    char small[5];
    assert_int_equal(mw_regex_expand(r, "$1$1", "abcdef", sp, 2, small, sizeof(small)), 12);
    assert_string_equal(small, "abcd");
    mw_regex_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(syntax_and_anchoring),
        cmocka_unit_test(errors),
        cmocka_unit_test(linear_time),
        cmocka_unit_test(captures),
        cmocka_unit_test(expand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
