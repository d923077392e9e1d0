/* testutil.h - helpers for collector tests on fixture trees. */
#ifndef MW_TESTUTIL_H
#define MW_TESTUTIL_H

#include "collect/collector.h"
#include "core/snapshot.h"

#include <stdint.h>

typedef struct tu_session tu_session;

/* Whether this process has mapped a shared library whose path contains
 * "/" NAME (e.g. "libyaml"): for libraries loaded on first use. */
int tu_library_mapped(const char *name);

/* Absolute path of tests/fixtures/NAME (from $MLWATCH_FIXTURES or the cwd). */
const char *tu_fixture(const char *name);
/* Copy tests/fixtures/NAME into a fresh temporary folder (for tests that
 * change files between cycles) and return its path; removed by tu_cleanup. */
const char *tu_fixture_copy(const char *name);
/* Write CONTENT to ROOT/REL, creating parent folders. */
void tu_write(const char *root, const char *rel, const char *content);
/* Remove ROOT/REL (file or tree). */
void tu_remove(const char *root, const char *rel);
void tu_cleanup(void);

/* Run the given collectors (comma-separated names; NULL = all) on ROOT. */
tu_session *tu_open(const char *root, const char *collectors);
/* One collection cycle; the caller frees the snapshot with mw_snapshot_free. */
mw_snapshot *tu_run(tu_session *s);
uint64_t tu_errors(tu_session *s, const char *collector);
mw_procmap *tu_procmap(tu_session *s);
void tu_close(tu_session *s);

/* Value of NAME{labels...} (NULL-terminated name/value pairs); fails the
 * test when absent. */
double tu_value(const mw_snapshot *snap, const char *name, ...);
/* 1 if such a sample exists. */
int tu_has(const mw_snapshot *snap, const char *name, ...);
/* Number of samples in family NAME (0 if absent). */
size_t tu_count(const mw_snapshot *snap, const char *name);

#endif
