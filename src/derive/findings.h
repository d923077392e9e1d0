/* findings.h - why is this training slow? The doctor's rules and their
 * input: a bounded history of the per-cycle values the rules need.
 *
 * Each cycle the doctor module turns the snapshot into a frame (host CPUs,
 * containers, GPUs and which container uses which GPU; dr_frame_from) and
 * keeps the frames in a ring (dr_history). The rules (findings.c) look at the
 * frames of a window and produce findings: a kind, a severity, the workload,
 * the evidence (numbers) and what to do. The same findings are exported as
 * mlwatch_finding, served as JSON at /api/v1/findings and printed by
 * `mlwatch doctor` (docs/doctor.md). */
#ifndef MW_FINDINGS_H
#define MW_FINDINGS_H

#include "../core/arena.h"
#include "../core/buf.h"
#include "../core/config.h"
#include "../core/hostfs.h"
#include "../core/snapshot.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    DR_CPU_GOVERNOR,
    DR_CPU_THROTTLING,
    DR_NUMA_MISMATCH,
    DR_GPU_THERMAL_THROTTLE,
    DR_GPU_POWER_THROTTLE,
    DR_PCIE_DOWNGRADED,
    DR_INPUT_BOUND,
    DR_MEMORY_PRESSURE,
    DR_GPU_ERRORS,
    DR_GPU_SHARED,
    DR_NKINDS
} dr_kind;

typedef enum { DR_INFO, DR_WARNING, DR_CRITICAL } dr_severity;

const char *dr_kind_name(dr_kind k); /* "cpu_throttling" */
int dr_kind_parse(const char *s);    /* -1 when unknown */
const char *dr_severity_name(dr_severity s);
int dr_severity_parse(const char *s);
const char *dr_kind_advice(dr_kind k); /* what to do, in words */

#define DR_MAX_EVIDENCE 10
/* The rules' thresholds and how far back the agent's findings look (the
 * `doctor:` section, doctor_config.c, docs/doctor.md). */
struct mw_doctor_thresholds {
    int64_t history_ms;
    double busy_cpu_ratio, cpu_frequency_ratio;
    double throttled_ratio, throttled_critical_ratio;
    double gpu_clock_ratio, gpu_throttle_fraction, gpu_busy_ratio;
    double input_gpu_utilization, input_cpu_saturation, input_io_pressure;
    double memory_working_set_ratio, memory_working_set_critical, memory_pressure_ratio;
    double gpu_corrected_errors;
};

/* The most kept of a finding's strings, terminator included (a finding
 * from a rule or from JSON alike). */
#define DR_NAMESPACE_MAX 128
#define DR_POD_MAX 256
#define DR_CONTAINER_MAX 512
#define DR_SUMMARY_MAX 512
#define DR_EVIDENCE_NAME_MAX 40

typedef struct dr_evidence {
    const char *name; /* "throttled_periods_ratio" */
    double value;
} dr_evidence;

/* A finding's strings are its list's (dr_list_str), "" when not set: the
 * agent evaluates its rules every cycle, and fixed-size fields made each
 * finding 1.8 KB, 115 KB a cycle on a node of 100 pods where every pod
 * shares a GPU. */
typedef struct dr_finding {
    dr_kind kind;
    dr_severity severity;
    double magnitude; /* how bad, for ranking within a severity (kind-specific, >= 0) */
    const char *namespace_, *pod, *container;
    char gpu[16];
    const char *summary; /* one sentence with the numbers */
    dr_evidence ev[DR_MAX_EVIDENCE];
    size_t nev;
    struct dr_list *list; /* where its strings are kept */
} dr_finding;

/* A growable list of findings, bounded (DR_MAX_FINDINGS), and their
 * strings. Not to be copied by value (its findings point at it). */
#define DR_MAX_FINDINGS 4096
#define DR_ROOT_MAX 4096 /* a --root path */
typedef struct dr_list {
    dr_finding *items;
    size_t n, cap;
    size_t dropped;   /* findings left out at the bound */
    const char *root; /* the host root (--root) the findings are of; "" unknown */
    mw_arena strs;
} dr_list;

void dr_list_init(dr_list *l);
void dr_list_free(dr_list *l);
dr_finding *dr_list_add(dr_list *l); /* zeroed, strings ""; NULL at the bound */
/* A copy of s, at most max - 1 bytes of it, kept as long as l. */
const char *dr_list_str(dr_list *l, const char *s, size_t max);
/* Severity first, then magnitude, then kind and workload (a stable order). */
void dr_list_rank(dr_list *l);
/* Keep the findings of namespace/pod (NULL or "" = any), plus the node's
 * own (no workload), which concern every pod on it. */
void dr_list_filter(dr_list *l, const char *ns, const char *pod, const char *container);

/* ---- frames: the per-cycle values the rules need ---- */

typedef struct dr_cpu {
    int32_t cpu;
    double busy_s, total_s; /* cumulative, from mlwatch_cpu_seconds_total */
    double hz, max_hz;      /* max: hardware (turbo included) else scaling max; 0 = unknown */
} dr_cpu;
/* A CPU in a packed frame whose CPUs are the frame before's (the same ids
 * in the same order, those of the nearest frame with whole CPUs): its times
 * as float differences from the frame before's reconstructed ones, its
 * frequencies whole as floats (within 128 Hz at 4 GHz). 16 bytes instead
 * of 40: a 224-CPU server's 64 frames keep 230 KiB instead of 570. */
typedef struct dr_cpu_packed {
    float busy_d, total_d;
    float hz, max_hz;
} dr_cpu_packed;

#define DR_NO_VALUE (-1.0)

/* A container's identity, the same from one frame to the next: a history
 * holds one counted copy per container (and one of each string), shared by
 * its frames. */
typedef struct dr_ident {
    const char *key; /* container_id, else the cgroup path */
    const char *ns, *pod, *name, *cgroup;
    struct dr_ident *next; /* the pool's */
    uint64_t hash;
    uint32_t refs;
} dr_ident;

/* What every frame keeps of a container: the cumulative values, which the
 * rules compare between the first frame of their window (any frame) and
 * the newest one. The newest and the oldest frame of a history hold these;
 * the frames between hold them packed (dr_packed). */
typedef struct dr_container {
    const dr_ident *id;
    double cpu_s, throttled_periods, periods, throttled_s; /* cumulative, -1 = absent */
    double mem_some_s, mem_full_s, io_some_s;              /* PSI totals, -1 = absent */
} dr_container;
#define DR_CTR_VALUES 7 /* the doubles of a dr_container, cpu_s first */

/* A container in a frame between the oldest and the newest of a history:
 * for each value, two bits of `kinds` (value k at bits 2k): DR_SAME as in
 * the frame before, DR_GONE (absent here), or DR_DIFF, the float difference
 * from the frame before, the frame's next one in `diffs`. A frame's
 * difference is taken from the previous frame's reconstructed value, so
 * rounding does not add up along the frames: a reconstructed value is
 * within 2^-24 of its last step (of 5 s of CPU time, 0.3 us), and equal
 * values stay equal. Most values of most containers do not move within a
 * stride (throttling, memory pressure; all of an idle container's): 2 bytes
 * plus 4 per value that moved, instead of 64 whole. The container's identity
 * is in the frame's dr_idset, its place in the frame before in `prev` (or
 * the same place). */
typedef struct dr_packed {
    uint16_t kinds;
} dr_packed;
#define DR_SAME 0u
#define DR_GONE 1u
#define DR_DIFF 2u
/* A packed frame counts its diffs before every 16th container (`marks`):
 * a value is found without reading the frame from its start. */
#define DR_MARK_EVERY 16
/* The identities of a packed frame's containers, in its order, each counted
 * once: consecutive packed frames of the same containers (most of them: a
 * node's containers change far less often than every stride) share one. */
typedef struct dr_idset {
    uint32_t refs;
    size_t n;
    const dr_ident *id[];
} dr_idset;
#define DR_ANCHOR 0x80000000u
/* The values of a container that the frame before lacks (or lacks a value
 * of): kept whole. */
typedef struct dr_anchor {
    double v[DR_CTR_VALUES];
} dr_anchor;

/* What the rules read of the newest frame only; a history drops it from a
 * frame when a newer one arrives. */
typedef struct dr_ctr_now {
    double quota_cpus;            /* quota / period, -1 = no quota */
    double ws_bytes, limit_bytes; /* -1 = absent */
    /* For containers that use a GPU: allowed CPUs (count) and the NUMA
     * nodes of their allowed CPUs and memory, from cpuset.*.effective. */
    int ncpus_allowed; /* -1 = unknown */
    int uses_gpu;
    uint64_t cpu_nodes, mem_nodes; /* bit N = node N; 0 = unknown */
} dr_ctr_now;

typedef struct dr_gpu {
    char id[16];
    double util;                                               /* -1 = absent */
    double sm_hz, sm_max_hz;                                   /* -1 = absent */
    uint32_t reasons;                                          /* DR_REASON_* bits active */
    double pcie_gen, pcie_gen_max, pcie_width, pcie_width_max; /* -1 = absent */
    double ecc_corrected, ecc_uncorrected, remap_uncorrectable, remap_pending, remap_failure;
    double xid_total; /* sum over XIDs, counted from the agent's start */
    /* mlwatch_gpu_health's current state (0 healthy, 1 degraded, 2 unknown,
     * 3 unhealthy; -1 absent), its reason and action; and
     * mlwatch_gpu_recent_hardware_events (collect/gpu/gpu_health.h). */
    int health;
    char health_reason[32], health_action[32];
    double recent_hw_events;
    int numa_node; /* -1 = unknown */
    int mig;
} dr_gpu;

#define DR_REASON_SW_POWER 0x1u
#define DR_REASON_HW_SLOWDOWN 0x2u
#define DR_REASON_SW_THERMAL 0x4u
#define DR_REASON_HW_THERMAL 0x8u
#define DR_REASON_HW_POWER_BRAKE 0x10u

typedef struct dr_use {
    uint32_t container; /* index into the frame's containers */
    uint32_t gpu;       /* index into the frame's GPUs */
    double mem_bytes;
} dr_use;

/* The counted strings and identities of a history's containers. */
typedef struct dr_str dr_str;
typedef struct dr_strpool {
    dr_str **buckets;
    size_t nbuckets, n; /* n: strings */
    dr_ident **ibuckets;
    size_t nibuckets, nidents;
} dr_strpool;

void dr_strpool_free(dr_strpool *p);

typedef struct dr_governor {
    char name[24]; /* "" = unknown */
} dr_governor;

/* One allocation of exactly the arrays' sizes; the newest-frame parts in a
 * second one. */
typedef struct dr_frame {
    int64_t t_ms;
    dr_strpool *pool;     /* where the container identities are counted */
    dr_strpool *own;      /* the frame's own pool when built without one */
    dr_cpu *cpus;         /* sorted by id; NULL when packed */
    dr_cpu_packed *pcpus; /* the same CPUs, packed (NULL when not) */
    size_t ncpus;
    dr_container *ctrs; /* sorted by key; NULL when packed */
    dr_packed *packed;  /* the same containers, packed (NULL when not) */
    float *diffs;       /* a packed frame's differences, in container order */
    uint32_t *marks;    /* diffs before container DR_MARK_EVERY * i */
    size_t ndiffs;
    dr_idset *ids; /* a packed frame's identities */
    /* A packed frame's containers' places in the frame before (DR_ANCHOR |
     * i: anchors[i]); NULL when every container is at its own place there
     * and none is an anchor. */
    uint32_t *prev;
    dr_anchor *anchors;
    size_t nctrs, nanchors;
    dr_gpu *gpus;
    size_t ngpus;
    dr_use *uses; /* a packed frame's may be the frame before's (shared) */
    size_t nuses;
    /* Parallel to cpus and ctrs; NULL once the frame is not the newest of
     * its history (dr_frame_drop_now). */
    dr_governor *governors;
    dr_ctr_now *now;
} dr_frame;

/* Extract a frame from a finished snapshot; cpuset files are read through
 * host (NULL: not read). Container identities are shared through pool
 * (NULL: the frame's own). Never fails; what is absent stays absent. Only
 * one thread may build and free the frames of one pool. */
dr_frame *dr_frame_from(const mw_snapshot *snap, const mw_hostfs *host, dr_strpool *pool);
void dr_frame_free(dr_frame *f);
/* Drop the parts only the newest frame needs (governors, now). */
void dr_frame_drop_now(dr_frame *f);
/* The container of key in a frame that is not packed; NULL when absent. */
const dr_container *dr_frame_container(const dr_frame *f, const char *key);
/* Index of key among f's containers (packed or not); -1 when absent. */
long dr_frame_find(const dr_frame *f, const char *key);
const dr_ident *dr_frame_ident(const dr_frame *f, size_t i);
/* The frame's one allocation, laid out for these counts (history.c). */
typedef struct dr_frame_shape {
    size_t ncpus, nctrs, ndiffs, nanchors, ngpus, nuses;
    int cpus_packed; /* CPUs as dr_cpu_packed */
    int packed;      /* containers 0: whole (ctrs), 1: packed, 2: packed with prev */
} dr_frame_shape;
dr_frame *dr_frame_alloc(const dr_frame_shape *shape);
/* The identities of n containers (whose counts it takes over): `share`,
 * counted once more, when it holds the same identities in the same order
 * (the containers' counts are then dropped), else a new set. */
dr_idset *dr_idset_take(dr_strpool *p, const dr_container *ctrs, size_t n, dr_idset *share);
/* Give the set's identities to containers of a whole frame (each counted
 * once more), and drop the set once. */
void dr_idset_give(dr_strpool *p, dr_idset *s);
void dr_idset_release(dr_strpool *p, dr_idset *s);

/* Parse a cpuset list file ("0-3,8\n", possibly empty) into a bitmap of
 * nbits bits. Returns the number of members or -1 (fuzzed: fuzz_cpuset). */
int dr_parse_cpuset(const char *text, uint64_t *bits, size_t nbits);

/* The ring of frames: at most DR_MAX_FRAMES; when the history is longer than
 * that many intervals, one frame is kept every `stride` cycles. 64 frames
 * keep one every 5 s of the default 5-minute history at 1 s: enough for the
 * rules (a window's first frame, the share of throttled samples), and half
 * the memory of 128. The frames between the oldest and the newest are
 * packed (history_ring.c). */
#define DR_MAX_FRAMES 64
typedef struct dr_history {
    dr_strpool pool; /* the container strings of its frames */
    dr_frame *frames[DR_MAX_FRAMES];
    size_t start, n;
    int64_t history_ms;
    unsigned stride, skipped;
} dr_history;

void dr_history_init(dr_history *h, int64_t history_ms, int64_t interval_ms);
/* Takes ownership of f (kept, or freed when the stride skips it); the newest
 * frame is always kept so the latest values are current. */
void dr_history_push(dr_history *h, dr_frame *f);
void dr_history_free(dr_history *h);
size_t dr_history_len(const dr_history *h);
const dr_frame *dr_history_at(const dr_history *h, size_t i); /* 0 = oldest */
/* The containers of frame i with their values, packed or not, in the
 * frame's order (nctrs of them; the caller frees). */
dr_container *dr_history_values(const dr_history *h, size_t i);
/* The nearest frame at or before frame i with whole CPUs: frame i's CPUs
 * are its CPUs, in the same order. */
const dr_frame *dr_history_cpu_ids(const dr_history *h, size_t i);
/* Frame i's CPUs whole (ncpus + 1 allocated; free it). */
dr_cpu *dr_history_cpus(const dr_history *h, size_t i);
/* One container's value at offset `field` of dr_container (cpu_s, ...) in
 * frames i0 to the newest: out[k] for frame i0 + k, -1 where that frame
 * lacks the container or the value. */
void dr_history_series(const dr_history *h, size_t i0, const char *key, size_t field, double *out);

/* Run every rule over the frames of the last window_ms (0 = all) and append
 * the findings to out (unranked). */
void dr_evaluate(const dr_history *h, int64_t window_ms, const struct mw_doctor_thresholds *t,
                 dr_list *out);

/* ---- rendering ---- */

/* {"generated_at":..., "source":..., "window_seconds":..., "findings":[...]} */
char *dr_list_to_json(const dr_list *l, int64_t now_ms, const char *source, double window_s);
/* The inverse (what `mlwatch doctor` reads from an agent). Returns 0, or -1
 * with a reason in err; bounded by DR_MAX_FINDINGS. Fuzzed. */
int dr_list_from_json(const char *text, size_t len, dr_list *out, char *err, size_t errsize);
/* The ranked report in plain words. */
void dr_list_to_text(const dr_list *l, const char *source, double window_s, mw_buf *out);

#endif
