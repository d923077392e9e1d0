/* run_systemd.h - a systemd transient scope for `mlwatch run`: where
 * systemd is PID 1 it owns the cgroup tree, and a cgroup made beside it
 * (run_cgroup.c) is one it may move or remove; asking it for a scope, as
 * `systemd-run --scope` does, gives the command a cgroup systemd knows.
 * Through systemd's D-Bus API (org.freedesktop.systemd1.Manager
 * StartTransientUnit, a scope whose PIDs property names the command's
 * process), over libsystemd's sd-bus loaded with dlopen (libsystemd.so.0,
 * in every Debian system): the system bus as root, the user's bus
 * otherwise (systemd's user manager, `systemd-run --user --scope`). */
#ifndef MW_RUN_SYSTEMD_H
#define MW_RUN_SYSTEMD_H

#include <stddef.h>
#include <sys/types.h>

/* Whether systemd runs this machine: /run/systemd/system exists (the test
 * of sd_booted(3)). DIR: /run/systemd/system, or another folder (tests). */
int mw_run_systemd_booted(const char *dir);

/* Start the transient scope UNIT (NAME.scope) holding the processes PIDS
 * (one or two) and wait (at most timeout_ms) for its start job to finish:
 * 0 when systemd put them in it, or -1 with why ("systemd: org.freedesktop.systemd1.UnitExists:
 * Unit ... already exists."). LIBRARY: the sd-bus library to load (NULL:
 * libsystemd.so.0). */
int mw_run_systemd_scope(const char *library, const char *unit, const char *description,
                         const pid_t *pids, size_t npids, int timeout_ms, char *why,
                         size_t whysize);

#endif
