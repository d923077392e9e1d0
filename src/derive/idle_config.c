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
#include "idle_config.h"
#include "../core/config.h"
#include "../core/units.h"
#include "../core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static int parse_namespace(mw_idle_settings *c, const char *file, yaml_document_t *doc,
                           const char *ns, yaml_node_t *k, yaml_node_t *v, char *err,
                           size_t errsize)
{
    if (strlen(ns) == 0 || strlen(ns) >= sizeof(c->overrides[0].ns))
        return mw_section_fail(err, errsize, file, "idle", k,
                               "namespace name must have 1 to 63 characters");
    for (size_t i = 0; i < c->noverrides; i++)
        if (strcmp(c->overrides[i].ns, ns) == 0)
            return mw_section_fail(err, errsize, file, "idle", k, "namespace '%s' is given twice",
                                   ns);
    if (c->noverrides >= MW_ARRAY_LEN(c->overrides))
        return mw_section_fail(err, errsize, file, "idle", k, "more than %zu namespaces",
                               MW_ARRAY_LEN(c->overrides));
    if (v->type != YAML_MAPPING_NODE)
        return mw_section_fail(err, errsize, file, "idle", v,
                               "%s: expected a mapping of threshold, window, busy_period", ns);
    struct mw_idle_override o = {.threshold = -1};
    mw_strlcpy(o.ns, ns, sizeof(o.ns));
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *kk = yaml_document_get_node(doc, p->key);
        yaml_node_t *vv = yaml_document_get_node(doc, p->value);
        const char *key = mw_section_text(kk), *val = mw_section_text(vv);
        if (!key)
            return mw_section_fail(err, errsize, file, "idle", kk ? kk : v,
                                   "%s: keys must be plain names", ns);
        if (!val)
            return mw_section_fail(err, errsize, file, "idle", vv ? vv : kk,
                                   "%s.%s: expected a single value", ns, key);
        if (strcmp(key, "threshold") == 0) {
            char *end;
            errno = 0;
            double d = strtod(val, &end);
            if (!*val || *end || errno || !(d >= 0 && d <= 100))
                return mw_section_fail(err, errsize, file, "idle", vv,
                                       "%s.threshold: must be a percentage from 0 to 100, got '%s'",
                                       ns, val);
            o.threshold = d;
        } else if (strcmp(key, "window") == 0 || strcmp(key, "busy_period") == 0) {
            int64_t ms;
            if (mw_parse_duration_ms(val, &ms) < 0 || ms <= 0)
                return mw_section_fail(err, errsize, file, "idle", vv,
                                       "%s.%s: invalid duration '%s' (examples: 30m, 2h, 90s)", ns,
                                       key, val);
            if (key[0] == 'w')
                o.window_ms = ms;
            else
                o.busy_period_ms = ms;
        } else {
            return mw_section_fail(err, errsize, file, "idle", kk,
                                   "%s: unknown key '%s' (threshold, window, busy_period)", ns,
                                   key);
        }
    }
    c->overrides[c->noverrides++] = o;
    return 0;
}

static int idle_section(void *settings, const char *file, void *docp, void *nodep, char *err,
                        size_t errsize)
{
    mw_idle_settings *c = settings;
    yaml_document_t *doc = docp;
    yaml_node_t *node = nodep;
    c->noverrides = 0;
    if (node->type != YAML_MAPPING_NODE)
        return mw_section_fail(err, errsize, file, "idle", node,
                               "expected a mapping (namespaces: ...)");
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = mw_section_text(k);
        if (!key || !v)
            return mw_section_fail(err, errsize, file, "idle", k ? k : node,
                                   "keys must be plain names");
        if (strcmp(key, "namespaces") != 0)
            return mw_section_fail(err, errsize, file, "idle", k, "unknown key '%s' (namespaces)",
                                   key);
        if (v->type != YAML_MAPPING_NODE)
            return mw_section_fail(err, errsize, file, "idle", v,
                                   "namespaces: expected a mapping NAMESPACE: {...}");
        for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top;
             q++) {
            yaml_node_t *nk = yaml_document_get_node(doc, q->key);
            yaml_node_t *nv = yaml_document_get_node(doc, q->value);
            const char *ns = mw_section_text(nk);
            if (!ns || !nv)
                return mw_section_fail(err, errsize, file, "idle", nk ? nk : v,
                                       "namespace names must be plain");
            if (parse_namespace(c, file, doc, ns, nk, nv, err, errsize) < 0) return -1;
        }
    }
    return 0;
}

static int check_percent(const char *v, char *why, size_t n)
{
    return mw_check_range(v, 0, 100, 0, "a percentage from 0 to 100", why, n);
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_idle_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option idle_rows[] = {
    OPT("idle-threshold", MW_OPT_NUMBER, threshold, "5", check_percent, "GPU utilization (percent) below which a held GPU counts as idle"),
    OPT("idle-window", MW_OPT_DURATION, window_ms, "30m", NULL, "How long a held GPU must stay below --idle-threshold before it is an idle session"),
    OPT("idle-busy-period", MW_OPT_DURATION, busy_period_ms, "1m", NULL, "How long an idle session must stay above the threshold to end (hysteresis)"),
    MW_OPT_SECTION_OF("idle", "none", idle_section, "Per-namespace idle overrides: idle: {namespaces: {NS: {threshold: 2, window: 2h, busy_period: 5m}}}"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_idle_options = MW_OPTION_GROUP(
    "idle GPU sessions", "src/derive/idle_config.c", mw_idle_settings, idle_rows, NULL);
