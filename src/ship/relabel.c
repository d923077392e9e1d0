/* relabel.c - write_relabel_configs with Prometheus's semantics, see relabel.h. */
#include "relabel.h"
#include "../core/bytes.h"
#include "../core/regex_bound.h"
#include "../core/util.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *why, size_t n, const char *fmt, const char *arg)
{
    snprintf(why, n, fmt, arg);
    return -1;
}

/* ---- RE2 -> POSIX ERE ---- */

typedef struct out_buf {
    char *p;
    size_t n, cap;
    int overflow;
} out_buf;

static void put(out_buf *o, const char *s)
{
    size_t l = strlen(s);
    if (o->n + l + 1 > o->cap) {
        o->overflow = 1;
        return;
    }
    memcpy(o->p + o->n, s, l + 1);
    o->n += l;
}

static void putch(out_buf *o, char c)
{
    char s[2] = {c, 0};
    put(o, s);
}

/* Characters that may follow a backslash outside brackets and mean
 * themselves, in both RE2 and POSIX ERE. */
static int is_escapable(char c)
{
    return c && strchr(".[]{}()\\*+?^$|/-", c) != NULL;
}

/* Translate a bracket expression starting at re[*i] == '['. */
static int translate_bracket(const char *re, size_t *i, out_buf *o, char *why, size_t whysize)
{
    size_t j = *i + 1;
    putch(o, '[');
    if (re[j] == '^') putch(o, re[j++]);
    if (re[j] == ']') putch(o, re[j++]); /* a literal ] first */
    for (;;) {
        char c = re[j];
        if (!c) return fail(why, whysize, "unterminated character class in '%s'", re);
        if (c == ']') {
            putch(o, ']');
            *i = j + 1;
            return 0;
        }
        if (c == '[' && re[j + 1] == ':') { /* [:alpha:] */
            const char *end = strstr(re + j + 2, ":]");
            if (!end) return fail(why, whysize, "unterminated [: :] class in '%s'", re);
            size_t len = (size_t)(end + 2 - (re + j));
            char tmp[64];
            if (len >= sizeof(tmp)) return fail(why, whysize, "bad [: :] class in '%s'", re);
            memcpy(tmp, re + j, len);
            tmp[len] = 0;
            put(o, tmp);
            j += len;
            continue;
        }
        if (c == '\\') {
            char e = re[j + 1];
            if (e == 'd')
                put(o, "0-9");
            else if (e == 'w')
                put(o, "[:alnum:]_");
            else if (e == 's')
                put(o, "[:space:]");
            else if (e && strchr(".*+?()[{}|$/", e))
                putch(o, e); /* literal in POSIX brackets already */
            else
                return fail(why, whysize,
                            "escape inside [...] not supported by POSIX regexes in '%s' (put ] "
                            "first and - last instead of escaping them)",
                            re);
            j += 2;
            continue;
        }
        putch(o, c);
        j++;
    }
}

int mw_relabel_translate(const char *re, char *outp, size_t outsize, int *icase, int *group_map,
                         size_t *ngroups, size_t *nposix, char *why, size_t whysize)
{
    out_buf o = {outp, 0, outsize, 0};
    outp[0] = 0;
    *icase = 0;
    *ngroups = 0;
    *nposix = 1; /* the anchoring group */
    size_t i = 0;
    if (strncmp(re, "(?i)", 4) == 0) {
        *icase = 1;
        i = 4;
    }
    while (re[i]) {
        char c = re[i];
        if (c == '\\') {
            char e = re[i + 1];
            const char *t = NULL;
            switch (e) {
            case 'd':
                t = "[0-9]";
                break;
            case 'D':
                t = "[^0-9]";
                break;
            case 'w':
                t = "[[:alnum:]_]";
                break;
            case 'W':
                t = "[^[:alnum:]_]";
                break;
            case 's':
                t = "[[:space:]]";
                break;
            case 'S':
                t = "[^[:space:]]";
                break;
            default:
                break;
            }
            if (t) {
                put(&o, t);
            } else if (is_escapable(e)) {
                putch(&o, '\\');
                putch(&o, e);
            } else {
                char s[3] = {'\\', e, 0};
                snprintf(why, whysize, "escape '%s' is not supported (POSIX regexes) in '%.200s'",
                         s, re);
                return -1;
            }
            i += 2;
            continue;
        }
        if (c == '[') {
            if (translate_bracket(re, &i, &o, why, whysize) < 0) return -1;
            continue;
        }
        if (c == '(') {
            if (*nposix >= MW_RL_MAX_GROUPS)
                return fail(why, whysize, "too many groups in '%.200s'", re);
            (*nposix)++;
            if (re[i + 1] == '?') {
                if (re[i + 2] != ':')
                    return fail(why, whysize,
                                "only (?:...) groups and a leading (?i) are supported in '%.200s'",
                                re);
                putch(&o, '(');
                i += 3;
                continue;
            }
            (*ngroups)++;
            group_map[*ngroups] = (int)*nposix;
            putch(&o, '(');
            i++;
            continue;
        }
        if ((c == '*' || c == '+' || c == '?' || c == '}') && re[i + 1] == '?')
            return fail(why, whysize, "non-greedy repetition is not supported in '%.200s'", re);
        putch(&o, c);
        i++;
    }
    if (o.overflow) return fail(why, whysize, "regex too long: '%.200s'", re);
    return 0;
}

/* ---- rules ---- */

static const struct {
    const char *name;
    mw_relabel_action a;
} actions[] = {
    {"replace", MW_RL_REPLACE},     {"keep", MW_RL_KEEP},         {"drop", MW_RL_DROP},
    {"hashmod", MW_RL_HASHMOD},     {"labelmap", MW_RL_LABELMAP}, {"labeldrop", MW_RL_LABELDROP},
    {"labelkeep", MW_RL_LABELKEEP},
};

int mw_rl_valid_name(const char *s)
{
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (p != s && c >= '0' && c <= '9');
        if (!ok) return 0;
    }
    return 1;
}

static int text_ok(const char *s, const char *what, char *why, size_t whysize)
{
    if (s && strlen(s) >= MW_RL_MAX_TEXT) {
        snprintf(why, whysize, "%s is longer than %d characters", what, MW_RL_MAX_TEXT - 1);
        return -1;
    }
    return 0;
}

static void rule_free(mw_relabel_rule *r)
{
    for (size_t i = 0; i < r->nsource; i++)
        free(r->source_labels[i]);
    free(r->separator);
    free(r->regex);
    free(r->target_label);
    free(r->replacement);
    if (r->re_ok) regfree(&r->re);
}

static int rule_init(mw_relabel_rule *r, const mw_relabel_spec *s, char *why, size_t whysize)
{
    memset(r, 0, sizeof(*r));
    r->action = MW_RL_REPLACE;
    if (s->action) {
        size_t k;
        for (k = 0; k < MW_ARRAY_LEN(actions); k++)
            if (strcmp(s->action, actions[k].name) == 0) break;
        if (k == MW_ARRAY_LEN(actions))
            return fail(why, whysize,
                        "unknown action '%.100s' (replace, keep, drop, hashmod, labelmap, "
                        "labeldrop, labelkeep)",
                        s->action);
        r->action = actions[k].a;
    }
    if (s->nsource > MW_RL_MAX_SOURCES)
        return fail(why, whysize, "more than %s source_labels", "16");
    for (size_t i = 0; i < s->nsource; i++) {
        if (!mw_rl_valid_name(s->source_labels[i]) || strlen(s->source_labels[i]) >= 256)
            return fail(why, whysize, "source_labels: '%.100s' is not a valid label name",
                        s->source_labels[i]);
        r->source_labels[r->nsource++] = mw_xstrdup(s->source_labels[i]);
    }
    if (text_ok(s->separator, "separator", why, whysize) < 0 ||
        text_ok(s->regex, "regex", why, whysize) < 0 ||
        text_ok(s->target_label, "target_label", why, whysize) < 0 ||
        text_ok(s->replacement, "replacement", why, whysize) < 0)
        return -1;
    r->separator = mw_xstrdup(s->separator ? s->separator : ";");
    r->regex = mw_xstrdup(s->regex ? s->regex : "(.*)");
    r->target_label = mw_xstrdup(s->target_label ? s->target_label : "");
    r->replacement = mw_xstrdup(s->replacement ? s->replacement : "$1");
    r->modulus = s->modulus;

    char body[MW_RL_MAX_TEXT * 3], full[MW_RL_MAX_TEXT * 3 + 8];
    int icase;
    char bound[160];
    if (mw_regex_check(r->regex, bound, sizeof(bound)) < 0) {
        snprintf(why, whysize, "regex '%.200s': %s", r->regex, bound);
        return -1;
    }
    if (mw_relabel_translate(r->regex, body, sizeof(body), &icase, r->group_map, &r->ngroups,
                             &r->nposix, why, whysize) < 0)
        return -1;
    if (!body[0]) {
        r->matches_empty_only = 1; /* ^(?:)$; glibc refuses an empty group */
    } else {
        snprintf(full, sizeof(full), "^(%s)$", body);
        int rc = regcomp(&r->re, full, REG_EXTENDED | (icase ? REG_ICASE : 0));
        if (rc != 0) {
            char msg[128];
            regerror(rc, &r->re, msg, sizeof(msg));
            snprintf(why, whysize, "regex '%.200s': %s", r->regex, msg);
            return -1;
        }
        r->re_ok = 1;
    }

    switch (r->action) {
    case MW_RL_REPLACE:
        if (!r->target_label[0])
            return fail(why, whysize, "action %s needs target_label", "replace");
        if (!strchr(r->target_label, '$') && !mw_rl_valid_name(r->target_label))
            return fail(why, whysize, "target_label '%.100s' is not a valid label name",
                        r->target_label);
        break;
    case MW_RL_HASHMOD:
        if (!r->target_label[0])
            return fail(why, whysize, "action %s needs target_label", "hashmod");
        if (!mw_rl_valid_name(r->target_label))
            return fail(why, whysize, "target_label '%.100s' is not a valid label name",
                        r->target_label);
        if (r->modulus == 0) return fail(why, whysize, "action %s needs a modulus > 0", "hashmod");
        break;
    case MW_RL_KEEP:
    case MW_RL_DROP:
        /* Prometheus accepts keep/drop without source_labels: the joined
         * value is then "", which matches "(.*)" - allowed here too. */
        break;
    case MW_RL_LABELDROP:
    case MW_RL_LABELKEEP:
        if (r->nsource || r->target_label[0] || strcmp(r->replacement, "$1") != 0 ||
            strcmp(r->separator, ";") != 0 || s->modulus)
            return fail(why, whysize, "labeldrop and labelkeep take only a regex (%s found more)",
                        "config");
        break;
    case MW_RL_LABELMAP:
        break;
    }
    return 0;
}

int mw_relabel_add(mw_relabel *r, const mw_relabel_spec *spec, char *why, size_t whysize)
{
    if (r->n >= MW_RL_MAX_RULES) return fail(why, whysize, "more than %s relabel rules", "64");
    r->rules = mw_xrealloc(r->rules, (r->n + 1) * sizeof(*r->rules));
    if (rule_init(&r->rules[r->n], spec, why, whysize) < 0) {
        rule_free(&r->rules[r->n]);
        return -1;
    }
    r->n++;
    return 0;
}

void mw_relabel_free(mw_relabel *r)
{
    for (size_t i = 0; i < r->n; i++)
        rule_free(&r->rules[i]);
    free(r->rules);
    r->rules = NULL;
    r->n = 0;
}

/* ---- label sets ---- */

const char *mw_rl_get(const mw_rl_labels *ls, const char *name)
{
    for (size_t i = 0; i < ls->n; i++)
        if (strcmp(ls->l[i].name, name) == 0) return ls->l[i].value;
    return NULL;
}

int mw_rl_set(mw_rl_labels *ls, const char *name, const char *value)
{
    for (size_t i = 0; i < ls->n; i++)
        if (strcmp(ls->l[i].name, name) == 0) {
            ls->l[i].value = value;
            return 0;
        }
    if (ls->n >= MW_RL_MAX_LABELS) return -1;
    ls->l[ls->n++] = (mw_rl_label){name, value};
    return 0;
}

void mw_rl_del(mw_rl_labels *ls, const char *name)
{
    for (size_t i = 0; i < ls->n; i++)
        if (strcmp(ls->l[i].name, name) == 0) {
            memmove(&ls->l[i], &ls->l[i + 1], (ls->n - i - 1) * sizeof(ls->l[0]));
            ls->n--;
            return;
        }
}

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const mw_rl_label *)a)->name, ((const mw_rl_label *)b)->name);
}

void mw_rl_sort(mw_rl_labels *ls)
{
    qsort(ls->l, ls->n, sizeof(ls->l[0]), label_cmp);
}

/* ---- matching and expansion ---- */

typedef struct match {
    regmatch_t m[MW_RL_MAX_GROUPS + 1];
} match;

static int rule_match(const mw_relabel_rule *r, const char *s, match *mt)
{
    if (r->matches_empty_only) {
        mt->m[1].rm_so = 0;
        mt->m[1].rm_eo = 0;
        return s[0] == '\0';
    }
    return regexec(&r->re, s, r->nposix + 1, mt->m, 0) == 0;
}

/* The text of RE2 group k of the match, or NULL when it did not take part. */
static const char *group(const mw_relabel_rule *r, const match *mt, const char *s, long k,
                         size_t *len)
{
    if (k < 0 || (size_t)k > r->ngroups) return NULL;
    int g = k == 0 ? 1 : r->group_map[k];
    if (r->matches_empty_only && k == 0) g = 1;
    regoff_t so = mt->m[g].rm_so, eo = mt->m[g].rm_eo;
    if (so < 0 || eo < so) return NULL;
    *len = (size_t)(eo - so);
    return s + so;
}

/* Go's regexp.Expand: $name or ${name}; a name of digits is a group number;
 * names of no group (and out-of-range numbers) expand to nothing; "$$" is
 * "$"; a malformed reference leaves the "$" as it is. */
static char *expand(const mw_relabel_rule *r, const char *tmpl, const match *mt, const char *s,
                    mw_arena *scratch)
{
    size_t cap = strlen(tmpl) + 1, n = 0;
    for (const char *p = tmpl; *p; p++)
        if (*p == '$') cap += strlen(s); /* each reference adds at most s */
    char *out = mw_arena_alloc(scratch, cap);
    for (const char *p = tmpl; *p;) {
        if (*p != '$') {
            out[n++] = *p++;
            continue;
        }
        if (p[1] == '$') {
            out[n++] = '$';
            p += 2;
            continue;
        }
        const char *name = p + 1, *end;
        int braced = *name == '{';
        if (braced) name++;
        end = name;
        while ((*end >= 'a' && *end <= 'z') || (*end >= 'A' && *end <= 'Z') ||
               (*end >= '0' && *end <= '9') || *end == '_')
            end++;
        if (end == name || (braced && *end != '}')) {
            out[n++] = *p++; /* malformed: the $ itself */
            continue;
        }
        long num = 0;
        int digits = 1;
        for (const char *q = name; q < end; q++) {
            if (*q < '0' || *q > '9') {
                digits = 0;
                break;
            }
            if (num < 100000000) num = num * 10 + (*q - '0');
        }
        if (digits) {
            size_t len;
            const char *g = group(r, mt, s, num, &len);
            if (g) {
                memcpy(out + n, g, len);
                n += len;
            }
        }
        p = braced ? end + 1 : end;
    }
    out[n] = 0;
    return out;
}

uint64_t mw_relabel_hashmod(const char *val, uint64_t modulus)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(val, strlen(val), md, &mdlen, EVP_md5(), NULL) || mdlen != 16) return 0;
    uint64_t v = mw_get_be64(md + 8); /* Prometheus: the digest's last 8 bytes, big-endian */
    return modulus ? v % modulus : 0;
}

static const char *join_sources(const mw_relabel_rule *r, const mw_rl_labels *ls, mw_arena *scratch)
{
    size_t total = 1;
    const char *vals[MW_RL_MAX_SOURCES];
    for (size_t i = 0; i < r->nsource; i++) {
        vals[i] = mw_rl_get(ls, r->source_labels[i]);
        if (!vals[i]) vals[i] = "";
        total += strlen(vals[i]) + strlen(r->separator);
    }
    char *out = mw_arena_alloc(scratch, total), *p = out;
    for (size_t i = 0; i < r->nsource; i++) {
        if (i) p = stpcpy(p, r->separator);
        p = stpcpy(p, vals[i]);
    }
    *p = 0;
    return out;
}

int mw_relabel_apply(const mw_relabel *rl, mw_rl_labels *ls, mw_arena *scratch)
{
    match mt;
    for (size_t k = 0; k < rl->n; k++) {
        const mw_relabel_rule *r = &rl->rules[k];
        switch (r->action) {
        case MW_RL_KEEP:
        case MW_RL_DROP: {
            int m = rule_match(r, join_sources(r, ls, scratch), &mt);
            if (m != (r->action == MW_RL_KEEP)) return 0;
            break;
        }
        case MW_RL_REPLACE: {
            const char *val = join_sources(r, ls, scratch);
            if (!rule_match(r, val, &mt)) break;
            /* As Prometheus: an invalid expanded target or an empty result
             * deletes the label named by the unexpanded target_label. */
            char *target = expand(r, r->target_label, &mt, val, scratch);
            char *res = expand(r, r->replacement, &mt, val, scratch);
            if (!mw_rl_valid_name(target) || !res[0])
                mw_rl_del(ls, r->target_label);
            else if (mw_rl_set(ls, target, res) < 0)
                return 0; /* more labels than a series may have */
            break;
        }
        case MW_RL_HASHMOD: {
            const char *val = join_sources(r, ls, scratch);
            char *num = mw_arena_alloc(scratch, 24);
            snprintf(num, 24, "%llu", (unsigned long long)mw_relabel_hashmod(val, r->modulus));
            if (mw_rl_set(ls, r->target_label, num) < 0) return 0;
            break;
        }
        case MW_RL_LABELMAP: {
            size_t n = ls->n;
            for (size_t i = 0; i < n; i++) {
                const char *name = ls->l[i].name;
                if (!rule_match(r, name, &mt)) continue;
                char *to = expand(r, r->replacement, &mt, name, scratch);
                if (mw_rl_set(ls, to, ls->l[i].value) < 0) return 0;
            }
            break;
        }
        case MW_RL_LABELDROP:
        case MW_RL_LABELKEEP:
            for (size_t i = 0; i < ls->n;) {
                int m = rule_match(r, ls->l[i].name, &mt);
                if (m == (r->action == MW_RL_LABELDROP)) {
                    memmove(&ls->l[i], &ls->l[i + 1], (ls->n - i - 1) * sizeof(ls->l[0]));
                    ls->n--;
                } else {
                    i++;
                }
            }
            break;
        }
    }
    return ls->n > 0;
}
