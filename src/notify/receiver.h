/* receiver.h - the notification receiver interface and registry.
 *
 * A receiver is one file (rx_webhook.c is the worked example) holding its
 * settings (an options group, core/options.h), its payload formatter and its
 * sender, registered with one mw_receiver row and a line in receivers.c:
 *
 *   const mw_receiver mw_receiver_webhook = {
 *       .name = "webhook", .shown = "webhook", .options = &webhook_options,
 *       .open = webhook_open, .format = webhook_format, .send = webhook_send,
 *       .close = webhook_close,
 *   };
 *
 * The notifier (notify.c) opens every receiver whose settings name it, and
 * its thread gives each one the messages it has not had: format() makes the
 * body of an idle-session message, format_alerts() that of a rule-alert
 * group's, send() delivers it (0 once the receiver accepted it). What each
 * receiver has had is kept in the state file under its name, so the order
 * of the registry may change without losing it. */
#ifndef MW_RECEIVER_H
#define MW_RECEIVER_H

#include "notify.h"

#include <stddef.h>
#include <stdint.h>

/* The most receivers compiled in (bitmasks in the notifier's table). */
#define MW_MAX_RECEIVERS 16

/* What every receiver may use when it opens. */
typedef struct mw_receiver_ctx {
    const char *external_url; /* http://NODE:PORT, the agent as Alertmanager would link it */
} mw_receiver_ctx;

typedef struct mw_receiver {
    const char *name;  /* the state file's key, mlwatch_notifications_total{receiver} */
    const char *shown; /* in the agent's start line: "idle GPU notifications to: ..." */
    const mw_option_group *options;
    /* Returns 1 with *state set when the settings switch the receiver on, 0
     * when they do not (nothing opened), -1 with a one-line message naming
     * the flag (a secret that cannot be read, a setting missing). */
    int (*open)(const void *settings, const mw_receiver_ctx *ctx, void **state, char *err,
                size_t errsize);
    /* The message body for one episode; now_ms is when it is made. */
    void (*format)(void *state, const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms,
                   mw_buf *out);
    /* The body of one rule-alert group message (notify.h); NULL: the
     * receiver takes idle-session messages only. */
    void (*format_alerts)(void *state, const mw_alert_group_msg *g, int64_t now_ms, mw_buf *out);
    /* Deliver the body: 0 when the receiver accepted it, -1 (logged once)
     * to be retried with backoff. Runs on the notifier's thread. */
    int (*send)(void *state, const mw_buf *body);
    void (*close)(void *state); /* wipes secrets */
} mw_receiver;

/* Every receiver compiled in (receivers.c). */
extern const mw_receiver *const mw_receivers[];
extern const size_t mw_nreceivers;
/* Index of the named receiver in mw_receivers[], or -1. */
int mw_receiver_index(const char *name);

/* The state of a receiver that POSTs JSON to a secret URL (webhook,
 * alertmanager), in rx_webhook.c. */
typedef struct mw_json_hook {
    char url[1024];         /* the resolved secret */
    char external_url[300]; /* ctx->external_url, for payloads that link the agent */
} mw_json_hook;
/* Open one from its URL setting (URL, file:PATH or env:NAME; "" = off):
 * returns as mw_receiver.open does, errors naming flag. */
int mw_json_hook_open(const char *spec, const char *flag, const mw_receiver_ctx *ctx, void **state,
                      char *err, size_t errsize);
void mw_json_hook_close(void *state);

/* POST a JSON body; 0 on a 2xx answer. Errors name what (the receiver) and
 * the status, never the URL (its path is the secret). rx_webhook.c; for
 * every receiver that posts JSON. */
int mw_notify_post_json(const char *url, const char *body, const char *what);

#endif
