/* notify_format.c - what an idle-GPU notification says, in each receiver's
 * format: plain text (e-mail, chat), Mattermost/Slack JSON, Alertmanager's
 * webhook payload (version 4) and an RFC 5322 e-mail; and reading secrets. */
#include "notify.h"
#include "notify_fmt.h"
#include "../core/hash.h"
#include "../core/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mw_notify_rfc3339(int64_t ms, char *out, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "2h 5m", "3m 10s", "45s": how long, for people. */
static void human_duration(int64_t ms, char *out, size_t n)
{
    int64_t s = ms < 0 ? 0 : ms / 1000;
    int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, sec = s % 60;
    if (d)
        snprintf(out, n, "%lldd %lldh", (long long)d, (long long)h);
    else if (h)
        snprintf(out, n, "%lldh %lldm", (long long)h, (long long)m);
    else if (m)
        snprintf(out, n, "%lldm %llds", (long long)m, (long long)sec);
    else
        snprintf(out, n, "%llds", (long long)sec);
}

static void human_bytes(double b, char *out, size_t n)
{
    if (b >= 1073741824.0)
        snprintf(out, n, "%.1f GiB", b / 1073741824.0);
    else
        snprintf(out, n, "%.0f MiB", b / 1048576.0);
}

static void cost_text(const mw_notify_episode *ep, char *out, size_t n)
{
    char co2[64] = "CO2 unknown (no carbon intensity)";
    if (ep->co2_grams >= 0) snprintf(co2, sizeof(co2), "%.0f g CO2", ep->co2_grams);
    snprintf(out, n, "%.2f GPU-hours, %.3f kWh, %s", ep->gpu_seconds / 3600.0,
             ep->energy_joules / 3.6e6, co2);
}

static void workload_text(const mw_notify_episode *ep, char *out, size_t n)
{
    if (ep->workload_kind[0])
        snprintf(out, n, "%s %s", ep->workload_kind, ep->workload);
    else
        snprintf(out, n, "unknown workload");
}

static void gpu_text(const mw_notify_episode *ep, char *out, size_t n)
{
    snprintf(out, n, "GPU %s%s%s%s", ep->gpu, ep->model[0] ? " (" : "", ep->model,
             ep->model[0] ? ")" : "");
}

static void summary(const mw_notify_episode *ep, mw_msg_kind kind, mw_buf *out)
{
    char gpu[160];
    gpu_text(ep, gpu, sizeof(gpu));
    if (kind == MW_MSG_RESOLVED)
        mw_buf_printf(out, "Resolved: %s on %s is no longer idle (%s): pod %s/%s", gpu, ep->node,
                      strcmp(ep->end_reason, "busy") == 0 ? "busy again" : "session ended", ep->ns,
                      ep->pod);
    else
        mw_buf_printf(out, "%sIdle GPU: %s on %s held by pod %s/%s",
                      kind == MW_MSG_REPEAT ? "Still idle: " : "", gpu, ep->node, ep->ns, ep->pod);
}

void mw_notify_text(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms, mw_buf *out)
{
    char since[32], dur[32], mem[32], cost[160], wl[300], gpu[160];
    mw_notify_rfc3339(ep->idle_since_ms, since, sizeof(since));
    int64_t end = kind == MW_MSG_RESOLVED && ep->ended_ms ? ep->ended_ms : now_ms;
    human_duration(end - ep->idle_since_ms, dur, sizeof(dur));
    human_bytes(ep->memory_bytes, mem, sizeof(mem));
    cost_text(ep, cost, sizeof(cost));
    workload_text(ep, wl, sizeof(wl));
    gpu_text(ep, gpu, sizeof(gpu));
    summary(ep, kind, out);
    mw_buf_printf(out,
                  "\nOwner: %s\nPod: %s/%s (container %s)\nWorkload: %s\nGPU: %s, %s, node %s\n"
                  "Idle (below %.0f%% utilization) since %s (%s)\nGPU memory held: %s\n"
                  "Cost so far: %s\n",
                  ep->owner, ep->ns, ep->pod, ep->container, wl, gpu, ep->uuid, ep->node,
                  ep->threshold_ratio * 100, since, dur, mem, cost);
}

void mw_notify_dump_json(json_t *j, mw_buf *out)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (s) {
        mw_buf_puts(out, s);
        free(s);
    }
    json_decref(j);
}

void mw_notify_chat_json(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms, mw_buf *out)
{
    mw_buf t;
    mw_buf_init(&t, 1 << 16);
    mw_notify_text(ep, kind, now_ms, &t);
    json_t *j = json_pack("{s:s?, s:s}", "text", t.data, "username", "mlwatch");
    mw_buf_free(&t);
    if (j) mw_notify_dump_json(j, out);
}

/* The alert's identity: Alertmanager's fingerprint is a hash of the label
 * set; FNV-1a 64 of the key and the episode's start does the same job. */
static void fingerprint(const mw_notify_episode *ep, char *out, size_t n)
{
    char buf[480];
    snprintf(buf, sizeof(buf), "%s@%lld", ep->key, (long long)ep->idle_since_ms);
    uint64_t h = mw_fnv1a64_str(MW_FNV1A64_SEED, buf);
    snprintf(out, n, "%016llx", (unsigned long long)h);
}

void mw_notify_alertmanager_json(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms,
                                 const char *external_url, mw_buf *out)
{
    char starts[32], ends[32], fp[20], dur[32], cost[160];
    mw_notify_rfc3339(ep->idle_since_ms, starts, sizeof(starts));
    if (kind == MW_MSG_RESOLVED)
        mw_notify_rfc3339(ep->ended_ms ? ep->ended_ms : now_ms, ends, sizeof(ends));
    else
        mw_strlcpy(ends, "0001-01-01T00:00:00Z", sizeof(ends));
    fingerprint(ep, fp, sizeof(fp));
    human_duration((kind == MW_MSG_RESOLVED && ep->ended_ms ? ep->ended_ms : now_ms) -
                       ep->idle_since_ms,
                   dur, sizeof(dur));
    cost_text(ep, cost, sizeof(cost));
    const char *status = kind == MW_MSG_RESOLVED ? "resolved" : "firing";
    json_t *labels =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "alertname",
                  "IdleGPUSession", "severity", "warning", "namespace", ep->ns, "pod", ep->pod,
                  "container", ep->container, "gpu", ep->gpu, "model", ep->model, "node", ep->node,
                  "workload_kind", ep->workload_kind, "workload", ep->workload, "owner", ep->owner);
    mw_buf t;
    mw_buf_init(&t, 1 << 16);
    mw_notify_text(ep, kind, now_ms, &t);
    char summ[600];
    snprintf(summ, sizeof(summ), "GPU %s on %s idle for %s (%s)", ep->gpu, ep->node, dur, cost);
    json_t *ann = json_pack("{s:s, s:s?, s:f, s:f, s:f}", "summary", summ, "description", t.data,
                            "gpu_memory_bytes", ep->memory_bytes, "idle_gpu_seconds",
                            ep->gpu_seconds, "idle_energy_joules", ep->energy_joules);
    mw_buf_free(&t);
    if (!labels || !ann) {
        json_decref(labels);
        json_decref(ann);
        return;
    }
    if (ep->co2_grams >= 0) json_object_set_new(ann, "idle_co2_grams", json_real(ep->co2_grams));
    json_t *alert = json_pack("{s:s, s:O, s:O, s:s, s:s, s:s, s:s}", "status", status, "labels",
                              labels, "annotations", ann, "startsAt", starts, "endsAt", ends,
                              "generatorURL", external_url, "fingerprint", fp);
    json_t *common = json_deep_copy(labels);
    char group_key[600];
    snprintf(group_key, sizeof(group_key), "{}:{alertname=\"IdleGPUSession\",pod=\"%s/%s\"}",
             ep->ns, ep->pod);
    json_t *j =
        json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}, s:o, s:O, s:s, s:[o]}", "version", "4",
                  "groupKey", group_key, "truncatedAlerts", 0, "status", status, "receiver",
                  "mlwatch", "groupLabels", "alertname", "IdleGPUSession", "commonLabels", common,
                  "commonAnnotations", ann, "externalURL", external_url, "alerts", alert);
    json_decref(labels);
    json_decref(ann);
    if (j) mw_notify_dump_json(j, out);
}

void mw_notify_header_safe(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; *in && i + 1 < n; in++)
        out[i++] = (unsigned char)*in < 0x20 || *in == 0x7f ? ' ' : *in;
    out[i] = '\0';
}

void mw_notify_email(const mw_notify_episode *ep, mw_msg_kind kind, int64_t now_ms,
                     const char *from, const char *to, mw_buf *out)
{
    char date[64], fp[20], subj[700];
    time_t t = (time_t)(now_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
    fingerprint(ep, fp, sizeof(fp));
    mw_buf s;
    mw_buf_init(&s, 4096);
    summary(ep, kind, &s);
    mw_notify_header_safe(s.data ? s.data : "", subj, sizeof(subj));
    mw_buf_free(&s);
    char hfrom[300], hto[1100];
    mw_notify_header_safe(from, hfrom, sizeof(hfrom));
    mw_notify_header_safe(to, hto, sizeof(hto));
    /* Message-ID names the episode and the message, so a mail system can
     * spot a duplicate too. */
    mw_buf_printf(out,
                  "Date: %s\r\nFrom: %s\r\nTo: %s\r\nSubject: [mlwatch] %s\r\n"
                  "Message-ID: <%s.%s.%lld@mlwatch>\r\nMIME-Version: 1.0\r\n"
                  "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n"
                  "\r\n",
                  date, hfrom, hto, subj, fp,
                  kind == MW_MSG_RESOLVED ? "resolved"
                  : kind == MW_MSG_REPEAT ? "repeat"
                                          : "firing",
                  (long long)now_ms);
    mw_buf t2;
    mw_buf_init(&t2, 1 << 16);
    mw_notify_text(ep, kind, now_ms, &t2);
    /* SMTP bodies end lines with CRLF; a line that is a lone "." is
     * dot-stuffed by libcurl. */
    for (const char *p = t2.data ? t2.data : ""; *p; p++) {
        if (*p == '\n') mw_buf_putc(out, '\r');
        mw_buf_putc(out, *p);
    }
    mw_buf_free(&t2);
}

int mw_secret_resolve(const char *spec, char *out, size_t outsize, char *err, size_t errsize)
{
    out[0] = '\0';
    if (strncmp(spec, "env:", 4) == 0) {
        const char *v = getenv(spec + 4);
        if (!v || !*v) {
            snprintf(err, errsize, "environment variable %s is not set", spec + 4);
            return -1;
        }
        if (strlen(v) >= outsize) {
            snprintf(err, errsize, "environment variable %s is too long", spec + 4);
            return -1;
        }
        mw_strlcpy(out, v, outsize);
        return 0;
    }
    if (strncmp(spec, "file:", 5) == 0) {
        FILE *f = fopen(spec + 5, "r");
        if (!f) {
            snprintf(err, errsize, "%s: %s", spec + 5, strerror(errno));
            return -1;
        }
        size_t len = fread(out, 1, outsize - 1, f);
        int toolong = len == outsize - 1 && fgetc(f) != EOF;
        fclose(f);
        out[len] = '\0';
        out[strcspn(out, "\r\n")] = '\0';
        if (toolong || !out[0]) {
            snprintf(err, errsize, "%s: %s", spec + 5, toolong ? "too long" : "empty");
            out[0] = '\0';
            return -1;
        }
        return 0;
    }
    if (strlen(spec) >= outsize) {
        snprintf(err, errsize, "value too long");
        return -1;
    }
    mw_strlcpy(out, spec, outsize);
    return 0;
}
