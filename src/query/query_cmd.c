/* query_cmd.c - `mlwatch query EXPR`: sends a PromQL query to the
 * Prometheus HTTP API (/api/v1/query or /api/v1/query_range) of --url, by
 * default the local agent on --listen, and prints the result as a table
 * (one line per series) or, with --json, the server's `data` object.
 *
 * The query goes over HTTP rather than straight to the store so the same
 * command works against the agent (whose store another process holds open)
 * and against Prometheus, VictoriaMetrics, Thanos... */
#include "query_cmd.h"

#include "../core/buf.h"
#include "../core/http_client.h"
#include "../core/util.h"
#include "api.h"
#include "promql.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BODY_MAX (256u << 20) /* a larger answer is an error, not an OOM */

static int check_time(const char *v, char *why, size_t whysize)
{
    int64_t ms;
    if (!*v || mw_api_parse_time(v, &ms) == 0) return 0;
    snprintf(why, whysize,
             "must be RFC 3339 (2026-01-02T15:04:05Z) or unix seconds (1767366245.5)");
    return -1;
}

static int check_step(const char *v, char *why, size_t whysize)
{
    int64_t ms;
    if (!*v || (pq_parse_duration(v, &ms) == 0 && ms > 0)) return 0;
    snprintf(why, whysize, "must be a positive duration (15s, 1m30s) or float seconds (15, 0.5)");
    return -1;
}

/* Percent-encode for a query string (RFC 3986 unreserved kept). */
static void put_encoded(mw_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            mw_buf_putc(b, (char)*p);
        } else {
            mw_buf_putc(b, '%');
            mw_buf_putc(b, hex[*p >> 4]);
            mw_buf_putc(b, hex[*p & 15]);
        }
    }
}

/* Times go to the server as seconds with millisecond precision: every
 * Prometheus-compatible server accepts that form. */
static void put_param_ms(mw_buf *b, const char *name, int64_t ms)
{
    mw_buf_printf(b, "&%s=%s%lld.%03lld", name, ms < 0 ? "-" : "",
                  (long long)(ms < 0 ? -ms : ms) / 1000, (long long)(ms < 0 ? -ms : ms) % 1000);
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_query_cmd_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option query_cmd_rows[] = {
    OPT("time", MW_OPT_STRING, time, "", check_time, "`mlwatch query`: evaluation time, RFC 3339 or unix seconds (default: now)"),
    OPT("start", MW_OPT_STRING, start, "", check_time, "`mlwatch query`: range query start, RFC 3339 or unix seconds"),
    OPT("end", MW_OPT_STRING, end, "", check_time, "`mlwatch query`: range query end, RFC 3339 or unix seconds"),
    OPT("step", MW_OPT_STRING, step, "", check_step, "`mlwatch query`: range query step, a duration (15s) or float seconds"),
    OPT("url", MW_OPT_STRING, url, "", NULL, "`mlwatch query`, `mlwatch doctor`: base URL of the agent to ask (query: or of any Prometheus-compatible server; default: the agent on --listen)"),
    OPT("token-file", MW_OPT_STRING, token_file, "", NULL, "`mlwatch query`, `mlwatch doctor`: file holding the bearer token to send (an agent with --read-token-file; the token is never printed)"),
    OPT("ca-file", MW_OPT_STRING, ca_file, "", NULL, "`mlwatch query`, `mlwatch doctor`: PEM CA certificates that sign the agent's certificate (an agent with --tls-cert-file); the default URL is then https://"),
    OPT("tls-server-name", MW_OPT_STRING, server_name, "", NULL, "`mlwatch query`, `mlwatch doctor`: name the agent's certificate is checked against when it is not the URL's host (the manifests' certificate names mlwatch)"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_query_cmd_options = MW_OPTION_GROUP(
    "mlwatch query", "src/query/query_cmd.c", mw_query_cmd_settings, query_cmd_rows, NULL);

/* The base URL: --url, else the agent on --listen (all interfaces means
 * this machine), https:// when a CA or server name is given for it. */
static int base_url(const mw_config *cfg, char *out, size_t outsize)
{
    const mw_query_cmd_settings *qs = mw_config_group(cfg, &mw_query_cmd_options);
    if (qs->url[0]) {
        mw_strlcpy(out, qs->url, outsize);
    } else {
        char host[256];
        uint16_t port;
        if (mw_parse_listen(cfg->listen, host, sizeof(host), &port) < 0 || port == 0) return -1;
        const char *h = host;
        if (!*h || strcmp(h, "0.0.0.0") == 0) h = "127.0.0.1";
        if (strcmp(h, "::") == 0) h = "::1";
        int v6 = strchr(h, ':') != NULL;
        int tls = qs->ca_file[0] || qs->server_name[0];
        snprintf(out, outsize, "%s://%s%s%s:%u", tls ? "https" : "http", v6 ? "[" : "", h,
                 v6 ? "]" : "", port);
    }
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '/')
        out[--n] = '\0';
    return 0;
}

int mw_query_client_prepare(const mw_config *cfg, const char *path, mw_query_client *qc,
                            mw_http_call *call, char *why, size_t whysize)
{
    const mw_query_cmd_settings *qs = mw_config_group(cfg, &mw_query_cmd_options);
    memset(qc, 0, sizeof(*qc));
    char base[1100], url[1400];
    if (base_url(cfg, base, sizeof(base)) < 0) {
        snprintf(why, whysize, "--listen %s has no port to query; give --url", cfg->listen);
        return -1;
    }
    snprintf(url, sizeof(url), "%s%s", base, path);
    if (qs->server_name[0]) {
        if (mw_http_rename_host(url, qs->server_name, qc->url, sizeof(qc->url), qc->connect_to,
                                sizeof(qc->connect_to)) < 0) {
            snprintf(why, whysize, "--tls-server-name: no host in the URL %s", base);
            return -1;
        }
        call->connect_to = qc->connect_to;
    } else {
        mw_strlcpy(qc->url, url, sizeof(qc->url));
    }
    if (qs->token_file[0]) {
        if (mw_read_secret_file(qs->token_file, qc->token, sizeof(qc->token), why, whysize) < 0)
            return -1;
        if (!qc->token[0]) {
            snprintf(why, whysize, "%s: no token in it (--token-file)", qs->token_file);
            return -1;
        }
        call->bearer_token = qc->token;
    }
    if (qs->ca_file[0]) call->tls.ca_file = qs->ca_file;
    call->url = qc->url;
    return 0;
}

static void put_label_value(const char *v)
{
    putchar('"');
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            printf("\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", stdout);
        else
            putchar(*v);
    }
    putchar('"');
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* name{a="b", c="d"}, labels sorted; {} for a series without any. */
static void print_labels(const json_t *metric)
{
    const json_t *name = json_object_get(metric, "__name__");
    size_t n = json_object_size(metric), k = 0;
    const char **keys = n ? calloc(n, sizeof(*keys)) : NULL;
    const char *key;
    json_t *v;
    if (keys) {
        json_object_foreach((json_t *)metric, key, v)
        {
            if (strcmp(key, "__name__") != 0 && json_is_string(v)) keys[k++] = key;
        }
        qsort(keys, k, sizeof(*keys), cmp_str);
    }
    if (json_is_string(name)) fputs(json_string_value(name), stdout);
    if (k || !json_is_string(name)) {
        putchar('{');
        for (size_t i = 0; i < k; i++) {
            printf("%s%s=", i ? ", " : "", keys[i]);
            put_label_value(json_string_value(json_object_get(metric, keys[i])));
        }
        putchar('}');
    }
    free(keys);
}

/* [ts, "value"] -> "value" (servers send values as strings). */
static const char *point_value(const json_t *pt)
{
    const json_t *v = json_array_get(pt, 1);
    return json_is_string(v) ? json_string_value(v) : "?";
}

/* Vector: `labels value`. Matrix: `labels` then one `  timestamp value`
 * line per point. Scalar and string: the value alone. */
static int print_table(const json_t *data)
{
    const char *type = json_string_value(json_object_get(data, "resultType"));
    const json_t *result = json_object_get(data, "result");
    if (!type) return -1;
    if (strcmp(type, "scalar") == 0 || strcmp(type, "string") == 0) {
        printf("%s\n", point_value(result));
        return 0;
    }
    if (!json_is_array(result)) return -1;
    size_t i;
    const json_t *s;
    json_array_foreach(result, i, s)
    {
        print_labels(json_object_get(s, "metric"));
        if (strcmp(type, "vector") == 0) {
            printf(" %s\n", point_value(json_object_get(s, "value")));
            continue;
        }
        putchar('\n');
        size_t j;
        const json_t *pt;
        json_array_foreach(json_object_get(s, "values"), j, pt)
        {
            printf("  %.3f %s\n", json_number_value(json_array_get(pt, 0)), point_value(pt));
        }
    }
    return 0;
}

/* Interpret the answer: 0 printed, 1 error (already reported). */
static int handle_answer(const mw_config *cfg, const char *url, long status, const mw_buf *body)
{
    json_error_t jerr;
    json_t *root = json_loadb(body->data ? body->data : "", body->len, 0, &jerr);
    const char *st = json_string_value(json_object_get(root, "status"));
    int rc = 1;
    if (!st) {
        fprintf(stderr, "mlwatch query: %s: HTTP %ld, not a Prometheus API answer: %.200s\n", url,
                status, body->data ? body->data : "");
    } else if (strcmp(st, "success") != 0) {
        const char *et = json_string_value(json_object_get(root, "errorType"));
        const char *e = json_string_value(json_object_get(root, "error"));
        fprintf(stderr, "mlwatch query: %s: %s\n", et ? et : "error", e ? e : "(no message)");
    } else {
        size_t i;
        const json_t *w;
        json_array_foreach(json_object_get(root, "warnings"), i, w)
        {
            fprintf(stderr, "mlwatch query: warning: %s\n", json_string_value(w));
        }
        json_array_foreach(json_object_get(root, "infos"), i, w)
        {
            fprintf(stderr, "mlwatch query: info: %s\n", json_string_value(w));
        }
        const json_t *data = json_object_get(root, "data");
        if (cfg->json) {
            char *s = json_dumps(data, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
            if (s) {
                printf("%s\n", s);
                rc = 0;
            }
            free(s);
        } else if (print_table(data) == 0) {
            rc = 0;
        } else {
            fprintf(stderr, "mlwatch query: %s: answer without resultType/result\n", url);
        }
    }
    json_decref(root);
    return rc;
}

int mw_query_command(const mw_config *cfg, char **rest, size_t nrest)
{
    const mw_query_cmd_settings *qs = mw_config_group(cfg, &mw_query_cmd_options);
    static const char usage[] =
        "usage: mlwatch query EXPR [--time T] [--start S --end E --step D] "
        "[--url URL] [--token-file F] [--ca-file F] [--tls-server-name N] [--json]";
    if (nrest != 1 || !rest[0][0]) {
        fprintf(stderr, "mlwatch query: %s (%s)\n",
                nrest == 0 ? "EXPR is missing" : "exactly one EXPR", usage);
        return 2;
    }
    int nrange = !!qs->start[0] + !!qs->end[0] + !!qs->step[0];
    if (nrange != 0 && nrange != 3) {
        fprintf(stderr, "mlwatch query: --start, --end and --step go together (%s)\n", usage);
        return 2;
    }
    if (nrange && qs->time[0]) {
        fprintf(stderr, "mlwatch query: --time is for instant queries, not with --start (%s)\n",
                usage);
        return 2;
    }
    int64_t t0 = 0, t1 = 0, step = 0;
    if (nrange) {
        /* Validated by the options table already; checked again for safety. */
        if (mw_api_parse_time(qs->start, &t0) < 0 || mw_api_parse_time(qs->end, &t1) < 0 ||
            pq_parse_duration(qs->step, &step) < 0 || step <= 0) {
            fprintf(stderr, "mlwatch query: bad --start, --end or --step (%s)\n", usage);
            return 2;
        }
        if (t1 < t0) {
            fprintf(stderr, "mlwatch query: --end is before --start\n");
            return 2;
        }
    } else if (qs->time[0] && mw_api_parse_time(qs->time, &t0) < 0) {
        fprintf(stderr, "mlwatch query: bad --time (%s)\n", usage);
        return 2;
    }

    mw_http_call call = {.connect_timeout_ms = 5000, .timeout_ms = 300000, .max_body = BODY_MAX};
    mw_query_client qc;
    char why[4200];
    if (mw_query_client_prepare(cfg, nrange ? "/api/v1/query_range" : "/api/v1/query", &qc, &call,
                                why, sizeof(why)) < 0) {
        fprintf(stderr, "mlwatch query: %s\n", why);
        return 2;
    }
    char shown[1400];
    mw_http_shown_url(qc.url, shown, sizeof(shown)); /* for messages: no user:password@ */
    mw_buf req;
    mw_buf_init(&req, 1u << 20);
    mw_buf_printf(&req, "%s?query=", qc.url);
    put_encoded(&req, rest[0]);
    if (nrange) {
        put_param_ms(&req, "start", t0);
        put_param_ms(&req, "end", t1);
        put_param_ms(&req, "step", step);
    } else if (qs->time[0]) {
        put_param_ms(&req, "time", t0);
    }
    if (mw_buf_putc(&req, '\0') < 0) {
        fprintf(stderr, "mlwatch query: EXPR too long\n");
        mw_buf_free(&req);
        return 2;
    }

    call.url = req.data;
    int rc;
    if (mw_http_perform(NULL, &call) == 0) {
        rc = handle_answer(cfg, shown, call.status, &call.answer);
    } else if (call.failure == MW_HTTP_UNAVAILABLE) {
        fprintf(stderr, "mlwatch query: %s: libcurl is not available\n", shown);
        rc = 1;
    } else if (call.failure == MW_HTTP_TOO_LARGE) {
        fprintf(stderr, "mlwatch query: %s: answer larger than %u MiB\n", shown, BODY_MAX >> 20);
        rc = 1;
    } else {
        fprintf(stderr, "mlwatch query: %s: %s\n", shown, call.reason);
        rc = 1;
    }
    mw_http_call_free(&call);
    mw_buf_free(&req);
    memset(qc.token, 0, sizeof(qc.token));
    return rc;
}
