/* cgroup_int.h - what the files of the cgroup collector share: cgroup.c
 * walks the hierarchy and reads each cgroup's control files,
 * cgroup_names.c names the containers, cgroup_emit.c emits the samples.
 * The bounds, the control-file slots and the records kept across cycles;
 * for these three files only (see cgroup.c for the design). */
#ifndef MW_CGROUP_INT_H
#define MW_CGROUP_INT_H

#include "collector.h"
#include "cgroup_path.h"
#include "cgroup_stat.h"
#include "pods.h"
#include "procmap.h"
#include "../core/buf.h"

#include <stdint.h>

#define MAX_DEPTH 10             /* hierarchy levels walked below the root */
#define MAX_ENTRIES 16384        /* reported cgroups */
#define MAX_DIRS 65536           /* directories listed or reported per cycle */
#define DENTS_SIZE (16 * 1024)   /* getdents64 buffer per depth */
#define MAX_FILE (64 * 1024)     /* bound for a control file */
#define MAX_PROCS (1024 * 1024)  /* bound for cgroup.procs (about 100k PIDs) */
#define PSI_EVERY 5              /* cycles between two reads of a cgroup's pressure */
#define REFRESH_EVERY 10         /* cycles between two reads of a cgroup's limits */
#define PODS_RESCAN_MS 60000     /* the names index is rebuilt at least this often */
#define PODS_RETRY_MS 10000      /* an unnamed container asks for a rebuild this often */
#define PODS_RETRY_AGE_MS 120000 /* ... while it is younger than this */
#define PATH_SIZE sizeof(((mw_container_ref *)0)->cgroup)

/* --- control files -------------------------------------------------------- */

/* Slots of a cgroup's control files; the first five are read every cycle. */
enum {
    F_CPU,      /* v2 cpu.stat, v1 cpuacct.usage */
    F_THROTTLE, /* v1 cpu.stat (v2: in cpu.stat) */
    F_MEM,      /* v2 memory.current, v1 memory.usage_in_bytes */
    F_MEMSTAT,  /* memory.stat */
    F_PROCS,    /* cgroup.procs */
    F_PSI_CPU,  /* v2 cpu.pressure, memory.pressure, io.pressure */
    F_PSI_MEM,
    F_PSI_IO,
    F_QUOTA,    /* v2 cpu.max, v1 cpu.cfs_quota_us */
    F_PERIOD,   /* v1 cpu.cfs_period_us (v2: in cpu.max) */
    F_MEMLIMIT, /* v2 memory.max, v1 memory.limit_in_bytes */
    NFILES
};

/* The hierarchy a file lives in (v1 has one per controller; a hybrid host
 * has the v2 hierarchy at unified/, where the pressure files are). */
enum { H_WALK, H_CPU, H_MEM, H_UNIFIED, NHIER };

typedef struct cg_file {
    const char *name;       /* NULL: not read in this cgroup version */
    unsigned char hier;     /* H_* */
    unsigned char optional; /* exists only with a controller or PSI enabled */
    unsigned char iterated; /* a seq_file that may need several reads */
} cg_file;

/* Files read every cycle stay open between cycles; those read every
 * PSI_EVERY or REFRESH_EVERY cycles are opened for each read (keeping them
 * would save little and multiply the descriptors the agent holds). */
#define KEPT(slot) ((slot) <= F_PROCS)

#define FD_NONE (-1)   /* not open (yet) */
#define FD_ABSENT (-2) /* optional file missing; looked for again at the next refresh */

/* --- state ----------------------------------------------------------------- */

typedef struct cg_entry {
    struct cg_entry *hnext; /* hash chain */
    uint64_t hash;
    uint64_t seen;   /* cycle in which the walk last met it */
    uint64_t born;   /* cycle in which the walk first met it */
    mw_cg_node node; /* kind, qos, runtime, pod UID, container ID */
    /* Path and names at their own length (a mw_container_ref is 1,168
     * bytes; hundreds of cgroups are kept); ID and pod UID are in node. */
    char *cgroup, *namespace_, *pod, *container;
    mw_label labels[4]; /* sample labels; values point into the strings above */
    size_t nlabels;
    uint64_t names_gen; /* pods index generation the names were taken from */
    int named;          /* names from the runtime's bundle or a log link: final */
    int bundle_named;   /* names from the runtime's bundle: never replaced */
    int bundle_failed;  /* the bundle is unreadable or malformed: counted once, not read again */
    int sandbox;        /* the runtime's bundle says it is the pod's sandbox */
    int64_t first_ms, last_try_ms;
    int fd[NFILES];       /* open control files, or FD_NONE / FD_ABSENT */
    int64_t dir_mtime_ns; /* not a cgroup file system: directory mtime at the last refresh */
    /* What the last reads gave. */
    int ok; /* CPU usage read this cycle: emit */
    mw_cg_cpu cpu;
    int has_mem, has_memstat;
    uint64_t mem_usage;
    mw_cg_memstat memstat;
    int nprocs; /* -1: unknown */
    unsigned char psi_some[3], psi_full[3];
    uint64_t psi_some_us[3], psi_full_us[3];
    int has_quota, has_mem_limit;
    double quota_s, period_s, mem_limit;
} cg_entry;

typedef struct cg_state {
    const mw_env *env;
    int v1;
    const cg_file *files;      /* FILES_V2 or FILES_V1 */
    int rootfd[NHIER];         /* hierarchy roots; v1 cpu/memory: -1 when absent or == walk */
    const char *prefix[NHIER]; /* for messages: "sys/fs/cgroup", ... */
    int kernfs;                /* the hierarchy is a real cgroup file system */
    cg_entry **buckets;
    size_t nbuckets;
    cg_entry **entries; /* sorted by path when emitting */
    size_t nentries, cap;
    int unsorted;           /* entries were added since the last sort */
    uint64_t inferred_gen;  /* pods index generation infer_names() last ran on */
    mw_buf bundle_buf;      /* an OCI bundle's config.json (bundle.h) */
    size_t nfds, fd_budget; /* control files kept open, and the most allowed */
    uint64_t cycle;
    int64_t now_ms;
    size_t dirs;    /* directories met this cycle */
    int overflowed; /* a bound was hit this cycle (reported once) */
    mw_pods *pods;
    int64_t pods_scan_ms;
    uint64_t pods_scan_cycle; /* cycle of the last rebuild, 0 = never */
    char *dents[MAX_DEPTH];
    char path[PATH_SIZE]; /* path of the directory being handled */
} cg_state;

/* cgroup_names.c: the sample labels of e from its kind and names. */
void mw_cgroup_set_labels(cg_entry *e);
/* cgroup_names.c: names for e from its runtime's bundle or the pods index. */
void mw_cgroup_name_entry(cg_state *st, mw_collect_ctx *ctx, cg_entry *e);
/* cgroup_names.c: names of unnamed containers from their pod's other cgroups. */
void mw_cgroup_infer_names(cg_state *st);
/* cgroup_emit.c: the samples of every cgroup read this cycle. */
void mw_cgroup_emit_all(cg_state *st, mw_collect_ctx *ctx);

#endif
