/* sources.h - what the agent can and cannot see on this host, and why.
 *
 * Each part that finds a data source (or finds it missing) notes it here
 * once, at init: the GPU collector ("gpu": NVML or ROCm SMI loaded, or the
 * loader's error), RAPL ("rapl": energy counters, or why the node's energy
 * is estimated), cgroups ("cgroup": v2, v1 or hybrid, where), Kubernetes
 * ("kubernetes": the pod watch on or off). The web UI's overview reads the
 * table through GET /api/v1/status/sources (serve/ui.c) to say what is
 * missing and how to enable it. Core knows no module: the table holds
 * names and texts only. Bounded: MW_SOURCES_MAX names, texts truncated. */
#ifndef MW_SOURCES_H
#define MW_SOURCES_H

#include <stddef.h>

#define MW_SOURCES_MAX 16

typedef enum { MW_SOURCE_SEEN, MW_SOURCE_ABSENT, MW_SOURCE_OFF } mw_source_state;

/* Set (or replace) what NAME's finder found: its state and one sentence. */
void mw_source_note(const char *name, mw_source_state state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "seen", "absent", "off". */
const char *mw_source_state_name(mw_source_state state);
/* The table as a JSON object {"NAME": {"state": ..., "detail": ...}, ...},
 * names sorted; the caller frees it. */
char *mw_sources_json(void);
/* Forget every note (tests, and an agent that starts again in-process). */
void mw_sources_reset(void);

#endif
