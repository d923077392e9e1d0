/* am_queue.c - the pure parts of the Alertmanager sender (am_sender.h): an
 * alert as API v2's PostableAlert JSON, the batch around them, the bounded
 * queue of encoded alerts, and an Alertmanager's name for logs and metrics.
 * Alerts are encoded once, on the evaluator's thread, so the queue holds
 * plain strings and a retry re-sends exactly the same bytes. */
#include "am_sender.h"
#include "../core/util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))) return 0;
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))) return 0;
    return n;
}

/* A JSON string of s, with each invalid UTF-8 byte as U+FFFD (templates can
 * make anything; Alertmanager takes only valid JSON). */
static json_t *text(const char *s)
{
    if (!s) s = "";
    json_t *j = json_string(s);
    if (j) return j;
    mw_buf b;
    mw_buf_init(&b, 0);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_seq(p);
        if (n) {
            mw_buf_append(&b, p, n);
            p += n;
        } else {
            mw_buf_puts(&b, "\xef\xbf\xbd");
            p++;
        }
    }
    j = json_string(b.data ? b.data : "");
    mw_buf_free(&b);
    return j;
}

static json_t *pairs(const mw_alert_pair *p, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++) {
        json_t *name = text(p[i].name);
        json_object_set_new(o, json_string_value(name), text(p[i].value));
        json_decref(name);
    }
    return o;
}

/* Go's time.Time in JSON is RFC 3339; milliseconds are what we hold. */
static json_t *rfc3339_ms(int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char s[64], out[80];
    strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, sizeof(out), "%s.%03dZ", s, (int)(ms % 1000));
    return json_string(out);
}

void mw_am_alert_json(const mw_alert *a, mw_buf *out)
{
    json_t *o = json_object();
    json_object_set_new(o, "labels", pairs(a->labels, a->nlabels));
    json_object_set_new(o, "annotations", pairs(a->annotations, a->nannotations));
    json_object_set_new(o, "startsAt", rfc3339_ms(a->starts_at_ms));
    if (a->ends_at_ms > 0) json_object_set_new(o, "endsAt", rfc3339_ms(a->ends_at_ms));
    if (a->generator_url && a->generator_url[0])
        json_object_set_new(o, "generatorURL", text(a->generator_url));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s) mw_buf_puts(out, s);
    free(s);
}

void mw_am_batch_json(char *const *items, size_t k, mw_buf *out)
{
    mw_buf_putc(out, '[');
    for (size_t i = 0; i < k; i++) {
        if (i) mw_buf_putc(out, ',');
        mw_buf_puts(out, items[i]);
    }
    mw_buf_putc(out, ']');
}

void mw_am_shown_url(const char *url, char *out, size_t size)
{
    const char *sep = strstr(url, "://");
    if (!sep) {
        snprintf(out, size, "invalid");
        return;
    }
    size_t slen = (size_t)(sep - url);
    const char *host = sep + 3;
    size_t hlen = strcspn(host, "/?#");
    /* user:password@ is not shown. */
    for (size_t i = hlen; i-- > 0;)
        if (host[i] == '@') {
            host += i + 1;
            hlen -= i + 1;
            break;
        }
    const char *port = "";
    const char *close = memchr(host, ']', hlen); /* [::1]:9093 */
    const char *colon = NULL;
    for (const char *p = close ? close : host; p < host + hlen; p++)
        if (*p == ':') colon = p;
    if (!colon) {
        if (slen == 4 && strncmp(url, "http", 4) == 0) port = ":80";
        if (slen == 5 && strncmp(url, "https", 5) == 0) port = ":443";
    }
    snprintf(out, size, "%.*s://%.*s%s", (int)slen, url, (int)hlen, host, port);
}

void mw_am_queue_init(mw_am_queue *q, size_t cap)
{
    memset(q, 0, sizeof(*q));
    q->cap = cap ? cap : 1;
    q->items = mw_xcalloc(q->cap, sizeof(q->items[0]));
}

void mw_am_queue_free(mw_am_queue *q)
{
    for (size_t i = 0; i < q->n; i++)
        free(q->items[(q->head + i) % q->cap]);
    free(q->items);
    memset(q, 0, sizeof(*q));
}

static void drop_oldest(mw_am_queue *q)
{
    free(q->items[q->head]);
    q->items[q->head] = NULL;
    q->head = (q->head + 1) % q->cap;
    q->n--;
    q->dropped++;
}

void mw_am_queue_push(mw_am_queue *q, const char *json)
{
    if (q->n == q->cap) drop_oldest(q);
    q->items[(q->head + q->n) % q->cap] = mw_xstrdup(json);
    q->n++;
}

size_t mw_am_queue_take(mw_am_queue *q, char **out, size_t max)
{
    size_t k = 0;
    while (k < max && q->n) {
        out[k++] = q->items[q->head];
        q->items[q->head] = NULL;
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    return k;
}

void mw_am_queue_put_back(mw_am_queue *q, char **items, size_t k)
{
    /* Those put back are older than anything queued: when there is no room
     * for all, the first of them go. */
    size_t room = q->cap - q->n, skip = k > room ? k - room : 0;
    for (size_t i = 0; i < skip; i++) {
        free(items[i]);
        q->dropped++;
    }
    for (size_t i = k; i-- > skip;) {
        q->head = (q->head + q->cap - 1) % q->cap;
        q->items[q->head] = items[i];
        q->n++;
    }
}
