/* alert_groups.h - rule alerts for the built-in receivers (receiver.h),
 * without an Alertmanager: grouped by alertname and node like
 * Alertmanager's group_by, with what each receiver has had of each alert,
 * kept in the notifier's state file so that a restart sends nothing twice.
 *
 * An alert is known by its labels (FNV-1a of the sorted label set, as
 * Alertmanager's fingerprint) and its startsAt. A receiver is due a group's
 * message when an alert of it fires that the receiver has not had, or one it
 * had as firing is resolved, or the group still fires repeat_interval after
 * its last message; the first message of a group waits group_wait from the
 * group's first alert, the next ones group_interval from the last. A
 * message carries every firing alert of the group and the newly resolved
 * ones; a resolved alert is sent once, to the receivers that had it firing,
 * then forgotten, and a resolved alert the table does not know (the
 * evaluator re-sends them for 15 minutes) is ignored. A firing alert not
 * refreshed by its endsAt is resolved then, as Alertmanager does; after a
 * restart its validity counts again from the load, so an agent that was
 * down resolves nothing by itself. Not locked: the notifier holds its mutex
 * around every call. */
#ifndef MW_ALERT_GROUPS_H
#define MW_ALERT_GROUPS_H

#include "notify.h"
#include "receiver.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define MW_ALERT_GROUPS_MAX 1024 /* alerts kept; more new ones are refused (counted) */
#define MW_ALERT_KEEP_MS (7LL * 24 * 3600 * 1000)

typedef struct mw_group_alert {
    uint64_t fp;            /* of the label set */
    mw_alert a;             /* deep copy (labels, annotations, generator URL owned) */
    int64_t valid_ms;       /* firing: endsAt - when it was last refreshed */
    unsigned fired;         /* receivers that had it firing */
    unsigned told_resolved; /* receivers that had it resolved */
} mw_group_alert;

typedef struct mw_alert_group {
    char alertname[256], node[256];
    int64_t first_ms;                       /* its first alert came */
    int64_t last_sent_ms[MW_MAX_RECEIVERS]; /* 0: none yet */
} mw_alert_group;

typedef struct mw_alert_groups {
    mw_group_alert *a;
    size_t n, cap;
    mw_alert_group *g;
    size_t ng, gcap;
    uint64_t refused; /* new alerts over MW_ALERT_GROUPS_MAX */
} mw_alert_groups;

typedef struct mw_alert_timing {
    int64_t group_wait_ms, group_interval_ms, repeat_ms; /* repeat 0: never */
} mw_alert_timing;

void mw_alert_groups_free(mw_alert_groups *t);
/* Take one evaluation's alerts; returns 1 when something changed that must
 * be saved and delivered (a new alert, one resolved), else 0. */
int mw_alert_groups_update(mw_alert_groups *t, const mw_alert *alerts, size_t n, int64_t now_ms);
/* Resolve firing alerts past their endsAt; returns 1 when any was. */
int mw_alert_groups_expire(mw_alert_groups *t, int64_t now_ms);
/* The first group receiver r is due: fills msg (free it with
 * mw_alert_group_msg_free) and returns 1, or 0. */
int mw_alert_groups_due(const mw_alert_groups *t, int r, int64_t now_ms,
                        const mw_alert_timing *timing, mw_alert_group_msg *msg);
/* msg was delivered to receiver r. */
void mw_alert_groups_delivered(mw_alert_groups *t, int r, const mw_alert_group_msg *msg,
                               int64_t now_ms);
/* Forget resolved alerts every enabled receiver has done with, and empty
 * groups. */
void mw_alert_groups_gc(mw_alert_groups *t, unsigned enabled, int64_t now_ms);

/* The state file's "alert_groups" member, and back (errors name the
 * element: "alert_groups.alerts[2].labels: ..."); parse replaces t's contents
 * only on success; now_ms restarts each firing alert's validity. */
json_t *mw_alert_groups_json(const mw_alert_groups *t);
int mw_alert_groups_parse(mw_alert_groups *t, json_t *j, int64_t now_ms, char *err, size_t errsize);

#endif
