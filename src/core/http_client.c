/* http_client.c - every outbound HTTP (and SMTP) call, over libcurl; see
 * http_client.h. libcurl itself is reached through src/core/lazylib.c, so a
 * machine without it runs everything but the features that call out. */
#include "http_client.h"
#include "util.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REDACTED "[redacted]"

struct mw_http_client {
    CURL *handle;
};

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static CURL *new_handle(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    return curl_easy_init();
}

mw_http_client *mw_http_client_new(void)
{
    CURL *h = new_handle();
    if (!h) return NULL;
    mw_http_client *c = mw_xcalloc(1, sizeof(*c));
    c->handle = h;
    return c;
}

void mw_http_client_free(mw_http_client *c)
{
    if (!c) return;
    curl_easy_cleanup(c->handle);
    free(c);
}

void mw_http_call_free(mw_http_call *call)
{
    mw_buf_free(&call->answer);
}

/* ---- redaction ---- */

/* Replace text[at, at+len) with rep, within size bytes. */
static void splice(char *text, size_t size, size_t at, size_t len, const char *rep)
{
    size_t tl = strlen(text), rl = strlen(rep);
    size_t tail = tl - at - len;
    if (at + rl >= size) rl = size - 1 - at;
    if (at + rl + tail >= size) tail = size - 1 - at - rl;
    memmove(text + at + rl, text + at + len, tail);
    memcpy(text + at, rep, rl);
    text[at + rl + tail] = '\0';
}

/* The authority of a URL ends at its path, query, fragment or the end of
 * the word; the user:password@ is what comes before its last '@' (a
 * password may hold one). */
static void drop_userinfo(char *text, size_t size)
{
    for (char *p = strstr(text, "://"); p; p = strstr(p, "://")) {
        p += 3;
        size_t end = strcspn(p, "/?# \t\r\n");
        char *at = NULL;
        for (char *c = p; c < p + end; c++)
            if (*c == '@') at = c;
        if (at) splice(text, size, (size_t)(p - text), (size_t)(at + 1 - p), "");
    }
}

static void redact_after(char *text, size_t size, const char *word)
{
    size_t wl = strlen(word);
    for (char *p = strstr(text, word); p; p = strstr(p, word)) {
        p += wl;
        size_t n = strcspn(p, " \t\r\n\"',;");
        if (n == 0 || (n == strlen(REDACTED) && strncmp(p, REDACTED, n) == 0)) continue;
        splice(text, size, (size_t)(p - text), n, REDACTED);
        p += strlen(REDACTED) < strlen(p) ? strlen(REDACTED) : strlen(p);
    }
}

void mw_http_redact(char *text, size_t size, const char *const *secrets)
{
    if (!size) return;
    drop_userinfo(text, size);
    redact_after(text, size, "Bearer ");
    redact_after(text, size, "Basic ");
    for (const char *const *s = secrets; s && *s; s++) {
        size_t sl = strlen(*s);
        if (!sl) continue;
        for (char *p = strstr(text, *s); p; p = strstr(p, *s)) {
            splice(text, size, (size_t)(p - text), sl, REDACTED);
            p += strlen(REDACTED) < strlen(p) ? strlen(REDACTED) : strlen(p);
        }
    }
}

void mw_http_shown_url(const char *url, char *out, size_t size)
{
    mw_strlcpy(out, url, size);
    drop_userinfo(out, size);
}

/* ---- callbacks ---- */

static size_t on_body(char *p, size_t size, size_t nmemb, void *cls)
{
    mw_http_call *call = cls;
    size_t n = size * nmemb;
    if (call->on_data) return call->on_data(p, n, call->cls) == 0 ? n : 0;
    if (call->max_body == 0) return n;
    if (call->truncate) {
        size_t room = call->max_body - call->answer.len;
        if (room) mw_buf_append(&call->answer, p, n < room ? n : room);
        return n;
    }
    /* 0 aborts the transfer (CURLE_WRITE_ERROR); answer.overflow says why. */
    return mw_buf_append(&call->answer, p, n) == 0 ? n : 0;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *cls)
{
    mw_http_call *call = cls;
    call->on_header(p, size * nmemb, call->cls);
    return size * nmemb;
}

static int on_progress(void *cls, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    mw_http_call *call = cls;
    return call->should_abort(call->cls) ? 1 : 0; /* non-zero aborts the transfer */
}

typedef struct upload {
    const char *data;
    size_t len, off;
} upload;

static size_t read_upload(char *dst, size_t size, size_t nmemb, void *cls)
{
    upload *u = cls;
    size_t want = size * nmemb, left = u->len - u->off;
    if (want > left) want = left;
    memcpy(dst, u->data + u->off, want);
    u->off += want;
    return want;
}

/* ---- one call ---- */

static void set_tls(CURL *h, const mw_http_tls *t)
{
    if (t->ca_file && *t->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, t->ca_file);
    if (t->ca_pem && *t->ca_pem) {
        struct curl_blob b = {(void *)t->ca_pem, strlen(t->ca_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    }
    if (t->cert_file && *t->cert_file) curl_easy_setopt(h, CURLOPT_SSLCERT, t->cert_file);
    if (t->key_file && *t->key_file) curl_easy_setopt(h, CURLOPT_SSLKEY, t->key_file);
    if (t->cert_pem && *t->cert_pem) {
        struct curl_blob b = {(void *)t->cert_pem, strlen(t->cert_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
    }
    if (t->key_pem && *t->key_pem) {
        struct curl_blob b = {(void *)t->key_pem, strlen(t->key_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
    }
    if (t->insecure_skip_verify) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    /* smtp:// must upgrade with STARTTLS; smtps:// is TLS from the start. */
    if (t->require_tls) curl_easy_setopt(h, CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
}

static mw_http_failure classify(CURLcode rc, const mw_http_call *call)
{
    switch (rc) {
    case CURLE_OK:
        return MW_HTTP_OK;
    case CURLE_WRITE_ERROR:
        return call->on_data           ? MW_HTTP_WRITE
               : call->answer.overflow ? MW_HTTP_TOO_LARGE
                                       : MW_HTTP_OTHER;
    case CURLE_OPERATION_TIMEDOUT:
        return MW_HTTP_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
        return MW_HTTP_CONNECT;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
        return MW_HTTP_TLS_VERIFY;
    case CURLE_SSL_CERTPROBLEM:
        return MW_HTTP_TLS_CLIENT;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
        return MW_HTTP_SEND_RECV;
    case CURLE_ABORTED_BY_CALLBACK:
        return MW_HTTP_ABORTED;
    default:
        return MW_HTTP_OTHER;
    }
}

/* The value of a "Name: value" line, the part a log must not show. */
static const char *header_value(const char *line)
{
    const char *colon = line ? strchr(line, ':') : NULL;
    if (!colon) return line;
    return colon + 1 + strspn(colon + 1, " \t");
}

/* error and detail, both without credentials. */
static void describe(mw_http_call *call, const char *errbuf)
{
    const char *secrets[] = {call->password, call->bearer_token, header_value(call->secret_header),
                             NULL};
    char shown[512]; /* with the detail, fits in error */
    mw_strlcpy(shown, call->url ? call->url : "", sizeof(shown));
    mw_http_redact(shown, sizeof(shown), secrets);
    mw_strlcpy(call->detail, errbuf, sizeof(call->detail));
    mw_http_redact(call->detail, sizeof(call->detail), secrets);
    if (call->failure == MW_HTTP_TOO_LARGE)
        snprintf(call->error, sizeof(call->error), "%s: answer larger than %zu bytes", shown,
                 call->max_body);
    else if (call->detail[0] && strcmp(call->detail, call->reason) != 0)
        snprintf(call->error, sizeof(call->error), "%s: %s: %s", shown, call->reason, call->detail);
    else
        snprintf(call->error, sizeof(call->error), "%s: %s", shown, call->reason);
}

static void unavailable(mw_http_call *call)
{
    call->failure = MW_HTTP_UNAVAILABLE;
    call->reason = "libcurl is not available";
    describe(call, "");
}

int mw_http_perform(mw_http_client *c, mw_http_call *call)
{
    mw_buf_init(&call->answer, call->max_body);
    call->status = 0;
    call->failure = MW_HTTP_OK;
    call->reason = "";
    call->detail[0] = call->error[0] = '\0';
    CURL *h = c ? c->handle : new_handle();
    if (!h) {
        unavailable(call);
        return -1;
    }
    if (c) curl_easy_reset(h);

    struct curl_slist *hdrs = NULL;
    for (int i = 0; i < MW_HTTP_CALL_HEADERS && call->headers[i]; i++)
        hdrs = curl_slist_append(hdrs, call->headers[i]);
    if (call->secret_header) hdrs = curl_slist_append(hdrs, call->secret_header);
    if (call->bearer_token && *call->bearer_token) {
        char auth[4300];
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", call->bearer_token);
        hdrs = curl_slist_append(hdrs, auth); /* copies it */
        memset(auth, 0, sizeof(auth));
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    upload up = {call->body, call->body_len, 0};
    curl_easy_setopt(h, CURLOPT_URL, call->url);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* timeouts without SIGALRM: we have threads */
    if (call->connect_timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)call->connect_timeout_ms);
    if (call->timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)call->timeout_ms);
    if (call->low_speed_time_s > 0) {
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, call->low_speed_time_s);
    }
    if (call->protocols) curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, call->protocols);
    if (call->user_agent) curl_easy_setopt(h, CURLOPT_USERAGENT, call->user_agent);
    if (hdrs) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (call->accept_encoding) curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, call->accept_encoding);
    if (call->max_redirects > 0) {
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, call->max_redirects);
    }
    if (call->no_proxy) curl_easy_setopt(h, CURLOPT_NOPROXY, call->no_proxy);
    if (call->unix_socket) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, call->unix_socket);
    struct curl_slist *connect_to = NULL;
    if (call->connect_to) {
        connect_to = curl_slist_append(NULL, call->connect_to);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to);
    }
    if (call->http2_prior_knowledge)
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    if (call->basic_auth) curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    if (call->username && *call->username) curl_easy_setopt(h, CURLOPT_USERNAME, call->username);
    if (call->password && *call->password) curl_easy_setopt(h, CURLOPT_PASSWORD, call->password);
    set_tls(h, &call->tls);
    struct curl_slist *rcpt = NULL;
    if (call->mail_from) {
        for (const char *const *r = call->mail_rcpt; r && *r; r++)
            rcpt = curl_slist_append(rcpt, *r);
        curl_easy_setopt(h, CURLOPT_MAIL_FROM, call->mail_from);
        curl_easy_setopt(h, CURLOPT_MAIL_RCPT, rcpt);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, read_upload);
        curl_easy_setopt(h, CURLOPT_READDATA, &up);
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    } else if (call->post) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        if (call->method) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call->method);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, call->body ? call->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(call->body ? call->body_len : 0));
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, call);
    if (call->on_header) {
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, call);
    }
    if (call->should_abort) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, call);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &call->status);
    if (c) {
        /* A kept handle keeps option pointers: let it forget the secrets,
         * the lists freed below and this stack frame's buffers. */
        curl_easy_setopt(h, CURLOPT_PASSWORD, "");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(h, CURLOPT_MAIL_RCPT, NULL);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, NULL);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
    } else {
        curl_easy_cleanup(h);
    }
    curl_slist_free_all(hdrs);
    curl_slist_free_all(rcpt);
    curl_slist_free_all(connect_to);
    call->failure = classify(rc, call);
    if (call->failure == MW_HTTP_OK) return 0;
    call->reason = curl_easy_strerror(rc);
    describe(call, errbuf);
    return -1;
}

/* URL with its host replaced by name, and "name:PORT:HOST:PORT" in
 * connect_to, so that the connection goes where URL said and the
 * certificate is checked against name. */
int mw_http_rename_host(const char *url, const char *name, char *out, size_t outsize,
                        char *connect_to, size_t ctsize)
{
    const char *h = strstr(url, "://");
    if (!h) return -1;
    h += 3;
    const char *at = strpbrk(h, "@/"); /* user:password@ */
    if (at && *at == '@') h = at + 1;
    const char *end;
    if (*h == '[') {
        end = strchr(h, ']');
        if (!end) return -1;
        end++;
    } else {
        end = h + strcspn(h, ":/?#");
    }
    if (end == h) return -1;
    const char *port = "";
    size_t plen = 0;
    if (*end == ':') {
        port = end + 1;
        plen = strcspn(port, "/?#");
    }
    const char *defport = strncmp(url, "https:", 6) == 0 ? "443" : "80";
    snprintf(connect_to, ctsize, "%s:%.*s:%.*s:%.*s", name, (int)(plen ? plen : strlen(defport)),
             plen ? port : defport, (int)(end - h), h, (int)(plen ? plen : strlen(defport)),
             plen ? port : defport);
    int n = snprintf(out, outsize, "%.*s%s%s", (int)(h - url), url, name, end);
    return n < 0 || (size_t)n >= outsize ? -1 : 0;
}
