/* rx_alertmanager.c - the receiver of Alertmanager's webhook payload
 * (version 4, one alert per message) at a secret URL
 * (--notify-alertmanager-webhook), for tools that already take it. */
#include "receiver.h"

typedef struct alertmanager_settings {
    char url[1024]; /* URL, file:PATH or env:NAME */
} alertmanager_settings;

/* clang-format off */
static const mw_option alertmanager_rows[] = {
    MW_OPT(alertmanager_settings, "notify-alertmanager-webhook", MW_OPT_STRING, url, "", NULL, "Webhook receiving Alertmanager's webhook payload (version 4): URL, file:PATH or env:NAME"),
};
/* clang-format on */
static const mw_option_group alertmanager_options =
    MW_OPTION_GROUP("notifications: Alertmanager payload", "src/notify/rx_alertmanager.c",
                    alertmanager_settings, alertmanager_rows, NULL);

static int alertmanager_open(const void *settings, const mw_receiver_ctx *ctx, void **state,
                             char *err, size_t errsize)
{
    return mw_json_hook_open(((const alertmanager_settings *)settings)->url,
                             "--notify-alertmanager-webhook", ctx, state, err, errsize);
}

static void alertmanager_format(void *state, const mw_notify_episode *ep, mw_msg_kind kind,
                                int64_t now_ms, mw_buf *out)
{
    const mw_json_hook *a = state;
    mw_notify_alertmanager_json(ep, kind, now_ms, a->external_url, out);
}

static void alertmanager_format_alerts(void *state, const mw_alert_group_msg *g, int64_t now_ms,
                                       mw_buf *out)
{
    (void)now_ms;
    const mw_json_hook *a = state;
    mw_alert_group_alertmanager_json(g, a->external_url, out);
}

static int alertmanager_send(void *state, const mw_buf *body)
{
    const mw_json_hook *a = state;
    return mw_notify_post_json(a->url, body->data ? body->data : "{}", "alertmanager webhook");
}

const mw_receiver mw_receiver_alertmanager = {
    .name = "alertmanager",
    .shown = "alertmanager-webhook",
    .options = &alertmanager_options,
    .open = alertmanager_open,
    .format = alertmanager_format,
    .format_alerts = alertmanager_format_alerts,
    .send = alertmanager_send,
    .close = mw_json_hook_close,
};
