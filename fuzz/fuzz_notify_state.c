/* fuzz_notify_state.c - the notifier's state file parser
 * (src/notify/notify_state.c) on arbitrary bytes: a refused file leaves the
 * table as it was; an accepted one is bounded, its episodes have keys, and
 * each one's messages format without trouble; so do the rule-alert groups
 * (alert_groups.h) it holds. */
#include "notify/notify_state.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_notify_table t = {0};
    mw_notify_episode keep = {.key = "k", .idle_since_ms = 1};
    check(mw_notify_table_upsert(&t, &keep) == 1);
    char err[256];
    int rc = mw_notify_table_parse(&t, (const char *)data, size, err, sizeof(err));
    if (rc < 0) {
        check(t.n == 1 && strcmp(t.e[0].ep.key, "k") == 0);
    } else {
        check(t.n <= MW_NOTIFY_MAX_EPISODES);
        for (size_t i = 0; i < t.n; i++) {
            check(t.e[i].ep.key[0] != '\0');
            mw_buf b;
            mw_buf_init(&b, 1 << 20);
            mw_notify_alertmanager_json(&t.e[i].ep, MW_MSG_RESOLVED, 1000, "http://x", &b);
            mw_notify_email(&t.e[i].ep, MW_MSG_FIRING, 1000, "a@b", "c@d", &b);
            mw_buf_free(&b);
        }
        check(t.groups.n <= MW_ALERT_GROUPS_MAX);
        mw_alert_timing timing = {1, 1, 1};
        mw_alert_group_msg m;
        mw_alert_groups_expire(&t.groups, INT64_MAX / 2);
        while (mw_alert_groups_due(&t.groups, 0, INT64_MAX / 2, &timing, &m)) {
            mw_buf b;
            mw_buf_init(&b, 1 << 20);
            mw_alert_group_alertmanager_json(&m, "http://x", &b);
            mw_alert_group_email(&m, 1000, "a@b", "c@d", &b);
            mw_alert_groups_delivered(&t.groups, 0, &m, INT64_MAX / 2);
            mw_alert_group_msg_free(&m);
            mw_buf_free(&b);
        }
        mw_alert_groups_gc(&t.groups, 1, INT64_MAX / 2);
    }
    mw_notify_table_free(&t);
    return 0;
}
