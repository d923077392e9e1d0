/* rulefile.c - parser of Prometheus rule files (rulefile.h) with libyaml:
 * unknown keys, bad durations, bad names, PromQL and template errors and
 * repeated group names are refused at load, each with the file, line and
 * column of the value at fault, so that a file mlwatch loads also loads in
 * Prometheus (and `promtool check rules` accepts it). */
#include "rulefile.h"
#include "../core/util.h"
#include "../core/yaml_text.h"

#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

typedef struct pctx {
    const char *file;
    yaml_document_t *doc;
    char *err;
    size_t errsize;
    size_t nrules; /* in the whole set, bounded */
} pctx;

static int fail(pctx *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(pctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++) /* one line */
        if (*p == '\n' || *p == '\r') *p = ' ';
    snprintf(c->err, c->errsize, "%s:%zu:%zu: %s", c->file, n ? n->start_mark.line + 1 : 1,
             n ? n->start_mark.column + 1 : 1, msg);
    return -1;
}

static const char *scalar(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE) return NULL;
    if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length) return NULL;
    return (const char *)n->data.scalar.value;
}

static int valid_name(const char *s, int colon)
{
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (colon && c == ':') || (p > s && c >= '0' && c <= '9');
        if (!ok) return 0;
    }
    return 1;
}

int mw_rules_valid_label_name(const char *s)
{
    return valid_name(s, 0);
}

int mw_rules_valid_metric_name(const char *s)
{
    return valid_name(s, 1);
}

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 6 ? 1 : (*p >> 4) == 14 ? 2 : (*p >> 3) == 30 ? 3 : -1;
        if (n < 0) return 0;
        p++;
        for (int i = 0; i < n; i++, p++)
            if ((*p & 0xc0) != 0x80) return 0;
    }
    return 1;
}

static int get_duration(pctx *c, const yaml_node_t *v, const char *key, int64_t *ms)
{
    const char *s = scalar(v);
    if (!s || pq_parse_duration(s, ms) < 0 || *ms < 0)
        return fail(c, v, "%s: not a valid duration string: \"%s\"", key, s ? s : "");
    return 0;
}

/* A mapping of name: value (labels, annotations), values parsed as
 * templates when tpls is set. */
static int get_map(pctx *c, const yaml_node_t *v, const char *what, int names_are_labels,
                   mw_tpl_kv **out, mw_tpl ***tpls, size_t *n)
{
    if (v->type != YAML_MAPPING_NODE)
        return fail(c, v, "%s: expected a mapping of name: value", what);
    size_t cap = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    *out = mw_xcalloc(cap ? cap : 1, sizeof(**out));
    if (tpls) *tpls = mw_xcalloc(cap ? cap : 1, sizeof(**tpls));
    *n = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(c->doc, p->value);
        const char *ks = scalar(k), *vs = scalar(val);
        if (!ks || (names_are_labels && !mw_rules_valid_label_name(ks)))
            return fail(c, k, "invalid %s name: %s", names_are_labels ? "label" : "annotation",
                        ks ? ks : "(not a string)");
        if (!names_are_labels && !*ks) return fail(c, k, "invalid annotation name: ");
        if (!vs) return fail(c, val, "%s %s: the value must be a string", what, ks);
        if (!valid_utf8(vs)) return fail(c, val, "invalid %s value: not UTF-8", what);
        for (size_t i = 0; i < *n; i++)
            if (strcmp((*out)[i].name, ks) == 0) return fail(c, k, "%s %s: repeated", what, ks);
        if (tpls) {
            char why[512];
            mw_tpl *t = mw_tpl_parse(vs, why, sizeof(why));
            if (!t) return fail(c, val, "%s %s: template: %s", what, ks, why);
            (*tpls)[*n] = t;
        }
        (*out)[*n].name = mw_xstrdup(ks);
        (*out)[*n].value = mw_xstrdup(vs);
        (*n)++;
    }
    return 0;
}

static void rule_free(mw_rule_def *r)
{
    free(r->name);
    free(r->expr_text);
    free(r->query);
    pq_node_free(r->expr);
    for (size_t i = 0; i < r->nlabels; i++) {
        free((char *)r->labels[i].name);
        free((char *)r->labels[i].value);
        if (r->label_tpls) mw_tpl_free(r->label_tpls[i]);
    }
    free(r->labels);
    free(r->label_tpls);
    for (size_t i = 0; i < r->nannotations; i++) {
        free((char *)r->annotations[i].name);
        free((char *)r->annotations[i].value);
        if (r->annotation_tpls) mw_tpl_free(r->annotation_tpls[i]);
    }
    free(r->annotations);
    free(r->annotation_tpls);
}

static int parse_rule(pctx *c, yaml_node_t *n, mw_rule_def *r)
{
    memset(r, 0, sizeof(*r));
    if (n->type != YAML_MAPPING_NODE) return fail(c, n, "a rule must be a mapping");
    yaml_node_t *record = NULL, *alert = NULL, *expr = NULL, *forn = NULL, *keep = NULL,
                *labels = NULL, *annotations = NULL;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        const char *ks = scalar(k);
        yaml_node_t **slot = !ks                                  ? NULL
                             : strcmp(ks, "record") == 0          ? &record
                             : strcmp(ks, "alert") == 0           ? &alert
                             : strcmp(ks, "expr") == 0            ? &expr
                             : strcmp(ks, "for") == 0             ? &forn
                             : strcmp(ks, "keep_firing_for") == 0 ? &keep
                             : strcmp(ks, "labels") == 0          ? &labels
                             : strcmp(ks, "annotations") == 0     ? &annotations
                                                                  : NULL;
        if (!slot) return fail(c, k, "field %s not found in type rulefmt.Rule", ks ? ks : "?");
        if (*slot) return fail(c, k, "field %s already set", ks);
        *slot = v;
    }
    if (record && alert) return fail(c, n, "only one of 'record' and 'alert' must be set");
    if (!record && !alert) return fail(c, n, "one of 'record' or 'alert' must be set");
    if (!expr) return fail(c, n, "field 'expr' must be set in rule");
    r->alert = alert != NULL;
    const char *name = scalar(record ? record : alert);
    if (record && !mw_rules_valid_metric_name(name))
        return fail(c, record, "invalid recording rule name: %s", name ? name : "");
    if (alert && (!name || !*name || !valid_utf8(name)))
        return fail(c, alert, "invalid alert name: %s", name ? name : "");
    if (record && annotations)
        return fail(c, annotations, "invalid field 'annotations' in recording rule");
    if (record && forn) return fail(c, forn, "invalid field 'for' in recording rule");
    if (record && keep) return fail(c, keep, "invalid field 'keep_firing_for' in recording rule");
    r->name = mw_xstrdup(name);
    const char *e = scalar(expr);
    if (!e || !*e) return fail(c, expr, "field 'expr' must be set in rule");
    char why[1024];
    r->expr = pq_parse(e, why, sizeof(why));
    if (!r->expr) return fail(c, expr, "could not parse expression: %s", why);
    if (r->expr->type != PQ_T_VECTOR && r->expr->type != PQ_T_SCALAR)
        return fail(c, expr, "invalid expression type \"%s\" for %s rule, must be vector or scalar",
                    r->expr->type == PQ_T_MATRIX ? "range vector" : "string",
                    record ? "recording" : "alerting");
    r->expr_text = mw_xstrdup(e);
    r->query = pq_format(r->expr);
    if (forn && get_duration(c, forn, "for", &r->for_ms) < 0) return -1;
    if (keep && get_duration(c, keep, "keep_firing_for", &r->keep_firing_for_ms) < 0) return -1;
    if (labels && get_map(c, labels, "label", 1, &r->labels, r->alert ? &r->label_tpls : NULL,
                          &r->nlabels) < 0)
        return -1;
    for (size_t i = 0; i < r->nlabels; i++)
        if (strcmp(r->labels[i].name, "__name__") == 0 && record)
            return fail(c, labels, "invalid label name: __name__");
    if (annotations && get_map(c, annotations, "annotation", 0, &r->annotations,
                               &r->annotation_tpls, &r->nannotations) < 0)
        return -1;
    return 0;
}

static void group_free(mw_rule_group_def *g)
{
    for (size_t i = 0; i < g->nrules; i++)
        rule_free(&g->rules[i]);
    free(g->rules);
    free(g->name);
    free(g->file);
}

static int parse_group(pctx *c, yaml_node_t *n, mw_rule_group_def *g)
{
    memset(g, 0, sizeof(*g));
    g->file = mw_xstrdup(c->file);
    if (n->type != YAML_MAPPING_NODE) return fail(c, n, "a group must be a mapping");
    yaml_node_t *rules = NULL, *name = NULL;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        const char *ks = scalar(k);
        if (!ks) return fail(c, k, "keys must be strings");
        if (strcmp(ks, "name") == 0) {
            name = v;
        } else if (strcmp(ks, "rules") == 0) {
            rules = v;
        } else if (strcmp(ks, "interval") == 0) {
            if (get_duration(c, v, "interval", &g->interval_ms) < 0) return -1;
            if (g->interval_ms == 0) return fail(c, v, "interval: must be greater than 0");
        } else if (strcmp(ks, "query_offset") == 0) {
            if (get_duration(c, v, "query_offset", &g->query_offset_ms) < 0) return -1;
        } else if (strcmp(ks, "limit") == 0) {
            const char *s = scalar(v);
            char *end;
            errno = 0;
            long long l = s ? strtoll(s, &end, 10) : -1;
            if (!s || *end || errno || l < 0)
                return fail(c, v, "limit: not a whole number: \"%s\"", s ? s : "");
            g->limit = l;
        } else {
            return fail(c, k, "field %s not found in type rulefmt.RuleGroup", ks);
        }
    }
    const char *ns = scalar(name);
    if (!ns || !*ns) return fail(c, name ? name : n, "Groupname must not be empty");
    g->name = mw_xstrdup(ns);
    if (!rules) return 0; /* a group without rules is valid */
    if (rules->type != YAML_SEQUENCE_NODE) return fail(c, rules, "rules: expected a list of rules");
    size_t cap = (size_t)(rules->data.sequence.items.top - rules->data.sequence.items.start);
    g->rules = mw_xcalloc(cap ? cap : 1, sizeof(*g->rules));
    for (yaml_node_item_t *it = rules->data.sequence.items.start;
         it < rules->data.sequence.items.top; it++) {
        if (++c->nrules > MW_RULES_MAX_RULES)
            return fail(c, rules, "more than %d rules", MW_RULES_MAX_RULES);
        int rc = parse_rule(c, yaml_document_get_node(c->doc, *it), &g->rules[g->nrules]);
        g->nrules++;
        if (rc < 0) return -1;
    }
    return 0;
}

int mw_rule_set_parse(mw_rule_set *set, const char *name, const char *text, size_t len, char *err,
                      size_t errsize)
{
    if (len > MW_RULE_FILE_MAX_BYTES) {
        snprintf(err, errsize, "%s:1:1: larger than %u bytes", name, MW_RULE_FILE_MAX_BYTES);
        return -1;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (mw_yaml_begin(&parser, &doc, name, text, len, err, errsize) < 0) return -1;
    pctx c = {.file = name, .doc = &doc, .err = err, .errsize = errsize};
    for (size_t i = 0; i < set->ngroups; i++)
        c.nrules += set->groups[i].nrules;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    mw_rule_group_def *groups = NULL;
    size_t n = 0;
    int rc = 0;
    if (root) { /* an empty file has no groups */
        yaml_node_t *list = NULL;
        if (root->type != YAML_MAPPING_NODE) {
            rc = fail(&c, root, "the top level must be a mapping with 'groups'");
        } else {
            for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
                 p < root->data.mapping.pairs.top && rc == 0; p++) {
                yaml_node_t *k = yaml_document_get_node(&doc, p->key);
                const char *ks = scalar(k);
                if (ks && strcmp(ks, "groups") == 0)
                    list = yaml_document_get_node(&doc, p->value);
                else
                    rc =
                        fail(&c, k, "field %s not found in type rulefmt.RuleGroups", ks ? ks : "?");
            }
        }
        if (rc == 0 && list && list->type != YAML_SEQUENCE_NODE &&
            !(list->type == YAML_SCALAR_NODE && list->data.scalar.length == 0))
            rc = fail(&c, list, "groups: expected a list of groups");
        if (rc == 0 && list && list->type == YAML_SEQUENCE_NODE) {
            size_t cap = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
            if (set->ngroups + cap > MW_RULES_MAX_GROUPS)
                rc = fail(&c, list, "more than %d groups", MW_RULES_MAX_GROUPS);
            groups = mw_xcalloc(cap ? cap : 1, sizeof(*groups));
            for (yaml_node_item_t *it = list->data.sequence.items.start;
                 rc == 0 && it < list->data.sequence.items.top; it++) {
                yaml_node_t *gn = yaml_document_get_node(&doc, *it);
                rc = parse_group(&c, gn, &groups[n]);
                n++;
                for (size_t j = 0; rc == 0 && j + 1 < n; j++)
                    if (strcmp(groups[j].name, groups[n - 1].name) == 0)
                        rc = fail(&c, gn, "groupname: \"%s\" is repeated in the same file",
                                  groups[n - 1].name);
            }
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            group_free(&groups[i]);
        free(groups);
        return -1;
    }
    set->groups = mw_xrealloc(set->groups, (set->ngroups + n + 1) * sizeof(*set->groups));
    if (n) memcpy(set->groups + set->ngroups, groups, n * sizeof(*groups));
    set->ngroups += n;
    free(groups);
    return 0;
}

static int load_one(mw_rule_set *set, const char *path, char *err, size_t errsize)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsize, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    char *buf = mw_xmalloc(MW_RULE_FILE_MAX_BYTES + 1);
    size_t len = fread(buf, 1, MW_RULE_FILE_MAX_BYTES + 1, f);
    int rd_err = ferror(f);
    fclose(f);
    int rc;
    if (rd_err) {
        snprintf(err, errsize, "%s: cannot read: %s", path, strerror(EIO));
        rc = -1;
    } else {
        rc = mw_rule_set_parse(set, path, buf, len, err, errsize);
    }
    free(buf);
    return rc;
}

int mw_rule_set_load_files(mw_rule_set *set, const char *patterns, char *err, size_t errsize)
{
    const char *p = patterns;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char pat[4096];
        if (n >= sizeof(pat)) n = sizeof(pat) - 1;
        memcpy(pat, p, n);
        pat[n] = '\0';
        p += n + (nl ? 1 : 0);
        if (!pat[0]) continue;
        glob_t g;
        int grc = glob(pat, GLOB_ERR, NULL, &g);
        if (grc == GLOB_NOMATCH) {
            globfree(&g);
            if (strpbrk(pat, "*?[")) continue; /* a glob may match nothing */
            snprintf(err, errsize, "%s: cannot read: %s", pat, strerror(ENOENT));
            return -1;
        }
        if (grc != 0) {
            globfree(&g);
            snprintf(err, errsize, "%s: cannot list the files it names", pat);
            return -1;
        }
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (stat(g.gl_pathv[i], &st) == 0 && S_ISDIR(st.st_mode)) continue;
            if (load_one(set, g.gl_pathv[i], err, errsize) < 0) {
                globfree(&g);
                return -1;
            }
        }
        globfree(&g);
    }
    return 0;
}

void mw_rule_set_free(mw_rule_set *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->ngroups; i++)
        group_free(&set->groups[i]);
    free(set->groups);
    set->groups = NULL;
    set->ngroups = 0;
}
