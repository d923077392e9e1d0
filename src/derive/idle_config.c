/* idle_config.c - the `idle:` section of the config file: per-namespace
 * overrides of the idle-session rule (threshold, window, busy period).
 *
 *   idle:
 *     namespaces:
 *       research: {threshold: 2, window: 2h, busy_period: 5m}
 *       notebooks: {window: 15m}
 *
 * A setting left out inherits the flag (--idle-threshold, --idle-window,
 * --idle-busy-period). Errors name the file, line and column. */
#include "../core/config.h"
#include "../core/units.h"
#include "../core/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static int fail(char *err, size_t errsize, const char *file, const yaml_node_t *n, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

static int fail(char *err, size_t errsize, const char *file, const yaml_node_t *n, const char *fmt,
                ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(err, errsize, "%s:%zu:%zu: idle: %s", file, n->start_mark.line + 1,
             n->start_mark.column + 1, msg);
    return -1;
}

/* The scalar's text, or NULL for a non-scalar or one holding a NUL. */
static const char *text_of(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE) return NULL;
    const char *t = (const char *)n->data.scalar.value;
    return strlen(t) == n->data.scalar.length ? t : NULL;
}

static int parse_namespace(mw_config *c, const char *file, yaml_document_t *doc, const char *ns,
                           yaml_node_t *k, yaml_node_t *v, char *err, size_t errsize)
{
    if (strlen(ns) == 0 || strlen(ns) >= sizeof(c->idle_overrides[0].ns))
        return fail(err, errsize, file, k, "namespace name must have 1 to 63 characters");
    for (size_t i = 0; i < c->nidle_overrides; i++)
        if (strcmp(c->idle_overrides[i].ns, ns) == 0)
            return fail(err, errsize, file, k, "namespace '%s' is given twice", ns);
    if (c->nidle_overrides >= MW_ARRAY_LEN(c->idle_overrides))
        return fail(err, errsize, file, k, "more than %zu namespaces",
                    MW_ARRAY_LEN(c->idle_overrides));
    if (v->type != YAML_MAPPING_NODE)
        return fail(err, errsize, file, v,
                    "%s: expected a mapping of threshold, window, busy_period", ns);
    struct mw_idle_override o = {.threshold = -1};
    mw_strlcpy(o.ns, ns, sizeof(o.ns));
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *kk = yaml_document_get_node(doc, p->key);
        yaml_node_t *vv = yaml_document_get_node(doc, p->value);
        const char *key = text_of(kk), *val = text_of(vv);
        if (!key) return fail(err, errsize, file, kk ? kk : v, "%s: keys must be plain names", ns);
        if (!val)
            return fail(err, errsize, file, vv ? vv : kk, "%s.%s: expected a single value", ns,
                        key);
        if (strcmp(key, "threshold") == 0) {
            char *end;
            errno = 0;
            double d = strtod(val, &end);
            if (!*val || *end || errno || !(d >= 0 && d <= 100))
                return fail(err, errsize, file, vv,
                            "%s.threshold: must be a percentage from 0 to 100, got '%s'", ns, val);
            o.threshold = d;
        } else if (strcmp(key, "window") == 0 || strcmp(key, "busy_period") == 0) {
            int64_t ms;
            if (mw_parse_duration_ms(val, &ms) < 0 || ms <= 0)
                return fail(err, errsize, file, vv,
                            "%s.%s: invalid duration '%s' (examples: 30m, 2h, 90s)", ns, key, val);
            if (key[0] == 'w')
                o.window_ms = ms;
            else
                o.busy_period_ms = ms;
        } else {
            return fail(err, errsize, file, kk,
                        "%s: unknown key '%s' (threshold, window, busy_period)", ns, key);
        }
    }
    c->idle_overrides[c->nidle_overrides++] = o;
    return 0;
}

int mw_idle_config_section(mw_config *c, const char *file, void *docp, void *nodep, char *err,
                           size_t errsize)
{
    yaml_document_t *doc = docp;
    yaml_node_t *node = nodep;
    c->nidle_overrides = 0;
    if (node->type != YAML_MAPPING_NODE)
        return fail(err, errsize, file, node, "expected a mapping (namespaces: ...)");
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = text_of(k);
        if (!key || !v) return fail(err, errsize, file, k ? k : node, "keys must be plain names");
        if (strcmp(key, "namespaces") != 0)
            return fail(err, errsize, file, k, "unknown key '%s' (namespaces)", key);
        if (v->type != YAML_MAPPING_NODE)
            return fail(err, errsize, file, v, "namespaces: expected a mapping NAMESPACE: {...}");
        for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top;
             q++) {
            yaml_node_t *nk = yaml_document_get_node(doc, q->key);
            yaml_node_t *nv = yaml_document_get_node(doc, q->value);
            const char *ns = text_of(nk);
            if (!ns || !nv)
                return fail(err, errsize, file, nk ? nk : v, "namespace names must be plain");
            if (parse_namespace(c, file, doc, ns, nk, nv, err, errsize) < 0) return -1;
        }
    }
    return 0;
}
