/* rx_webhook.c - the Mattermost/Slack incoming-webhook receiver: a POST of
 * {"text": ...} to a secret URL (--notify-webhook). Also the JSON POST that
 * every webhook-like receiver uses (mw_notify_post_json). */
#include "receiver.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct webhook_settings {
    char url[1024]; /* URL, file:PATH or env:NAME */
} webhook_settings;

/* clang-format off */
static const mw_option webhook_rows[] = {
    MW_OPT(webhook_settings, "notify-webhook", MW_OPT_STRING, url, "", NULL, "Mattermost or Slack incoming webhook URL for idle GPU sessions: URL, file:PATH or env:NAME"),
};
/* clang-format on */
static const mw_option_group webhook_options = MW_OPTION_GROUP(
    "notifications: webhook", "src/notify/rx_webhook.c", webhook_settings, webhook_rows, NULL);

/* POST JSON; 0 on a 2xx answer. Errors name the receiver kind and the
 * status, never the URL (its path is the secret). */
int mw_notify_post_json(const char *url, const char *body, const char *what)
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

int mw_json_hook_open(const char *spec, const char *flag, const mw_receiver_ctx *ctx, void **state,
                      char *err, size_t errsize)
{
    if (!spec[0]) return 0;
    mw_json_hook *h = mw_xcalloc(1, sizeof(*h));
    char why[256];
    if (mw_secret_resolve(spec, h->url, sizeof(h->url), why, sizeof(why)) < 0) {
        snprintf(err, errsize, "%s: %s", flag, why);
        free(h);
        return -1;
    }
    mw_strlcpy(h->external_url, ctx->external_url, sizeof(h->external_url));
    *state = h;
    return 1;
}

void mw_json_hook_close(void *state)
{
    if (!state) return;
    memset(state, 0, sizeof(mw_json_hook)); /* the URL is the secret */
    free(state);
}

static int webhook_open(const void *settings, const mw_receiver_ctx *ctx, void **state, char *err,
                        size_t errsize)
{
    return mw_json_hook_open(((const webhook_settings *)settings)->url, "--notify-webhook", ctx,
                             state, err, errsize);
}

static void webhook_format(void *state, const mw_notify_episode *ep, mw_msg_kind kind,
                           int64_t now_ms, mw_buf *out)
{
    (void)state;
    mw_notify_chat_json(ep, kind, now_ms, out);
}

static void webhook_format_alerts(void *state, const mw_alert_group_msg *g, int64_t now_ms,
                                  mw_buf *out)
{
    (void)state;
    (void)now_ms;
    mw_alert_group_chat_json(g, out);
}

static int webhook_send(void *state, const mw_buf *body)
{
    const mw_json_hook *w = state;
    return mw_notify_post_json(w->url, body->data ? body->data : "{}", "webhook");
}

const mw_receiver mw_receiver_webhook = {
    .name = "webhook",
    .shown = "webhook",
    .options = &webhook_options,
    .open = webhook_open,
    .format = webhook_format,
    .format_alerts = webhook_format_alerts,
    .send = webhook_send,
    .close = mw_json_hook_close,
};
