/* alert_groups.c - the table of rule alerts the built-in receivers are
 * sent, by group (see alert_groups.h), and its part of the state file. */
#include "alert_groups.h"
#include "../core/hash.h"
#include "../core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAIRS 64  /* labels, annotations kept per alert */
#define MAX_TEXT 8192 /* bytes kept of a label or annotation value */

/* ---- alerts: deep copies ---- */

static char *copy_text(const char *s)
{
    if (!s) s = "";
    size_t n = strnlen(s, MAX_TEXT);
    char *c = mw_xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const mw_alert_pair *)a)->name, ((const mw_alert_pair *)b)->name);
}

static mw_alert_pair *copy_pairs(const mw_alert_pair *p, size_t n, size_t *out_n)
{
    if (n > MAX_PAIRS) n = MAX_PAIRS;
    mw_alert_pair *c = mw_xcalloc(n ? n : 1, sizeof(*c));
    for (size_t i = 0; i < n; i++) {
        c[i].name = copy_text(p[i].name);
        c[i].value = copy_text(p[i].value);
    }
    *out_n = n;
    return c;
}

static void free_pairs(const mw_alert_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((void *)p[i].name);
        free((void *)p[i].value);
    }
    free((void *)p);
}

static void copy_alert(mw_alert *dst, const mw_alert *src)
{
    *dst = *src;
    mw_alert_pair *l = copy_pairs(src->labels, src->nlabels, &dst->nlabels);
    qsort(l, dst->nlabels, sizeof(*l), by_name);
    dst->labels = l;
    dst->annotations = copy_pairs(src->annotations, src->nannotations, &dst->nannotations);
    dst->generator_url = copy_text(src->generator_url);
}

static void free_alert(mw_alert *a)
{
    free_pairs(a->labels, a->nlabels);
    free_pairs(a->annotations, a->nannotations);
    free((void *)a->generator_url);
    memset(a, 0, sizeof(*a));
}

void mw_alert_group_msg_free(mw_alert_group_msg *g)
{
    for (size_t i = 0; i < g->n; i++)
        free_alert(&g->alerts[i]);
    free(g->alerts);
    memset(g, 0, sizeof(*g));
}

static const char *label(const mw_alert *a, const char *name)
{
    for (size_t i = 0; i < a->nlabels; i++)
        if (strcmp(a->labels[i].name, name) == 0) return a->labels[i].value;
    return "";
}

/* Alertmanager's fingerprint is a hash of the sorted label set; FNV-1a 64
 * over name, value pairs does the same job. */
uint64_t mw_alert_fingerprint(const mw_alert *a)
{
    mw_alert_pair sorted[MAX_PAIRS];
    size_t n = a->nlabels < MAX_PAIRS ? a->nlabels : MAX_PAIRS;
    memcpy(sorted, a->labels, n * sizeof(sorted[0]));
    qsort(sorted, n, sizeof(sorted[0]), by_name);
    uint64_t h = MW_FNV1A64_SEED;
    for (size_t i = 0; i < n; i++) {
        h = mw_fnv1a64_byte(mw_fnv1a64_str(h, sorted[i].name), 0xff);
        h = mw_fnv1a64_byte(mw_fnv1a64_str(h, sorted[i].value), 0xff);
    }
    return h;
}

/* ---- the table ---- */

void mw_alert_groups_free(mw_alert_groups *t)
{
    for (size_t i = 0; i < t->n; i++)
        free_alert(&t->a[i].a);
    free(t->a);
    free(t->g);
    memset(t, 0, sizeof(*t));
}

static mw_group_alert *find(mw_alert_groups *t, uint64_t fp)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->a[i].fp == fp) return &t->a[i];
    return NULL;
}

static int in_group(const mw_alert_group *g, const mw_alert *a)
{
    return strcmp(g->alertname, label(a, "alertname")) == 0 &&
           strcmp(g->node, label(a, "node")) == 0;
}

static void ensure_group(mw_alert_groups *t, const mw_alert *a, int64_t now_ms)
{
    for (size_t i = 0; i < t->ng; i++)
        if (in_group(&t->g[i], a)) return;
    if (t->ng == t->gcap) {
        t->gcap = t->gcap ? t->gcap * 2 : 8;
        t->g = mw_xrealloc(t->g, t->gcap * sizeof(t->g[0]));
    }
    mw_alert_group *g = &t->g[t->ng++];
    memset(g, 0, sizeof(*g));
    mw_strlcpy(g->alertname, label(a, "alertname"), sizeof(g->alertname));
    mw_strlcpy(g->node, label(a, "node"), sizeof(g->node));
    g->first_ms = now_ms;
}

/* A firing alert, new or again: its copy, nothing delivered yet. */
static void set_firing(mw_group_alert *e, const mw_alert *a, uint64_t fp, int64_t now_ms)
{
    copy_alert(&e->a, a);
    e->a.resolved = 0;
    e->fp = fp;
    e->valid_ms = a->ends_at_ms > now_ms ? a->ends_at_ms - now_ms : 0;
    e->fired = e->told_resolved = 0;
}

int mw_alert_groups_update(mw_alert_groups *t, const mw_alert *alerts, size_t n, int64_t now_ms)
{
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        const mw_alert *a = &alerts[i];
        uint64_t fp = mw_alert_fingerprint(a);
        mw_group_alert *e = find(t, fp);
        if (a->resolved) {
            /* Only an alert we know as firing, of the same start. */
            if (e && !e->a.resolved && e->a.starts_at_ms == a->starts_at_ms) {
                e->a.resolved = 1;
                e->a.ends_at_ms = a->ends_at_ms ? a->ends_at_ms : now_ms;
                changed = 1;
            }
            continue;
        }
        if (e && !e->a.resolved && e->a.starts_at_ms == a->starts_at_ms) {
            /* A resend: new annotations ($value) and validity, no message. */
            unsigned fired = e->fired;
            free_alert(&e->a);
            set_firing(e, a, fp, now_ms);
            e->fired = fired;
            continue;
        }
        if (e && e->a.resolved && e->a.starts_at_ms == a->starts_at_ms && !e->told_resolved) {
            /* Expired unseen, then refreshed: it never stopped firing. */
            unsigned fired = e->fired;
            free_alert(&e->a);
            set_firing(e, a, fp, now_ms);
            e->fired = fired;
            changed = 1;
            continue;
        }
        if (e) { /* fires again: a new episode of the same labels */
            free_alert(&e->a);
            set_firing(e, a, fp, now_ms);
            ensure_group(t, a, now_ms);
            changed = 1;
            continue;
        }
        if (t->n >= MW_ALERT_GROUPS_MAX) {
            t->refused++;
            continue;
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 16;
            t->a = mw_xrealloc(t->a, t->cap * sizeof(t->a[0]));
        }
        e = &t->a[t->n++];
        memset(e, 0, sizeof(*e));
        set_firing(e, a, fp, now_ms);
        ensure_group(t, a, now_ms);
        changed = 1;
    }
    return changed;
}

int mw_alert_groups_expire(mw_alert_groups *t, int64_t now_ms)
{
    int changed = 0;
    for (size_t i = 0; i < t->n; i++) {
        mw_alert *a = &t->a[i].a;
        if (!a->resolved && a->ends_at_ms > 0 && a->ends_at_ms < now_ms) {
            a->resolved = 1;
            changed = 1;
        }
    }
    return changed;
}

static void msg_add(mw_alert_group_msg *m, const mw_alert *a)
{
    m->alerts = mw_xrealloc(m->alerts, (m->n + 1) * sizeof(m->alerts[0]));
    copy_alert(&m->alerts[m->n++], a);
}

int mw_alert_groups_due(const mw_alert_groups *t, int r, int64_t now_ms,
                        const mw_alert_timing *timing, mw_alert_group_msg *msg)
{
    unsigned bit = 1u << r;
    memset(msg, 0, sizeof(*msg));
    for (size_t gi = 0; gi < t->ng; gi++) {
        const mw_alert_group *g = &t->g[gi];
        int new_firing = 0, new_resolved = 0, firing = 0;
        for (size_t i = 0; i < t->n; i++) {
            const mw_group_alert *e = &t->a[i];
            if (!in_group(g, &e->a)) continue;
            if (!e->a.resolved) {
                firing = 1;
                if (!(e->fired & bit)) new_firing = 1;
            } else if ((e->fired & bit) && !(e->told_resolved & bit)) {
                new_resolved = 1;
            }
        }
        int64_t last = g->last_sent_ms[r];
        int repeat = firing && last && timing->repeat_ms > 0 && now_ms - last >= timing->repeat_ms;
        if (!new_firing && !new_resolved && !repeat) continue;
        if (last ? now_ms - last < timing->group_interval_ms
                 : now_ms - g->first_ms < timing->group_wait_ms)
            continue;
        mw_strlcpy(msg->alertname, g->alertname, sizeof(msg->alertname));
        mw_strlcpy(msg->node, g->node, sizeof(msg->node));
        for (size_t i = 0; i < t->n; i++)
            if (in_group(g, &t->a[i].a) && !t->a[i].a.resolved) msg_add(msg, &t->a[i].a);
        msg->nfiring = msg->n;
        for (size_t i = 0; i < t->n; i++) {
            const mw_group_alert *e = &t->a[i];
            if (in_group(g, &e->a) && e->a.resolved && (e->fired & bit) &&
                !(e->told_resolved & bit))
                msg_add(msg, &e->a);
        }
        return 1;
    }
    return 0;
}

void mw_alert_groups_delivered(mw_alert_groups *t, int r, const mw_alert_group_msg *msg,
                               int64_t now_ms)
{
    unsigned bit = 1u << r;
    for (size_t i = 0; i < msg->n; i++) {
        const mw_alert *sent = &msg->alerts[i];
        mw_group_alert *e = find(t, mw_alert_fingerprint(sent));
        if (!e || e->a.starts_at_ms != sent->starts_at_ms) continue;
        e->fired |= bit;
        if (sent->resolved) e->told_resolved |= bit;
    }
    for (size_t gi = 0; gi < t->ng; gi++)
        if (strcmp(t->g[gi].alertname, msg->alertname) == 0 &&
            strcmp(t->g[gi].node, msg->node) == 0)
            t->g[gi].last_sent_ms[r] = now_ms;
}

void mw_alert_groups_gc(mw_alert_groups *t, unsigned enabled, int64_t now_ms)
{
    for (size_t i = t->n; i-- > 0;) {
        mw_group_alert *e = &t->a[i];
        if (!e->a.resolved) continue;
        /* Done with: every receiver had its end, or never had it firing. */
        unsigned pending = e->fired & ~e->told_resolved & enabled;
        if (pending && now_ms - e->a.ends_at_ms <= MW_ALERT_KEEP_MS) continue;
        free_alert(&e->a);
        memmove(e, e + 1, (t->n - i - 1) * sizeof(*e));
        t->n--;
    }
    for (size_t gi = t->ng; gi-- > 0;) {
        size_t members = 0;
        for (size_t i = 0; i < t->n; i++)
            members += in_group(&t->g[gi], &t->a[i].a);
        if (members) continue;
        memmove(&t->g[gi], &t->g[gi + 1], (t->ng - gi - 1) * sizeof(t->g[0]));
        t->ng--;
    }
}

/* ---- state file ---- */

static json_t *pairs_json(const mw_alert_pair *p, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, p[i].name, json_string(p[i].value));
    return o;
}

json_t *mw_alert_groups_json(const mw_alert_groups *t)
{
    json_t *alerts = json_array(), *groups = json_array();
    for (size_t i = 0; i < t->n; i++) {
        const mw_group_alert *e = &t->a[i];
        json_t *rx = json_object();
        for (int r = 0; r < (int)mw_nreceivers; r++)
            if (e->fired & (1u << r))
                json_object_set_new(rx, mw_receivers[r]->name,
                                    json_pack("{s:b}", "resolved", (e->told_resolved >> r) & 1));
        json_array_append_new(
            alerts, json_pack("{s:o, s:o, s:I, s:I, s:I, s:b, s:s, s:o}", "labels",
                              pairs_json(e->a.labels, e->a.nlabels), "annotations",
                              pairs_json(e->a.annotations, e->a.nannotations), "starts_at_ms",
                              (json_int_t)e->a.starts_at_ms, "ends_at_ms",
                              (json_int_t)e->a.ends_at_ms, "valid_ms", (json_int_t)e->valid_ms,
                              "resolved", e->a.resolved, "generator_url",
                              e->a.generator_url ? e->a.generator_url : "", "delivered", rx));
    }
    for (size_t gi = 0; gi < t->ng; gi++) {
        const mw_alert_group *g = &t->g[gi];
        json_t *sent = json_object();
        for (int r = 0; r < (int)mw_nreceivers; r++)
            if (g->last_sent_ms[r])
                json_object_set_new(sent, mw_receivers[r]->name, json_integer(g->last_sent_ms[r]));
        json_array_append_new(groups, json_pack("{s:s, s:s, s:I, s:o}", "alertname", g->alertname,
                                                "node", g->node, "first_ms",
                                                (json_int_t)g->first_ms, "last_sent_ms", sent));
    }
    return json_pack("{s:o, s:o}", "alerts", alerts, "groups", groups);
}

static int bad(char *err, size_t errsize, const char *what, size_t i, const char *field,
               const char *why)
{
    snprintf(err, errsize, "alert_groups.%s[%zu].%s: %s", what, i, field, why);
    return -1;
}

static int parse_pairs(json_t *o, mw_alert_pair **out, size_t *n)
{
    if (!json_is_object(o) || json_object_size(o) > MAX_PAIRS) return -1;
    mw_alert_pair tmp[MAX_PAIRS];
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (!json_is_string(v)) return -1;
        tmp[k].name = key;
        tmp[k].value = json_string_value(v);
        k++;
    }
    *out = copy_pairs(tmp, k, n);
    return 0;
}

static int get_int(json_t *o, const char *key, int64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return -1;
    *out = json_integer_value(v);
    return 0;
}

static int parse_alert(json_t *o, size_t i, int64_t now_ms, mw_group_alert *e, char *err,
                       size_t errsize)
{
    memset(e, 0, sizeof(*e));
    if (!json_is_object(o)) return bad(err, errsize, "alerts", i, "", "expected an object");
    mw_alert_pair *l = NULL, *an = NULL;
    if (parse_pairs(json_object_get(o, "labels"), &l, &e->a.nlabels) < 0)
        return bad(err, errsize, "alerts", i, "labels", "expected an object of strings");
    qsort(l, e->a.nlabels, sizeof(*l), by_name);
    e->a.labels = l;
    if (parse_pairs(json_object_get(o, "annotations"), &an, &e->a.nannotations) < 0) {
        free_alert(&e->a);
        return bad(err, errsize, "alerts", i, "annotations", "expected an object of strings");
    }
    e->a.annotations = an;
    json_t *gu = json_object_get(o, "generator_url"), *res = json_object_get(o, "resolved");
    e->a.generator_url = copy_text(json_is_string(gu) ? json_string_value(gu) : "");
    const char *field = NULL;
    if (get_int(o, "starts_at_ms", &e->a.starts_at_ms) < 0)
        field = "starts_at_ms";
    else if (get_int(o, "ends_at_ms", &e->a.ends_at_ms) < 0)
        field = "ends_at_ms";
    else if (get_int(o, "valid_ms", &e->valid_ms) < 0)
        field = "valid_ms";
    else if (!json_is_boolean(res))
        field = "resolved";
    if (field) {
        free_alert(&e->a);
        return bad(err, errsize, "alerts", i, field, "missing or of the wrong type");
    }
    e->a.resolved = json_is_true(res);
    /* The agent was down: count the validity again from now. */
    if (!e->a.resolved && e->a.ends_at_ms > 0) e->a.ends_at_ms = now_ms + e->valid_ms;
    e->fp = mw_alert_fingerprint(&e->a);
    json_t *rx = json_object_get(o, "delivered");
    if (!json_is_object(rx)) {
        free_alert(&e->a);
        return bad(err, errsize, "alerts", i, "delivered", "expected an object");
    }
    for (int r = 0; r < (int)mw_nreceivers; r++) {
        json_t *d = json_object_get(rx, mw_receivers[r]->name);
        if (!d) continue; /* receivers removed since are ignored */
        e->fired |= 1u << r;
        if (json_is_true(json_object_get(d, "resolved"))) e->told_resolved |= 1u << r;
    }
    return 0;
}

int mw_alert_groups_parse(mw_alert_groups *t, json_t *j, int64_t now_ms, char *err, size_t errsize)
{
    mw_alert_groups nt = {0};
    json_t *alerts = json_object_get(j, "alerts"), *groups = json_object_get(j, "groups");
    if (!json_is_array(alerts) || !json_is_array(groups)) {
        snprintf(err, errsize, "alert_groups: expected {\"alerts\": [...], \"groups\": [...]}");
        return -1;
    }
    if (json_array_size(alerts) > MW_ALERT_GROUPS_MAX) {
        snprintf(err, errsize, "alert_groups: more than %d alerts", MW_ALERT_GROUPS_MAX);
        return -1;
    }
    nt.cap = json_array_size(alerts) + 1;
    nt.a = mw_xcalloc(nt.cap, sizeof(nt.a[0]));
    for (size_t i = 0; i < json_array_size(alerts); i++) {
        if (parse_alert(json_array_get(alerts, i), i, now_ms, &nt.a[nt.n], err, errsize) < 0) {
            mw_alert_groups_free(&nt);
            return -1;
        }
        nt.n++;
    }
    for (size_t gi = 0; gi < json_array_size(groups); gi++) {
        json_t *o = json_array_get(groups, gi);
        json_t *name = json_object_get(o, "alertname"), *node = json_object_get(o, "node");
        json_t *sent = json_object_get(o, "last_sent_ms");
        int64_t first;
        if (!json_is_string(name) || !json_is_string(node) || !json_is_object(sent) ||
            get_int(o, "first_ms", &first) < 0) {
            mw_alert_groups_free(&nt);
            return bad(err, errsize, "groups", gi, "",
                       "expected {alertname, node, first_ms, last_sent_ms}");
        }
        if (nt.ng == nt.gcap) {
            nt.gcap = nt.gcap ? nt.gcap * 2 : 8;
            nt.g = mw_xrealloc(nt.g, nt.gcap * sizeof(nt.g[0]));
        }
        mw_alert_group *g = &nt.g[nt.ng++];
        memset(g, 0, sizeof(*g));
        mw_strlcpy(g->alertname, json_string_value(name), sizeof(g->alertname));
        mw_strlcpy(g->node, json_string_value(node), sizeof(g->node));
        g->first_ms = first;
        for (int r = 0; r < (int)mw_nreceivers; r++) {
            json_t *v = json_object_get(sent, mw_receivers[r]->name);
            if (json_is_integer(v)) g->last_sent_ms[r] = json_integer_value(v);
        }
    }
    /* Every alert has its group (a file edited by hand may lack one). */
    for (size_t i = 0; i < nt.n; i++)
        ensure_group(&nt, &nt.a[i].a, now_ms);
    mw_alert_groups_free(t);
    *t = nt;
    return 0;
}
