/* api.c - Prometheus' HTTP query API over the embedded store, as Grafana's
 * Prometheus data source calls it: /api/v1/query, /api/v1/query_range
 * (GET and form POST), /api/v1/series, /api/v1/labels,
 * /api/v1/label/<name>/values, /api/v1/metadata (the status endpoints:
 * api_status.c), every answer gzip'd when the client takes gzip.
 * Same JSON envelope, value encoding (numbers as strings), error types and
 * status codes as Prometheus (400 bad_data, 422 execution, 503 timeout). */
#include "api.h"
#include "api_internal.h"

#include "../core/buf.h"
#include "../core/util.h"
#include "../mlwatch.h"
#include "promql.h"
#include "qinternal.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zlib.h>

#define MAX_POINTS 11000

static void params_add(params *p, const char *k, size_t kl, const char *v, size_t vl)
{
    if (p->n >= MAX_PARAMS) return;
    p->k[p->n] = mw_xmalloc(kl + 1);
    memcpy(p->k[p->n], k, kl);
    p->k[p->n][kl] = '\0';
    p->v[p->n] = mw_xmalloc(vl + 1);
    memcpy(p->v[p->n], v, vl);
    p->v[p->n][vl] = '\0';
    p->vlen[p->n] = vl;
    p->n++;
}

static enum MHD_Result get_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                               const char *value, size_t value_size)
{
    (void)kind;
    if (key) params_add(cls, key, key_size, value ? value : "", value ? value_size : 0);
    return MHD_YES;
}

static size_t url_decode(char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            s[o++] = ' ';
        } else if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                   isxdigit((unsigned char)s[i + 2])) {
            char h[3] = {s[i + 1], s[i + 2], 0};
            s[o++] = (char)strtol(h, NULL, 16);
            i += 2;
        } else {
            s[o++] = s[i];
        }
    }
    return o;
}

void api_params_load(params *p, const mw_http_request *req)
{
    memset(p, 0, sizeof(*p));
    MHD_get_connection_values_n(req->conn, MHD_GET_ARGUMENT_KIND, get_arg, p);
    const char *ct = mw_http_header(req, "Content-Type");
    if (!req->body || !ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0) return;
    char *body = mw_xmalloc(req->body_len + 1);
    memcpy(body, req->body, req->body_len);
    body[req->body_len] = '\0';
    char *save = NULL;
    for (char *pair = strtok_r(body, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '=');
        size_t kl = eq ? (size_t)(eq - pair) : strlen(pair);
        kl = url_decode(pair, kl);
        char *value = eq ? eq + 1 : pair + kl;
        size_t vl = url_decode(value, eq ? strlen(value) : 0);
        params_add(p, pair, kl, value, vl);
    }
    free(body);
}

void api_params_free(params *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->k[i]);
        free(p->v[i]);
    }
}

const char *api_param(const params *p, const char *k)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->k[i], k)) return p->v[i];
    return NULL;
}

void api_respond_json(mw_http_response *resp, int status, json_t *root)
{
    char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(16));
    json_decref(root);
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = s;
    resp->len = s ? strlen(s) : 0;
}

void api_respond_error(mw_http_response *resp, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *type = status == 400   ? "bad_data"
                       : status == 503 ? "timeout"
                       : status == 404 ? "not_found"
                                       : "execution";
    json_t *root = json_pack("{s:s, s:s, s:s}", "status", "error", "errorType", type, "error", msg);
    api_respond_json(resp, status, root);
}

/* The store could not open (or is being reopened): 503, as Prometheus
 * answers while its TSDB is not ready. */
static void respond_store_unavailable(mw_http_response *resp)
{
    api_respond_json(resp, 503,
                     json_pack("{s:s, s:s, s:s}", "status", "error", "errorType", "unavailable",
                               "error", "store unavailable"));
}

/* The reader's namespace scope as one set matcher on "namespace" (into
 * *m): 1 when scoped, 0 when the reader sees everything, -1 after a 500. */
static int scope_matcher(const mw_http_request *req, mw_matcher *m, mw_http_response *resp)
{
    const mw_http_scope *sc = req->scope;
    if (!sc || !sc->scoped) return 0;
    char err[256];
    if (mw_matcher_init_set(m, "namespace", sc->namespaces, sc->n, sc->node_series, err,
                            sizeof(err)) < 0) {
        api_respond_error(resp, 500, "the namespace scope of this reader: %s", err);
        return -1;
    }
    return 1;
}

/* A NUL in a parameter (%00) would cut the query short where C strings end,
 * silently; the other C0 controls and DEL have no place in PromQL either
 * (tab, newline and carriage return are whitespace): 400 naming the
 * parameter and the byte. -1 after responding. */
static int check_control_bytes(mw_http_response *resp, const params *p)
{
    for (int i = 0; i < p->n; i++)
        for (size_t j = 0; j < p->vlen[i]; j++) {
            unsigned char ch = (unsigned char)p->v[i][j];
            if ((ch >= 0x20 && ch != 0x7f) || ch == '\t' || ch == '\n' || ch == '\r') continue;
            api_respond_error(resp, 400,
                              "invalid parameter \"%.64s\": control character 0x%02x at byte "
                              "%zu (counting from 0); only tab, newline and carriage return are "
                              "allowed",
                              p->k[i], ch, j);
            return -1;
        }
    return 0;
}

/* The answer gzip'd when the client takes gzip and it is over 1 KiB (as
 * Prometheus, which compresses every answer a client accepts so; the
 * small ones gain nothing). Level 1: a 30-minute range answer of 78 KB
 * comes out at about a fifth in well under a millisecond. */
void api_gzip(const mw_http_request *req, mw_http_response *resp)
{
    if (!resp->body || resp->len < 1024 || resp->stream || resp->free_fn || resp->body_static ||
        !mw_http_accepts_gzip(req))
        return;
    z_stream z = {0};
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return;
    uLong cap = deflateBound(&z, (uLong)resp->len);
    unsigned char *out = mw_xmalloc(cap);
    z.next_in = (unsigned char *)resp->body;
    z.avail_in = (uInt)resp->len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return;
    }
    free(resp->body);
    resp->body = (char *)out;
    resp->len = n;
    mw_http_add_header(resp, "Content-Encoding", "gzip");
    mw_http_add_header(resp, "Vary", "Accept-Encoding");
}

void api_respond_data(mw_http_response *resp, json_t *data)
{
    api_respond_json(resp, 200, json_pack("{s:s, s:o}", "status", "success", "data", data));
}

/* Prometheus' parseTime: float seconds or RFC 3339. */
int mw_api_parse_time(const char *s, int64_t *ms)
{
    if (!s || !*s) return -1;
    char *end;
    double d = strtod(s, &end);
    if (!*end && end != s) {
        if (!isfinite(d) || fabs(d) > 9e12) return -1; /* ~ year 287000: no overflow in ms */
        *ms = (int64_t)llround(d * 1000);
        return 0;
    }
    int Y, M, D, h, m, sec, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sec, &n) != 6 || n != 19)
        return -1;
    const char *p = s + n;
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int digits = 0;
        while (isdigit((unsigned char)*p)) {
            if (digits < 3) frac = frac * 10 + (*p - '0');
            digits++;
            p++;
        }
        if (!digits) return -1;
        for (; digits < 3; digits++)
            frac *= 10;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5) return -1;
        off = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return -1;
    struct tm tm = {.tm_year = Y - 1900,
                    .tm_mon = M - 1,
                    .tm_mday = D,
                    .tm_hour = h,
                    .tm_min = m,
                    .tm_sec = sec};
    *ms = ((int64_t)timegm(&tm) - off) * 1000 + frac;
    return 0;
}

static json_t *ts_json(int64_t t)
{
    if (t % 1000 == 0) return json_integer(t / 1000);
    return json_real((double)t / 1000);
}

static json_t *point_json(int64_t t, double v)
{
    char buf[PQ_VALUE_BUFSIZE];
    pq_format_value(v, buf, sizeof(buf));
    return json_pack("[o, s]", ts_json(t), buf);
}

static json_t *labels_json(const pq_label *l, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, l[i].name, json_string(l[i].value));
    return o;
}

/* The answer's tree. The query API sends scalars and strings this way;
 * vectors and matrices go through result_text, which writes the same bytes. */
static json_t *result_json(const pq_result *r)
{
    static const char *types[] = {"scalar", "string", "vector", "matrix"};
    json_t *res;
    if (r->type == PQ_T_SCALAR) {
        res = point_json(r->t, r->scalar);
    } else if (r->type == PQ_T_STRING) {
        res = json_pack("[o, s]", ts_json(r->t), r->str ? r->str : "");
    } else {
        res = json_array();
        for (size_t i = 0; i < r->nseries; i++) {
            const pq_series *s = &r->series[i];
            json_t *o = json_object();
            json_object_set_new(o, "metric", labels_json(s->labels, s->nlabels));
            if (r->type == PQ_T_VECTOR) {
                json_object_set_new(o, "value", point_json(s->t[0], s->v[0]));
            } else {
                json_t *vals = json_array();
                for (size_t k = 0; k < s->n; k++)
                    json_array_append_new(vals, point_json(s->t[k], s->v[k]));
                json_object_set_new(o, "values", vals);
            }
            json_array_append_new(res, o);
        }
    }
    return json_pack("{s:s, s:o}", "resultType", types[r->type], "result", res);
}

/* A vector or matrix answer written straight as text, byte for byte what
 * json_dumps of result_json's tree gives (JSON_COMPACT,
 * JSON_REAL_PRECISION(16)): a range query's answer has one point per series
 * and step, and building a jansson array, integer and string per point cost
 * more than the text. Labels still go through jansson (its escaping and
 * UTF-8 checks); so do timestamps that are not whole seconds (its real
 * formatting). */
static void put_ts(mw_buf *b, int64_t t)
{
    if (t % 1000 != 0) {
        json_t *j = ts_json(t);
        char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(16));
        json_decref(j);
        if (s) mw_buf_puts(b, s);
        free(s);
        return;
    }
    int64_t x = t / 1000;
    char tmp[24];
    size_t n = 0;
    uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0) tmp[n++] = '-';
    if (mw_buf_reserve(b, n) < 0) return;
    for (size_t i = 0; i < n; i++)
        b->data[b->len + i] = tmp[n - 1 - i];
    b->len += n;
    b->data[b->len] = '\0';
}

static void put_point(mw_buf *b, int64_t t, double v)
{
    char num[PQ_VALUE_BUFSIZE];
    mw_buf_putc(b, '[');
    put_ts(b, t);
    mw_buf_append(b, ",\"", 2);
    pq_format_value(v, num, sizeof(num));
    mw_buf_puts(b, num);
    mw_buf_append(b, "\"]", 2);
}

/* The warning of an answer some of whose stored samples failed their
 * checksum: fewer samples, said so, never silently. */
static void damaged_warning(const pq_result *r, char *out, size_t size)
{
    snprintf(out, size,
             "%zu stored chunk%s failed %s checksum: %s samples are missing from this answer "
             "(the agent's log names the files)",
             r->damaged_chunks, r->damaged_chunks == 1 ? "" : "s",
             r->damaged_chunks == 1 ? "its" : "their", r->damaged_chunks == 1 ? "its" : "their");
}

/* The answer's "warnings" and "infos", as Prometheus's API writes them: at
 * most 10 of each, then how many more were left out; NULL for none (the
 * key is then absent, as Go's omitempty leaves it). The damaged-chunk
 * warning comes first. */
static void annot_arrays(const pq_result *r, const char *query, json_t **warnings, json_t **infos)
{
    json_t *arr[2] = {json_array(), json_array()};
    size_t skipped[2] = {0, 0};
    if (r->damaged_chunks) {
        char w[200];
        damaged_warning(r, w, sizeof(w));
        json_array_append_new(arr[0], json_string(w));
    }
    for (size_t i = 0; i < r->nannots; i++) {
        int k = r->annots[i].info ? 1 : 0;
        if (json_array_size(arr[k]) >= 10) {
            skipped[k]++;
            continue;
        }
        char *t = pq_annot_text(&r->annots[i], query);
        json_array_append_new(arr[k], json_string(t));
        free(t);
    }
    for (int k = 0; k < 2; k++) {
        if (skipped[k]) {
            char m[80];
            snprintf(m, sizeof(m), "%zu more %s annotations omitted", skipped[k],
                     k ? "info" : "warning");
            json_array_append_new(arr[k], json_string(m));
        }
        if (!json_array_size(arr[k])) {
            json_decref(arr[k]);
            arr[k] = NULL;
        }
    }
    *warnings = arr[0];
    *infos = arr[1];
}

/* Prometheus's "stats" object (any stats= value; per-step samples are
 * Prometheus's per_step_stats feature, off there by default, not here):
 * timings in seconds, samples read from the store and the peak in memory. */
static json_t *stats_json(const pq_result *r, double prep_s, double eval_s)
{
    return json_pack("{s:{s:f, s:f, s:f, s:f, s:f, s:f}, s:{s:I, s:I}}", "timings", "evalTotalTime",
                     eval_s, "resultSortTime", 0.0, "queryPreparationTime", prep_s, "innerEvalTime",
                     eval_s, "execQueueTime", 0.0, "execTotalTime", prep_s + eval_s, "samples",
                     "totalQueryableSamples", (json_int_t)r->total_samples, "peakSamples",
                     (json_int_t)r->peak_samples);
}

/* NULL when the text would be larger than max bytes (0: no limit). */
static char *result_text(const pq_result *r, const char *query, const json_t *stats, size_t max,
                         size_t *len)
{
    mw_buf b;
    mw_buf_init(&b, max);
    mw_buf_puts(&b,
                r->type == PQ_T_VECTOR
                    ? "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
                    : "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[");
    for (size_t i = 0; i < r->nseries; i++) {
        const pq_series *s = &r->series[i];
        json_t *l = labels_json(s->labels, s->nlabels);
        char *ls = json_dumps(l, JSON_COMPACT | JSON_REAL_PRECISION(16));
        json_decref(l);
        mw_buf_puts(&b, i ? ",{\"metric\":" : "{\"metric\":");
        mw_buf_puts(&b, ls ? ls : "{}");
        free(ls);
        if (r->nhists && pq_hist_put_points(&b, r, s)) {
            /* native histograms: histogram_fmt.c */
        } else if (r->type == PQ_T_VECTOR) {
            mw_buf_puts(&b, ",\"value\":");
            put_point(&b, s->t[0], s->v[0]);
        } else {
            mw_buf_puts(&b, ",\"values\":[");
            for (size_t k = 0; k < s->n; k++) {
                if (k) mw_buf_putc(&b, ',');
                put_point(&b, s->t[k], s->v[k]);
            }
            mw_buf_putc(&b, ']');
        }
        mw_buf_putc(&b, '}');
    }
    mw_buf_putc(&b, ']');
    if (stats) {
        char *st = json_dumps(stats, JSON_COMPACT | JSON_REAL_PRECISION(9));
        mw_buf_puts(&b, ",\"stats\":");
        mw_buf_puts(&b, st ? st : "{}");
        free(st);
    }
    mw_buf_putc(&b, '}');
    json_t *an[2];
    annot_arrays(r, query, &an[0], &an[1]);
    for (int k = 0; k < 2; k++) {
        if (!an[k]) continue;
        char *text = json_dumps(an[k], JSON_COMPACT);
        json_decref(an[k]);
        mw_buf_puts(&b, k ? ",\"infos\":" : ",\"warnings\":");
        mw_buf_puts(&b, text ? text : "[]");
        free(text);
    }
    mw_buf_putc(&b, '}');
    if (b.overflow) {
        mw_buf_free(&b);
        return NULL;
    }
    return mw_buf_steal(&b, len);
}

/* The answer's limits: 0, or -1 after a 422. */
static int check_answer(const mw_query_api *api, const pq_result *r, mw_http_response *resp)
{
    if (r->type != PQ_T_VECTOR && r->type != PQ_T_MATRIX) return 0;
    if (api->max_answer_series && r->nseries > api->max_answer_series) {
        api_respond_error(resp, 422,
                          "the answer would hold %zu series, more than the limit of %zu "
                          "(--query-max-series)",
                          r->nseries, api->max_answer_series);
        return -1;
    }
    size_t points = 0;
    for (size_t i = 0; i < r->nseries; i++)
        points += r->type == PQ_T_VECTOR ? 1 : r->series[i].n;
    if (api->max_answer_points && points > api->max_answer_points) {
        api_respond_error(resp, 422,
                          "the answer would hold %zu points, more than the limit of %zu "
                          "(--query-max-points)",
                          points, api->max_answer_points);
        return -1;
    }
    return 0;
}

int api_time_param(mw_http_response *resp, const params *p, const char *name, int64_t def,
                   int64_t *out)
{
    const char *v = api_param(p, name);
    if (!v || !*v) {
        *out = def;
        return 0;
    }
    if (mw_api_parse_time(v, out) < 0) {
        api_respond_error(resp, 400,
                          "invalid parameter \"%s\": cannot parse \"%.100s\" to a valid timestamp",
                          name, v);
        return -1;
    }
    return 0;
}

static void query_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    mw_query_api *api = cls;
    params p;
    api_params_load(&p, req);
    int range = strcmp(req->path, "/api/v1/query_range") == 0;
    int64_t start, end, step = 0;
    pq_node *n = NULL;
    const char *q = api_param(&p, "query");
    char err[1024];
    if (check_control_bytes(resp, &p) < 0) goto done;
    if (!q) {
        api_respond_error(resp, 400, "invalid parameter \"query\": query must not be empty");
        goto done;
    }
    if (range) {
        if (api_time_param(resp, &p, "start", INT64_MIN, &start) < 0 ||
            api_time_param(resp, &p, "end", INT64_MIN, &end) < 0)
            goto done;
        if (start == INT64_MIN || end == INT64_MIN) {
            api_respond_error(resp, 400,
                              "invalid parameter \"%s\": cannot parse \"\" to a valid timestamp",
                              start == INT64_MIN ? "start" : "end");
            goto done;
        }
        if (end < start) {
            api_respond_error(
                resp, 400,
                "invalid parameter \"end\": end timestamp must not be before start time");
            goto done;
        }
        const char *st = api_param(&p, "step");
        if (!st || pq_parse_duration(st, &step) < 0) {
            api_respond_error(
                resp, 400,
                "invalid parameter \"step\": cannot parse \"%.100s\" to a valid duration",
                st ? st : "");
            goto done;
        }
        if (step <= 0) {
            api_respond_error(resp, 400,
                              "invalid parameter \"step\": zero or negative query resolution step "
                              "widths are not accepted. Try a positive integer");
            goto done;
        }
        if ((end - start) / step > MAX_POINTS) {
            api_respond_error(resp, 400,
                              "exceeded maximum resolution of 11,000 points per timeseries. Try "
                              "decreasing the query resolution (?step=XX)");
            goto done;
        }
    } else {
        if (api_time_param(resp, &p, "time", mw_now_ms(), &start) < 0) goto done;
        end = start;
    }
    pq_limits lim = api->limits;
    lim.cancel = req->cancel;
    const char *to = api_param(&p, "timeout");
    int64_t tms;
    if (to && *to) {
        if (pq_parse_duration(to, &tms) < 0) {
            api_respond_error(
                resp, 400,
                "invalid parameter \"timeout\": cannot parse \"%.100s\" to a valid duration", to);
            goto done;
        }
        if (tms > 0 && (lim.timeout_ms <= 0 || tms < lim.timeout_ms)) lim.timeout_ms = tms;
    }
    int64_t t_parse = mw_mono_ns();
    n = pq_parse(q, err, sizeof(err));
    if (!n) {
        api_respond_error(resp, 400, "invalid parameter \"query\": %s", err);
        goto done;
    }
    if (!api->store) {
        respond_store_unavailable(resp);
        goto done;
    }
    mw_matcher scope;
    int scoped = scope_matcher(req, &scope, resp);
    if (scoped < 0) goto done;
    if (scoped) lim.scope = &scope;
    pq_result r;
    int64_t t_eval = mw_mono_ns();
    int rc = pq_eval(api->store, n, start, end, step, &lim, &r, err, sizeof(err));
    if (scoped) mw_matcher_free(&scope);
    if (rc) {
        api_respond_error(resp, rc, "%s", err);
        /* What the query held is free again: give it back to the system
         * now rather than at the agent's next cycle. */
        mw_release_free_memory();
        goto done;
    }
    if (check_answer(api, &r, resp) < 0) {
        pq_result_free(&r);
        mw_release_free_memory();
        goto done;
    }
    const char *want_stats = api_param(&p, "stats");
    json_t *stats = want_stats && *want_stats ? stats_json(&r, (double)(t_eval - t_parse) / 1e9,
                                                           (double)(mw_mono_ns() - t_eval) / 1e9)
                                              : NULL;
    if (r.type == PQ_T_VECTOR || r.type == PQ_T_MATRIX) {
        resp->status = 200;
        resp->content_type = "application/json";
        resp->body = result_text(&r, q, stats, api->max_answer_bytes, &resp->len);
        if (!resp->body)
            api_respond_error(resp, 422,
                              "the answer would be larger than %zu bytes (--query-max-bytes)",
                              api->max_answer_bytes);
    } else {
        json_t *data = result_json(&r);
        if (stats) json_object_set(data, "stats", stats);
        json_t *ws, *is;
        annot_arrays(&r, q, &ws, &is);
        if (ws || is) {
            json_t *root = json_pack("{s:s, s:o}", "status", "success", "data", data);
            if (ws) json_object_set_new(root, "warnings", ws);
            if (is) json_object_set_new(root, "infos", is);
            api_respond_json(resp, 200, root);
        } else {
            api_respond_data(resp, data);
        }
    }
    json_decref(stats);
    pq_result_free(&r);
    if (resp->status != 200 || resp->len > (1u << 20)) mw_release_free_memory();
done:
    pq_node_free(n);
    api_params_free(&p);
    api_gzip(req, resp);
}

/* Series matching any match[] selector, with samples in [start, end]; a
 * callback per series. -1 after responding with an error. */
typedef void (*series_fn)(void *ctx, const mw_series_data *d);

static int for_series(mw_query_api *api, const mw_http_request *req, mw_http_response *resp,
                      const params *p, int need_match, series_fn fn, void *ctx)
{
    int64_t start, end;
    if (api_time_param(resp, p, "start", INT64_MIN / 2, &start) < 0 ||
        api_time_param(resp, p, "end", INT64_MAX / 2, &end) < 0)
        return -1;
    if (!api->store) {
        respond_store_unavailable(resp);
        return -1;
    }
    mw_matcher scope;
    int scoped = scope_matcher(req, &scope, resp);
    if (scoped < 0) return -1;
    int nmatch = 0, failed = 0;
    for (int i = 0; i <= p->n && !failed; i++) {
        const char *sel = NULL;
        if (i < p->n) {
            if (strcmp(p->k[i], "match[]") != 0) continue;
            sel = p->v[i];
        } else if (nmatch || need_match) {
            break;
        }
        nmatch++;
        char err[1024];
        pq_node *n = NULL;
        if (sel) {
            n = pq_parse(sel, err, sizeof(err));
            if (n && n->kind != PQ_VSEL) {
                snprintf(err, sizeof(err), "match[] must be a series selector");
                pq_node_free(n);
                n = NULL;
            }
            if (!n) {
                api_respond_error(resp, 400, "invalid parameter \"match[]\": %s", err);
                failed = 1;
                break;
            }
        }
        mw_select_result r;
        int rc = mw_store_select_scoped(api->store, scoped ? &scope : NULL, n ? n->matchers : NULL,
                                        n ? n->nmatchers : 0, start, end, api->limits.max_samples,
                                        &r, err, sizeof(err));
        pq_node_free(n);
        if (rc < 0) {
            api_respond_error(resp, 422, "%s", err);
            failed = 1;
            break;
        }
        if (api->limits.max_series && r.nseries > api->limits.max_series) {
            api_respond_error(resp, 422,
                              "the selector matches %zu series, more than the limit of %zu "
                              "(--query-max-series)",
                              r.nseries, api->limits.max_series);
            mw_select_result_free(&r);
            return -1;
        }
        for (size_t k = 0; k < r.nseries; k++)
            if (r.series[k].n) fn(ctx, &r.series[k]);
        mw_select_result_free(&r);
    }
    if (scoped) mw_matcher_free(&scope);
    if (failed) return -1;
    if (!nmatch) {
        api_respond_error(resp, 400, "no match[] parameter provided");
        return -1;
    }
    return 0;
}

typedef struct collect {
    smap seen;
    mw_buf key;
    json_t *arr;
    const char *label; /* label values: of this name; labels: NULL */
    int names;
} collect;

static void collect_series(void *ctx, const mw_series_data *d)
{
    collect *c = ctx;
    if (c->names || c->label) {
        for (size_t i = 0; i < d->nlabels; i++) {
            const char *s = c->names ? d->labels[i].name : NULL;
            if (c->label && !strcmp(d->labels[i].name, c->label)) s = d->labels[i].value;
            if (!s || smap_get(&c->seen, s) != (size_t)-1) continue;
            smap_put(&c->seen, s, 0);
            json_array_append_new(c->arr, json_string(s));
        }
        return;
    }
    mw_buf_clear(&c->key);
    json_t *o = json_object();
    for (size_t i = 0; i < d->nlabels; i++) {
        mw_buf_printf(&c->key, "%s\xff%s\xfe", d->labels[i].name, d->labels[i].value);
        json_object_set_new(o, d->labels[i].name, json_string(d->labels[i].value));
    }
    if (smap_get(&c->seen, c->key.data) != (size_t)-1) {
        json_decref(o);
        return;
    }
    smap_put(&c->seen, c->key.data, 0);
    json_array_append_new(c->arr, o);
}

static int cmp_json_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* Prometheus 3's escaping of a name in a URL path (model.UnescapeName,
 * ValueEncodingEscaping): "U__" then "__" for "_" and "_HEX_" for any
 * other character outside [a-zA-Z0-9]; a name that does not decode stays
 * as it is. In place (the decoded name is never longer). */
static void unescape_name(char *name)
{
    if (strncmp(name, "U__", 3)) return;
    char out[1024];
    size_t o = 0;
    for (const char *p = name + 3; *p; p++) {
        if (o + 5 >= sizeof(out)) return;
        if (*p != '_') {
            out[o++] = *p;
            continue;
        }
        if (p[1] == '_') {
            out[o++] = '_';
            p++;
            continue;
        }
        char *end;
        unsigned long cp = strtoul(p + 1, &end, 16);
        if (end == p + 1 || *end != '_') return;
        int len = mw_utf8_put(cp, out + o);
        if (!len) return; /* a surrogate or past U+10FFFF */
        o += (size_t)len;
        p = end;
    }
    if (o == 0 || o > strlen(name)) return;
    memcpy(name, out, o);
    name[o] = 0;
}

/* Go's %q of s, for messages: bytes outside printable ASCII as \xNN. */
static void go_quote(const char *s, char *out, size_t size)
{
    size_t o = 0;
    out[o++] = '"';
    for (; *s && o + 6 < size; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o++] = '"';
    out[o] = 0;
}

static void meta_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    mw_query_api *api = cls;
    params p;
    api_params_load(&p, req);
    collect c = {.arr = json_array()};
    smap_init(&c.seen);
    mw_buf_init(&c.key, 0);
    char name[256] = "";
    if (check_control_bytes(resp, &p) < 0) goto done;
    if (!strcmp(req->path, "/api/v1/labels")) {
        c.names = 1;
    } else if (!strncmp(req->path, "/api/v1/label/", 14)) {
        const char *s = req->path + 14, *e = strstr(s, "/values");
        if (!e || e[7] || e == s || (size_t)(e - s) >= sizeof(name)) {
            api_respond_error(resp, 404, "not found");
            goto done;
        }
        memcpy(name, s, (size_t)(e - s));
        name[url_decode(name, (size_t)(e - s))] = '\0';
        unescape_name(name);
        if (!lbl_name_valid(name)) { /* Go's %q of the name */
            char q[sizeof(name) * 4 + 3];
            go_quote(name, q, sizeof(q));
            api_respond_error(resp, 400, "invalid label name: %s", q);
            goto done;
        }
        c.label = name;
    }
    if (for_series(api, req, resp, &p, !c.names && !c.label, collect_series, &c) < 0) goto done;
    if (c.names || c.label) {
        size_t n = json_array_size(c.arr);
        json_t **items = mw_xcalloc(n ? n : 1, sizeof(json_t *));
        for (size_t i = 0; i < n; i++)
            items[i] = json_incref(json_array_get(c.arr, i));
        qsort(items, n, sizeof(json_t *), cmp_json_str);
        json_array_clear(c.arr);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(c.arr, items[i]);
        free(items);
    }
    api_respond_data(resp, json_incref(c.arr));
done:
    json_decref(c.arr);
    smap_free(&c.seen);
    mw_buf_free(&c.key);
    api_params_free(&p);
    api_gzip(req, resp);
}

/* A scoped reader learns only the metric names of series it may see: a
 * name stays when one of them has a sample at any time (a selection
 * limited to one sample says so without loading more). */
static void drop_invisible_metrics(mw_query_api *api, const mw_matcher *scope, json_t *data)
{
    const char *name;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(data, tmp, name, v)
    {
        int visible = 0;
        if (api->store) {
            mw_matcher m;
            char err[256];
            if (mw_matcher_init(&m, MW_MATCH_EQ, "__name__", name, err, sizeof(err)) == 0) {
                mw_select_result r;
                int rc = mw_store_select_scoped(api->store, scope, &m, 1, INT64_MIN / 2,
                                                INT64_MAX / 2, 1, &r, err, sizeof(err));
                if (rc < 0)
                    visible = 1; /* more than one sample */
                else {
                    for (size_t k = 0; k < r.nseries && !visible; k++)
                        visible = r.series[k].n > 0;
                    mw_select_result_free(&r);
                }
                mw_matcher_free(&m);
            }
        }
        if (!visible) json_object_del(data, name);
    }
}

/* /api/v1/metadata?metric=NAME&limit=N as Prometheus 2.x. */
static void metadata_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    mw_query_api *api = cls;
    params p;
    api_params_load(&p, req);
    const char *ls = api_param(&p, "limit"), *metric = api_param(&p, "metric");
    long limit = -1;
    if (ls && *ls) {
        char *end;
        limit = strtol(ls, &end, 10);
        if (*end || end == ls) {
            api_respond_error(resp, 400, "limit must be a number");
            api_params_free(&p);
            return;
        }
    }
    json_t *data = mw_metadata_json(api->meta, metric, limit);
    mw_matcher scope;
    int scoped = scope_matcher(req, &scope, resp);
    if (scoped < 0) {
        json_decref(data);
        api_params_free(&p);
        return;
    }
    if (scoped) drop_invisible_metrics(api, &scope, data);
    if (scoped) mw_matcher_free(&scope);
    api_respond_data(resp, data);
    api_params_free(&p);
    api_gzip(req, resp);
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_query_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option query_rows[] = {
    OPT("query-timeout", MW_OPT_DURATION, timeout_ms, "2m", NULL, "Longest one PromQL query may take, evaluated from the store or forwarded to --query-url (a query thread is busy meanwhile); beyond it errorType timeout (503, or 504 from --query-url)"),
    OPT("query-max-samples", MW_OPT_NUMBER, max_samples, "20000000", mw_check_count, "Most samples one PromQL query may hold in memory at once (loaded and computed); beyond it 422 (0: no limit)"),
    OPT("query-max-series", MW_OPT_NUMBER, max_series, "500000", mw_check_count, "Most series one selector may load, and one answer (query, query_range, series) may hold; beyond it 422 (0: no limit)"),
    OPT("query-max-points", MW_OPT_NUMBER, max_points, "5000000", mw_check_count, "Most points (samples) one query's answer may hold; beyond it 422 (0: no limit)"),
    OPT("query-max-bytes", MW_OPT_SIZE, max_bytes, "64MiB", NULL, "Largest answer one query may send; beyond it 422 (0: no limit)"),
    OPT("query-lookback-delta", MW_OPT_DURATION, lookback_ms, "5m", NULL, "How far back an instant selector looks for a series' latest sample, as Prometheus's --query.lookback-delta"),
    OPT("query-closed-windows", MW_OPT_BOOL, closed_windows, "false", NULL, "Take a sample exactly at the start of a range, subquery or lookback window, as Prometheus 2 did (Prometheus 3 and the default leave the start out: (t - range, t])"),
    OPT("query-delayed-name-removal", MW_OPT_BOOL, delayed_name_removal, "false", NULL, "Drop the metric name (and __type__, __unit__) of a function's or operator's result only at the end of the query, so that label_replace and by (__name__) still see it, as Prometheus 3's promql-delayed-name-removal feature (off there too by default)"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_query_options =
    MW_OPTION_GROUP("PromQL engine", "src/query/api.c", mw_query_settings, query_rows, NULL);

void mw_query_api_set_limits(mw_query_api *api, const mw_query_settings *set)
{
    pq_default_limits(&api->limits);
    api->limits.max_samples = (size_t)set->max_samples;
    api->limits.timeout_ms = set->timeout_ms;
    api->limits.lookback_ms = set->lookback_ms;
    api->limits.closed_windows = set->closed_windows;
    api->limits.delayed_name_removal = set->delayed_name_removal;
    api->limits.max_series = (size_t)set->max_series;
    api->max_answer_series = (size_t)set->max_series;
    api->max_answer_points = (size_t)set->max_points;
    api->max_answer_bytes = (size_t)set->max_bytes;
}

void mw_query_api_register(mw_http_server *http, mw_query_api *api)
{
    static const char *methods[] = {"GET", "POST"};
    for (int i = 0; i < 2; i++) {
        mw_http_route_lane(http, MW_ROLE_READ, methods[i], "/api/v1/query", 0, query_handler, api);
        mw_http_route_lane(http, MW_ROLE_READ, methods[i], "/api/v1/query_range", 0, query_handler,
                           api);
        mw_http_route_lane(http, MW_ROLE_READ, methods[i], "/api/v1/series", 0, meta_handler, api);
        mw_http_route_lane(http, MW_ROLE_READ, methods[i], "/api/v1/labels", 0, meta_handler, api);
        mw_http_route_lane(http, MW_ROLE_READ, methods[i], "/api/v1/label/", 1, meta_handler, api);
    }
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/metadata", 0, metadata_handler, api);
    api_register_status(http, api);
}
