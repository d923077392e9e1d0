/* rules_api.c - GET /api/v1/rules and GET /api/v1/alerts in Prometheus's
 * shapes (web/api/v1: RuleGroup, AlertingRule, RecordingRule, Alert; keys
 * in its order), which Grafana's alerting pages and promtool-style tools
 * read, and POST /-/reload, which reads the rule files again and keeps the
 * rules in force when one is bad. */
#include "rules_internal.h"
#include "../core/log.h"
#include "../core/util.h"

#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Go's time.Time JSON (RFC 3339 with nanoseconds, trailing zeros cut), in
 * UTC; 0 is Go's zero time. */
static json_t *json_time(int64_t ms)
{
    if (!ms) return json_string("0001-01-01T00:00:00Z");
    time_t s = (time_t)(ms / 1000);
    int frac = (int)(ms % 1000);
    if (frac < 0) {
        frac += 1000;
        s--;
    }
    struct tm tm;
    gmtime_r(&s, &tm);
    char buf[64], f[8] = "";
    if (frac) {
        snprintf(f, sizeof(f), ".%03d", frac);
        for (size_t k = strlen(f); k > 1 && f[k - 1] == '0'; k--)
            f[k - 1] = '\0';
    }
    snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d%sZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, f);
    return json_string(buf);
}

/* strconv.FormatFloat(v, 'e', -1, 64): "1e+00", "1.86e+03". */
static json_t *json_value(double v)
{
    char buf[48];
    if (v != v || v - v != 0) {
        mw_tpl_format_float(v, buf, sizeof(buf));
        return json_string(buf);
    }
    for (int prec = 0; prec < 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return json_string(buf);
}

/* A Go float64 in JSON: whole numbers without ".0". */
static json_t *json_num(double v)
{
    if (v == (double)(long long)v && v > -1e15 && v < 1e15) return json_integer((long long)v);
    return json_real(v);
}

/* A duration in seconds as Go's Duration.Seconds() gives it: whole
 * nanoseconds. */
static json_t *json_seconds(double s)
{
    return json_num(floor(s * 1e9 + 0.5) / 1e9);
}

static json_t *json_pairs(const mw_alert_pair *p, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, p[i].name, json_string(p[i].value));
    return o;
}

static json_t *json_kv(const mw_tpl_kv *p, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, p[i].name, json_string(p[i].value));
    return o;
}

static const char *state_name(int s)
{
    return s == ST_FIRING ? "firing" : s == ST_PENDING ? "pending" : "inactive";
}

static json_t *json_alert(const alert_st *a)
{
    json_t *o = json_object();
    json_object_set_new(o, "labels", json_pairs(a->labels, a->nlabels));
    json_object_set_new(o, "annotations", json_pairs(a->annotations, a->nannotations));
    json_object_set_new(o, "state", json_string(state_name(a->state)));
    json_object_set_new(o, "activeAt", json_time(a->active_at));
    if (a->keep_firing_since)
        json_object_set_new(o, "keepFiringSince", json_time(a->keep_firing_since));
    json_object_set_new(o, "value", json_value(a->value));
    return o;
}

static int alert_cmp(const void *x, const void *y)
{
    const alert_st *a = *(alert_st *const *)x, *b = *(alert_st *const *)y;
    for (size_t i = 0; i < a->nlabels && i < b->nlabels; i++) {
        int c = strcmp(a->labels[i].name, b->labels[i].name);
        if (!c) c = strcmp(a->labels[i].value, b->labels[i].value);
        if (c) return c;
    }
    return a->nlabels < b->nlabels ? -1 : a->nlabels > b->nlabels;
}

/* The rule's active alerts (resolved ones are not), sorted by labels. */
static json_t *json_alerts(const rule_st *rs, json_t *into)
{
    const alert_st **v = mw_xcalloc(rs->nalerts + 1, sizeof(*v));
    size_t n = 0;
    for (size_t i = 0; i < rs->nalerts; i++)
        if (!rs->alerts[i].resolved_at) v[n++] = &rs->alerts[i];
    qsort(v, n, sizeof(*v), alert_cmp);
    json_t *arr = into ? into : json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_alert(v[i]));
    free(v);
    return arr;
}

static const char *health_name(int h)
{
    return h == H_OK ? "ok" : h == H_ERR ? "err" : "unknown";
}

static json_t *json_rule(const rule_st *rs, int with_alerts)
{
    const mw_rule_def *d = rs->def;
    json_t *o = json_object();
    if (d->alert) {
        int state = ST_INACTIVE;
        for (size_t i = 0; i < rs->nalerts; i++)
            if (rs->alerts[i].state > state) state = rs->alerts[i].state;
        json_object_set_new(o, "state", json_string(state_name(state)));
    }
    json_object_set_new(o, "name", json_string(d->name));
    json_object_set_new(o, "query", json_string(d->query));
    if (d->alert) {
        json_object_set_new(o, "duration", json_num((double)d->for_ms / 1000));
        json_object_set_new(o, "keepFiringFor", json_num((double)d->keep_firing_for_ms / 1000));
        json_object_set_new(o, "labels", json_kv(d->labels, d->nlabels));
        json_object_set_new(o, "annotations", json_kv(d->annotations, d->nannotations));
        if (with_alerts) json_object_set_new(o, "alerts", json_alerts(rs, NULL));
    } else if (d->nlabels) {
        json_object_set_new(o, "labels", json_kv(d->labels, d->nlabels));
    }
    json_object_set_new(o, "health", json_string(health_name(rs->health)));
    if (rs->last_error[0]) json_object_set_new(o, "lastError", json_string(rs->last_error));
    json_object_set_new(o, "evaluationTime", json_seconds(rs->eval_seconds));
    json_object_set_new(o, "lastEvaluation", json_time(rs->last_eval_ms));
    json_object_set_new(o, "type", json_string(d->alert ? "alerting" : "recording"));
    return o;
}

/* The values of a repeated query parameter (rule_name[]=a&rule_name[]=b). */
typedef struct arg_list {
    const char *key;
    const char *v[64];
    size_t n;
} arg_list;

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    arg_list *l = cls;
    if (key && value && strcmp(key, l->key) == 0 && l->n < 64) l->v[l->n++] = value;
    return MHD_YES;
}

static int in_list(const arg_list *l, const char *s)
{
    if (!l->n) return 1;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0) return 1;
    return 0;
}

static void respond_json(mw_http_response *resp, json_t *data)
{
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("success"));
    json_object_set_new(o, "data", data);
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(o);
    /* Go's encoding/json writes <, > and & as \u003c, \u003e, \u0026 (only
     * strings hold them), so the bodies are Prometheus's byte for byte. */
    mw_buf b;
    mw_buf_init(&b, 0);
    for (const char *p = text ? text : ""; *p; p++) {
        if (*p == '<')
            mw_buf_puts(&b, "\\u003c");
        else if (*p == '>')
            mw_buf_puts(&b, "\\u003e");
        else if (*p == '&')
            mw_buf_puts(&b, "\\u0026");
        else
            mw_buf_putc(&b, *p);
    }
    free(text);
    resp->body = mw_buf_steal(&b, NULL);
    resp->status = 200;
    resp->content_type = "application/json";
    resp->len = resp->body ? strlen(resp->body) : 0;
}

static void rules_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    mw_rules *r = cls;
    const char *type = mw_http_arg(req, "type");
    if (type && *type && strcmp(type, "alert") != 0 && strcmp(type, "record") != 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "invalid parameter \"type\": not supported value \"%.100s\"",
                 type);
        mw_http_json_error(resp, 400, "bad_data", msg);
        return;
    }
    int alerts = !type || !*type || strcmp(type, "alert") == 0;
    int records = !type || !*type || strcmp(type, "record") == 0;
    const char *excl = mw_http_arg(req, "exclude_alerts");
    int with_alerts = !excl || strcmp(excl, "true") != 0;
    arg_list names = {.key = "rule_name[]"}, groups = {.key = "rule_group[]"},
             files = {.key = "file[]"};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, collect_arg, &names);
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, collect_arg, &groups);
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, collect_arg, &files);
    int filtered = names.n || groups.n || files.n || (type && *type);
    json_t *list = json_array();
    pthread_mutex_lock(&r->w.mu);
    for (size_t i = 0; i < r->ngroups; i++) {
        const group_st *g = &r->groups[i];
        if (!in_list(&groups, g->def->name) || !in_list(&files, g->def->file)) continue;
        json_t *rules = json_array();
        for (size_t j = 0; j < g->def->nrules; j++) {
            const rule_st *rs = &g->rules[j];
            if ((rs->def->alert ? !alerts : !records) || !in_list(&names, rs->def->name)) continue;
            json_array_append_new(rules, json_rule(rs, with_alerts));
        }
        if (filtered && !json_array_size(rules)) {
            json_decref(rules);
            continue;
        }
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(g->def->name));
        json_object_set_new(o, "file", json_string(g->def->file));
        json_object_set_new(o, "rules", rules);
        json_object_set_new(o, "interval", json_num((double)g->interval_ms / 1000));
        json_object_set_new(o, "limit", json_integer(g->def->limit));
        json_object_set_new(o, "evaluationTime", json_seconds(g->eval_seconds));
        json_object_set_new(o, "lastEvaluation", json_time(g->last_eval_ms));
        json_array_append_new(list, o);
    }
    pthread_mutex_unlock(&r->w.mu);
    json_t *data = json_object();
    json_object_set_new(data, "groups", list);
    respond_json(resp, data);
}

static void alerts_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)req;
    mw_rules *r = cls;
    json_t *list = json_array();
    pthread_mutex_lock(&r->w.mu);
    for (size_t i = 0; i < r->ngroups; i++)
        for (size_t j = 0; j < r->groups[i].def->nrules; j++)
            if (r->groups[i].rules[j].def->alert) json_alerts(&r->groups[i].rules[j], list);
    pthread_mutex_unlock(&r->w.mu);
    json_t *data = json_object();
    json_object_set_new(data, "alerts", list);
    respond_json(resp, data);
}

static void reload_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)req;
    mw_rules *r = cls;
    char err[2048];
    if (mw_rules_reload(r, err, sizeof(err)) < 0) {
        mw_log(MW_LOG_ERROR, "rules", "reload failed, the previous rules stay in force: %s", err);
        mw_http_text(resp, 500, "failed to reload rules: %s\n", err);
        return;
    }
    mw_http_text(resp, 200, "%s", "");
}

void mw_rules_routes(mw_rules *r, mw_http_server *http)
{
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/rules", 0, rules_handler, r);
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/alerts", 0, alerts_handler, r);
    mw_http_route(http, MW_ROLE_ADMIN, "POST", "/-/reload", 0, reload_handler, r);
}
