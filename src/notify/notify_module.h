/* notify_module.h - the notifier as the consumer of the idle module's
 * episodes (derive/idle.h): it starts the notifier (notify.c) on the first
 * cycle, feeds it the open and ended episodes of each cycle, adds its
 * self-metrics, and hands the idle module the episodes that were open when
 * the agent stopped. The agent wires it to the idle module
 * (agent/idle_notify.c). */
#ifndef MW_NOTIFY_MODULE_H
#define MW_NOTIFY_MODULE_H

#include "../core/config.h"
#include "../core/snapshot.h"

typedef struct mw_notify_module mw_notify_module;

/* Nothing is started yet (the notifier starts on the first consume). */
mw_notify_module *mw_notify_module_new(const mw_config *cfg);
/* Give the idle module (its state) the episodes that were open in the
 * state file (DATA_DIR/state, an older agent's migrated first), with
 * mw_idle_restore(). */
void mw_notify_module_restore(mw_notify_module *m, void *idle_state);
/* Self-metrics (mlwatch_notifications_total), once the notifier runs. */
void mw_notify_module_emit(mw_notify_module *m, mw_snapshot *snap);
/* After the idle module's derive: start the notifier if it is not yet (once:
 * a failure is logged and notifications stay off), then resolve the ended
 * episodes and open or update the open ones. Never blocks. */
void mw_notify_module_consume(mw_notify_module *m, void *idle_state);
/* The notifier once consume has started it, else NULL (not started yet, no
 * receiver configured, or failed): the ctx of mw_notifier_alerts, the
 * built-in receivers' alert sink (notify.h). */
struct mw_notifier *mw_notify_module_notifier(mw_notify_module *m);
void mw_notify_module_free(mw_notify_module *m);

#endif
