/* alert_format.c - what a rule-alert group message (notify.h) says in each
 * built-in receiver's format: plain text (chat, e-mail), Mattermost/Slack
 * JSON, Alertmanager's webhook payload (version 4) and an RFC 5322 e-mail.
 * The text follows Alertmanager's default templates: "[FIRING:N] alertname"
 * then each alert's summary, description and other labels. */
#include "notify.h"
#include "notify_fmt.h"
#include "../core/hash.h"
#include "../core/util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *annotation(const mw_alert *a, const char *name)
{
    for (size_t i = 0; i < a->nannotations; i++)
        if (strcmp(a->annotations[i].name, name) == 0) return a->annotations[i].value;
    return NULL;
}

/* "[FIRING:2] MlwatchGPULost on gpu-01" or "[RESOLVED] ...". */
static void title(const mw_alert_group_msg *g, mw_buf *out)
{
    if (g->nfiring)
        mw_buf_printf(out, "[FIRING:%zu] %s", g->nfiring, g->alertname);
    else
        mw_buf_printf(out, "[RESOLVED] %s", g->alertname);
    if (g->node[0]) mw_buf_printf(out, " on %s", g->node);
}

static void alert_text(const mw_alert *a, mw_buf *out)
{
    const char *summary = annotation(a, "summary"), *desc = annotation(a, "description");
    char since[32];
    mw_notify_rfc3339(a->starts_at_ms, since, sizeof(since));
    mw_buf_printf(out, "- %s\n", summary ? summary : "(no summary)");
    if (desc) mw_buf_printf(out, "  %s\n", desc);
    mw_buf_puts(out, "  Labels:");
    for (size_t i = 0; i < a->nlabels; i++)
        if (strcmp(a->labels[i].name, "alertname") != 0 && strcmp(a->labels[i].name, "node") != 0)
            mw_buf_printf(out, " %s=%s", a->labels[i].name, a->labels[i].value);
    mw_buf_printf(out, "\n  Since: %s", since);
    if (a->resolved) {
        char end[32];
        mw_notify_rfc3339(a->ends_at_ms, end, sizeof(end));
        mw_buf_printf(out, ", resolved %s", end);
    }
    mw_buf_putc(out, '\n');
    if (a->generator_url && a->generator_url[0])
        mw_buf_printf(out, "  Source: %s\n", a->generator_url);
}

void mw_alert_group_text(const mw_alert_group_msg *g, mw_buf *out)
{
    title(g, out);
    mw_buf_putc(out, '\n');
    if (g->nfiring) mw_buf_puts(out, "Firing:\n");
    for (size_t i = 0; i < g->nfiring; i++)
        alert_text(&g->alerts[i], out);
    if (g->n > g->nfiring) mw_buf_puts(out, "Resolved:\n");
    for (size_t i = g->nfiring; i < g->n; i++)
        alert_text(&g->alerts[i], out);
}

void mw_alert_group_chat_json(const mw_alert_group_msg *g, mw_buf *out)
{
    mw_buf t;
    mw_buf_init(&t, 1 << 18);
    mw_alert_group_text(g, &t);
    json_t *j = json_pack("{s:s?, s:s}", "text", t.data, "username", "mlwatch");
    mw_buf_free(&t);
    if (j) mw_notify_dump_json(j, out);
}

static json_t *pairs_json(const mw_alert_pair *p, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, p[i].name, json_string(p[i].value));
    return o;
}

/* The pairs every alert of the group has with the same value. */
static json_t *common(const mw_alert_group_msg *g, int annotations)
{
    json_t *o = json_object();
    if (!g->n) return o;
    const mw_alert *first = &g->alerts[0];
    size_t n = annotations ? first->nannotations : first->nlabels;
    const mw_alert_pair *p = annotations ? first->annotations : first->labels;
    for (size_t i = 0; i < n; i++) {
        int everywhere = 1;
        for (size_t k = 1; k < g->n && everywhere; k++) {
            const mw_alert *a = &g->alerts[k];
            size_t m = annotations ? a->nannotations : a->nlabels;
            const mw_alert_pair *q = annotations ? a->annotations : a->labels;
            int found = 0;
            for (size_t j = 0; j < m; j++)
                if (strcmp(q[j].name, p[i].name) == 0 && strcmp(q[j].value, p[i].value) == 0)
                    found = 1;
            everywhere = found;
        }
        if (everywhere) json_object_set_new(o, p[i].name, json_string(p[i].value));
    }
    return o;
}

void mw_alert_group_alertmanager_json(const mw_alert_group_msg *g, const char *external_url,
                                      mw_buf *out)
{
    json_t *alerts = json_array();
    for (size_t i = 0; i < g->n; i++) {
        const mw_alert *a = &g->alerts[i];
        char starts[32], ends[32] = "0001-01-01T00:00:00Z", fp[20];
        mw_notify_rfc3339(a->starts_at_ms, starts, sizeof(starts));
        if (a->resolved) mw_notify_rfc3339(a->ends_at_ms, ends, sizeof(ends));
        snprintf(fp, sizeof(fp), "%016llx", (unsigned long long)mw_alert_fingerprint(a));
        json_t *j = json_pack(
            "{s:s, s:o, s:o, s:s, s:s, s:s, s:s}", "status", a->resolved ? "resolved" : "firing",
            "labels", pairs_json(a->labels, a->nlabels), "annotations",
            pairs_json(a->annotations, a->nannotations), "startsAt", starts, "endsAt", ends,
            "generatorURL", a->generator_url ? a->generator_url : "", "fingerprint", fp);
        if (j) json_array_append_new(alerts, j);
    }
    char key[700];
    snprintf(key, sizeof(key), "{}:{alertname=\"%s\", node=\"%s\"}", g->alertname, g->node);
    json_t *j =
        json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:s}, s:o, s:o, s:s, s:o}", "version", "4",
                  "groupKey", key, "truncatedAlerts", 0, "status",
                  g->nfiring ? "firing" : "resolved", "receiver", "mlwatch", "groupLabels",
                  "alertname", g->alertname, "node", g->node, "commonLabels", common(g, 0),
                  "commonAnnotations", common(g, 1), "externalURL", external_url, "alerts", alerts);
    if (j) mw_notify_dump_json(j, out);
}

void mw_alert_group_email(const mw_alert_group_msg *g, int64_t now_ms, const char *from,
                          const char *to, mw_buf *out)
{
    char date[64], subj[700], hfrom[300], hto[1100];
    time_t t = (time_t)(now_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
    mw_buf s;
    mw_buf_init(&s, 4096);
    title(g, &s);
    mw_notify_header_safe(s.data ? s.data : "", subj, sizeof(subj));
    mw_buf_free(&s);
    mw_notify_header_safe(from, hfrom, sizeof(hfrom));
    mw_notify_header_safe(to, hto, sizeof(hto));
    char gk[600];
    snprintf(gk, sizeof(gk), "%s\xff%s", g->alertname, g->node);
    mw_buf_printf(out,
                  "Date: %s\r\nFrom: %s\r\nTo: %s\r\nSubject: [mlwatch] %s\r\n"
                  "Message-ID: <%016llx.%lld@mlwatch>\r\nMIME-Version: 1.0\r\n"
                  "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n"
                  "\r\n",
                  date, hfrom, hto, subj, (unsigned long long)mw_fnv1a64_str(MW_FNV1A64_SEED, gk),
                  (long long)now_ms);
    mw_buf body;
    mw_buf_init(&body, 1 << 18);
    mw_alert_group_text(g, &body);
    /* SMTP bodies end lines with CRLF (libcurl dot-stuffs a lone "."). */
    for (const char *p = body.data ? body.data : ""; *p; p++) {
        if (*p == '\n') mw_buf_putc(out, '\r');
        mw_buf_putc(out, *p);
    }
    mw_buf_free(&body);
}
