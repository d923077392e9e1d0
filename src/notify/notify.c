/* notify.c - the notifier's table of idle episodes, its delivery thread
 * and its state file (see notify.h for the contract).
 *
 * Each episode records, per receiver, whether the opening message and the
 * resolved message were delivered and when the last one was: the thread
 * sends what is missing, so a receiver that was down gets its messages when
 * it is back, and a restart (the table is reloaded from the state file)
 * sends nothing twice. A message counts as delivered when the receiver
 * accepted it (HTTP 2xx, SMTP 250); a crash between that and the state write
 * can repeat one message (at least once, never lost). */
#include "notify.h"
#include "notify_state.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS (5 * 60 * 1000)

static const char *const RECEIVER_NAMES[MW_NRECEIVERS] = {"webhook", "alertmanager", "email"};

#define OPT(n, t, f, d, h, v) MW_OPT(mw_notify_settings, n, t, f, d, h, v)
static const mw_option notify_rows[] = {
    OPT("notify-webhook", MW_OPT_STRING, webhook, "",
        "Mattermost or Slack incoming webhook URL for idle GPU sessions: URL, file:PATH or "
        "env:NAME",
        NULL),
    OPT("notify-alertmanager-webhook", MW_OPT_STRING, alertmanager_webhook, "",
        "Webhook receiving Alertmanager's webhook payload (version 4): URL, file:PATH or env:NAME",
        NULL),
    OPT("notify-smtp-server", MW_OPT_STRING, smtp_server, "",
        "SMTP server for idle GPU e-mail, smtp://HOST:PORT (STARTTLS required) or "
        "smtps://HOST:PORT",
        NULL),
    OPT("notify-smtp-from", MW_OPT_STRING, smtp_from, "", "Sender address of e-mail", NULL),
    OPT("notify-smtp-to", MW_OPT_STRING, smtp_to, "", "Comma-separated recipients of e-mail", NULL),
    OPT("notify-smtp-username", MW_OPT_STRING, smtp_username, "", "SMTP user name", NULL),
    OPT("notify-smtp-password", MW_OPT_STRING, smtp_password, "",
        "SMTP password: file:PATH or env:NAME (a literal works but shows in the process list)",
        NULL),
    OPT("notify-smtp-ca-file", MW_OPT_PATH, smtp_ca_file, "",
        "CA bundle to verify the SMTP server with (default: the system's)", NULL),
    OPT("notify-repeat-interval", MW_OPT_DURATION, repeat_interval_ms, "4h",
        "Repeat a notification for a session still idle after this long", NULL),
};
#undef OPT
const mw_option_group mw_notify_options =
    MW_OPTION_GROUP("notifications", "src/notify/notify.c", mw_notify_settings, notify_rows, NULL);

typedef struct receiver {
    int enabled;
    char url[1024]; /* a secret for webhooks */
    int64_t next_try_ms, backoff_ms;
    uint64_t ok, failed;
} receiver;

struct mw_notifier {
    mw_worker w; /* its mutex also guards the table and dirty */
    int dirty;
    mw_notify_table table;
    receiver rx[MW_NRECEIVERS];
    char smtp_from[256], smtp_to[1024], smtp_user[256], smtp_password[1024], smtp_ca[PATH_MAX];
    char state_path[PATH_MAX + 64];
    int64_t repeat_ms, last_save_ms;
    char external_url[300];
};

/* POST JSON; 0 on a 2xx answer. Errors name the receiver kind and the
 * status, never the URL (its path is the secret). */
static int post_json(const char *url, const char *body, const char *what)
{
    mw_http_call call = {.url = url,
                         .headers = {"Content-Type: application/json"},
                         .post = 1,
                         .body = body,
                         .body_len = strlen(body),
                         .timeout_ms = 10000,
                         .connect_timeout_ms = 5000,
                         .user_agent = "mlwatch"};
    int rc = mw_http_perform(NULL, &call);
    mw_http_call_free(&call);
    if (rc < 0) {
        mw_log_once(MW_LOG_WARN, "notify", what, "%s: delivery failed: %s (will retry)", what,
                    call.reason);
        return -1;
    }
    if (call.status < 200 || call.status > 299) {
        mw_log_once(MW_LOG_WARN, "notify", what, "%s: receiver answered HTTP %ld (will retry)",
                    what, call.status);
        return -1;
    }
    return 0;
}

static int send_email(mw_notifier *n, const char *msg)
{
    char to[1024];
    const char *rcpt[sizeof(to) / 2 + 1]; /* "a,b,...": at most one per two bytes */
    size_t nrcpt = 0;
    mw_strlcpy(to, n->smtp_to, sizeof(to));
    char *save = NULL;
    for (char *t = strtok_r(to, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        if (*t) rcpt[nrcpt++] = t;
    }
    rcpt[nrcpt] = NULL;
    /* The envelope takes the bare address of "Name <addr>". */
    char from[256];
    const char *lt = strchr(n->smtp_from, '<');
    mw_strlcpy(from, lt ? lt : n->smtp_from, sizeof(from));
    mw_http_call call = {.url = n->rx[MW_RX_EMAIL].url,
                         .tls = {.ca_file = n->smtp_ca, .require_tls = 1},
                         .username = n->smtp_user,
                         .password = n->smtp_password,
                         .mail_from = from,
                         .mail_rcpt = rcpt,
                         .body = msg,
                         .body_len = strlen(msg),
                         .timeout_ms = 20000,
                         .connect_timeout_ms = 5000};
    int rc = mw_http_perform(NULL, &call);
    mw_http_call_free(&call);
    if (rc < 0) {
        mw_log_once(MW_LOG_WARN, "notify", "email", "email: delivery failed: %s (will retry)",
                    call.reason);
        return -1;
    }
    return 0;
}

static int deliver(mw_notifier *n, int r, const mw_notify_episode *ep, mw_msg_kind kind,
                   int64_t now)
{
    mw_buf b;
    mw_buf_init(&b, 1 << 20);
    int rc;
    if (r == MW_RX_WEBHOOK) {
        mw_notify_chat_json(ep, kind, now, &b);
        rc = post_json(n->rx[r].url, b.data ? b.data : "{}", "webhook");
    } else if (r == MW_RX_ALERTMANAGER) {
        mw_notify_alertmanager_json(ep, kind, now, n->external_url, &b);
        rc = post_json(n->rx[r].url, b.data ? b.data : "{}", "alertmanager webhook");
    } else {
        mw_notify_email(ep, kind, now, n->smtp_from, n->smtp_to, &b);
        rc = send_email(n, b.data ? b.data : "");
    }
    mw_buf_free(&b);
    return rc;
}

/* One pass over the table: for each receiver that is due, the first
 * message it lacks. The lock is not held while sending. */
static void pass(mw_notifier *n)
{
    int64_t now = mw_now_ms();
    for (int r = 0; r < MW_NRECEIVERS; r++) {
        receiver *rx = &n->rx[r];
        if (!rx->enabled || now < rx->next_try_ms) continue;
        for (;;) {
            mw_notify_episode ep;
            mw_msg_kind kind;
            pthread_mutex_lock(&n->w.mu);
            int idx = mw_notify_table_due(&n->table, r, now, n->repeat_ms, &ep, &kind);
            pthread_mutex_unlock(&n->w.mu);
            if (idx < 0) break;
            int rc = deliver(n, r, &ep, kind, now);
            pthread_mutex_lock(&n->w.mu);
            if (rc == 0) {
                mw_notify_table_delivered(&n->table, &ep, r, kind, now);
                n->dirty = 1;
                rx->ok++;
                rx->backoff_ms = 0;
            } else {
                rx->failed++;
                rx->backoff_ms = rx->backoff_ms ? rx->backoff_ms * 2 : BACKOFF_MIN_MS;
                if (rx->backoff_ms > BACKOFF_MAX_MS) rx->backoff_ms = BACKOFF_MAX_MS;
                rx->next_try_ms = now + rx->backoff_ms;
            }
            pthread_mutex_unlock(&n->w.mu);
            if (rc != 0) break;
        }
    }
    pthread_mutex_lock(&n->w.mu);
    mw_notify_table_gc(&n->table, n->rx[0].enabled | n->rx[1].enabled << 1 | n->rx[2].enabled << 2);
    /* Structural changes are saved at once; cost figures once a minute. */
    if (n->dirty || now - n->last_save_ms >= 60000) {
        char err[256];
        if (n->state_path[0] &&
            mw_notify_table_save(&n->table, n->state_path, err, sizeof(err)) < 0)
            mw_log_once(MW_LOG_WARN, "notify", "save", "cannot save state: %s", err);
        n->dirty = 0;
        n->last_save_ms = now;
    }
    pthread_mutex_unlock(&n->w.mu);
}

static void *run(void *arg)
{
    mw_notifier *n = arg;
    pthread_mutex_lock(&n->w.mu);
    while (!n->w.stop) {
        pthread_mutex_unlock(&n->w.mu);
        pass(n);
        pthread_mutex_lock(&n->w.mu);
        /* Retries and repeats are due at times of their own: look again
         * every 250 ms, or at once when an episode changes. */
        mw_worker_wait_locked(&n->w, 250);
    }
    pthread_mutex_unlock(&n->w.mu);
    return NULL;
}

static void node_name(const mw_config *cfg, char *out, size_t n)
{
    if (cfg->node_name[0]) {
        mw_strlcpy(out, cfg->node_name, n);
        return;
    }
    const char *env = getenv("NODE_NAME");
    if (env && *env) {
        mw_strlcpy(out, env, n);
        return;
    }
    if (gethostname(out, n) != 0) mw_strlcpy(out, "unknown", n);
    out[n - 1] = '\0';
}

int mw_notifier_new(const mw_config *config, mw_notifier **out, char *err, size_t errsize)
{
    const mw_config *cfg = config;
    const mw_notify_settings *ns = mw_config_group(config, &mw_notify_options);
    *out = NULL;
    if (!ns->webhook[0] && !ns->alertmanager_webhook[0] && !ns->smtp_server[0]) return 1;
    mw_notifier *n = mw_xcalloc(1, sizeof(*n));
    char why[256];
    const char *specs[MW_NRECEIVERS] = {ns->webhook, ns->alertmanager_webhook, ns->smtp_server};
    static const char *const flags[MW_NRECEIVERS] = {
        "--notify-webhook", "--notify-alertmanager-webhook", "--notify-smtp-server"};
    for (int r = 0; r < MW_NRECEIVERS; r++) {
        if (!specs[r][0]) continue;
        if (mw_secret_resolve(specs[r], n->rx[r].url, sizeof(n->rx[r].url), why, sizeof(why)) < 0) {
            snprintf(err, errsize, "%s: %s", flags[r], why);
            free(n);
            return -1;
        }
        n->rx[r].enabled = 1;
    }
    if (n->rx[MW_RX_EMAIL].enabled) {
        if (!ns->smtp_from[0] || !ns->smtp_to[0]) {
            snprintf(err, errsize,
                     "--notify-smtp-server needs --notify-smtp-from and "
                     "--notify-smtp-to");
            free(n);
            return -1;
        }
        if (ns->smtp_password[0] &&
            mw_secret_resolve(ns->smtp_password, n->smtp_password, sizeof(n->smtp_password), why,
                              sizeof(why)) < 0) {
            snprintf(err, errsize, "--notify-smtp-password: %s", why);
            free(n);
            return -1;
        }
        mw_strlcpy(n->smtp_from, ns->smtp_from, sizeof(n->smtp_from));
        mw_strlcpy(n->smtp_to, ns->smtp_to, sizeof(n->smtp_to));
        mw_strlcpy(n->smtp_user, ns->smtp_username, sizeof(n->smtp_user));
        mw_strlcpy(n->smtp_ca, ns->smtp_ca_file, sizeof(n->smtp_ca));
    }
    n->repeat_ms = ns->repeat_interval_ms;
    char node[254];
    node_name(cfg, node, sizeof(node));
    snprintf(n->external_url, sizeof(n->external_url), "http://%s%s", node,
             strchr(cfg->listen, ':') ? strrchr(cfg->listen, ':') : "");
    if (cfg->state_dir[0]) {
        if (mkdir(cfg->state_dir, 0700) < 0 && errno != EEXIST) {
            snprintf(err, errsize, "--state-dir %s: %s", cfg->state_dir, strerror(errno));
            free(n);
            return -1;
        }
        snprintf(n->state_path, sizeof(n->state_path), "%s/idle-notifications.json",
                 cfg->state_dir);
        if (mw_notify_table_load(&n->table, n->state_path, why, sizeof(why)) < 0)
            /* A damaged file must not stop the agent; what it held is lost
             * (at worst one repeated message per open episode). */
            mw_log(MW_LOG_WARN, "notify", "ignoring state file: %s", why);
    }
    mw_worker_init(&n->w);
    n->last_save_ms = mw_now_ms();
    if (mw_worker_start(&n->w, run, n) < 0) {
        snprintf(err, errsize, "cannot start the notification thread");
        mw_worker_destroy(&n->w);
        free(n);
        return -1;
    }
    mw_log(MW_LOG_INFO, "notify", "idle GPU notifications to:%s%s%s (state in %s)",
           n->rx[0].enabled ? " webhook" : "", n->rx[1].enabled ? " alertmanager-webhook" : "",
           n->rx[2].enabled ? " email" : "", n->state_path[0] ? n->state_path : "memory only");
    *out = n;
    return 0;
}

void mw_notifier_free(mw_notifier *n)
{
    if (!n) return;
    mw_worker_stop(&n->w);
    char err[256];
    if (n->state_path[0] && mw_notify_table_save(&n->table, n->state_path, err, sizeof(err)) < 0)
        mw_log(MW_LOG_WARN, "notify", "cannot save state: %s", err);
    mw_notify_table_free(&n->table);
    memset(n->rx, 0, sizeof(n->rx)); /* secrets */
    memset(n->smtp_password, 0, sizeof(n->smtp_password));
    mw_worker_destroy(&n->w);
    free(n);
}

void mw_notifier_upsert(mw_notifier *n, const mw_notify_episode *ep)
{
    pthread_mutex_lock(&n->w.mu);
    if (mw_notify_table_upsert(&n->table, ep)) {
        n->dirty = 1;
        mw_worker_kick_locked(&n->w);
    }
    pthread_mutex_unlock(&n->w.mu);
}

void mw_notifier_resolve(mw_notifier *n, const mw_notify_episode *ep)
{
    pthread_mutex_lock(&n->w.mu);
    mw_notify_table_resolve(&n->table, ep);
    n->dirty = 1;
    mw_worker_kick_locked(&n->w);
    pthread_mutex_unlock(&n->w.mu);
}

size_t mw_notifier_open_episodes(mw_notifier *n, mw_notify_episode *out, size_t max)
{
    size_t k = 0;
    pthread_mutex_lock(&n->w.mu);
    for (size_t i = 0; i < n->table.n && k < max; i++)
        if (!n->table.e[i].ep.ended_ms) out[k++] = n->table.e[i].ep;
    pthread_mutex_unlock(&n->w.mu);
    return k;
}

void mw_notifier_kick(mw_notifier *n)
{
    mw_worker_kick(&n->w);
}

static const mw_metric_desc NOTIFICATIONS = {
    "mlwatch_notifications_total",
    "Idle-GPU notification attempts by receiver kind and result (delivered or failed).", "",
    MW_COUNTER};

void mw_notifier_emit(mw_notifier *n, mw_snapshot *snap)
{
    pthread_mutex_lock(&n->w.mu);
    for (int r = 0; r < MW_NRECEIVERS; r++) {
        if (!n->rx[r].enabled) continue;
        mw_emit(snap, &NOTIFICATIONS, (double)n->rx[r].ok, "receiver", RECEIVER_NAMES[r], "result",
                "delivered", MW_END);
        mw_emit(snap, &NOTIFICATIONS, (double)n->rx[r].failed, "receiver", RECEIVER_NAMES[r],
                "result", "failed", MW_END);
    }
    pthread_mutex_unlock(&n->w.mu);
}
