/* sender.c - remote-write requests over libcurl and the retry policy, see sender.h. */
#include "sender.h"
#include "../core/util.h"
#include "../mlwatch.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RETRY_AFTER_CAP_MS (5 * 60 * 1000)

struct mw_rw_client {
    const mw_rw_endpoint_cfg *ep;
    const volatile int *stop;
    CURL *curl;
    char answer[256];
    size_t answer_len;
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

static size_t on_body(char *p, size_t size, size_t n, void *cls)
{
    mw_rw_client *c = cls;
    size_t len = size * n, room = sizeof(c->answer) - 1 - c->answer_len;
    size_t take = len < room ? len : room;
    memcpy(c->answer + c->answer_len, p, take);
    c->answer_len += take;
    c->answer[c->answer_len] = 0;
    return len; /* read and discard the rest: the answer is bounded */
}

static size_t on_header(char *p, size_t size, size_t n, void *cls)
{
    mw_rw_client *c = cls;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        char v[128];
        size_t vl = len - 12 < sizeof(v) - 1 ? len - 12 : sizeof(v) - 1;
        memcpy(v, p + 12, vl);
        v[vl] = 0;
        c->retry_after_ms = mw_rw_parse_retry_after(v, (int64_t)time(NULL));
    }
    return len;
}

static int on_progress(void *cls, curl_off_t a, curl_off_t b, curl_off_t cc, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)cc;
    (void)d;
    const mw_rw_client *c = cls;
    return *c->stop ? 1 : 0; /* non-zero aborts the transfer at shutdown */
}

mw_rw_client *mw_rw_client_new(const mw_rw_endpoint_cfg *ep, const volatile int *stop)
{
    mw_rw_client *c = mw_xcalloc(1, sizeof(*c));
    c->ep = ep;
    c->stop = stop;
    c->curl = curl_easy_init();
    if (!c->curl) {
        free(c);
        return NULL;
    }
    return c;
}

void mw_rw_client_free(mw_rw_client *c)
{
    if (!c) return;
    curl_easy_cleanup(c->curl);
    free(c);
}

/* Read a secret file into out, without trailing white space. */
static int read_secret(const char *path, char *out, size_t n, char *why, size_t whysize)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(why, whysize, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t len = fread(out, 1, n - 1, f);
    int toolong = len == n - 1 && fgetc(f) != EOF;
    fclose(f);
    if (toolong) {
        snprintf(why, whysize, "%s: longer than %zu bytes", path, n - 1);
        return -1;
    }
    out[len] = 0;
    while (len && isspace((unsigned char)out[len - 1]))
        out[--len] = 0;
    return 0;
}

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
    c->answer_len = 0;
    c->answer[0] = 0;
    c->retry_after_ms = -1;
    char secret[4096], auth[4200];
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Encoding: snappy");
    h = curl_slist_append(h, "Content-Type: application/x-protobuf");
    h = curl_slist_append(h, "X-Prometheus-Remote-Write-Version: 0.1.0");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    CURL *e = c->curl;
    curl_easy_reset(e);
    if (ep->bearer_token_file[0]) {
        if (read_secret(ep->bearer_token_file, secret, sizeof(secret), res->detail,
                        sizeof(res->detail)) < 0) {
            curl_slist_free_all(h);
            res->outcome = MW_RW_RETRY; /* the file may appear (mounted secret) */
            return;
        }
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", secret);
        h = curl_slist_append(h, auth);
    }
    if (ep->basic_username[0]) {
        secret[0] = 0;
        if (ep->basic_password_file[0] &&
            read_secret(ep->basic_password_file, secret, sizeof(secret), res->detail,
                        sizeof(res->detail)) < 0) {
            curl_slist_free_all(h);
            res->outcome = MW_RW_RETRY;
            return;
        }
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(e, CURLOPT_USERNAME, ep->basic_username);
        curl_easy_setopt(e, CURLOPT_PASSWORD, secret);
    }
    curl_easy_setopt(e, CURLOPT_URL, ep->url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "mlwatch/" MLWATCH_VERSION);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ep->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(ep->timeout_ms < 10000 ? ep->timeout_ms : 10000));
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, c);
    if (ep->ca_file[0]) curl_easy_setopt(e, CURLOPT_CAINFO, ep->ca_file);
    if (ep->cert_file[0]) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, ep->cert_file);
        curl_easy_setopt(e, CURLOPT_SSLKEY, ep->key_file);
    }
    if (ep->insecure_skip_verify) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(e);
    /* The handle keeps option pointers: clear the secrets it saw. */
    curl_easy_setopt(e, CURLOPT_PASSWORD, "");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
    memset(secret, 0, sizeof(secret));
    memset(auth, 0, sizeof(auth));
    if (rc != CURLE_OK) {
        res->outcome = MW_RW_RETRY;
        snprintf(res->detail, sizeof(res->detail), "%s",
                 errbuf[0] ? errbuf : curl_easy_strerror(rc));
        one_line(res->detail);
        return;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &res->status);
    res->outcome = mw_rw_classify(res->status);
    if (res->outcome == MW_RW_RETRY) res->retry_after_ms = c->retry_after_ms;
    snprintf(res->detail, sizeof(res->detail), "HTTP %ld: %s", res->status, c->answer);
    one_line(res->detail);
}
