/* template_funcs.c - the functions of rule templates (template.h): Go's
 * builtins that rule files use (and, or, not, len, index, print, printf,
 * eq...) and Prometheus's (humanize*, query, first, label, value,
 * reReplaceAll, match, title, toUpper...), with the formatting of Go's fmt
 * and of Prometheus's template package, so that an annotation reads the
 * same in mlwatch as in Prometheus. */
#include "template_internal.h"
#include "../core/buf.h"
#include "../core/regex.h"
#include "../core/util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mw_tpl_format_float(double v, char *out, size_t size)
{
    if (isnan(v)) {
        snprintf(out, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    /* The shortest %e that reads back, then Go's choice between %e and %f
     * for the shortest form (strconv.FormatFloat(v, 'g', -1, 64)): %e when
     * the exponent is below -4 or at least 6. */
    char e[40];
    int prec = 0;
    for (; prec < 17; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec, v);
        if (strtod(e, NULL) == v) break;
    }
    const char *ep = strchr(e, 'e');
    int exp = atoi(ep + 1);
    if (exp < -4 || exp >= 6) {
        /* mantissa digits as they are, exponent with at least two digits */
        snprintf(out, size, "%.*se%c%02d", (int)(ep - e), e, exp < 0 ? '-' : '+', abs(exp));
        return;
    }
    int decimals = prec - exp;
    snprintf(out, size, "%.*f", decimals > 0 ? decimals : 0, v);
}

int tv_truth(const tv *v)
{
    switch (v->k) {
    case TV_NIL:
        return 0;
    case TV_STR:
        return v->s[0] != '\0';
    case TV_FLOAT:
        return v->f != 0;
    case TV_INT:
    case TV_BOOL:
        return v->i != 0;
    case TV_MAP:
    case TV_SAMPLES:
        return v->n != 0;
    case TV_SAMPLE:
    case TV_DATA:
        return 1;
    }
    return 0;
}

static const char *print_map(tpl_env *env, const mw_tpl_kv *kv, size_t n)
{
    mw_buf b;
    mw_buf_init(&b, MW_TPL_MAX_OUTPUT);
    mw_buf_puts(&b, "map[");
    for (size_t i = 0; i < n; i++)
        mw_buf_printf(&b, "%s%s:%s", i ? " " : "", kv[i].name, kv[i].value);
    mw_buf_puts(&b, "]");
    const char *s = mw_arena_strdup(env->a, b.data ? b.data : "");
    mw_buf_free(&b);
    return s;
}

const char *tv_print(tpl_env *env, const tv *v)
{
    char num[64];
    switch (v->k) {
    case TV_NIL:
        return "<no value>";
    case TV_STR:
        return v->s;
    case TV_FLOAT:
        mw_tpl_format_float(v->f, num, sizeof(num));
        break;
    case TV_INT:
        snprintf(num, sizeof(num), "%lld", v->i);
        break;
    case TV_BOOL:
        return v->i ? "true" : "false";
    case TV_MAP:
        return print_map(env, v->kv, v->n);
    case TV_SAMPLE: {
        char val[40];
        mw_tpl_format_float(v->smp->value, val, sizeof(val));
        const char *m = print_map(env, v->smp->labels, v->smp->nlabels);
        size_t len = strlen(m) + strlen(val) + 8;
        char *s = mw_arena_alloc(env->a, len);
        snprintf(s, len, "{%s %s}", m, val);
        return s;
    }
    case TV_SAMPLES:
        snprintf(num, sizeof(num), "[%zu samples]", v->n);
        break;
    case TV_DATA:
        return "{...}";
    }
    return mw_arena_strdup(env->a, num);
}

/* Prometheus's convertToFloat: numbers, and strings that parse as floats. */
static int to_float(tpl_env *env, const tv *v, double *out)
{
    switch (v->k) {
    case TV_FLOAT:
        *out = v->f;
        return 0;
    case TV_INT:
        *out = (double)v->i;
        return 0;
    case TV_STR: {
        char *end;
        const char *s = v->s;
        if (strcmp(s, "NaN") == 0) {
            *out = NAN;
            return 0;
        }
        *out = strtod(s, &end);
        if (end != s && !*end) return 0;
        return tpl_fail(env, "strconv.ParseFloat: parsing \"%s\": invalid syntax", s);
    }
    default:
        return tpl_fail(env, "can't convert %s to float", tv_print(env, v));
    }
}

static int to_str(tpl_env *env, const tv *v, const char **out)
{
    *out = "";
    if (v->k != TV_STR) return tpl_fail(env, "expected string; found %s", tv_print(env, v));
    *out = v->s;
    return 0;
}

static tv str_tv(tpl_env *env, const char *s)
{
    return (tv){.k = TV_STR, .s = mw_arena_strdup(env->a, s)};
}

/* ---- Prometheus's humanizers ---- */

/* v (|v| < 1, not 0) times 1000 until it is at least 1, at most 8 times:
 * the SI prefix that says so ("m" ... "y"), shared by humanize and
 * humanizeDuration. */
static const char *scale_below_one(double *v)
{
    static const char *const small[] = {"m", "u", "n", "p", "f", "a", "z", "y"};
    const char *prefix = "";
    for (size_t i = 0; i < 8 && fabs(*v) < 1; i++) {
        prefix = small[i];
        *v *= 1000;
    }
    return prefix;
}

/* Each humanizer writes its finite v into buf; humanized() does the rest:
 * the argument as a float, NaN and infinities as Go prints them (with the
 * humanizer's suffix: humanizePercentage's "%"), the string result. */
typedef void (*humanizer)(double v, char *buf, size_t size);

static int humanized(tpl_env *env, const tv *a, humanizer format, const char *nonfinite_suffix,
                     tv *out)
{
    double v = 0;
    if (to_float(env, a, &v) < 0) return -1;
    char buf[96];
    if (isnan(v) || isinf(v)) {
        mw_tpl_format_float(v, buf, sizeof(buf));
        strcat(buf, nonfinite_suffix);
    } else {
        format(v, buf, sizeof(buf));
    }
    *out = str_tv(env, buf);
    return 0;
}

static void si_prefixed(double v, char *buf, size_t size)
{
    if (v == 0) {
        snprintf(buf, size, "%.4g", v);
    } else if (fabs(v) >= 1) {
        static const char *big[] = {"k", "M", "G", "T", "P", "E", "Z", "Y"};
        const char *prefix = "";
        for (size_t i = 0; i < 8 && fabs(v) >= 1000; i++) {
            prefix = big[i];
            v /= 1000;
        }
        snprintf(buf, size, "%.4g%s", v, prefix);
    } else {
        const char *prefix = scale_below_one(&v);
        snprintf(buf, size, "%.4g%s", v, prefix);
    }
}

static void binary_prefixed(double v, char *buf, size_t size)
{
    if (fabs(v) <= 1) {
        snprintf(buf, size, "%.4g", v);
        return;
    }
    static const char *p[] = {"ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"};
    const char *prefix = "";
    for (size_t i = 0; i < 8 && fabs(v) >= 1024; i++) {
        prefix = p[i];
        v /= 1024;
    }
    snprintf(buf, size, "%.4g%s", v, prefix);
}

static void duration_of(double v, char *buf, size_t size)
{
    if (v == 0) {
        snprintf(buf, size, "0s");
    } else if (fabs(v) >= 1) {
        const char *sign = v < 0 ? "-" : "";
        v = fabs(v);
        long long d = (long long)v;
        long long s = d % 60, m = (d / 60) % 60, h = (d / 3600) % 24, days = d / 86400;
        if (days)
            snprintf(buf, size, "%s%lldd %lldh %lldm %llds", sign, days, h, m, s);
        else if (h)
            snprintf(buf, size, "%s%lldh %lldm %llds", sign, h, m, s);
        else if (m)
            snprintf(buf, size, "%s%lldm %llds", sign, m, s);
        else
            snprintf(buf, size, "%s%.4gs", sign, v);
    } else {
        const char *prefix = scale_below_one(&v);
        snprintf(buf, size, "%.4g%ss", v, prefix);
    }
}

static void percentage_of(double v, char *buf, size_t size)
{
    snprintf(buf, size, "%.4g%%", v * 100);
}

/* Go's time.Time.String() in UTC: "2006-01-02 15:04:05.999999999 +0000 UTC". */
static void timestamp_of(double v, char *buf, size_t size)
{
    double whole = floor(v);
    long long ns = llround((v - whole) * 1e9);
    if (ns >= 1000000000) {
        whole += 1;
        ns -= 1000000000;
    }
    time_t t = (time_t)whole;
    struct tm tm;
    gmtime_r(&t, &tm);
    char frac[32] = "";
    if (ns) {
        snprintf(frac, sizeof(frac), ".%09lld", ns);
        for (size_t k = strlen(frac); k > 1 && frac[k - 1] == '0'; k--)
            frac[k - 1] = '\0';
    }
    snprintf(buf, size, "%04d-%02d-%02d %02d:%02d:%02d%s +0000 UTC", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

#define HUMANIZER(name, format, nonfinite_suffix)                                                  \
    static int name(tpl_env *env, const tv *a, size_t n, tv *out)                                  \
    {                                                                                              \
        (void)n;                                                                                   \
        return humanized(env, a, format, nonfinite_suffix, out);                                   \
    }
HUMANIZER(f_humanize, si_prefixed, "")
HUMANIZER(f_humanize1024, binary_prefixed, "")
HUMANIZER(f_humanize_duration, duration_of, "")
HUMANIZER(f_humanize_percentage, percentage_of, "%")
HUMANIZER(f_humanize_timestamp, timestamp_of, "")
#undef HUMANIZER

static int f_case(tpl_env *env, const tv *a, int (*conv)(int), tv *out)
{
    const char *s;
    if (to_str(env, a, &s) < 0) return -1;
    char *r = mw_arena_strdup(env->a, s);
    for (char *p = r; *p; p++)
        *p = (char)conv((unsigned char)*p);
    *out = (tv){.k = TV_STR, .s = r};
    return 0;
}
static int f_to_upper(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    return f_case(env, a, toupper, out);
}
static int f_to_lower(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    return f_case(env, a, tolower, out);
}
/* strings.Title: the first letter of each word upper-cased. */
static int f_title(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *s;
    if (to_str(env, a, &s) < 0) return -1;
    char *r = mw_arena_strdup(env->a, s);
    int prev_letter = 0;
    for (char *p = r; *p; p++) {
        int letter = isalnum((unsigned char)*p) || *p == '_' || *p == '\'' || (*p & 0x80);
        if (letter && !prev_letter) *p = (char)toupper((unsigned char)*p);
        prev_letter = letter;
    }
    *out = (tv){.k = TV_STR, .s = r};
    return 0;
}

/* Go's regexp is unanchored; ours anchors, so the pattern is wrapped:
 * (.*?)(PAT)(.*) finds the leftmost match, groups of PAT from 3. */
static mw_regex *unanchored(tpl_env *env, const char *pat)
{
    size_t len = strlen(pat) + 32;
    char *w = mw_arena_alloc(env->a, len);
    snprintf(w, len, "(.*?)(%s)(.*)", pat);
    char err[256];
    mw_regex *re = mw_regex_compile(w, err, sizeof(err));
    if (!re) tpl_fail(env, "error parsing regexp: %s", err);
    return re;
}

static int f_re_replace_all(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *pat, *repl, *text;
    if (to_str(env, &a[0], &pat) < 0 || to_str(env, &a[1], &repl) < 0 ||
        to_str(env, &a[2], &text) < 0)
        return -1;
    mw_regex *re = unanchored(env, pat);
    if (!re) return -1;
    /* PAT alone numbers its named groups as user[] does (the wrapper's
     * numbers are 2 higher): $name and ${name} are looked up in it. */
    char err[256];
    mw_regex *names = mw_regex_compile(pat, err, sizeof(err));
    if (!names) {
        mw_regex_free(re);
        return tpl_fail(env, "error parsing regexp: %s", err);
    }
    size_t ng = mw_regex_ngroups(re) + 1;
    mw_regex_span *sp = mw_arena_alloc(env->a, ng * sizeof(*sp));
    mw_regex_span *user = mw_arena_alloc(env->a, ng * sizeof(*user));
    mw_buf b;
    mw_buf_init(&b, MW_TPL_MAX_OUTPUT);
    const char *p = text;
    int guard = 0;
    while (guard++ < 10000 && mw_regex_capture(re, p, sp, ng)) {
        /* user[0] is the match, user[k] PAT's group k */
        user[0] = sp[2];
        for (size_t k = 3; k + 1 < ng; k++)
            user[k - 2] = sp[k];
        mw_buf_append(&b, p, (size_t)sp[2].start);
        size_t nu = ng - 3;
        size_t len = mw_regex_expand(names, repl, p, user, nu, NULL, 0);
        char *e = mw_arena_alloc(env->a, len + 1);
        mw_regex_expand(names, repl, p, user, nu, e, len + 1);
        mw_buf_puts(&b, e);
        long end = sp[2].end;
        if (sp[2].end == sp[2].start) { /* an empty match: step over one byte */
            if (!p[end]) {
                p += end;
                break;
            }
            mw_buf_putc(&b, p[end]);
            end++;
        }
        p += end;
        if (!*p) break;
    }
    mw_buf_puts(&b, p);
    mw_regex_free(re);
    mw_regex_free(names);
    *out = str_tv(env, b.data ? b.data : "");
    mw_buf_free(&b);
    return 0;
}

static int f_match(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *pat, *text;
    if (to_str(env, &a[0], &pat) < 0 || to_str(env, &a[1], &text) < 0) return -1;
    mw_regex *re = unanchored(env, pat);
    if (!re) return -1;
    *out = (tv){.k = TV_BOOL, .i = mw_regex_match(re, text)};
    mw_regex_free(re);
    return 0;
}

static int f_strip_port(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *s;
    if (to_str(env, a, &s) < 0) return -1;
    char *r = mw_arena_strdup(env->a, s);
    char *colon = strrchr(r, ':');
    if (r[0] == '[') {
        char *close = strchr(r, ']');
        if (close && close[1] == ':') {
            *close = '\0';
            r++;
        }
    } else if (colon && colon == strchr(r, ':')) {
        *colon = '\0';
    }
    *out = (tv){.k = TV_STR, .s = r};
    return 0;
}

/* ---- queries ---- */

static int f_query(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *q;
    if (to_str(env, a, &q) < 0) return -1;
    if (!env->d->query) return tpl_fail(env, "query is not available here");
    if (++env->queries > TPL_MAX_QUERIES)
        return tpl_fail(env, "more than %d queries in one template", TPL_MAX_QUERIES);
    mw_tpl_sample *s = NULL;
    size_t ns = 0;
    char err[512];
    if (env->d->query(env->d->query_ctx, q, env->a, &s, &ns, err, sizeof(err)) < 0)
        return tpl_fail(env, "%s", err);
    *out = (tv){.k = TV_SAMPLES, .smp = s, .n = ns};
    return 0;
}

static int f_first(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    if (a->k != TV_SAMPLES) return tpl_fail(env, "first() called on a non-query result");
    if (!a->n) return tpl_fail(env, "first() called on vector with no elements");
    *out = (tv){.k = TV_SAMPLE, .smp = a->smp};
    return 0;
}

static int f_label(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *name;
    if (to_str(env, &a[0], &name) < 0) return -1;
    if (a[1].k != TV_SAMPLE) return tpl_fail(env, "label() called on a non-sample");
    *out = (tv){.k = TV_STR, .s = ""};
    for (size_t i = 0; i < a[1].smp->nlabels; i++)
        if (strcmp(a[1].smp->labels[i].name, name) == 0) out->s = a[1].smp->labels[i].value;
    return 0;
}

static int f_value(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    if (a->k != TV_SAMPLE) return tpl_fail(env, "value() called on a non-sample");
    *out = (tv){.k = TV_FLOAT, .f = a->smp->value};
    return 0;
}

static int f_strvalue(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    if (a->k != TV_SAMPLE) return tpl_fail(env, "strvalue() called on a non-sample");
    *out = (tv){.k = TV_STR, .s = ""};
    for (size_t i = 0; i < a->smp->nlabels; i++)
        if (strcmp(a->smp->labels[i].name, "__value__") == 0) out->s = a->smp->labels[i].value;
    return 0;
}

static int f_sort_by_label(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *name;
    if (to_str(env, &a[0], &name) < 0) return -1;
    if (a[1].k != TV_SAMPLES) return tpl_fail(env, "sortByLabel() called on a non-query result");
    mw_tpl_sample *s = mw_arena_alloc(env->a, (a[1].n ? a[1].n : 1) * sizeof(*s));
    memcpy(s, a[1].smp, a[1].n * sizeof(*s));
    /* insertion sort: stable, as Go's sort.Stable */
    for (size_t i = 1; i < a[1].n; i++) {
        mw_tpl_sample x = s[i];
        tv xl, yl, lname = {.k = TV_STR, .s = name};
        tv xs = {.k = TV_SAMPLE, .smp = &x};
        f_label(env, (tv[]){lname, xs}, 2, &xl);
        size_t j = i;
        while (j > 0) {
            tv ys = {.k = TV_SAMPLE, .smp = &s[j - 1]};
            f_label(env, (tv[]){lname, ys}, 2, &yl);
            if (strcmp(yl.s, xl.s) <= 0) break;
            s[j] = s[j - 1];
            j--;
        }
        s[j] = x;
    }
    *out = (tv){.k = TV_SAMPLES, .smp = s, .n = a[1].n};
    return 0;
}

static int f_parse_duration(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    const char *s;
    if (to_str(env, a, &s) < 0) return -1;
    char *end;
    double secs = strtod(s, &end);
    if (end == s || *end) return tpl_fail(env, "not a duration in seconds: \"%s\"", s);
    *out = (tv){.k = TV_FLOAT, .f = secs};
    return 0;
}

/* ---- Go's builtins ---- */

static int f_not(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)env;
    (void)n;
    *out = (tv){.k = TV_BOOL, .i = !tv_truth(a)};
    return 0;
}

static int f_len(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)n;
    if (a->k == TV_STR)
        *out = (tv){.k = TV_INT, .i = (long long)strlen(a->s)};
    else if (a->k == TV_MAP || a->k == TV_SAMPLES)
        *out = (tv){.k = TV_INT, .i = (long long)a->n};
    else
        return tpl_fail(env, "len of type %s", a->k == TV_NIL ? "nil" : "float64");
    return 0;
}

static int f_index(tpl_env *env, const tv *a, size_t n, tv *out)
{
    *out = a[0];
    for (size_t k = 1; k < n; k++) {
        if (out->k == TV_MAP) {
            const char *key;
            if (to_str(env, &a[k], &key) < 0) return -1;
            const char *v = "";
            for (size_t i = 0; i < out->n; i++)
                if (strcmp(out->kv[i].name, key) == 0) v = out->kv[i].value;
            *out = (tv){.k = TV_STR, .s = v};
        } else if (out->k == TV_SAMPLES && a[k].k == TV_INT) {
            if (a[k].i < 0 || (size_t)a[k].i >= out->n)
                return tpl_fail(env, "index out of range: %lld", a[k].i);
            *out = (tv){.k = TV_SAMPLE, .smp = &out->smp[a[k].i]};
        } else {
            return tpl_fail(env, "can't index item of type %s", tv_print(env, out));
        }
    }
    return 0;
}

static int f_print(tpl_env *env, const tv *a, size_t n, tv *out)
{
    /* fmt.Sprint: a space between operands when neither is a string */
    mw_buf b;
    mw_buf_init(&b, MW_TPL_MAX_OUTPUT);
    for (size_t i = 0; i < n; i++) {
        if (i && a[i].k != TV_STR && a[i - 1].k != TV_STR) mw_buf_putc(&b, ' ');
        mw_buf_puts(&b, tv_print(env, &a[i]));
    }
    *out = str_tv(env, b.data ? b.data : "");
    mw_buf_free(&b);
    return 0;
}

static int f_println(tpl_env *env, const tv *a, size_t n, tv *out)
{
    mw_buf b;
    mw_buf_init(&b, MW_TPL_MAX_OUTPUT);
    for (size_t i = 0; i < n; i++)
        mw_buf_printf(&b, "%s%s", i ? " " : "", tv_print(env, &a[i]));
    mw_buf_putc(&b, '\n');
    *out = str_tv(env, b.data);
    mw_buf_free(&b);
    return 0;
}

static int f_printf(tpl_env *env, const tv *a, size_t n, tv *out)
{
    const char *fmt;
    if (to_str(env, &a[0], &fmt) < 0) return -1;
    *out = (tv){.k = TV_STR, .s = tpl_sprintf(env, fmt, a + 1, n - 1)};
    return 0;
}

/* eq and the orderings: numbers with numbers, strings with strings. */
static int compare(tpl_env *env, const tv *x, const tv *y, int *cmp)
{
    int xn = x->k == TV_FLOAT || x->k == TV_INT, yn = y->k == TV_FLOAT || y->k == TV_INT;
    if (xn && yn) {
        if (x->k != y->k) return tpl_fail(env, "incompatible types for comparison");
        double a = x->k == TV_INT ? (double)x->i : x->f, b = y->k == TV_INT ? (double)y->i : y->f;
        *cmp = a < b ? -1 : a > b ? 1 : 0;
        return 0;
    }
    if (x->k == TV_STR && y->k == TV_STR) {
        int c = strcmp(x->s, y->s);
        *cmp = c < 0 ? -1 : c > 0;
        return 0;
    }
    if (x->k == TV_BOOL && y->k == TV_BOOL) {
        *cmp = x->i == y->i ? 0 : 2;
        return 0;
    }
    return tpl_fail(env, "incompatible types for comparison");
}

static int f_eq(tpl_env *env, const tv *a, size_t n, tv *out)
{
    int any = 0;
    for (size_t i = 1; i < n && !any; i++) {
        int c;
        if (compare(env, &a[0], &a[i], &c) < 0) return -1;
        any = c == 0;
    }
    *out = (tv){.k = TV_BOOL, .i = any};
    return 0;
}

#define ORDER(fname, test)                                                                         \
    static int fname(tpl_env *env, const tv *a, size_t n, tv *out)                                 \
    {                                                                                              \
        (void)n;                                                                                   \
        int c;                                                                                     \
        if (compare(env, &a[0], &a[1], &c) < 0) return -1;                                         \
        if (c == 2 && #test[0] != '!') return tpl_fail(env, "invalid type for comparison");        \
        *out = (tv){.k = TV_BOOL, .i = (test)};                                                    \
        return 0;                                                                                  \
    }
ORDER(f_ne, !(c == 0))
ORDER(f_lt, c < 0)
ORDER(f_le, c <= 0)
ORDER(f_gt, c == 1)
ORDER(f_ge, c >= 0 && c != 2)

static int f_identity(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)env;
    (void)n;
    *out = *a;
    return 0;
}

static int f_external_url(tpl_env *env, const tv *a, size_t n, tv *out)
{
    (void)a;
    (void)n;
    *out = (tv){.k = TV_STR, .s = env->d->external_url ? env->d->external_url : ""};
    return 0;
}

static const tpl_func funcs[] = {
    {"and", NULL, 1, -1, 1},
    {"eq", f_eq, 2, -1, 0},
    {"externalURL", f_external_url, 0, 0, 0},
    {"first", f_first, 1, 1, 0},
    {"ge", f_ge, 2, 2, 0},
    {"gt", f_gt, 2, 2, 0},
    {"humanize", f_humanize, 1, 1, 0},
    {"humanize1024", f_humanize1024, 1, 1, 0},
    {"humanizeDuration", f_humanize_duration, 1, 1, 0},
    {"humanizePercentage", f_humanize_percentage, 1, 1, 0},
    {"humanizeTimestamp", f_humanize_timestamp, 1, 1, 0},
    {"index", f_index, 1, -1, 0},
    {"label", f_label, 2, 2, 0},
    {"le", f_le, 2, 2, 0},
    {"len", f_len, 1, 1, 0},
    {"lt", f_lt, 2, 2, 0},
    {"match", f_match, 2, 2, 0},
    {"ne", f_ne, 2, 2, 0},
    {"not", f_not, 1, 1, 0},
    {"or", NULL, 1, -1, 1},
    {"parseDuration", f_parse_duration, 1, 1, 0},
    {"print", f_print, 0, -1, 0},
    {"printf", f_printf, 1, -1, 0},
    {"println", f_println, 0, -1, 0},
    {"query", f_query, 1, 1, 0},
    {"reReplaceAll", f_re_replace_all, 3, 3, 0},
    {"safeHtml", f_identity, 1, 1, 0},
    {"sortByLabel", f_sort_by_label, 2, 2, 0},
    {"stripPort", f_strip_port, 1, 1, 0},
    {"strvalue", f_strvalue, 1, 1, 0},
    {"title", f_title, 1, 1, 0},
    {"toLower", f_to_lower, 1, 1, 0},
    {"toUpper", f_to_upper, 1, 1, 0},
    {"value", f_value, 1, 1, 0},
};

const tpl_func *tpl_func_lookup(const char *name)
{
    for (size_t i = 0; i < MW_ARRAY_LEN(funcs); i++)
        if (strcmp(funcs[i].name, name) == 0) return &funcs[i];
    return NULL;
}
