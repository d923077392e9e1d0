/* module.h - stages after collection: derive, store, ship, notify.
 *
 * Collectors read the host; modules work on what they collected. Each cycle
 * the agent runs, in registry order (modules.c):
 *   1. derive(snap)   - add samples computed from this cycle's samples
 *                       (energy attribution, carbon, idle sessions, findings);
 *                       a later module sees what earlier ones added;
 *   2. consume(snap)  - read the finished snapshot (append to the store,
 *                       enqueue for remote write, send notifications); must
 *                       not block: slow work belongs on the module's thread;
 * then the snapshot is published for /metrics. routes() registers HTTP
 * endpoints on the agent's one port. `mlwatch metrics` runs derive only.
 *
 * init() returns MW_COLLECTOR_ABSENT when the module is switched off by the
 * configuration, 0 when active, or a negative errno (logged, module off). */
#ifndef MW_MODULE_H
#define MW_MODULE_H

#include "../collect/collector.h"

/* The agent's HTTP server (serve/http.h), opaque here: only the modules that
 * register routes include serve/http.h, the others never see the HTTP layer. */
typedef struct mw_http_server mw_http_server;

typedef struct mw_module {
    const char *name;
    /* Its settings (core/options.h), declared in its own file, or NULL. */
    const mw_option_group *options;
    /* Set for modules with effects beyond the snapshot (files under
     * --state-dir or --data-dir, network traffic, notifications): they run in
     * the agent only, never in one-shot commands such as `mlwatch metrics`,
     * which must not race a running agent for its files. */
    int agent_only;
    int (*init)(const mw_env *env, void **state);
    void (*routes)(void *state, mw_http_server *http);     /* optional */
    void (*derive)(void *state, mw_snapshot *snap);        /* optional */
    void (*consume)(void *state, const mw_snapshot *snap); /* optional */
    void (*destroy)(void *state);                          /* optional */
    /* optional, called from HTTP threads for /-/ready: 0 when the module
     * serves, or -1 with why it does not (the store while disabled). */
    int (*ready)(void *state, char *why, size_t size);
    /* optional, on SIGHUP: read its files again (the rule files); a module
     * whose files are bad keeps what it had and logs why. */
    void (*reload)(void *state);
} mw_module;

extern const mw_module *const mw_modules[];
extern const size_t mw_nmodules;

typedef struct mw_module_set mw_module_set;

/* Which modules a set runs: all (the agent); not the agent_only ones
 * (one-shot commands); those that need no local collection (a hub, which
 * stores, serves and ships what agents remote-write to it: modules.c). */
enum { MW_MODULES_AGENT = 0, MW_MODULES_ONESHOT = 1, MW_MODULES_HUB = 2 };
mw_module_set *mw_module_set_new(const mw_env *env, int mode);
void mw_module_set_routes(mw_module_set *set, mw_http_server *http);
void mw_module_set_derive(mw_module_set *set, mw_snapshot *snap);
void mw_module_set_consume(mw_module_set *set, const mw_snapshot *snap);
/* SIGHUP: each module's reload, in order. */
void mw_module_set_reload(mw_module_set *set);
/* 0 when every module is ready, or -1 with "NAME: why" of the first that
 * is not. */
int mw_module_set_ready(mw_module_set *set, char *why, size_t size);
void mw_module_set_free(mw_module_set *set);

#endif
