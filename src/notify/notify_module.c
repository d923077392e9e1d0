/* notify_module.c - the notifier fed from the idle module's episodes; see
 * notify_module.h. */
#include "notify_module.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../derive/idle.h"
#include "notify.h"
#include "notify_state.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

struct mw_notify_module {
    const mw_config *cfg;
    mw_notifier *notifier;
    int notifier_failed;
    int no_receiver;
    /* Without a notifier because no receiver is configured, the open
     * episodes are still kept in the state file: the idle alert of the
     * shipped rules (MlwatchIdleGPUSession) reads mlwatch_gpu_idle_seconds,
     * and an episode that restarted with the agent would wait its window
     * and its `for` again. No delivery flags are set, so a notifier started
     * later announces what nobody was told. */
    mw_notify_table kept;
    int kept_dirty;
};

mw_notify_module *mw_notify_module_new(const mw_config *cfg)
{
    mw_notify_module *m = mw_xcalloc(1, sizeof(*m));
    m->cfg = cfg;
    return m;
}

void mw_notify_module_restore(mw_notify_module *m, void *idle_state)
{
    char path[PATH_MAX + 64], err[PATH_MAX * 3 + 256];
    int rc = mw_notify_state_migrate(m->cfg, err, sizeof(err));
    if (rc != 0) mw_log(rc > 0 ? MW_LOG_INFO : MW_LOG_WARN, "notify", "%s", err);
    mw_notify_state_path(m->cfg, path, sizeof(path));
    mw_notify_table t = {0};
    if (mw_notify_table_load(&t, path, err, sizeof(err)) == 0) {
        int64_t now = mw_now_ms();
        for (size_t i = 0; i < t.n; i++)
            if (mw_idle_restore(idle_state, &t.e[i].ep, now) < 0) break;
    }
    mw_notify_table_free(&t);
}

void mw_notify_module_emit(mw_notify_module *m, mw_snapshot *snap)
{
    if (m->notifier) mw_notifier_emit(m->notifier, snap);
}

static void keep_upsert(void *ctx, const mw_idle_episode *ep)
{
    mw_notify_module *m = ctx;
    if (mw_notify_table_upsert(&m->kept, ep)) m->kept_dirty = 1;
}

static void save_kept(mw_notify_module *m)
{
    char path[PATH_MAX + 64], err[PATH_MAX + 256];
    m->kept_dirty = 0;
    if (mw_state_dir_make(m->cfg) < 0) {
        mw_log_once(MW_LOG_WARN, "idle", "keep", "cannot create %s/state (--data-dir)",
                    m->cfg->data_dir);
        return;
    }
    mw_notify_state_path(m->cfg, path, sizeof(path));
    if (mw_notify_table_save(&m->kept, path, err, sizeof(err)) < 0)
        mw_log_once(MW_LOG_WARN, "idle", "keep", "cannot save the open idle sessions: %s", err);
}

/* Saved when an episode opens or ends (rare: no disk wait in most cycles)
 * and at the end; the cost figures of a crash's last minutes are lost. */
static void keep_episodes(mw_notify_module *m, void *idle_state)
{
    const mw_idle_episode *ended;
    size_t nended = mw_idle_ended(idle_state, &ended);
    for (size_t i = 0; i < nended; i++) {
        mw_notify_table_resolve(&m->kept, &ended[i]);
        m->kept_dirty = 1;
    }
    mw_notify_table_gc(&m->kept, 0);
    mw_idle_each_open(idle_state, keep_upsert, m);
    if (m->kept_dirty) save_kept(m);
}

static void upsert(void *ctx, const mw_idle_episode *ep)
{
    mw_notifier_upsert(ctx, ep);
}

void mw_notify_module_consume(mw_notify_module *m, void *idle_state)
{
    if (!m->notifier && !m->notifier_failed) {
        char err[512];
        int rc = mw_notifier_new(m->cfg, &m->notifier, err, sizeof(err));
        if (rc < 0) mw_log(MW_LOG_ERROR, "idle", "notifications off: %s", err);
        if (rc != 0) m->notifier_failed = 1;
        /* Not after a failure: the file holds what the receivers had. */
        if (rc > 0) m->no_receiver = 1;
    }
    if (!m->notifier) {
        if (m->no_receiver) keep_episodes(m, idle_state);
        return;
    }
    const mw_idle_episode *ended;
    size_t nended = mw_idle_ended(idle_state, &ended);
    for (size_t i = 0; i < nended; i++)
        mw_notifier_resolve(m->notifier, &ended[i]);
    mw_idle_each_open(idle_state, upsert, m->notifier);
}

mw_notifier *mw_notify_module_notifier(mw_notify_module *m)
{
    return m->notifier;
}

void mw_notify_module_free(mw_notify_module *m)
{
    if (!m) return;
    if (m->no_receiver && m->kept.n) save_kept(m); /* with their cost so far */
    mw_notify_table_free(&m->kept);
    mw_notifier_free(m->notifier);
    free(m);
}
