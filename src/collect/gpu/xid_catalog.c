/* xid_catalog.c - the XID catalog (xid.h): data/xid-catalog.yaml, embedded
 * at build time (CMakeLists.txt writes it into xid_catalog_data.c), parsed
 * at start, and an operator's --gpu-xid-catalog file merged over it. One
 * parser for both, through libyaml's document API; everything not
 * understood is an error naming file:line:col, so a catalog that means
 * less than it says does not load. */
#include "xid.h"
#include "../../core/units.h"
#include "../../core/util.h"
#include "../../core/yaml_text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static const char *const class_names[MW_XID_CLASS_COUNT] = {
    "unknown", "application", "driver", "hardware", "memory", "bus", "nvlink", "thermal"};
static const char *const state_names[MW_HEALTH_NSTATES] = {"healthy", "degraded", "unknown",
                                                           "unhealthy"};
static const char *const action_names[MW_ACTION_COUNT] = {
    "none", "restart_application", "reset_gpu", "reboot_node", "drain_and_contact_support"};

const char *mw_xid_class_name(int c)
{
    return c >= 0 && c < MW_XID_CLASS_COUNT ? class_names[c] : "unknown";
}
const char *mw_health_state_name(int s)
{
    return s >= 0 && s < MW_HEALTH_NSTATES ? state_names[s] : "unknown";
}
const char *mw_health_action_name(int a)
{
    return a >= 0 && a < MW_ACTION_COUNT ? action_names[a] : "none";
}

typedef struct cat_parse {
    yaml_document_t *doc;
    const char *name;
    char *err;
    size_t errsize;
} cat_parse;

static int fail(cat_parse *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(cat_parse *c, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!n) /* a node libyaml did not give: no position */
        snprintf(c->err, c->errsize, "%s: %s", c->name, msg);
    else
        snprintf(c->err, c->errsize, "%s:%zu:%zu: %s", c->name, n->start_mark.line + 1,
                 n->start_mark.column + 1, msg);
    return -1;
}

static const char *scalar(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE) return NULL;
    const char *s = (const char *)n->data.scalar.value;
    return strlen(s) == n->data.scalar.length ? s : NULL;
}

static int word(cat_parse *c, const yaml_node_t *n, const char *what, const char *const *names,
                int count, uint8_t *out)
{
    const char *s = scalar(n);
    for (int k = 0; s && k < count; k++)
        if (strcmp(s, names[k]) == 0) {
            *out = (uint8_t)k;
            return 0;
        }
    char list[200] = "";
    for (int k = 0; k < count; k++) {
        if (names == state_names && k == MW_HEALTH_UNKNOWN) continue;
        size_t used = strlen(list);
        snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", names[k]);
    }
    return fail(c, n, "%s must be one of %s", what, list);
}

static int number(cat_parse *c, const yaml_node_t *n, const char *what, double max, double *out)
{
    const char *s = scalar(n);
    char *end = NULL;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || !(v >= 0) || v > max)
        return fail(c, n, "%s must be a number from 0 to %.0f", what, max);
    *out = v;
    return 0;
}

static int duration(cat_parse *c, const yaml_node_t *n, const char *what, int64_t *us)
{
    const char *s = scalar(n);
    int64_t ms;
    if (s && strcmp(s, "0") == 0) {
        *us = 0;
        return 0;
    }
    if (!s || mw_parse_duration_ms(s, &ms) < 0 || ms < 0 || ms > 366LL * 86400000)
        return fail(c, n, "%s must be a duration (30s, 10m, 24h) or 0", what);
    *us = ms * 1000;
    return 0;
}

#define FOR_PAIRS(c, node, K, V)                                                                   \
    for (yaml_node_pair_t *pr_ = (node)->data.mapping.pairs.start;                                 \
         pr_ < (node)->data.mapping.pairs.top; pr_++)                                              \
        for (yaml_node_t *K = yaml_document_get_node((c)->doc, pr_->key),                          \
                         *V = yaml_document_get_node((c)->doc, pr_->value), *once_ = K;            \
             once_; once_ = NULL)

static int mapping(cat_parse *c, const yaml_node_t *n, const char *what)
{
    if (!n || n->type != YAML_MAPPING_NODE) return fail(c, n, "%s must be a mapping", what);
    return 0;
}

static int parse_escalate(cat_parse *c, const yaml_node_t *n, mw_xid_entry *e)
{
    if (mapping(c, n, "escalate") < 0) return -1;
    int has_count = 0;
    FOR_PAIRS(c, n, k, v)
    {
        const char *key = scalar(k);
        double d;
        if (key && strcmp(key, "count") == 0) {
            if (number(c, v, "escalate.count", 1e9, &d) < 0) return -1;
            if (d < 2) return fail(c, v, "escalate.count must be 2 or more");
            e->escalate_count = (uint32_t)d;
            has_count = 1;
        } else if (key && strcmp(key, "state") == 0) {
            if (word(c, v, "escalate.state", state_names, MW_HEALTH_NSTATES, &e->escalate_state) <
                0)
                return -1;
        } else if (key && strcmp(key, "action") == 0) {
            if (word(c, v, "escalate.action", action_names, MW_ACTION_COUNT, &e->escalate_action) <
                0)
                return -1;
        } else {
            return fail(c, k, "unknown key '%.64s' in escalate (count, state, action)",
                        key ? key : "?");
        }
    }
    if (!has_count) return fail(c, n, "escalate needs a count");
    return 0;
}

/* An entry's keys over *e; code required when need_code. */
static int parse_entry(cat_parse *c, const yaml_node_t *n, mw_xid_entry *e, int need_code)
{
    if (mapping(c, n, "an entry") < 0) return -1;
    int has_code = 0;
    FOR_PAIRS(c, n, k, v)
    {
        const char *key = scalar(k);
        double d;
        if (!key) return fail(c, k, "keys must be words");
        if (strcmp(key, "code") == 0 && need_code) {
            if (number(c, v, "code", 4294967295.0, &d) < 0) return -1;
            if (d != (double)(uint32_t)d) return fail(c, v, "code must be a whole number");
            e->code = (uint32_t)d;
            has_code = 1;
        } else if (strcmp(key, "sxid") == 0 && need_code) {
            const char *s = scalar(v);
            if (!s || (strcmp(s, "true") && strcmp(s, "false")))
                return fail(c, v, "sxid must be true or false");
            e->sxid = strcmp(s, "true") == 0;
        } else if (strcmp(key, "class") == 0) {
            if (word(c, v, "class", class_names, MW_XID_CLASS_COUNT, &e->cls) < 0) return -1;
        } else if (strcmp(key, "state") == 0) {
            if (word(c, v, "state", state_names, MW_HEALTH_NSTATES, &e->state) < 0) return -1;
            if (e->state == MW_HEALTH_UNKNOWN)
                return fail(c, v, "state unknown is the agent's (no reading), not an event's");
        } else if (strcmp(key, "action") == 0) {
            if (word(c, v, "action", action_names, MW_ACTION_COUNT, &e->action) < 0) return -1;
        } else if (strcmp(key, "hold") == 0) {
            if (duration(c, v, "hold", &e->hold_us) < 0) return -1;
        } else if (strcmp(key, "meaning") == 0) {
            const char *s = scalar(v);
            if (!s) return fail(c, v, "meaning must be text");
            if (strlen(s) >= MW_XID_MEANING_MAX)
                return fail(c, v, "meaning is longer than %d characters", MW_XID_MEANING_MAX - 1);
            mw_strlcpy(e->meaning, s, sizeof(e->meaning));
        } else if (strcmp(key, "escalate") == 0) {
            if (parse_escalate(c, v, e) < 0) return -1;
        } else {
            return fail(c, k,
                        "unknown key '%.64s' (code, sxid, class, state, action, hold, meaning, "
                        "escalate)",
                        key);
        }
    }
    if (need_code && !has_code) return fail(c, n, "an entry needs a code");
    return 0;
}

static int parse_xids(cat_parse *c, const yaml_node_t *n, mw_xid_catalog *cat)
{
    if (!n || n->type != YAML_SEQUENCE_NODE) return fail(c, n, "xids must be a list of entries");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *en = yaml_document_get_node(c->doc, *it);
        mw_xid_entry tmp = {0};
        if (parse_entry(c, en, &tmp, 1) < 0) return -1;
        size_t k;
        for (k = 0; k < cat->n; k++)
            if (cat->e[k].code == tmp.code && cat->e[k].sxid == tmp.sxid) break;
        if (k == cat->n) {
            if (cat->n == MW_XID_CATALOG_MAX)
                return fail(c, en, "more than %d entries", MW_XID_CATALOG_MAX);
            cat->n++;
        }
        cat->e[k] = tmp;
    }
    return 0;
}

static int parse_thresholds(cat_parse *c, const yaml_node_t *n, mw_health_thresholds *t)
{
    if (mapping(c, n, "thresholds") < 0) return -1;
    FOR_PAIRS(c, n, k, v)
    {
        const char *key = scalar(k);
        int rc;
        if (key && strcmp(key, "retired_pages") == 0)
            rc = number(c, v, key, 1e6, &t->retired_pages);
        else if (key && strcmp(key, "pcie_replays_per_minute") == 0)
            rc = number(c, v, key, 1e12, &t->pcie_replays_per_minute);
        else if (key && strcmp(key, "nvlink_errors_per_minute") == 0)
            rc = number(c, v, key, 1e12, &t->nvlink_errors_per_minute);
        else if (key && strcmp(key, "clock_event_hold") == 0)
            rc = duration(c, v, key, &t->clock_event_hold_us);
        else if (key && strcmp(key, "recent_hardware_window") == 0)
            rc = duration(c, v, key, &t->recent_hardware_window_us);
        else
            return fail(c, k,
                        "unknown key '%.64s' in thresholds (retired_pages, "
                        "pcie_replays_per_minute, nvlink_errors_per_minute, clock_event_hold, "
                        "recent_hardware_window)",
                        key ? key : "?");
        if (rc < 0) return -1;
    }
    return 0;
}

static int text_key(cat_parse *c, const yaml_node_t *v, const char *what, char *out, size_t size)
{
    const char *s = scalar(v);
    if (!s) return fail(c, v, "%s must be text", what);
    if (strlen(s) >= size) return fail(c, v, "%s is longer than %zu characters", what, size - 1);
    mw_strlcpy(out, s, size);
    return 0;
}

static int parse_root(cat_parse *c, const yaml_node_t *root, mw_xid_catalog *cat)
{
    if (!root) return 0; /* an empty file changes nothing */
    if (mapping(c, root, "the catalog") < 0) return -1;
    FOR_PAIRS(c, root, k, v)
    {
        const char *key = scalar(k);
        int rc;
        if (!key)
            return fail(c, k, "keys must be words");
        else if (strcmp(key, "version") == 0)
            rc = text_key(c, v, key, cat->version, sizeof(cat->version));
        else if (strcmp(key, "source") == 0)
            rc = text_key(c, v, key, cat->source, sizeof(cat->source));
        else if (strcmp(key, "retrieved") == 0)
            rc = text_key(c, v, key, cat->retrieved, sizeof(cat->retrieved));
        else if (strcmp(key, "window") == 0) {
            rc = duration(c, v, key, &cat->window_us);
            if (rc == 0 && cat->window_us == 0) rc = fail(c, v, "window must be longer than 0");
        } else if (strcmp(key, "thresholds") == 0)
            rc = parse_thresholds(c, v, &cat->th);
        else if (strcmp(key, "default") == 0)
            rc = parse_entry(c, v, &cat->def, 0);
        else if (strcmp(key, "sxid_fatal") == 0)
            rc = parse_entry(c, v, &cat->sxid_fatal, 0);
        else if (strcmp(key, "sxid_nonfatal") == 0)
            rc = parse_entry(c, v, &cat->sxid_nonfatal, 0);
        else if (strcmp(key, "xids") == 0)
            rc = parse_xids(c, v, cat);
        else
            return fail(c, k,
                        "unknown key '%.64s' (version, source, retrieved, window, thresholds, "
                        "default, sxid_fatal, sxid_nonfatal, xids)",
                        key);
        if (rc < 0) return -1;
    }
    return 0;
}

int mw_xid_catalog_parse(mw_xid_catalog *cat, const char *name, const char *text, size_t len,
                         char *err, size_t errsize)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (mw_yaml_begin(&parser, &doc, name, text, len, err, errsize) < 0) return -1;
    /* Parsed into a copy: a file with an error changes nothing. */
    mw_xid_catalog *tmp = mw_xmalloc(sizeof(*tmp));
    memcpy(tmp, cat, sizeof(*tmp));
    cat_parse c = {&doc, name, err, errsize};
    int rc = parse_root(&c, yaml_document_get_root_node(&doc), tmp);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc == 0) memcpy(cat, tmp, sizeof(*cat));
    free(tmp);
    return rc;
}

int mw_xid_catalog_load(mw_xid_catalog *cat, const char *path, char *err, size_t errsize)
{
    memset(cat, 0, sizeof(*cat));
    if (mw_xid_catalog_parse(cat, "built-in xid-catalog.yaml", mw_xid_catalog_builtin,
                             mw_xid_catalog_builtin_len, err, errsize) < 0)
        return -1;
    if (!path || !*path) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *text = mw_xmalloc(1u << 20);
    size_t n = fread(text, 1, (1u << 20) - 1, f);
    int big = !feof(f);
    fclose(f);
    int rc = -1;
    if (big)
        snprintf(err, errsize, "%s: larger than 1 MiB", path);
    else
        rc = mw_xid_catalog_parse(cat, path, text, n, err, errsize);
    free(text);
    return rc;
}

const mw_xid_entry *mw_xid_catalog_find(const mw_xid_catalog *cat, uint32_t code, int sxid,
                                        const char *text)
{
    for (size_t k = 0; k < cat->n; k++)
        if (cat->e[k].code == code && cat->e[k].sxid == (sxid != 0)) return &cat->e[k];
    if (!sxid) return &cat->def;
    /* The driver writes "Non-fatal" or "Fatal" (also "Severity 1 ... fatal")
     * after the code. */
    if (text && (strstr(text, "Non-fatal") || strstr(text, "non-fatal")))
        return &cat->sxid_nonfatal;
    if (text && (strstr(text, "Fatal") || strstr(text, "fatal"))) return &cat->sxid_fatal;
    return &cat->sxid_nonfatal;
}
