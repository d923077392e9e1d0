/* snapshot.h - the samples of one collection cycle.
 *
 * Collectors describe each metric family once, statically (mw_metric_desc),
 * and add samples to the cycle's snapshot with mw_emit(). The snapshot owns
 * a copy of every distinct label value in its arena; it is immutable once
 * published and is what /metrics renders, what the store will ingest, and what derived
 * computations (energy, idle sessions) read.
 *
 * Label names must be string literals (they are not copied). */
#ifndef MW_SNAPSHOT_H
#define MW_SNAPSHOT_H

#include "arena.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { MW_GAUGE, MW_COUNTER, MW_INFO } mw_metric_type;

/* Naming rules (checked by tests/unit/test_metric_names.c):
 *  - name starts with "mlwatch_", counters end in "_total", info in "_info";
 *  - a non-empty unit is a base unit and the name ends in "_<unit>" (before
 *    "_total" for counters). */
typedef struct mw_metric_desc {
    const char *name; /* full sample name, e.g. "mlwatch_cpu_seconds_total" */
    const char *help;
    const char *unit; /* "seconds", "bytes", "joules", ... or "" */
    mw_metric_type type;
} mw_metric_desc;

/* A metric family described once, at file scope, by its collector: the
 * variable, the type, the name, the unit ("" for none) and the help text.
 *   MW_METRIC(READS, MW_COUNTER, "mlwatch_disk_reads_completed_total", "",
 *             "Reads completed by the device."); */
#define MW_METRIC(var, type_, name_, unit_, help_)                                                 \
    static const mw_metric_desc var = {.name = name_, .help = help_, .unit = unit_, .type = type_}

typedef struct mw_label {
    const char *name;
    const char *value;
} mw_label;

/* labels may be shared with other samples of the snapshot that have the
 * same labels (a container's families all carry its namespace, pod,
 * container and ID): read-only. */
typedef struct mw_sample {
    struct mw_sample *next;
    double value;
    const mw_label *labels;
    uint32_t nlabels;
} mw_sample;

typedef struct mw_family {
    struct mw_family *next; /* order of first emission */
    const mw_metric_desc *desc;
    mw_sample *first, *last;
    size_t nsamples;
} mw_family;

typedef struct mw_snapshot {
    mw_arena arena;
    mw_family *first, *last;
    mw_family **slots; /* open-addressing index by name */
    size_t nslots, nfamilies, nsamples;
    mw_family *last_used; /* family of the last emitted sample (fast path) */
    int64_t timestamp_ms; /* when collection of this cycle began */
    /* Label values are stored once per snapshot: a container's ID, pod and
     * namespace recur on every family of that container. Index of the
     * stored values while the snapshot is built, freed by mw_snapshot_seal;
     * likewise the label sets recently copied, which samples of the same
     * labels share (nsets: copies made). */
    struct mw_interned *interned;
    size_t ninterned, ninterned_slots;
    struct mw_labelset *sets;
    size_t nsets;
} mw_snapshot;

#define MW_MAX_LABELS 16
/* Terminator of variadic label lists (a typed null pointer, as varargs need). */
#define MW_END ((const char *)NULL)

mw_snapshot *mw_snapshot_new(void);
void mw_snapshot_free(mw_snapshot *s);
/* Drop what only building needs (the label value index) once no more
 * samples are expected; emitting afterwards still works. */
void mw_snapshot_seal(mw_snapshot *s);

/* Add one sample. Variadic arguments are label name/value pairs ending with
 * NULL: mw_emit(s, &CPU_SECONDS, 12.5, "cpu", "0", "mode", "user", NULL).
 * A NULL value is written as "". */
void mw_emit(mw_snapshot *s, const mw_metric_desc *d, double value, ...);
void mw_emitv(mw_snapshot *s, const mw_metric_desc *d, double value, size_t nlabels,
              const mw_label *labels);

/* Append NAME=VALUE (NAME a string literal; VALUE copied) to every sample
 * that lacks a label NAME: the node's name on every series of a cycle.
 * Samples that shared a label set share the extended one. */
void mw_snapshot_label_all(mw_snapshot *s, const char *name, const char *value);

const mw_family *mw_snapshot_find(const mw_snapshot *s, const char *name);
/* The value of the first sample of NAME whose labels include all given pairs
 * (NULL-terminated name/value list); returns 0 and sets *out, or -1. Used by
 * tests and derived computations. */
int mw_snapshot_get(const mw_snapshot *s, const char *name, double *out, ...);

#endif
