/* energy_internal.h - the energy model's state, shared by energy.c (one
 * interval) and energy_totals.c (its tables, totals in and out). Not for
 * other files: they use energy.h. */
#ifndef MW_ENERGY_INTERNAL_H
#define MW_ENERGY_INTERNAL_H

#include "energy.h"

#include <stddef.h>
#include <stdint.h>

#define NBUCKETS 4096
#define MAX_COUNTERS 200000 /* previous values kept; beyond it new series get no delta */
#define MAX_NODE_SERIES 256
#define MAX_GPUS 64
#define ENTITY_EXPIRY_MS 600000 /* a container gone this long stops being exported */
#define SEP '\x1f'

/* A container's (or a share's) running totals and interval scratch. */
typedef struct ent {
    char *ns, *pod, *ctr;
    double j[MW_EC_N][MW_EK_N][MW_EM_N];
    double co2;
    int64_t last_ms;
    /* scratch of the current interval */
    uint64_t cycle;
    double cpu_d, weight, gpu[MW_EK_N];
    /* CPU seconds its cgroup counted before the node's /proc/stat did (the
     * files are read moments apart), not paid in interval owed_cycle: the
     * node counts them, and their energy, in the next interval. */
    double owed;
    uint64_t owed_cycle;
} ent;

/* A string-keyed table: counters' previous values, containers, node
 * source totals. */
typedef struct node {
    struct node *next;
    char *key;
    uint64_t seen;
    double v;
    ent *ent; /* entity table only */
} node;

typedef struct table {
    node *b[NBUCKETS];
    size_t n, cap;
} table;

typedef struct gpu_part {
    char index[16];
    char uuid[96];
    double j, idle, floor_w;
    int floor_source;
} gpu_part;

/* An idle floor: what is learnt is kept across restarts. */
typedef struct idle_floor {
    double w;
    int learnt;
} idle_floor;

typedef struct gpu_floor_slot {
    char uuid[96];
    idle_floor f;
} gpu_floor_slot;

struct mw_energy {
    mw_energy_params p;
    table counters; /* previous counter values and power floors */
    table ents;     /* containers */
    table nodes;    /* node source totals, key source SEP zone SEP method */
    ent shares[MW_ES_N];
    double comp_total[MW_EC_N][MW_EK_N][MW_EM_N];
    double node_co2;
    uint64_t cycle, violations, below_parts, intervals;
    int64_t last_ts;
    int have_ts, restored;
    int cpu_method;            /* MW_EM_* of the CPU component in the last interval, -1 before */
    idle_floor floor[MW_EC_N]; /* cpu, dram, other; GPUs in gpu_floors */
    gpu_floor_slot gpu_floors[MAX_GPUS];
    size_t ngpu_floors;
    mw_energy_interval last;
    gpu_part gpus[MAX_GPUS];
    size_t ngpus;
};

node *mw_energy_tfind(table *t, const char *key, int create);
/* Drop nodes for which keep() says no. */
void mw_energy_tsweep(table *t, int (*keep)(const node *, const void *), const void *arg);
void mw_energy_tfree(table *t);
/* Add j joules to node source total (source, zone, method). */
void mw_energy_node_add(mw_energy *e, const char *source, const char *zone, const char *method,
                        double j);
/* A container's entry (created when create and there is room), its
 * interval scratch reset on the first use of a cycle. */
ent *mw_energy_entity(mw_energy *e, const char *ns, const char *pod, const char *ctr, int create);
/* The floor of the GPU with this UUID (NULL when the table is full). */
idle_floor *mw_energy_gpu_floor(mw_energy *e, const char *uuid);

#endif
