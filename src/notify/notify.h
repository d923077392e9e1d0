/* notify.h - notifications of idle GPU sessions for users without
 * Alertmanager: Mattermost/Slack incoming webhooks, a webhook carrying
 * Alertmanager's webhook payload (version 4), and e-mail over SMTP.
 *
 * The detector (src/derive/idle.c) keeps the notifier's table of episodes up
 * to date from the collection loop, through the notify module
 * (notify_module.c) (never blocking: a mutex held for a copy);
 * the notifier's own thread delivers what each receiver (receiver.h: one
 * file each, listed in receivers.c) has not had yet:
 * the opening message, a repeat every --notify-repeat-interval while the
 * episode stays open, the resolved message when it ends. A receiver that
 * fails is retried with exponential backoff (1 s doubling to 5 min), and gets
 * everything it missed once it is back. The table, with what each receiver
 * has had, is written atomically to DATA_DIR/state after each change, so a
 * restarted agent neither repeats a message nor forgets an open episode.
 * Secrets (webhook URLs, the SMTP password) are read from the configuration
 * ("file:PATH", "env:NAME" or a literal) and never logged or exported. */
#ifndef MW_NOTIFY_H
#define MW_NOTIFY_H

#include "../core/buf.h"
#include "../core/config.h"
#include "../core/snapshot.h"
#include "../derive/idle.h"
#include "../rules/alert.h"

#include <stdint.h>

/* One idle episode, as the idle module (derive/idle.h) hands it over. */
typedef mw_idle_episode mw_notify_episode;

typedef enum { MW_MSG_FIRING, MW_MSG_REPEAT, MW_MSG_RESOLVED } mw_msg_kind;

typedef struct mw_notifier mw_notifier;

/* The notifier's own settings (notify.c); each receiver has its own
 * (receiver.h). */
typedef struct mw_notify_settings {
    int64_t repeat_interval_ms;
    /* Rule alerts (alert_groups.h), grouped by alertname and node as
     * Alertmanager's group_by: the first message of a group waits
     * group_wait for the rest of it, the next ones group_interval; a group
     * still firing is repeated every repeat_interval. */
    int64_t group_wait_ms, group_interval_ms;
} mw_notify_settings;
extern const mw_option_group mw_notify_options;

/* Start the notifier when any receiver is configured: returns 0 with *out
 * set, 1 when none is (nothing started), -1 with a message (a secret that
 * cannot be read, a state folder that cannot be created). */
int mw_notifier_new(const mw_config *cfg, mw_notifier **out, char *err, size_t errsize);
void mw_notifier_free(mw_notifier *n);

/* Open or update an episode (same key and idle_since). */
void mw_notifier_upsert(mw_notifier *n, const mw_notify_episode *ep);
/* End the open episode of key (with its final figures in ep). */
void mw_notifier_resolve(mw_notifier *n, const mw_notify_episode *ep);
/* The alert sink of the built-in receivers (rules/alert.h's send, notifier
 * as ctx): copies the alerts into the groups and returns. */
void mw_notifier_alerts(void *notifier, const mw_alert *alerts, size_t n, int64_t now_ms);
/* Open episodes from the persisted state (after a restart). */
size_t mw_notifier_open_episodes(mw_notifier *n, mw_notify_episode *out, size_t max);
/* Wake the thread to deliver now (tests); returns after one delivery pass
 * when wait is set. */
void mw_notifier_kick(mw_notifier *n);
/* Self-metrics: mlwatch_notifications_total{receiver,result}. */
void mw_notifier_emit(mw_notifier *n, mw_snapshot *snap);

/* Message bodies (notify_format.c), pure functions for tests and fuzzing.
 * now_ms is when the message is made (for "idle for 2h 5m"). */
void mw_notify_text(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms, mw_buf *out);
/* {"text": ...} for Mattermost and Slack. */
void mw_notify_chat_json(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms,
                         mw_buf *out);
/* Alertmanager's webhook payload, version 4, one alert. */
void mw_notify_alertmanager_json(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms,
                                 const char *external_url, mw_buf *out);
/* RFC 5322 message with headers. */
void mw_notify_email(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms,
                     const char *from, const char *to, mw_buf *out);

/* One rule-alert message: the alerts of one group (alertname, node) that a
 * receiver is due: every firing alert of the group first (nfiring), then
 * those resolved since its last message. */
typedef struct mw_alert_group_msg {
    char alertname[256], node[256];
    mw_alert *alerts; /* deep copies, owned (mw_alert_group_msg_free) */
    size_t n, nfiring;
} mw_alert_group_msg;
void mw_alert_group_msg_free(mw_alert_group_msg *g);
/* An alert's identity, as Alertmanager's fingerprint: FNV-1a 64 of its
 * sorted label set (alert_groups.c). */
uint64_t mw_alert_fingerprint(const mw_alert *a);
/* Its bodies (alert_format.c), as the idle-session ones above. */
void mw_alert_group_text(const mw_alert_group_msg *g, mw_buf *out);
void mw_alert_group_chat_json(const mw_alert_group_msg *g, mw_buf *out);
/* Alertmanager's webhook payload, version 4: the group's alerts. */
void mw_alert_group_alertmanager_json(const mw_alert_group_msg *g, const char *external_url,
                                      mw_buf *out);
void mw_alert_group_email(const mw_alert_group_msg *g, int64_t now_ms, const char *from,
                          const char *to, mw_buf *out);

/* Resolve a secret: "file:PATH" (first line), "env:NAME", else the literal.
 * Returns 0, or -1 with a message naming the file or variable (never the
 * value). */
int mw_secret_resolve(const char *spec, char *out, size_t outsize, char *err, size_t errsize);

#endif
