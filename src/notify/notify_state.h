/* notify_state.h - the notifier's table of episodes and what each receiver
 * has had, and its state file (JSON, written atomically). Not locked: the
 * notifier holds its mutex around every call. */
#ifndef MW_NOTIFY_STATE_H
#define MW_NOTIFY_STATE_H

#include "alert_groups.h"
#include "notify.h"
#include "receiver.h"

#include <stddef.h>
#include <stdint.h>

#define MW_NOTIFY_MAX_EPISODES 1024
/* Ended episodes a receiver never took are dropped after this long. */
#define MW_NOTIFY_KEEP_MS (7LL * 24 * 3600 * 1000)

typedef struct mw_notify_entry {
    mw_notify_episode ep;
    /* Bitmasks and times by index in mw_receivers[]; the state file keys
     * them by receiver name. */
    unsigned fired, resolved;
    int64_t last_sent_ms[MW_MAX_RECEIVERS];
} mw_notify_entry;

typedef struct mw_notify_table {
    mw_notify_entry *e;
    size_t n, cap;
    mw_alert_groups groups; /* rule alerts, in the same file ("alert_groups") */
} mw_notify_table;

void mw_notify_table_free(mw_notify_table *t);
/* Returns 1 when the episode is new (a change worth saving), 0 if updated,
 * -1 if the table is full. */
int mw_notify_table_upsert(mw_notify_table *t, const mw_notify_episode *ep);
void mw_notify_table_resolve(mw_notify_table *t, const mw_notify_episode *ep);
/* The first message receiver r is due: returns its entry index and copies
 * the episode, or -1. repeat_ms 0 = no repeats. */
int mw_notify_table_due(const mw_notify_table *t, int r, int64_t now_ms, int64_t repeat_ms,
                        mw_notify_episode *ep, mw_msg_kind *kind);
void mw_notify_table_delivered(mw_notify_table *t, const mw_notify_episode *ep, int r,
                               mw_msg_kind kind, int64_t now_ms);
/* Drop ended episodes every enabled receiver has had the end of. */
void mw_notify_table_gc(mw_notify_table *t, unsigned enabled);

/* State file. parse() replaces t's contents only on success; errors name
 * the element ("episodes[2].pod: ..."). */
int mw_notify_table_parse(mw_notify_table *t, const char *text, size_t len, char *err,
                          size_t errsize);
int mw_notify_table_load(mw_notify_table *t, const char *path, char *err, size_t errsize);
int mw_notify_table_save(const mw_notify_table *t, const char *path, char *err, size_t errsize);
/* The two halves of save: the text (NULL when it cannot be made; the
 * caller frees it), made under the notifier's lock, and its atomic write,
 * outside it, so that no one waits for the disk while holding the lock. */
char *mw_notify_table_encode(const mw_notify_table *t);
int mw_notify_state_write(const char *path, const char *text, char *err, size_t errsize);

#define MW_NOTIFY_STATE_FILE "idle-notifications.json"
/* DATA_DIR/state/idle-notifications.json (mw_state_dir). */
void mw_notify_state_path(const mw_config *cfg, char *out, size_t size);
/* Once: where the state file is missing and an older agent's is in
 * mw_legacy_state_dir (--state-dir, else DATA_DIR), it is loaded, saved in
 * the new place and renamed to idle-notifications.json.migrated. 1 when
 * migrated, 0 when there was nothing to do, -1 with a message. */
int mw_notify_state_migrate(const mw_config *cfg, char *err, size_t errsize);

#endif
