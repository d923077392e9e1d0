/* gpu_health.h - GPU health: events from the kernel log and NVML,
 * deduplicated against the XID catalog (xid.h), and the counters the
 * collector already reads, turned into a state, a reason and a recommended
 * action per GPU and per node (docs/gpu.md "Health").
 *
 * The engine (gpu_health.c) is fed and evaluated on the GPU collector's
 * thread; its event history and node summary are read from any thread.
 * The functions at the end are the published interface of the running GPU
 * collector, for the stages after collection (derive/gpu_events.c serves
 * the events and readiness; a Kubernetes node condition can call
 * mw_gpu_node_health_get). */
#ifndef MW_GPU_HEALTH_H
#define MW_GPU_HEALTH_H

#include "xid.h"
#include "../node_health.h"

#include <stddef.h>
#include <stdint.h>

#define MW_GPU_EVENTS_MAX 1024 /* deduplicated events kept per node */
#define MW_HEALTH_REASON_MAX 32

enum { MW_GPU_EVENT_KMSG, MW_GPU_EVENT_NVML };

/* One deduplicated event: every record of one code on one GPU (or NVSwitch,
 * or unknown PCI device) within the catalog's window, counted. */
typedef struct mw_gpu_event {
    uint64_t id;
    int dev;                /* the GPU's place in the collector, -1: not a GPU it reads */
    char gpu[12], uuid[96]; /* "" when not known */
    char pci[16];           /* "0000:3b:00" */
    char device[24];        /* SXID: "nvidia-nvswitch0" */
    uint32_t code;
    uint8_t sxid, cls, source, before_start;
    uint8_t state, action; /* what the catalog says one event does */
    uint64_t count;
    int64_t first_us, last_us; /* monotonic (the kernel log's timeline) */
    int64_t first_ms, last_ms; /* wall clock */
    int64_t pid;               /* -1 when not given */
    char process[64];
    char message[200]; /* the first record's */
} mw_gpu_event;

typedef struct mw_gpu_health {
    uint8_t state, action;
    char reason[MW_HEALTH_REASON_MAX]; /* "none", "gpu_lost", "xid_79", ... (bounded) */
    uint32_t recent_hardware_events;   /* non-application events in the recent window */
} mw_gpu_health;

typedef struct mw_gpu_node_health {
    uint8_t state, action;
    char reason[MW_HEALTH_REASON_MAX];
    char gpu[12]; /* the GPU the reason is about ("" for the node itself) */
    unsigned ngpus;
    unsigned count[MW_HEALTH_NSTATES]; /* GPUs per state */
    int64_t updated_ms;                /* wall clock of the evaluation */
} mw_gpu_node_health;

typedef struct mw_gpu_event_stats {
    uint64_t records;   /* XID and SXID records seen, every source */
    uint64_t events;    /* deduplicated events created */
    uint64_t evicted;   /* events dropped from the history at its bound */
    uint64_t kmsg_lost; /* kernel log records overwritten before they were read */
    uint64_t kmsg_read; /* kernel log records read */
    int kmsg_on;        /* the kernel log is read */
} mw_gpu_event_stats;

typedef struct mw_gpu_health_engine mw_gpu_health_engine;
struct mw_gpu_dev;

mw_gpu_health_engine *mw_gpu_health_new(const mw_xid_catalog *cat);
void mw_gpu_health_free(mw_gpu_health_engine *e);
/* The GPUs' identities (index, uuid, PCI bus id), n <= MW_GPU_MAX_DEVICES. */
void mw_gpu_health_devices(mw_gpu_health_engine *e, const struct mw_gpu_dev *devs, unsigned n);
/* A kernel log record (any message: the others are ignored). */
void mw_gpu_health_kmsg(mw_gpu_health_engine *e, const mw_kmsg_record *rec, int before_start,
                        int64_t now_us, int64_t now_ms);
/* An NVML XID event of GPU dev, at now_us (monotonic) / now_ms (wall). */
void mw_gpu_health_nvml_xid(mw_gpu_health_engine *e, unsigned dev, uint32_t code, int64_t now_us,
                            int64_t now_ms);
/* Evaluate every GPU from its events and counters (slow: its slow
 * readings are new), filling out[i]; then the node. */
void mw_gpu_health_evaluate(mw_gpu_health_engine *e, const struct mw_gpu_dev *devs, unsigned n,
                            int slow, int64_t now_us, int64_t now_ms, mw_gpu_health *out);
void mw_gpu_health_node(mw_gpu_health_engine *e, mw_gpu_node_health *out);
/* The node's summary as the GPUHealthy Node condition says it
 * (collect/node_health.h): the state; a CamelCase reason ("GPUsHealthy",
 * else the node's reason in CamelCase: "GPULost", "XID79",
 * "RowRemapFailed", "NoReading"); a message naming the GPU, the reason, the
 * recommended action and the GPUs per state. */
void mw_gpu_node_verdict(const mw_gpu_node_health *h, mw_node_gpu_state *state, char *reason,
                         size_t rsize, char *message, size_t msize);
/* Up to max events, oldest first; returns how many. */
size_t mw_gpu_health_events(mw_gpu_health_engine *e, mw_gpu_event *out, size_t max,
                            mw_gpu_event_stats *st);
void mw_gpu_health_kmsg_stats(mw_gpu_health_engine *e, int on, uint64_t read, uint64_t lost);

/* ---- the running GPU collector's (gpu_collector.c) ---- */

/* The node's GPU health: 0, or -1 when no GPU collector runs. */
int mw_gpu_node_health_get(mw_gpu_node_health *out);
/* A copy of the event history (free it), *n events; NULL with *n = 0 when
 * no GPU collector runs. */
mw_gpu_event *mw_gpu_events_get(size_t *n, mw_gpu_event_stats *st);
/* 0 when the GPU stack answers (or no GPU collector runs), -1 with why
 * when no poll has completed for the stale limit. */
int mw_gpu_answering(char *why, size_t size);

#endif
