/* access_policy.c - the --access-policy file through libyaml's document API
 * (access_policy.h). Everything not understood is an error naming the file,
 * line and column: a policy that means less than it says must not load. */
#include "access_policy.h"
#include "../core/util.h"
#include "../core/yaml_text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static int fail(char *err, size_t errsize, const char *name, const yaml_node_t *n, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static int fail(char *err, size_t errsize, const char *name, const yaml_node_t *n, const char *fmt,
                ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(err, errsize, "%s:%zu:%zu: %s", name, n->start_mark.line + 1, n->start_mark.column + 1,
             msg);
    return -1;
}

/* A scalar's text, or NULL when it is not a scalar or holds a NUL. */
static const char *scalar(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE) return NULL;
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length) return NULL;
    return s;
}

static void binding_free(mw_binding *b)
{
    free(b->subject);
    for (size_t i = 0; i < b->nnamespaces; i++)
        free(b->namespaces[i]);
    free(b->namespaces);
}

void mw_access_policy_free(mw_access_policy *p)
{
    for (size_t i = 0; i < p->n; i++)
        binding_free(&p->b[i]);
    free(p->b);
    memset(p, 0, sizeof(*p));
}

static int parse_binding(const char *name, yaml_document_t *doc, yaml_node_t *n, mw_binding *b,
                         char *err, size_t errsize)
{
    memset(b, 0, sizeof(*b));
    b->line = (int)n->start_mark.line + 1;
    if (n->type != YAML_MAPPING_NODE)
        return fail(err, errsize, name, n,
                    "a binding must be a mapping of token_file, user or group, namespaces and "
                    "node_series");
    int have_ns = 0, have_subject = 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = scalar(k);
        if (!key) return fail(err, errsize, name, k, "a key must be a plain string");
        if (strcmp(key, "token_file") == 0 || strcmp(key, "user") == 0 ||
            strcmp(key, "group") == 0) {
            const char *s = scalar(v);
            if (have_subject)
                return fail(err, errsize, name, k,
                            "a binding has exactly one of token_file, user and group");
            if (!s || !*s) return fail(err, errsize, name, v, "%s must be a non-empty string", key);
            have_subject = 1;
            b->kind = key[0] == 't'   ? MW_BIND_TOKEN_FILE
                      : key[0] == 'u' ? MW_BIND_USER
                                      : MW_BIND_GROUP;
            b->subject = mw_xstrdup(s);
        } else if (strcmp(key, "namespaces") == 0) {
            if (have_ns) return fail(err, errsize, name, k, "namespaces given twice");
            have_ns = 1;
            if (v->type != YAML_SEQUENCE_NODE)
                return fail(err, errsize, name, v, "namespaces must be a list of names");
            size_t cnt = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
            if (cnt > MW_POLICY_MAX_NAMESPACES)
                return fail(err, errsize, name, v, "more than %d namespaces",
                            MW_POLICY_MAX_NAMESPACES);
            b->namespaces = mw_xcalloc(cnt ? cnt : 1, sizeof(char *));
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = yaml_document_get_node(doc, *it);
                const char *s = scalar(e);
                if (!s || !*s)
                    return fail(err, errsize, name, e, "a namespace must be a non-empty string");
                b->namespaces[b->nnamespaces++] = mw_xstrdup(s);
            }
        } else if (strcmp(key, "node_series") == 0) {
            const char *s = scalar(v);
            if (s && strcmp(s, "visible") == 0)
                b->node_series = 1;
            else if (s && strcmp(s, "hidden") == 0)
                b->node_series = 0;
            else
                return fail(err, errsize, name, v, "node_series must be visible or hidden");
        } else {
            return fail(err, errsize, name, k,
                        "unknown key '%.64s' (token_file, user, group, namespaces, node_series)",
                        key);
        }
    }
    if (!have_subject)
        return fail(err, errsize, name, n, "a binding needs one of token_file, user and group");
    if (!have_ns) return fail(err, errsize, name, n, "a binding needs namespaces");
    if (b->nnamespaces == 0 && !b->node_series)
        return fail(err, errsize, name, n,
                    "namespaces is empty and node_series hidden: this binding would see nothing");
    return 0;
}

static int parse_doc(const char *name, yaml_document_t *doc, mw_access_policy *out, char *err,
                     size_t errsize)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root) {
        snprintf(err, errsize, "%s: empty policy (it needs bindings)", name);
        return -1;
    }
    if (root->type != YAML_MAPPING_NODE)
        return fail(err, errsize, name, root, "the policy must be a mapping with bindings");
    yaml_node_t *list = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        const char *key = scalar(k);
        if (!key || strcmp(key, "bindings") != 0)
            return fail(err, errsize, name, k, "unknown key '%.64s' (the policy has bindings)",
                        key ? key : "");
        list = yaml_document_get_node(doc, p->value);
    }
    if (!list) return fail(err, errsize, name, root, "the policy has no bindings");
    if (list->type != YAML_SEQUENCE_NODE)
        return fail(err, errsize, name, list, "bindings must be a list");
    size_t cnt = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
    if (cnt == 0) /* binds no one: a mistake, not a policy that hides everything */
        return fail(err, errsize, name, list, "bindings is empty (the policy binds no one)");
    if (cnt > MW_POLICY_MAX_BINDINGS)
        return fail(err, errsize, name, list, "more than %d bindings", MW_POLICY_MAX_BINDINGS);
    mw_access_policy p = {mw_xcalloc(cnt ? cnt : 1, sizeof(mw_binding)), 0};
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top;
         it++) {
        int rc =
            parse_binding(name, doc, yaml_document_get_node(doc, *it), &p.b[p.n], err, errsize);
        p.n++;
        if (rc < 0) {
            mw_access_policy_free(&p);
            return -1;
        }
    }
    *out = p;
    return 0;
}

int mw_access_policy_parse(const char *name, const char *text, size_t len, mw_access_policy *out,
                           char *err, size_t errsize)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (mw_yaml_begin(&parser, &doc, name, text, len, err, errsize) < 0) return -1;
    mw_access_policy tmp = {0};
    int rc = parse_doc(name, &doc, &tmp, err, errsize);
    yaml_document_delete(&doc);
    /* One document: a second one ("---") would be ignored without a word. */
    if (rc == 0) {
        if (mw_yaml_next(&parser, &doc, name, err, errsize) < 0) {
            rc = -1;
        } else {
            yaml_node_t *second = yaml_document_get_root_node(&doc);
            if (second)
                rc = fail(err, errsize, name, second,
                          "a second YAML document; the file must hold one mapping");
            yaml_document_delete(&doc);
        }
        if (rc < 0)
            mw_access_policy_free(&tmp);
        else
            *out = tmp;
    }
    yaml_parser_delete(&parser);
    return rc;
}

int mw_access_policy_load(const char *path, mw_access_policy *out, char *err, size_t errsize)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *text = mw_xmalloc(MW_POLICY_FILE_MAX);
    size_t len = fread(text, 1, MW_POLICY_FILE_MAX, f);
    int bad = ferror(f) || len == MW_POLICY_FILE_MAX;
    fclose(f);
    int rc = -1;
    if (bad)
        snprintf(err, errsize, "%s: cannot be read, or larger than %d bytes", path,
                 MW_POLICY_FILE_MAX - 1);
    else
        rc = mw_access_policy_parse(path, text, len, out, err, errsize);
    free(text);
    return rc;
}
