/* test_alert_groups.c - rule alerts to the built-in receivers
 * (src/notify/alert_groups.h, alert_format.c): grouping by alertname and
 * node with group_wait, group_interval and repeats; each firing and each
 * resolved alert once per receiver; the state file across a restart; the
 * expiry of alerts not refreshed; the bound; the message bodies byte for
 * byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "notify/alert_groups.h"
#include "notify/notify_state.h"
#include "notify/receiver.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0 1764680400000LL /* 2025-12-02T13:00:00Z */
static const mw_alert_timing TIMING = {
    .group_wait_ms = 30000, .group_interval_ms = 300000, .repeat_ms = 4 * 3600 * 1000LL};

static mw_alert_pair IDLE_A[] = {
    {"alertname", "MlwatchIdleGPUSession"}, {"gpu", "0"}, {"node", "n1"}, {"pod", "nb-0"}};
static mw_alert_pair IDLE_B[] = {
    {"alertname", "MlwatchIdleGPUSession"}, {"gpu", "1"}, {"node", "n1"}, {"pod", "nb-1"}};
static mw_alert_pair IDLE_N2[] = {
    {"alertname", "MlwatchIdleGPUSession"}, {"gpu", "0"}, {"node", "n2"}, {"pod", "nb-9"}};
static mw_alert_pair SUMMARY[] = {{"summary", "Idle GPU 0 on n1 held by shared/nb-0"}};

static mw_alert alert(mw_alert_pair *labels, int64_t starts, int resolved, int64_t ends)
{
    return (mw_alert){.labels = labels,
                      .nlabels = 4,
                      .annotations = SUMMARY,
                      .nannotations = 1,
                      .starts_at_ms = starts,
                      .ends_at_ms = ends,
                      .resolved = resolved,
                      .generator_url = "http://n1:9400/graph"};
}

/* Due for receiver r at now: the message's (firing, total) counts, or -1. */
static int due(mw_alert_groups *t, int r, int64_t now, size_t *nfiring, size_t *n)
{
    mw_alert_group_msg m;
    if (!mw_alert_groups_due(t, r, now, &TIMING, &m)) return -1;
    *nfiring = m.nfiring;
    *n = m.n;
    mw_alert_groups_delivered(t, r, &m, now);
    mw_alert_group_msg_free(&m);
    return 0;
}

static void grouped_with_wait_and_interval(void **st)
{
    (void)st;
    mw_alert_groups t = {0};
    mw_alert in[] = {alert(IDLE_A, T0, 0, T0 + 240000), alert(IDLE_N2, T0, 0, T0 + 240000)};
    assert_int_equal(mw_alert_groups_update(&t, in, 2, T0), 1);
    size_t f, n;
    assert_int_equal(due(&t, 0, T0 + 29999, &f, &n), -1); /* group_wait */
    /* A second alert of n1's group within the wait: in the same message. */
    mw_alert more = alert(IDLE_B, T0 + 10000, 0, T0 + 250000);
    assert_int_equal(mw_alert_groups_update(&t, &more, 1, T0 + 10000), 1);
    mw_alert_group_msg m;
    assert_int_equal(mw_alert_groups_due(&t, 0, T0 + 30000, &TIMING, &m), 1);
    assert_string_equal(m.alertname, "MlwatchIdleGPUSession");
    assert_string_equal(m.node, "n1");
    assert_int_equal(m.n, 2);
    assert_int_equal(m.nfiring, 2);
    mw_alert_groups_delivered(&t, 0, &m, T0 + 30000);
    mw_alert_group_msg_free(&m);
    assert_int_equal(due(&t, 0, T0 + 30000, &f, &n), 0); /* n2's group */
    assert_int_equal(f, 1);
    assert_int_equal(due(&t, 0, T0 + 30000, &f, &n), -1);
    /* Re-sent each evaluation: nothing new. */
    assert_int_equal(mw_alert_groups_update(&t, in, 2, T0 + 60000), 0);
    assert_int_equal(due(&t, 0, T0 + 60000, &f, &n), -1);
    /* Receiver 1 has had nothing: its own messages. */
    assert_int_equal(due(&t, 1, T0 + 60000, &f, &n), 0);
    assert_int_equal(n, 2);
    /* A new alert in n1's group waits for group_interval after the last. */
    mw_alert_pair c[] = {
        {"alertname", "MlwatchIdleGPUSession"}, {"gpu", "2"}, {"node", "n1"}, {"pod", "nb-2"}};
    mw_alert third = alert(c, T0 + 100000, 0, T0 + 400000);
    assert_int_equal(mw_alert_groups_update(&t, &third, 1, T0 + 100000), 1);
    assert_int_equal(due(&t, 0, T0 + 329999, &f, &n), -1);
    assert_int_equal(due(&t, 0, T0 + 330000, &f, &n), 0);
    assert_int_equal(f, 3); /* every firing alert of the group */
    mw_alert_groups_free(&t);
}

static void repeat_interval(void **st)
{
    (void)st;
    mw_alert_groups t = {0};
    mw_alert a = alert(IDLE_A, T0, 0, 0);
    mw_alert_groups_update(&t, &a, 1, T0);
    size_t f, n;
    assert_int_equal(due(&t, 0, T0 + 30000, &f, &n), 0);
    assert_int_equal(due(&t, 0, T0 + 30000 + TIMING.repeat_ms - 1, &f, &n), -1);
    assert_int_equal(due(&t, 0, T0 + 30000 + TIMING.repeat_ms, &f, &n), 0);
    assert_int_equal(f, 1);
    mw_alert_groups_free(&t);
}

static void resolved_once(void **st)
{
    (void)st;
    mw_alert_groups t = {0};
    mw_alert a = alert(IDLE_A, T0, 0, T0 + 240000);
    mw_alert_groups_update(&t, &a, 1, T0);
    size_t f, n;
    assert_int_equal(due(&t, 0, T0 + 30000, &f, &n), 0);
    mw_alert r = alert(IDLE_A, T0, 1, T0 + 100000);
    assert_int_equal(mw_alert_groups_update(&t, &r, 1, T0 + 100000), 1);
    assert_int_equal(due(&t, 0, T0 + 100000, &f, &n), -1); /* group_interval */
    assert_int_equal(due(&t, 0, T0 + 330000, &f, &n), 0);
    assert_int_equal(f, 0);
    assert_int_equal(n, 1);
    assert_int_equal(due(&t, 0, T0 + 900000, &f, &n), -1);
    mw_alert_groups_gc(&t, 1u << 0, T0 + 900000);
    assert_int_equal(t.n, 0);
    assert_int_equal(t.ng, 0);
    /* The evaluator re-sends it for 15 minutes: ignored. */
    assert_int_equal(mw_alert_groups_update(&t, &r, 1, T0 + 910000), 0);
    assert_int_equal(due(&t, 0, T0 + 2000000, &f, &n), -1);
    /* Fired and resolved before any receiver had it: nothing at all. */
    mw_alert b = alert(IDLE_B, T0, 0, 0), rb = alert(IDLE_B, T0, 1, T0 + 1000);
    mw_alert_groups_update(&t, &b, 1, T0 + 3000000);
    mw_alert_groups_update(&t, &rb, 1, T0 + 3001000);
    assert_int_equal(due(&t, 0, T0 + 4000000, &f, &n), -1);
    mw_alert_groups_gc(&t, 1u << 0, T0 + 4000000);
    assert_int_equal(t.n, 0);
    /* The same labels fire again later: a new alert, sent again. */
    mw_alert again = alert(IDLE_A, T0 + 5000000, 0, 0);
    assert_int_equal(mw_alert_groups_update(&t, &again, 1, T0 + 5000000), 1);
    assert_int_equal(due(&t, 0, T0 + 5030000, &f, &n), 0);
    mw_alert_groups_free(&t);
}

/* What was sent survives a restart: the state file's round trip. */
static void across_restart(void **st)
{
    (void)st;
    mw_notify_table before = {0};
    mw_alert a = alert(IDLE_A, T0, 0, T0 + 240000), b = alert(IDLE_B, T0, 0, T0 + 240000);
    mw_alert_groups_update(&before.groups, &a, 1, T0);
    size_t f, n;
    assert_int_equal(due(&before.groups, 0, T0 + 30000, &f, &n), 0);
    mw_alert_groups_update(&before.groups, &b, 1, T0 + 40000); /* not sent yet */
    char path[] = "/tmp/mlwatch-groups-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[256];
    assert_int_equal(mw_notify_table_save(&before, path, err, sizeof(err)), 0);
    mw_notify_table after = {0};
    assert_int_equal(mw_notify_table_load(&after, path, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(after.groups.n, 2);
    /* The validity of a firing alert counts again from the load: the time
     * the agent was down does not expire it. */
    int64_t now = mw_now_ms();
    assert_int_equal(mw_alert_groups_expire(&after.groups, now + 150000), 0);
    /* b, not sent before the restart, is due after it, with a as the
     * group's other firing alert. */
    size_t f2, n2;
    assert_int_equal(due(&after.groups, 0, now + 1000, &f2, &n2), 0);
    assert_int_equal(f2, 2);
    /* The evaluator re-sends both: nothing is due, however long after
     * (short of the repeat interval). */
    a.ends_at_ms = b.ends_at_ms = now + 240000;
    mw_alert both[] = {a, b};
    assert_int_equal(mw_alert_groups_update(&after.groups, both, 2, now + 2000), 0);
    assert_int_equal(due(&after.groups, 0, now + 400000, &f2, &n2), -1);
    /* And a resolve after the restart goes out once. */
    mw_alert ra = alert(IDLE_A, T0, 1, now + 500000);
    assert_int_equal(mw_alert_groups_update(&after.groups, &ra, 1, now + 500000), 1);
    assert_int_equal(due(&after.groups, 0, now + 800000, &f2, &n2), 0);
    assert_int_equal(f2, 1); /* b still fires */
    assert_int_equal(n2, 2);
    assert_int_equal(due(&after.groups, 0, now + 1200000, &f2, &n2), -1);
    mw_notify_table_free(&before);
    mw_notify_table_free(&after);
}

static void expiry(void **st)
{
    (void)st;
    mw_alert_groups t = {0};
    mw_alert a = alert(IDLE_A, T0, 0, T0 + 240000);
    mw_alert_groups_update(&t, &a, 1, T0);
    size_t f, n;
    assert_int_equal(due(&t, 0, T0 + 30000, &f, &n), 0);
    assert_int_equal(mw_alert_groups_expire(&t, T0 + 240000), 0);
    assert_int_equal(mw_alert_groups_expire(&t, T0 + 240001), 1);
    assert_int_equal(due(&t, 0, T0 + 330000, &f, &n), 0);
    assert_int_equal(f, 0);
    assert_int_equal(n, 1);
    mw_alert_groups_free(&t);
}

static void bounded(void **st)
{
    (void)st;
    mw_alert_groups t = {0};
    char gpu[16];
    mw_alert_pair l[] = {{"alertname", "X"}, {"gpu", gpu}, {"node", "n1"}, {"pod", "p"}};
    for (int i = 0; i <= MW_ALERT_GROUPS_MAX; i++) {
        snprintf(gpu, sizeof(gpu), "%d", i);
        mw_alert a = alert(l, T0, 0, 0);
        mw_alert_groups_update(&t, &a, 1, T0);
    }
    assert_int_equal(t.n, MW_ALERT_GROUPS_MAX);
    assert_int_equal(t.refused, 1);
    mw_alert_groups_free(&t);
}

static void parse_errors(void **st)
{
    (void)st;
    mw_notify_table t = {0};
    char err[256];
    const char *bad = "{\"version\": 1, \"episodes\": [], \"alert_groups\": {\"alerts\": "
                      "[{\"labels\": {\"a\": 1}}], \"groups\": []}}";
    assert_int_equal(mw_notify_table_parse(&t, bad, strlen(bad), err, sizeof(err)), -1);
    assert_string_equal(err, "alert_groups.alerts[0].labels: expected an object of strings");
    const char *old = "{\"version\": 1, \"episodes\": []}"; /* before rule alerts */
    assert_int_equal(mw_notify_table_parse(&t, old, strlen(old), err, sizeof(err)), 0);
    assert_int_equal(t.groups.n, 0);
    mw_notify_table_free(&t);
}

static mw_alert_group_msg sample_msg(void)
{
    mw_alert_groups t = {0};
    mw_alert a = alert(IDLE_A, T0, 0, T0 + 240000), r = alert(IDLE_B, T0, 0, T0 + 240000);
    mw_alert_groups_update(&t, (mw_alert[]){a, r}, 2, T0);
    size_t f, n;
    due(&t, 0, T0 + 30000, &f, &n);
    mw_alert rr = alert(IDLE_B, T0, 1, T0 + 60000);
    mw_alert_groups_update(&t, &rr, 1, T0 + 60000);
    mw_alert_group_msg m;
    assert_int_equal(mw_alert_groups_due(&t, 0, T0 + 330000, &TIMING, &m), 1);
    mw_alert_groups_free(&t);
    return m;
}

static void bodies(void **st)
{
    (void)st;
    mw_alert_group_msg m = sample_msg();
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_alert_group_chat_json(&m, &b);
    assert_string_equal(
        b.data, "{\"text\":\"[FIRING:1] MlwatchIdleGPUSession on n1\\nFiring:\\n- Idle GPU 0 on "
                "n1 held by shared/nb-0\\n  Labels: gpu=0 pod=nb-0\\n  Since: "
                "2025-12-02T13:00:00Z\\n  Source: http://n1:9400/graph\\nResolved:\\n- Idle GPU "
                "0 on n1 held by shared/nb-0\\n  Labels: gpu=1 pod=nb-1\\n  Since: "
                "2025-12-02T13:00:00Z, resolved 2025-12-02T13:01:00Z\\n  Source: "
                "http://n1:9400/graph\\n\",\"username\":\"mlwatch\"}");
    mw_buf_clear(&b);
    mw_alert_group_alertmanager_json(&m, "http://n1:9400", &b);
    char fa[20], fb[20];
    snprintf(fa, sizeof(fa), "%016llx", (unsigned long long)mw_alert_fingerprint(&m.alerts[0]));
    snprintf(fb, sizeof(fb), "%016llx", (unsigned long long)mw_alert_fingerprint(&m.alerts[1]));
    char want[4096];
    snprintf(
        want, sizeof(want),
        "{\"version\":\"4\",\"groupKey\":\"{}:{alertname=\\\"MlwatchIdleGPUSession\\\", "
        "node=\\\"n1\\\"}\",\"truncatedAlerts\":0,\"status\":\"firing\",\"receiver\":\"mlwatch\","
        "\"groupLabels\":{\"alertname\":\"MlwatchIdleGPUSession\",\"node\":\"n1\"},"
        "\"commonLabels\":{\"alertname\":\"MlwatchIdleGPUSession\",\"node\":\"n1\"},"
        "\"commonAnnotations\":{\"summary\":\"Idle GPU 0 on n1 held by shared/nb-0\"},"
        "\"externalURL\":\"http://n1:9400\",\"alerts\":[{\"status\":\"firing\",\"labels\":{"
        "\"alertname\":\"MlwatchIdleGPUSession\",\"gpu\":\"0\",\"node\":\"n1\",\"pod\":\"nb-0\"},"
        "\"annotations\":{\"summary\":\"Idle GPU 0 on n1 held by shared/nb-0\"},\"startsAt\":"
        "\"2025-12-02T13:00:00Z\",\"endsAt\":\"0001-01-01T00:00:00Z\",\"generatorURL\":\"http://"
        "n1:9400/graph\",\"fingerprint\":\"%s\"},{\"status\":\"resolved\",\"labels\":{"
        "\"alertname\":\"MlwatchIdleGPUSession\",\"gpu\":\"1\",\"node\":\"n1\",\"pod\":\"nb-1\"},"
        "\"annotations\":{\"summary\":\"Idle GPU 0 on n1 held by shared/nb-0\"},\"startsAt\":"
        "\"2025-12-02T13:00:00Z\",\"endsAt\":\"2025-12-02T13:01:00Z\",\"generatorURL\":\"http://"
        "n1:9400/graph\",\"fingerprint\":\"%s\"}]}",
        fa, fb);
    assert_string_equal(b.data, want);
    mw_buf_clear(&b);
    mw_alert_group_email(&m, T0, "mlwatch <a@x>", "b@x", &b);
    assert_non_null(strstr(b.data, "\r\nSubject: [mlwatch] [FIRING:1] MlwatchIdleGPUSession on "
                                   "n1\r\n"));
    assert_non_null(
        strstr(b.data, "\r\n\r\n[FIRING:1] MlwatchIdleGPUSession on n1\r\nFiring:\r\n"));
    mw_buf_free(&b);
    mw_alert_group_msg_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grouped_with_wait_and_interval),
        cmocka_unit_test(repeat_interval),
        cmocka_unit_test(resolved_once),
        cmocka_unit_test(across_restart),
        cmocka_unit_test(expiry),
        cmocka_unit_test(bounded),
        cmocka_unit_test(parse_errors),
        cmocka_unit_test(bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
