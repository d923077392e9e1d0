/* test_am_sender.c - rule alerts to Alertmanager (src/notify/am_sender.h):
 * the API v2 payload byte for byte, the shown URL, the queue's bound,
 * batches of 64, retries of timeouts and 5xx with backoff, a 4xx dropped,
 * the settings; and the alert sink registry (src/rules/alert.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "core/config.h"
#include "notify/am_sender.h"
#include "rules/alert.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

static const mw_alert_pair IDLE_LABELS[] = {
    {"alertname", "MlwatchIdleGPUSession"},
    {"gpu", "0"},
    {"namespace", "shared"},
    {"node", "n1"},
    {"pod", "nb-0"},
    {"severity", "warning"},
};
static const mw_alert_pair IDLE_ANN[] = {
    {"summary", "Idle GPU 0 on n1 held by shared/nb-0"},
    {"description", "It has been idle for 31m \"here\"."},
};

static mw_alert idle_alert(void)
{
    return (mw_alert){.labels = IDLE_LABELS,
                      .nlabels = 6,
                      .annotations = IDLE_ANN,
                      .nannotations = 2,
                      .starts_at_ms = 1764680400123, /* 2025-12-02T13:00:00.123Z */
                      .ends_at_ms = 1764681000000,
                      .generator_url = "http://n1:9400/graph?g0.expr=up"};
}

static void payload_bytes(void **st)
{
    (void)st;
    mw_alert a = idle_alert();
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_am_alert_json(&a, &b);
    assert_string_equal(
        b.data,
        "{\"labels\":{\"alertname\":\"MlwatchIdleGPUSession\",\"gpu\":\"0\",\"namespace\":"
        "\"shared\",\"node\":\"n1\",\"pod\":\"nb-0\",\"severity\":\"warning\"},\"annotations\":{"
        "\"summary\":\"Idle GPU 0 on n1 held by shared/nb-0\",\"description\":\"It has been idle "
        "for 31m \\\"here\\\".\"},\"startsAt\":\"2025-12-02T13:00:00.123Z\",\"endsAt\":\"2025-12-"
        "02T13:10:00.000Z\",\"generatorURL\":\"http://n1:9400/graph?g0.expr=up\"}");
    /* No endsAt or generatorURL when there is none; bad UTF-8 replaced. */
    mw_buf_clear(&b);
    const mw_alert_pair l[] = {{"alertname", "X\xff"}};
    mw_alert bare = {.labels = l, .nlabels = 1, .starts_at_ms = 1000};
    mw_am_alert_json(&bare, &b);
    assert_string_equal(b.data, "{\"labels\":{\"alertname\":\"X\xef\xbf\xbd\"},\"annotations\":{},"
                                "\"startsAt\":\"1970-01-01T00:00:01.000Z\"}");
    mw_buf_clear(&b);
    char *items[] = {"{\"a\":1}", "{\"b\":2}"};
    mw_am_batch_json(items, 2, &b);
    assert_string_equal(b.data, "[{\"a\":1},{\"b\":2}]");
    mw_buf_free(&b);
}

static void shown_url(void **st)
{
    (void)st;
    char s[128];
    mw_am_shown_url("https://u:pw@am.example/prefix/?x=1", s, sizeof(s));
    assert_string_equal(s, "https://am.example:443");
    mw_am_shown_url("http://127.0.0.1:9093", s, sizeof(s));
    assert_string_equal(s, "http://127.0.0.1:9093");
    mw_am_shown_url("http://am", s, sizeof(s));
    assert_string_equal(s, "http://am:80");
    mw_am_shown_url("http://[::1]:9093/x", s, sizeof(s));
    assert_string_equal(s, "http://[::1]:9093");
}

static void queue_bound(void **st)
{
    (void)st;
    mw_am_queue q;
    mw_am_queue_init(&q, 3);
    char item[16];
    for (int i = 0; i < 5; i++) {
        snprintf(item, sizeof(item), "%d", i);
        mw_am_queue_push(&q, item);
    }
    assert_int_equal(q.n, 3);
    assert_int_equal(q.dropped, 2);
    char *out[4];
    assert_int_equal(mw_am_queue_take(&q, out, 2), 2);
    assert_string_equal(out[0], "2");
    assert_string_equal(out[1], "3");
    /* While the batch is out, one more comes: the queue holds 4, 5... */
    mw_am_queue_push(&q, "5");
    /* ...so one of the two put back (the oldest, "2") is dropped. */
    mw_am_queue_put_back(&q, out, 2);
    assert_int_equal(q.n, 3);
    assert_int_equal(q.dropped, 3);
    assert_int_equal(mw_am_queue_take(&q, out, 4), 3);
    assert_string_equal(out[0], "3");
    assert_string_equal(out[1], "4");
    assert_string_equal(out[2], "5");
    for (int i = 0; i < 3; i++)
        free(out[i]);
    mw_am_queue_free(&q);
}

/* A fake Alertmanager: answers each POST from a script (status, or 0 for
 * a timeout), and keeps the alert counts of the bodies it was sent. */
typedef struct fake_am {
    long answers[16];
    size_t nanswers, calls;
    size_t batch_sizes[16];
    char last_url[512];
} fake_am;

static int fake_post(void *cls, const mw_am_target *t, const mw_buf *body, long *status,
                     char *reason, size_t reasonsize)
{
    fake_am *f = cls;
    snprintf(f->last_url, sizeof(f->last_url), "%s", mw_am_target_url(t));
    size_t n = 0;
    for (const char *p = body->data; *p; p++)
        n += strncmp(p, "{\"labels\"", 9) == 0;
    assert_true(body->data[0] == '[' && body->data[body->len - 1] == ']');
    f->batch_sizes[f->calls] = n;
    long a = f->calls < f->nanswers ? f->answers[f->calls] : 200;
    f->calls++;
    if (a == 0) {
        snprintf(reason, reasonsize, "Timeout was reached");
        return -1;
    }
    *status = a;
    snprintf(reason, reasonsize, "HTTP %ld", a);
    return 0;
}

static mw_am_settings settings(void)
{
    mw_am_settings s;
    memset(&s, 0, sizeof(s));
    s.timeout_ms = 1000;
    s.queue_capacity = 10000;
    return s;
}

static void enqueue_n(mw_am_target *t, int n)
{
    mw_alert a = idle_alert();
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_am_alert_json(&a, &b);
    for (int i = 0; i < n; i++)
        mw_am_target_enqueue(t, b.data);
    mw_buf_free(&b);
}

static void batches_of_64(void **st)
{
    (void)st;
    mw_am_settings s = settings();
    fake_am f = {.nanswers = 0};
    mw_am_target *t = mw_am_target_new("http://127.0.0.1:9093/", &s, 10000, fake_post, &f);
    enqueue_n(t, 130);
    assert_int_equal(mw_am_target_step(t), 0);
    assert_int_equal(mw_am_target_step(t), 0);
    assert_int_equal(mw_am_target_step(t), 0);
    assert_int_equal(mw_am_target_step(t), -1); /* empty */
    assert_int_equal(f.calls, 3);
    assert_int_equal(f.batch_sizes[0], 64);
    assert_int_equal(f.batch_sizes[1], 64);
    assert_int_equal(f.batch_sizes[2], 2);
    assert_string_equal(f.last_url, "http://127.0.0.1:9093/api/v2/alerts");
    assert_string_equal(mw_am_target_shown(t), "http://127.0.0.1:9093");
    mw_am_counts c;
    mw_am_target_counts(t, &c);
    assert_int_equal(c.sent, 130);
    assert_int_equal(c.errors, 0);
    assert_int_equal(c.queued, 0);
    mw_am_target_free(t);
}

static void retry_with_backoff(void **st)
{
    (void)st;
    mw_am_settings s = settings();
    /* 503, a timeout, 500, then accepted; later a 400 (never retried). */
    fake_am f = {.answers = {503, 0, 500, 200, 400}, .nanswers = 5};
    mw_am_target *t = mw_am_target_new("http://am:9093", &s, 10000, fake_post, &f);
    enqueue_n(t, 3);
    assert_int_equal(mw_am_target_step(t), MW_AM_BACKOFF_MIN_MS);
    assert_int_equal(mw_am_target_step(t), 2 * MW_AM_BACKOFF_MIN_MS);
    assert_int_equal(mw_am_target_step(t), 4 * MW_AM_BACKOFF_MIN_MS);
    mw_am_counts c;
    mw_am_target_counts(t, &c);
    assert_int_equal(c.queued, 3); /* kept for the retry */
    assert_int_equal(c.errors, 9);
    assert_int_equal(c.sent, 0);
    assert_int_equal(mw_am_target_step(t), 0); /* accepted: backoff reset */
    mw_am_target_counts(t, &c);
    assert_int_equal(c.sent, 3);
    assert_int_equal(c.queued, 0);
    assert_int_equal(c.backoff_ms, 0);
    assert_int_equal(f.batch_sizes[3], 3); /* the same batch, whole */
    enqueue_n(t, 2);
    assert_int_equal(mw_am_target_step(t), -1); /* 400: dropped, nothing left */
    mw_am_target_counts(t, &c);
    assert_int_equal(c.sent, 3);
    assert_int_equal(c.errors, 11);
    assert_int_equal(c.dropped, 2);
    assert_int_equal(c.queued, 0);
    mw_am_target_free(t);
}

static void backoff_capped(void **st)
{
    (void)st;
    mw_am_settings s = settings();
    fake_am f = {.answers = {503, 503, 503, 503, 503, 503, 503, 503, 503, 503}, .nanswers = 10};
    mw_am_target *t = mw_am_target_new("http://am:9093", &s, 10000, fake_post, &f);
    enqueue_n(t, 1);
    int64_t last = 0;
    for (int i = 0; i < 10; i++)
        last = mw_am_target_step(t);
    assert_int_equal(last, MW_AM_BACKOFF_MAX_MS);
    mw_am_target_free(t);
}

static void settings_from_flags(void **st)
{
    (void)st;
    static mw_config cfg;
    mw_config_defaults(&cfg);
    char *argv[] = {"mlwatch",
                    "agent",
                    "--alertmanager-url",
                    "http://a:9093,https://b:9093/am",
                    "--alertmanager-queue-capacity",
                    "5"};
    char err[512] = "";
    size_t nrest = 0;
    assert_int_equal(mw_config_from_args(&cfg, 6, argv, 2, NULL, &nrest, 0, err, sizeof(err)), 0);
    const mw_am_settings *s = mw_config_group(&cfg, &mw_am_options);
    assert_string_equal(s->urls, "http://a:9093,https://b:9093/am");
    assert_true(s->queue_capacity == 5);
    assert_int_equal(s->timeout_ms, 10000);
    char *bad[] = {"mlwatch", "agent", "--alertmanager-url", "am:9093"};
    mw_config_defaults(&cfg);
    assert_int_equal(mw_config_from_args(&cfg, 4, bad, 2, NULL, &nrest, 0, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "is not an http:// or https:// URL"));
    char *cap[] = {"mlwatch", "agent", "--alertmanager-queue-capacity", "0"};
    mw_config_defaults(&cfg);
    assert_int_equal(mw_config_from_args(&cfg, 4, cap, 2, NULL, &nrest, 0, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "whole number"));
    /* The defaults: off, capacity 10000 like Prometheus. */
    mw_config_defaults(&cfg);
    s = mw_config_group(&cfg, &mw_am_options);
    assert_true(s->queue_capacity == 10000);
    mw_am_sender *sender = (mw_am_sender *)1;
    assert_int_equal(mw_am_sender_new(s, &sender, err, sizeof(err)), 1);
    assert_null(sender);
}

static void settings_from_yaml_list(void **st)
{
    (void)st;
    char path[] = "/tmp/mlwatch-am-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml = "alertmanager_url:\n  - http://a:9093\n  - http://b:9093\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    static mw_config cfg;
    mw_config_defaults(&cfg);
    char err[512] = "";
    assert_int_equal(mw_config_load_file(&cfg, path, err, sizeof(err)), 0);
    assert_string_equal(((const mw_am_settings *)mw_config_group(&cfg, &mw_am_options))->urls,
                        "http://a:9093,http://b:9093");
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *bad = "alertmanager_url:\n  - http://a:9093\n  - {x: 1}\n";
    assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    mw_config_defaults(&cfg);
    assert_int_equal(mw_config_load_file(&cfg, path, err, sizeof(err)), -1);
    char want[128];
    snprintf(want, sizeof(want), "%s:3:5: alertmanager_url: each item must be one URL", path);
    assert_string_equal(err, want);
    unlink(path);
}

/* The sender as a sink: an alert too large to queue is dropped and counted
 * on every Alertmanager, the others queue (nothing listens there). */
static void sender_bounds_an_alert(void **st)
{
    (void)st;
    mw_am_settings s = settings();
    snprintf(s.urls, sizeof(s.urls), "http://127.0.0.1:1,http://127.0.0.1:2");
    mw_am_sender *sender = NULL;
    char err[256];
    assert_int_equal(mw_am_sender_new(&s, &sender, err, sizeof(err)), 0);
    char *huge = malloc(MW_AM_MAX_ALERT_BYTES + 1);
    memset(huge, 'x', MW_AM_MAX_ALERT_BYTES);
    huge[MW_AM_MAX_ALERT_BYTES] = '\0';
    mw_alert_pair ann[] = {{"description", huge}};
    mw_alert alerts[2] = {idle_alert(), idle_alert()};
    alerts[1].annotations = ann; /* after one that was queued */
    alerts[1].nannotations = 1;
    mw_am_sender_send(sender, alerts, 2, 0);
    mw_snapshot *snap = mw_snapshot_new();
    mw_am_sender_emit(sender, snap);
    assert_true(tu_value(snap, "mlwatch_alertmanager_dropped_total", "alertmanager",
                         "http://127.0.0.1:1", MW_END) == 1);
    assert_true(tu_value(snap, "mlwatch_alertmanager_dropped_total", "alertmanager",
                         "http://127.0.0.1:2", MW_END) == 1);
    assert_true(tu_value(snap, "mlwatch_alertmanager_queue_length", "alertmanager",
                         "http://127.0.0.1:2", MW_END) == 1);
    assert_true(tu_value(snap, "mlwatch_alertmanager_discovered", MW_END) == 2);
    mw_snapshot_free(snap);
    mw_am_sender_free(sender);
    free(huge);
}

/* The registry of sinks: each batch reaches every sink, a removed one none. */
static size_t got_a, got_b;
static void sink_a(void *ctx, const mw_alert *alerts, size_t n, int64_t now_ms)
{
    (void)ctx;
    (void)alerts;
    (void)now_ms;
    got_a += n;
}
static void sink_b(void *ctx, const mw_alert *alerts, size_t n, int64_t now_ms)
{
    (void)ctx;
    (void)alerts;
    (void)now_ms;
    got_b += n;
}

static void sink_registry(void **st)
{
    (void)st;
    int a, b;
    mw_alert_sink sa = {.name = "a", .send = sink_a, .ctx = &a};
    mw_alert_sink sb = {.name = "b", .send = sink_b, .ctx = &b};
    assert_int_equal(mw_alert_sink_add(&sa), 0);
    assert_int_equal(mw_alert_sink_add(&sb), 0);
    mw_alert al[2] = {idle_alert(), idle_alert()};
    mw_alert_sinks_send(al, 2, 0);
    assert_int_equal(got_a, 2);
    assert_int_equal(got_b, 2);
    mw_alert_sink_remove(&a);
    mw_alert_sinks_send(al, 1, 0);
    assert_int_equal(got_a, 2);
    assert_int_equal(got_b, 3);
    mw_alert_sink_remove(&b);
}

int main(void)
{
    mw_options_register_all();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(payload_bytes),       cmocka_unit_test(shown_url),
        cmocka_unit_test(queue_bound),         cmocka_unit_test(batches_of_64),
        cmocka_unit_test(retry_with_backoff),  cmocka_unit_test(backoff_capped),
        cmocka_unit_test(settings_from_flags), cmocka_unit_test(settings_from_yaml_list),
        cmocka_unit_test(sink_registry),       cmocka_unit_test(sender_bounds_an_alert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
