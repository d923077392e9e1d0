/* sender.c - remote-write requests (through core/http_client.c) and the retry
 * policy, see sender.h. */
#include "sender.h"
#include "../core/http_client.h"
#include "../core/util.h"
#include "../mlwatch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RETRY_AFTER_CAP_MS (5 * 60 * 1000)

struct mw_rw_client {
    const mw_rw_endpoint_cfg *ep;
    const volatile int *stop;
    mw_http_client *http;
    int64_t retry_after_ms;
};

mw_rw_outcome mw_rw_classify(long status)
{
    if (status >= 200 && status < 300) return MW_RW_OK;
    if (status == 429 || status >= 500 || status < 100) return MW_RW_RETRY;
    return MW_RW_REJECTED; /* 1xx/3xx/4xx: sending it again will not help */
}

int64_t mw_rw_backoff_ms(unsigned attempt, int64_t min_ms, int64_t max_ms, int64_t retry_after_ms,
                         double r)
{
    if (retry_after_ms >= 0)
        return retry_after_ms > RETRY_AFTER_CAP_MS ? RETRY_AFTER_CAP_MS : retry_after_ms;
    int64_t d = min_ms > 0 ? min_ms : 1;
    for (unsigned i = 0; i < attempt && d < max_ms; i++)
        d *= 2;
    if (d > max_ms) d = max_ms;
    if (r < 0) r = 0;
    if (r >= 1) r = 0.999999;
    return d / 2 + (int64_t)((double)(d - d / 2) * r);
}

int64_t mw_rw_parse_retry_after(const char *v, int64_t now_s)
{
    while (*v == ' ' || *v == '\t')
        v++;
    if (*v >= '0' && *v <= '9') {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
            end++;
        if (*end || errno || s > 86400ull * 365) return -1;
        return (int64_t)s * 1000;
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end) return -1;
    int64_t t = (int64_t)timegm(&tm);
    return t <= now_s ? 0 : (t - now_s) * 1000;
}

#define ANSWER_KEPT 255 /* the start of the answer, for the detail */

static void on_header(const char *p, size_t len, void *cls)
{
    mw_rw_client *c = cls;
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        char v[128];
        size_t vl = len - 12 < sizeof(v) - 1 ? len - 12 : sizeof(v) - 1;
        memcpy(v, p + 12, vl);
        v[vl] = 0;
        c->retry_after_ms = mw_rw_parse_retry_after(v, (int64_t)time(NULL));
    }
}

static int stopping(void *cls)
{
    const mw_rw_client *c = cls;
    return *c->stop; /* aborts the transfer at shutdown */
}

mw_rw_client *mw_rw_client_new(const mw_rw_endpoint_cfg *ep, const volatile int *stop)
{
    mw_rw_client *c = mw_xcalloc(1, sizeof(*c));
    c->ep = ep;
    c->stop = stop;
    c->http = mw_http_client_new();
    if (!c->http) {
        free(c);
        return NULL;
    }
    return c;
}

void mw_rw_client_free(mw_rw_client *c)
{
    if (!c) return;
    mw_http_client_free(c->http);
    free(c);
}

/* Read a secret file into out, without trailing white space. */
static void one_line(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f) *p = ' ';
}

void mw_rw_post(mw_rw_client *c, const void *body, size_t len, mw_rw_result *res)
{
    const mw_rw_endpoint_cfg *ep = c->ep;
    memset(res, 0, sizeof(*res));
    res->retry_after_ms = -1;
    c->retry_after_ms = -1;
    char token[4096] = "", password[4096] = "";
    if (ep->bearer_token_file[0] && mw_read_secret_file(ep->bearer_token_file, token, sizeof(token),
                                                        res->detail, sizeof(res->detail)) < 0) {
        res->outcome = MW_RW_RETRY; /* the file may appear (mounted secret) */
        return;
    }
    if (ep->basic_username[0] && ep->basic_password_file[0] &&
        mw_read_secret_file(ep->basic_password_file, password, sizeof(password), res->detail,
                            sizeof(res->detail)) < 0) {
        memset(token, 0, sizeof(token));
        res->outcome = MW_RW_RETRY;
        return;
    }
    /* tls_config.server_name: the URL names the certificate's host, the
     * connection goes to the configured one. */
    char renamed[sizeof(ep->url) + 256], connect_to[sizeof(ep->url) + 300];
    int rename = ep->server_name[0] &&
                 mw_http_rename_host(ep->url, ep->server_name, renamed, sizeof(renamed), connect_to,
                                     sizeof(connect_to)) == 0;
    mw_http_call call = {
        .url = rename ? renamed : ep->url,
        .connect_to = rename ? connect_to : NULL,
        .protocols = "http,https",
        .headers = {"Content-Encoding: snappy", "Content-Type: application/x-protobuf",
                    "X-Prometheus-Remote-Write-Version: 0.1.0",
                    "Expect:"}, /* no 100-continue round trip */
        .bearer_token = token,
        .basic_auth = ep->basic_username[0] != 0,
        .username = ep->basic_username,
        .password = ep->basic_username[0] ? password : NULL,
        .user_agent = "mlwatch/" MLWATCH_VERSION,
        .post = 1,
        .body = body,
        .body_len = len,
        .timeout_ms = ep->timeout_ms,
        .connect_timeout_ms = ep->timeout_ms < 10000 ? ep->timeout_ms : 10000,
        .max_body = ANSWER_KEPT,
        .truncate = 1,
        .on_header = on_header,
        .should_abort = stopping,
        .cls = c,
        .tls = {.ca_file = ep->ca_file,
                .cert_file = ep->cert_file,
                .key_file = ep->cert_file[0] ? ep->key_file : NULL,
                .insecure_skip_verify = ep->insecure_skip_verify},
    };
    int rc = mw_http_perform(c->http, &call);
    memset(token, 0, sizeof(token));
    memset(password, 0, sizeof(password));
    if (rc < 0) {
        res->outcome = MW_RW_RETRY;
        snprintf(res->detail, sizeof(res->detail), "%s",
                 call.detail[0] ? call.detail : call.reason);
        one_line(res->detail);
        mw_http_call_free(&call);
        return;
    }
    res->status = call.status;
    res->outcome = mw_rw_classify(res->status);
    if (res->outcome == MW_RW_RETRY) res->retry_after_ms = c->retry_after_ms;
    snprintf(res->detail, sizeof(res->detail), "HTTP %ld: %s", res->status,
             call.answer.data ? call.answer.data : "");
    one_line(res->detail);
    mw_http_call_free(&call);
}
