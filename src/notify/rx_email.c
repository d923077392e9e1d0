/* rx_email.c - the e-mail receiver: an RFC 5322 message over SMTP, with
 * STARTTLS required on smtp:// and TLS from the start on smtps://
 * (--notify-smtp-*). */
#include "receiver.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct email_settings {
    char server[512]; /* URL, file:PATH or env:NAME */
    char from[256];
    char to[1024]; /* comma-separated addresses */
    char username[256];
    char password[1024]; /* file:PATH, env:NAME or a literal */
    char ca_file[PATH_MAX];
} email_settings;

#define OPT(n, t, f, d, v, h) MW_OPT(email_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option email_rows[] = {
    OPT("notify-smtp-server", MW_OPT_STRING, server, "", NULL, "SMTP server for idle GPU e-mail, smtp://HOST:PORT (STARTTLS required) or smtps://HOST:PORT"),
    OPT("notify-smtp-from", MW_OPT_STRING, from, "", NULL, "Sender address of e-mail"),
    OPT("notify-smtp-to", MW_OPT_STRING, to, "", NULL, "Comma-separated recipients of e-mail"),
    OPT("notify-smtp-username", MW_OPT_STRING, username, "", NULL, "SMTP user name"),
    OPT("notify-smtp-password", MW_OPT_STRING, password, "", NULL, "SMTP password: file:PATH or env:NAME (a literal works but shows in the process list)"),
    OPT("notify-smtp-ca-file", MW_OPT_PATH, ca_file, "", NULL, "CA bundle to verify the SMTP server with (default: the system's)"),
};
/* clang-format on */
#undef OPT
static const mw_option_group email_options = MW_OPTION_GROUP(
    "notifications: e-mail", "src/notify/rx_email.c", email_settings, email_rows, NULL);

typedef struct email {
    char url[512]; /* the resolved server */
    char smtp_from[256], smtp_to[1024], smtp_user[256], smtp_password[1024], smtp_ca[PATH_MAX];
} email;

static int send_email(const email *n, const char *msg)
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
    mw_http_call call = {.url = n->url,
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

static int email_open(const void *settings, const mw_receiver_ctx *ctx, void **state, char *err,
                      size_t errsize)
{
    (void)ctx;
    const email_settings *s = settings;
    if (!s->server[0]) return 0;
    email *e = mw_xcalloc(1, sizeof(*e));
    char why[256];
    if (mw_secret_resolve(s->server, e->url, sizeof(e->url), why, sizeof(why)) < 0) {
        snprintf(err, errsize, "--notify-smtp-server: %s", why);
        free(e);
        return -1;
    }
    if (!s->from[0] || !s->to[0]) {
        snprintf(err, errsize,
                 "--notify-smtp-server needs --notify-smtp-from and "
                 "--notify-smtp-to");
        free(e);
        return -1;
    }
    if (s->password[0] && mw_secret_resolve(s->password, e->smtp_password, sizeof(e->smtp_password),
                                            why, sizeof(why)) < 0) {
        snprintf(err, errsize, "--notify-smtp-password: %s", why);
        free(e);
        return -1;
    }
    mw_strlcpy(e->smtp_from, s->from, sizeof(e->smtp_from));
    mw_strlcpy(e->smtp_to, s->to, sizeof(e->smtp_to));
    mw_strlcpy(e->smtp_user, s->username, sizeof(e->smtp_user));
    mw_strlcpy(e->smtp_ca, s->ca_file, sizeof(e->smtp_ca));
    *state = e;
    return 1;
}

static void email_format(void *state, const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms,
                         mw_buf *out)
{
    const email *e = state;
    mw_notify_email(ep, kind, now_ms, e->smtp_from, e->smtp_to, out);
}

static void email_format_alerts(void *state, const mw_alert_group_msg *g, int64_t now_ms,
                                mw_buf *out)
{
    const email *e = state;
    mw_alert_group_email(g, now_ms, e->smtp_from, e->smtp_to, out);
}

static int email_send(void *state, const mw_buf *body)
{
    return send_email(state, body->data ? body->data : "");
}

static void email_close(void *state)
{
    if (!state) return;
    memset(state, 0, sizeof(email)); /* the password */
    free(state);
}

const mw_receiver mw_receiver_email = {
    .name = "email",
    .shown = "email",
    .options = &email_options,
    .open = email_open,
    .format = email_format,
    .format_alerts = email_format_alerts,
    .send = email_send,
    .close = email_close,
};
