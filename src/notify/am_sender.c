/* am_sender.c - rule alerts to Alertmanagers (see am_sender.h): the
 * settings, one queue and thread per Alertmanager, the POST through core's
 * HTTP client, and the self-metrics. */
#include "am_sender.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"
#include "../mlwatch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- settings ---- */

static int check_urls(const char *v, char *why, size_t n)
{
    char copy[sizeof(((mw_am_settings *)0)->urls)];
    mw_strlcpy(copy, v, sizeof(copy));
    size_t count = 0;
    char *save = NULL;
    for (char *u = strtok_r(copy, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
            char shown[128];
            mw_am_shown_url(u, shown, sizeof(shown));
            snprintf(why, n, "'%s' is not an http:// or https:// URL", shown);
            return -1;
        }
        if (strlen(u) >= 480) {
            snprintf(why, n, "a URL is longer than 479 characters");
            return -1;
        }
        if (++count > MW_AM_MAX) {
            snprintf(why, n, "more than %d Alertmanagers", MW_AM_MAX);
            return -1;
        }
    }
    return 0;
}

static int check_capacity(const char *v, char *why, size_t n)
{
    return mw_check_range(v, 1, 1e7, 1, "a whole number from 1 to 10000000", why, n);
}

/* In the config file, alertmanager_url may also be a list of URLs. */
static int urls_section(void *settings, const char *file, void *docp, void *nodep, char *err,
                        size_t errsize)
{
    mw_am_settings *s = settings;
    yaml_document_t *doc = docp;
    yaml_node_t *node = nodep;
    if (node->type != YAML_SEQUENCE_NODE)
        return mw_section_fail(err, errsize, file, "alertmanager_url", node,
                               "expected a URL or a list of URLs");
    char joined[sizeof(s->urls)] = "";
    for (yaml_node_item_t *it = node->data.sequence.items.start; it < node->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(doc, *it);
        const char *u = mw_section_text(item);
        if (!u || !u[0] || strchr(u, ','))
            return mw_section_fail(err, errsize, file, "alertmanager_url", item ? item : node,
                                   "each item must be one URL");
        size_t len = strlen(joined);
        if (len + strlen(u) + 2 > sizeof(joined))
            return mw_section_fail(err, errsize, file, "alertmanager_url", item, "too many URLs");
        snprintf(joined + len, sizeof(joined) - len, "%s%s", len ? "," : "", u);
    }
    char why[256];
    if (check_urls(joined, why, sizeof(why)) < 0)
        return mw_section_fail(err, errsize, file, "alertmanager_url", node, "%s", why);
    mw_strlcpy(s->urls, joined, sizeof(s->urls));
    return 0;
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_am_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option am_rows[] = {
    {.name = "alertmanager-url", .type = MW_OPT_STRING, .offset = offsetof(mw_am_settings, urls), .size = sizeof(((mw_am_settings *)0)->urls), .def = "", .help = "Alertmanagers to send rule alerts to (API v2), comma-separated base URLs such as http://alertmanager:9093; in the config file also a list (docs/alerting.md)", .validate = check_urls, .section = urls_section},
    OPT("alertmanager-timeout", MW_OPT_DURATION, timeout_ms, "10s", NULL, "Longest one POST of alerts to an Alertmanager may take before it is retried"),
    OPT("alertmanager-queue-capacity", MW_OPT_NUMBER, queue_capacity, "10000", check_capacity, "Alerts queued per Alertmanager while it is slow or down; beyond it the oldest are dropped (mlwatch_alertmanager_dropped_total)"),
    OPT("alertmanager-ca-file", MW_OPT_PATH, ca_file, "", NULL, "CA bundle to verify the Alertmanagers' certificates with, instead of the system's"),
    OPT("alertmanager-cert-file", MW_OPT_PATH, cert_file, "", NULL, "Client certificate for the Alertmanagers (TLS client authentication)"),
    OPT("alertmanager-key-file", MW_OPT_PATH, key_file, "", NULL, "Key of --alertmanager-cert-file"),
    OPT("alertmanager-bearer-token-file", MW_OPT_PATH, bearer_token_file, "", NULL, "File holding a bearer token for the Alertmanagers (read for each request)"),
    OPT("alertmanager-basic-auth-username", MW_OPT_STRING, basic_username, "", NULL, "User name for HTTP basic authentication to the Alertmanagers"),
    OPT("alertmanager-basic-auth-password-file", MW_OPT_PATH, basic_password_file, "", NULL, "File holding the basic-authentication password (read for each request)"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_am_options = MW_OPTION_GROUP(
    "alerting: Alertmanager", "src/notify/am_sender.c", mw_am_settings, am_rows, NULL);

/* ---- one Alertmanager ---- */

struct mw_am_target {
    mw_worker w; /* its mutex guards the queue and the counters */
    mw_am_queue q;
    size_t inflight;
    char url[512];   /* BASE/api/v2/alerts */
    char shown[300]; /* scheme://host:port */
    const mw_am_settings *settings;
    mw_am_post_fn post;
    void *cls;
    mw_http_client *http; /* the thread's */
    uint64_t sent, errors, rejected;
    int64_t backoff_ms;
};

static void one_line(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f) *p = ' ';
}

static int stopping(void *cls)
{
    return mw_worker_stopping(&((mw_am_target *)cls)->w);
}

static int http_post(void *cls, const mw_am_target *t, const mw_buf *body, long *status,
                     char *reason, size_t reasonsize)
{
    (void)cls;
    const mw_am_settings *s = t->settings;
    char token[4096] = "", password[4096] = "";
    if (s->bearer_token_file[0] &&
        mw_read_secret_file(s->bearer_token_file, token, sizeof(token), reason, reasonsize) < 0)
        return -1; /* the file may appear (a mounted secret) */
    if (s->basic_username[0] && s->basic_password_file[0] &&
        mw_read_secret_file(s->basic_password_file, password, sizeof(password), reason,
                            reasonsize) < 0) {
        memset(token, 0, sizeof(token));
        return -1;
    }
    mw_http_call call = {
        .url = t->url,
        .protocols = "http,https",
        .headers = {"Content-Type: application/json", "Expect:"},
        .bearer_token = token[0] ? token : NULL,
        .basic_auth = s->basic_username[0] != 0,
        .username = s->basic_username,
        .password = s->basic_username[0] ? password : NULL,
        .user_agent = "mlwatch/" MLWATCH_VERSION,
        .post = 1,
        .body = body->data,
        .body_len = body->len,
        .timeout_ms = s->timeout_ms,
        .connect_timeout_ms = s->timeout_ms < 5000 ? s->timeout_ms : 5000,
        .max_body = 1024,
        .truncate = 1,
        .should_abort = stopping,
        .cls = (void *)t,
        .tls = {.ca_file = s->ca_file,
                .cert_file = s->cert_file,
                .key_file = s->cert_file[0] ? s->key_file : NULL},
    };
    int rc = mw_http_perform(((mw_am_target *)t)->http, &call);
    memset(token, 0, sizeof(token));
    memset(password, 0, sizeof(password));
    if (rc < 0)
        snprintf(reason, reasonsize, "%s", call.detail[0] ? call.detail : call.reason);
    else
        snprintf(reason, reasonsize, "HTTP %ld: %s", call.status,
                 call.answer.data ? call.answer.data : "");
    one_line(reason);
    *status = call.status;
    mw_http_call_free(&call);
    return rc;
}

mw_am_target *mw_am_target_new(const char *base_url, const mw_am_settings *s, size_t capacity,
                               mw_am_post_fn post, void *cls)
{
    mw_am_target *t = mw_xcalloc(1, sizeof(*t));
    mw_worker_init(&t->w);
    mw_am_queue_init(&t->q, capacity);
    size_t len = strlen(base_url);
    while (len && base_url[len - 1] == '/')
        len--;
    snprintf(t->url, sizeof(t->url), "%.*s/api/v2/alerts", (int)len, base_url);
    mw_am_shown_url(base_url, t->shown, sizeof(t->shown));
    t->settings = s;
    t->post = post ? post : http_post;
    t->cls = cls;
    return t;
}

void mw_am_target_free(mw_am_target *t)
{
    if (!t) return;
    mw_am_queue_free(&t->q);
    mw_worker_destroy(&t->w);
    free(t);
}

void mw_am_target_enqueue(mw_am_target *t, const char *json)
{
    pthread_mutex_lock(&t->w.mu);
    mw_am_queue_push(&t->q, json);
    mw_worker_kick_locked(&t->w);
    pthread_mutex_unlock(&t->w.mu);
}

void mw_am_target_drop(mw_am_target *t)
{
    pthread_mutex_lock(&t->w.mu);
    t->rejected++;
    pthread_mutex_unlock(&t->w.mu);
}

/* Timeouts, broken connections, 5xx and 429 may pass; another answer
 * would come again. */
static int retryable(int rc, long status)
{
    return rc < 0 || status >= 500 || status == 429;
}

int64_t mw_am_target_step(mw_am_target *t)
{
    char *items[MW_AM_BATCH];
    pthread_mutex_lock(&t->w.mu);
    size_t k = mw_am_queue_take(&t->q, items, MW_AM_BATCH);
    t->inflight = k;
    pthread_mutex_unlock(&t->w.mu);
    if (!k) return -1;
    mw_buf body;
    mw_buf_init(&body, 0);
    mw_am_batch_json(items, k, &body);
    long status = 0;
    char reason[512] = "";
    int rc = t->post(t->cls, t, &body, &status, reason, sizeof(reason));
    mw_buf_free(&body);
    int ok = rc == 0 && status >= 200 && status <= 299;
    pthread_mutex_lock(&t->w.mu);
    t->inflight = 0;
    int64_t wait = 0;
    if (ok) {
        t->sent += k;
        t->backoff_ms = 0;
        for (size_t i = 0; i < k; i++)
            free(items[i]);
    } else if (retryable(rc, status)) {
        t->errors += k;
        mw_am_queue_put_back(&t->q, items, k);
        t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : MW_AM_BACKOFF_MIN_MS;
        if (t->backoff_ms > MW_AM_BACKOFF_MAX_MS) t->backoff_ms = MW_AM_BACKOFF_MAX_MS;
        wait = t->backoff_ms;
    } else {
        t->errors += k;
        t->rejected += k;
        for (size_t i = 0; i < k; i++)
            free(items[i]);
    }
    if (!ok && t->q.n == 0 && wait == 0) wait = -1;
    pthread_mutex_unlock(&t->w.mu);
    if (!ok)
        mw_log_once(MW_LOG_WARN, "alertmanager", t->shown, "%s: %zu alerts %s: %s", t->shown, k,
                    retryable(rc, status) ? "not delivered (will retry)" : "rejected (dropped)",
                    reason);
    return wait;
}

void mw_am_target_counts(mw_am_target *t, mw_am_counts *out)
{
    pthread_mutex_lock(&t->w.mu);
    *out = (mw_am_counts){.sent = t->sent,
                          .errors = t->errors,
                          .dropped = t->q.dropped + t->rejected,
                          .queued = t->q.n + t->inflight,
                          .backoff_ms = t->backoff_ms};
    pthread_mutex_unlock(&t->w.mu);
}

const char *mw_am_target_url(const mw_am_target *t)
{
    return t->url;
}

const char *mw_am_target_shown(const mw_am_target *t)
{
    return t->shown;
}

static void *target_thread(void *arg)
{
    mw_am_target *t = arg;
    t->http = mw_http_client_new();
    for (;;) {
        int64_t wait = mw_am_target_step(t);
        pthread_mutex_lock(&t->w.mu);
        /* An empty queue waits for a kick; a failure for its backoff,
         * which new alerts do not cut short. */
        int go_on = 1;
        if (t->w.stop)
            go_on = 0;
        else if (wait < 0 && t->q.n == 0)
            go_on = mw_worker_wait_locked(&t->w, MW_WORKER_NO_TIMEOUT);
        else if (wait > 0) {
            int64_t until = mw_mono_ns() / 1000000 + wait;
            for (int64_t left = wait; go_on && left > 0; left = until - mw_mono_ns() / 1000000)
                go_on = mw_worker_wait_locked(&t->w, left);
        }
        pthread_mutex_unlock(&t->w.mu);
        if (!go_on) break;
    }
    mw_http_client_free(t->http);
    t->http = NULL;
    return NULL;
}

/* ---- the sender ---- */

struct mw_am_sender {
    mw_am_settings settings; /* the targets point at it */
    mw_am_target *t[MW_AM_MAX];
    size_t n;
};

void mw_am_sender_free(mw_am_sender *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        mw_worker_stop(&s->t[i]->w);
        mw_am_target_free(s->t[i]);
    }
    free(s);
}

int mw_am_sender_new(const mw_am_settings *settings, mw_am_sender **out, char *err, size_t errsize)
{
    *out = NULL;
    if (!settings->urls[0]) return 1;
    char why[256];
    if (check_urls(settings->urls, why, sizeof(why)) < 0) {
        snprintf(err, errsize, "--alertmanager-url: %s", why);
        return -1;
    }
    if (settings->cert_file[0] && !settings->key_file[0]) {
        snprintf(err, errsize, "--alertmanager-cert-file needs --alertmanager-key-file");
        return -1;
    }
    if (settings->bearer_token_file[0] && settings->basic_username[0]) {
        snprintf(err, errsize,
                 "--alertmanager-bearer-token-file and --alertmanager-basic-auth-username: "
                 "one or the other");
        return -1;
    }
    mw_am_sender *s = mw_xcalloc(1, sizeof(*s));
    s->settings = *settings;
    char copy[sizeof(settings->urls)];
    mw_strlcpy(copy, settings->urls, sizeof(copy));
    char *save = NULL;
    for (char *u = strtok_r(copy, ",", &save); u && s->n < MW_AM_MAX;
         u = strtok_r(NULL, ",", &save)) {
        mw_am_target *t =
            mw_am_target_new(u, &s->settings, (size_t)settings->queue_capacity, NULL, NULL);
        if (mw_worker_start(&t->w, target_thread, t) < 0) {
            mw_am_target_free(t);
            mw_am_sender_free(s);
            snprintf(err, errsize, "cannot start the Alertmanager sender's thread");
            return -1;
        }
        s->t[s->n++] = t;
    }
    char names[MW_AM_MAX * 300] = "";
    for (size_t i = 0; i < s->n; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof(names) - len, " %s", s->t[i]->shown);
    }
    mw_log(MW_LOG_INFO, "alertmanager", "rule alerts to Alertmanager:%s", names);
    *out = s;
    return 0;
}

void mw_am_sender_send(void *sender, const mw_alert *alerts, size_t n, int64_t now_ms)
{
    (void)now_ms;
    mw_am_sender *s = sender;
    mw_buf b;
    mw_buf_init(&b, MW_AM_MAX_ALERT_BYTES);
    for (size_t i = 0; i < n; i++) {
        mw_buf_clear(&b);
        b.overflow = 0;
        mw_am_alert_json(&alerts[i], &b);
        int too_large = b.overflow || !b.data;
        if (too_large)
            mw_log_once(MW_LOG_WARN, "alertmanager", "too large",
                        "an alert larger than %d bytes is dropped (its annotations?)",
                        MW_AM_MAX_ALERT_BYTES);
        for (size_t j = 0; j < s->n; j++) {
            if (too_large)
                mw_am_target_drop(s->t[j]);
            else
                mw_am_target_enqueue(s->t[j], b.data);
        }
    }
    mw_buf_free(&b);
}

/* clang-format off */
MW_METRIC(AM_SENT, MW_COUNTER, "mlwatch_alertmanager_notifications_total", "", "Rule alerts an Alertmanager accepted (HTTP 2xx), by Alertmanager.");
MW_METRIC(AM_ERRORS, MW_COUNTER, "mlwatch_alertmanager_errors_total", "", "Rule alerts in POSTs that failed (retried or rejected), by Alertmanager.");
MW_METRIC(AM_DROPPED, MW_COUNTER, "mlwatch_alertmanager_dropped_total", "", "Rule alerts never delivered: pushed out of a full queue or rejected with a 4xx.");
MW_METRIC(AM_QUEUE, MW_GAUGE, "mlwatch_alertmanager_queue_length", "", "Rule alerts waiting for an Alertmanager, the batch in flight included.");
MW_METRIC(AM_CAPACITY, MW_GAUGE, "mlwatch_alertmanager_queue_capacity", "", "Most rule alerts queued per Alertmanager (--alertmanager-queue-capacity).");
MW_METRIC(AM_DISCOVERED, MW_GAUGE, "mlwatch_alertmanager_discovered", "", "Alertmanagers rule alerts are sent to (--alertmanager-url).");
/* clang-format on */

void mw_am_sender_emit(mw_am_sender *s, mw_snapshot *snap)
{
    mw_emit(snap, &AM_DISCOVERED, (double)s->n, MW_END);
    for (size_t i = 0; i < s->n; i++) {
        mw_am_counts c;
        mw_am_target_counts(s->t[i], &c);
        const char *am = s->t[i]->shown;
        mw_emit(snap, &AM_SENT, (double)c.sent, "alertmanager", am, MW_END);
        mw_emit(snap, &AM_ERRORS, (double)c.errors, "alertmanager", am, MW_END);
        mw_emit(snap, &AM_DROPPED, (double)c.dropped, "alertmanager", am, MW_END);
        mw_emit(snap, &AM_QUEUE, (double)c.queued, "alertmanager", am, MW_END);
        mw_emit(snap, &AM_CAPACITY, (double)s->t[i]->q.cap, "alertmanager", am, MW_END);
    }
}
