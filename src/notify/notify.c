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
#include "receiver.h"
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

typedef struct receiver {
    const mw_receiver *r;
    int index;   /* r's in mw_receivers[]: its bit in the table */
    void *state; /* the receiver's own (its secrets), from its open() */
    int64_t next_try_ms, backoff_ms;
    uint64_t ok, failed;
} receiver;

struct mw_notifier {
    mw_worker w; /* its mutex also guards the table and dirty */
    int dirty;
    mw_notify_table table;
    receiver rx[MW_MAX_RECEIVERS]; /* the open ones, in registry order */
    size_t nrx;
    unsigned enabled; /* bits of mw_receivers[] indices */
    char state_path[PATH_MAX + 64];
    int64_t repeat_ms, last_save_ms;
    mw_alert_timing timing;
};

#define OPT(n, t, f, d, v, h) MW_OPT(mw_notify_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option notify_rows[] = {
    OPT("notify-repeat-interval", MW_OPT_DURATION, repeat_interval_ms, "4h", NULL, "Repeat a notification for a session still idle, or a group of rule alerts still firing, after this long"),
    OPT("notify-group-wait", MW_OPT_DURATION, group_wait_ms, "30s", NULL, "Rule alerts to the built-in receivers: how long the first message of a group (alertname, node) waits for more of its alerts (Alertmanager's group_wait)"),
    OPT("notify-group-interval", MW_OPT_DURATION, group_interval_ms, "5m", NULL, "Rule alerts to the built-in receivers: the least time between two messages of a group, for new or resolved alerts (Alertmanager's group_interval)"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_notify_options =
    MW_OPTION_GROUP("notifications", "src/notify/notify.c", mw_notify_settings, notify_rows, NULL);

/* After a delivery attempt: the counters, and the backoff of a failure. */
static void record(mw_notifier *n, receiver *rx, int rc, int64_t now)
{
    if (rc == 0) {
        n->dirty = 1;
        rx->ok++;
        rx->backoff_ms = 0;
        return;
    }
    rx->failed++;
    rx->backoff_ms = rx->backoff_ms ? rx->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (rx->backoff_ms > BACKOFF_MAX_MS) rx->backoff_ms = BACKOFF_MAX_MS;
    rx->next_try_ms = now + rx->backoff_ms;
}

static int send_body(receiver *rx, mw_buf *b)
{
    int rc = rx->r->send(rx->state, b);
    mw_buf_free(b);
    return rc;
}

/* The idle-session messages rx lacks; -1 once one failed. */
static int deliver_episodes(mw_notifier *n, receiver *rx, int64_t now)
{
    int r = rx->index;
    for (;;) {
        mw_notify_episode ep;
        mw_msg_kind kind;
        pthread_mutex_lock(&n->w.mu);
        int idx = mw_notify_table_due(&n->table, r, now, n->repeat_ms, &ep, &kind);
        pthread_mutex_unlock(&n->w.mu);
        if (idx < 0) return 0;
        mw_buf b;
        mw_buf_init(&b, 1 << 20);
        rx->r->format(rx->state, &ep, kind, now, &b);
        int rc = send_body(rx, &b);
        pthread_mutex_lock(&n->w.mu);
        if (rc == 0) mw_notify_table_delivered(&n->table, &ep, r, kind, now);
        record(n, rx, rc, now);
        pthread_mutex_unlock(&n->w.mu);
        if (rc != 0) return -1;
    }
}

/* The rule-alert group messages rx is due (alert_groups.h). */
static void deliver_groups(mw_notifier *n, receiver *rx, int64_t now)
{
    if (!rx->r->format_alerts) return;
    for (;;) {
        mw_alert_group_msg msg;
        pthread_mutex_lock(&n->w.mu);
        int due = mw_alert_groups_due(&n->table.groups, rx->index, now, &n->timing, &msg);
        pthread_mutex_unlock(&n->w.mu);
        if (!due) return;
        mw_buf b;
        mw_buf_init(&b, 1 << 20);
        rx->r->format_alerts(rx->state, &msg, now, &b);
        int rc = send_body(rx, &b);
        pthread_mutex_lock(&n->w.mu);
        if (rc == 0) mw_alert_groups_delivered(&n->table.groups, rx->index, &msg, now);
        record(n, rx, rc, now);
        pthread_mutex_unlock(&n->w.mu);
        mw_alert_group_msg_free(&msg);
        if (rc != 0) return;
    }
}

/* One pass: for each receiver that is due, the messages it lacks. The
 * lock is not held while sending. */
static void pass(mw_notifier *n)
{
    int64_t now = mw_now_ms();
    pthread_mutex_lock(&n->w.mu);
    if (mw_alert_groups_expire(&n->table.groups, now)) n->dirty = 1;
    pthread_mutex_unlock(&n->w.mu);
    for (size_t i = 0; i < n->nrx; i++) {
        receiver *rx = &n->rx[i];
        if (now < rx->next_try_ms) continue;
        if (deliver_episodes(n, rx, now) == 0) deliver_groups(n, rx, now);
    }
    pthread_mutex_lock(&n->w.mu);
    mw_notify_table_gc(&n->table, n->enabled);
    mw_alert_groups_gc(&n->table.groups, n->enabled, now);
    /* Structural changes are saved at once; cost figures once a minute.
     * The text is made under the lock, written without it: the collection
     * loop and the rule evaluator, which take the lock, never wait for the
     * disk. */
    char *text = NULL;
    if (n->state_path[0] && (n->dirty || now - n->last_save_ms >= 60000)) {
        text = mw_notify_table_encode(&n->table);
        n->dirty = 0;
        n->last_save_ms = now;
    }
    pthread_mutex_unlock(&n->w.mu);
    char err[256];
    if (text && mw_notify_state_write(n->state_path, text, err, sizeof(err)) < 0)
        mw_log_once(MW_LOG_WARN, "notify", "save", "cannot save state: %s", err);
    free(text);
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

static void close_receivers(mw_notifier *n)
{
    for (size_t i = 0; i < n->nrx; i++)
        n->rx[i].r->close(n->rx[i].state);
    n->nrx = 0;
}

int mw_notifier_new(const mw_config *cfg, mw_notifier **out, char *err, size_t errsize)
{
    *out = NULL;
    mw_notifier *n = mw_xcalloc(1, sizeof(*n));
    char node[254];
    mw_node_name(cfg, node, sizeof(node));
    char external_url[300];
    snprintf(external_url, sizeof(external_url), "http://%s%s", node,
             strchr(cfg->listen, ':') ? strrchr(cfg->listen, ':') : "");
    mw_receiver_ctx ctx = {external_url};
    for (size_t r = 0; r < mw_nreceivers; r++) {
        const mw_receiver *rc = mw_receivers[r];
        void *state = NULL;
        int on = rc->open(mw_config_group(cfg, rc->options), &ctx, &state, err, errsize);
        if (on < 0) {
            close_receivers(n);
            free(n);
            return -1;
        }
        if (!on) continue;
        n->rx[n->nrx++] = (receiver){.r = rc, .index = (int)r, .state = state};
        n->enabled |= 1u << r;
    }
    if (!n->nrx) {
        free(n);
        return 1;
    }
    const mw_notify_settings *ns = mw_config_group(cfg, &mw_notify_options);
    n->repeat_ms = ns->repeat_interval_ms;
    n->timing = (mw_alert_timing){ns->group_wait_ms, ns->group_interval_ms, ns->repeat_interval_ms};
    char why[256];
    {
        char merr[PATH_MAX * 3 + 256];
        int mrc = mw_notify_state_migrate(cfg, merr, sizeof(merr));
        if (mrc != 0) mw_log(mrc > 0 ? MW_LOG_INFO : MW_LOG_WARN, "notify", "%s", merr);
        int rc = mw_state_dir_make(cfg);
        if (rc < 0) {
            snprintf(err, errsize, "cannot create %s/state (--data-dir): %s", cfg->data_dir,
                     strerror(-rc));
            close_receivers(n);
            free(n);
            return -1;
        }
        mw_notify_state_path(cfg, n->state_path, sizeof(n->state_path));
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
        mw_notify_table_free(&n->table);
        close_receivers(n);
        free(n);
        return -1;
    }
    char names[MW_MAX_RECEIVERS * 32] = "";
    for (size_t i = 0; i < n->nrx; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof(names) - len, " %s", n->rx[i].r->shown);
    }
    mw_log(MW_LOG_INFO, "notify", "idle GPU notifications to:%s (state in %s)", names,
           n->state_path[0] ? n->state_path : "memory only");
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
    close_receivers(n); /* each wipes its secrets */
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

void mw_notifier_alerts(void *notifier, const mw_alert *alerts, size_t count, int64_t now_ms)
{
    mw_notifier *n = notifier;
    pthread_mutex_lock(&n->w.mu);
    if (mw_alert_groups_update(&n->table.groups, alerts, count, now_ms)) {
        n->dirty = 1;
        mw_worker_kick_locked(&n->w);
    }
    pthread_mutex_unlock(&n->w.mu);
}

void mw_notifier_kick(mw_notifier *n)
{
    mw_worker_kick(&n->w);
}

/* clang-format off */
MW_METRIC(NOTIFICATIONS, MW_COUNTER, "mlwatch_notifications_total", "", "Notification attempts (idle GPU sessions, rule-alert groups) by receiver kind and result (delivered or failed).");
/* clang-format on */

void mw_notifier_emit(mw_notifier *n, mw_snapshot *snap)
{
    pthread_mutex_lock(&n->w.mu);
    for (size_t i = 0; i < n->nrx; i++) {
        mw_emit(snap, &NOTIFICATIONS, (double)n->rx[i].ok, "receiver", n->rx[i].r->name, "result",
                "delivered", MW_END);
        mw_emit(snap, &NOTIFICATIONS, (double)n->rx[i].failed, "receiver", n->rx[i].r->name,
                "result", "failed", MW_END);
    }
    pthread_mutex_unlock(&n->w.mu);
}
