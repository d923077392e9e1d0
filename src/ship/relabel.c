/* relabel.c - write_relabel_configs with Prometheus's semantics, see relabel.h. */
#include "relabel.h"
#include "../core/bytes.h"
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
    mw_regex_free(r->re);
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

    char re_why[256];
    r->re = mw_regex_compile(r->regex, re_why, sizeof(re_why));
    if (!r->re) {
        snprintf(why, whysize, "regex '%.200s': %s", r->regex, re_why);
        return -1;
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

int mw_relabel_copy(mw_relabel *dst, const mw_relabel *src, char *why, size_t whysize)
{
    memset(dst, 0, sizeof(*dst));
    for (size_t i = 0; i < src->n; i++) {
        const mw_relabel_rule *r = &src->rules[i];
        const char *action = NULL;
        for (size_t k = 0; k < MW_ARRAY_LEN(actions); k++)
            if (actions[k].a == r->action) action = actions[k].name;
        mw_relabel_spec sp = {.action = action,
                              .source_labels = (const char *const *)r->source_labels,
                              .nsource = r->nsource,
                              .separator = r->separator,
                              .regex = r->regex,
                              .target_label = r->target_label,
                              .replacement = r->replacement,
                              .modulus = r->modulus};
        if (mw_relabel_add(dst, &sp, why, whysize) < 0) {
            mw_relabel_free(dst);
            return -1;
        }
    }
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

/* The groups of a match of s, in scratch; NULL when s does not match. */
static mw_regex_span *rule_capture(const mw_relabel_rule *r, const char *s, mw_arena *scratch,
                                   size_t *nspans)
{
    *nspans = mw_regex_ngroups(r->re) + 1;
    mw_regex_span *spans = mw_arena_alloc(scratch, *nspans * sizeof(*spans));
    return mw_regex_capture(r->re, s, spans, *nspans) ? spans : NULL;
}

/* tmpl expanded with the groups of a match of s (Go's regexp.Expand). */
static char *expand(const mw_relabel_rule *r, const char *tmpl, const mw_regex_span *spans,
                    size_t nspans, const char *s, mw_arena *scratch)
{
    size_t n = mw_regex_expand(r->re, tmpl, s, spans, nspans, NULL, 0);
    char *out = mw_arena_alloc(scratch, n + 1);
    mw_regex_expand(r->re, tmpl, s, spans, nspans, out, n + 1);
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
    for (size_t k = 0; k < rl->n; k++) {
        const mw_relabel_rule *r = &rl->rules[k];
        switch (r->action) {
        case MW_RL_KEEP:
        case MW_RL_DROP: {
            int m = mw_regex_match(r->re, join_sources(r, ls, scratch));
            if (m != (r->action == MW_RL_KEEP)) return 0;
            break;
        }
        case MW_RL_REPLACE: {
            const char *val = join_sources(r, ls, scratch);
            size_t nspans;
            const mw_regex_span *spans = rule_capture(r, val, scratch, &nspans);
            if (!spans) break;
            /* As Prometheus: an invalid expanded target or an empty result
             * deletes the label named by the unexpanded target_label. */
            char *target = expand(r, r->target_label, spans, nspans, val, scratch);
            char *res = expand(r, r->replacement, spans, nspans, val, scratch);
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
                size_t nspans;
                const mw_regex_span *spans = rule_capture(r, name, scratch, &nspans);
                if (!spans) continue;
                char *to = expand(r, r->replacement, spans, nspans, name, scratch);
                if (mw_rl_set(ls, to, ls->l[i].value) < 0) return 0;
            }
            break;
        }
        case MW_RL_LABELDROP:
        case MW_RL_LABELKEEP:
            for (size_t i = 0; i < ls->n;) {
                int m = mw_regex_match(r->re, ls->l[i].name);
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
