/* xid.h - GPU error events and what they mean: the kernel log's XID and
 * SXID lines (/dev/kmsg), the XID catalog (data/xid-catalog.yaml, built in,
 * overridable with --gpu-xid-catalog) and the record parsers. The health
 * engine that turns events and counters into states is gpu_health.h.
 *
 * Parsers are pure functions on bytes (unit-tested, fuzzed by fuzz_xid);
 * the reader (kmsg.c) and the engine run on the GPU collector's thread. */
#ifndef MW_GPU_XID_H
#define MW_GPU_XID_H

#include "../../core/hostfs.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- /dev/kmsg records (the kernel's Documentation/ABI/testing/dev-kmsg) ---- */

/* One record "prio,seq,usec,flags[,more];message": usec is the kernel's
 * timestamp (local_clock, microseconds since boot, the CLOCK_MONOTONIC
 * timeline), msg points into the parsed line (not terminated; the
 * kernel escapes non-printable bytes as \xNN). */
typedef struct mw_kmsg_record {
    unsigned prio; /* facility << 3 | level */
    uint64_t seq, usec;
    char flag; /* '-', 'c' or '+' */
    const char *msg;
    size_t msg_len;
} mw_kmsg_record;

/* Parse one header line (without its newline). Returns 0, or -1 when it
 * is not a record header (a continuation line " KEY=value" included). */
int mw_kmsg_parse_record(const char *line, size_t len, mw_kmsg_record *r);

/* ---- NVRM / nvswitch lines ---- */

enum { MW_XID_LINE_NONE, MW_XID_LINE_XID, MW_XID_LINE_SXID, MW_XID_LINE_GPU_AT };

/* What an XID, SXID or "GPU at" line says. */
typedef struct mw_xid_line {
    int kind;         /* MW_XID_LINE_* */
    char pci[16];     /* "0000:3b:00" (domain:bus:device, lower case) */
    char device[24];  /* SXID: "nvidia-nvswitch0" */
    char uuid[96];    /* GPU_AT: "GPU-..." */
    uint32_t code;    /* XID or SXID number */
    int64_t pid;      /* -1: not given (or '<unknown>') */
    char process[64]; /* "" when not given */
    char text[200];   /* the rest of the message, cleaned */
} mw_xid_line;

/* Recognise the driver's lines of several generations:
 *   NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
 *   NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen ...
 *   NVRM: Xid (PCI:0000:3b:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 0) ...
 *   NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 ...          (older drivers)
 *   NVRM: GPU at PCI:0000:3b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae
 *   nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 ...
 * Returns the kind (MW_XID_LINE_NONE for anything else). */
int mw_xid_parse_line(const char *msg, size_t len, mw_xid_line *x);

/* ---- the catalog ---- */

enum {
    MW_XID_CLASS_UNKNOWN,
    MW_XID_CLASS_APPLICATION,
    MW_XID_CLASS_DRIVER,
    MW_XID_CLASS_HARDWARE,
    MW_XID_CLASS_MEMORY,
    MW_XID_CLASS_BUS,
    MW_XID_CLASS_NVLINK,
    MW_XID_CLASS_THERMAL,
    MW_XID_CLASS_COUNT
};
/* Health states, in increasing severity (a node takes its worst GPU's). */
enum { MW_HEALTH_HEALTHY, MW_HEALTH_DEGRADED, MW_HEALTH_UNKNOWN, MW_HEALTH_UNHEALTHY };
#define MW_HEALTH_NSTATES 4
/* Recommended actions, in increasing cost. */
enum {
    MW_ACTION_NONE,
    MW_ACTION_RESTART_APPLICATION,
    MW_ACTION_RESET_GPU,
    MW_ACTION_REBOOT_NODE,
    MW_ACTION_DRAIN_CONTACT_SUPPORT,
    MW_ACTION_COUNT
};
const char *mw_xid_class_name(int c);
const char *mw_health_state_name(int s);
const char *mw_health_action_name(int a);

#define MW_XID_CATALOG_MAX 256
#define MW_XID_MEANING_MAX 96

/* One code's facts and rule. state: what one event does to its GPU
 * (MW_HEALTH_HEALTHY: nothing alone); escalate_count > 0: that many events
 * of the code on one GPU within the window give escalate_state. hold_us:
 * how long after its last event the state holds (0: until the GPU is seen
 * reset: its energy counter restarts, or it comes back from lost). */
typedef struct mw_xid_entry {
    uint32_t code;
    uint8_t sxid; /* an NVSwitch SXID rather than a GPU XID */
    uint8_t cls, state, action;
    uint32_t escalate_count;
    uint8_t escalate_state, escalate_action;
    int64_t hold_us;
    char meaning[MW_XID_MEANING_MAX];
} mw_xid_entry;

/* Thresholds of the counter rules (the catalog's `thresholds:`). */
typedef struct mw_health_thresholds {
    double retired_pages;              /* both causes together */
    double pcie_replays_per_minute;    /* replay counter rate */
    double nvlink_errors_per_minute;   /* CRC (flit, data) and replays over a GPU's links */
    int64_t clock_event_hold_us;       /* hw/sw thermal, power brake held this long */
    int64_t recent_hardware_window_us; /* what counts as recent for the doctor */
} mw_health_thresholds;

typedef struct mw_xid_catalog {
    char version[32];
    char source[160];
    char retrieved[16];
    int64_t window_us; /* deduplication and escalation window */
    mw_health_thresholds th;
    mw_xid_entry def; /* codes not listed */
    mw_xid_entry sxid_fatal, sxid_nonfatal;
    mw_xid_entry e[MW_XID_CATALOG_MAX];
    size_t n;
} mw_xid_catalog;

/* The catalog built from data/xid-catalog.yaml (embedded at build time). */
extern const char mw_xid_catalog_builtin[];
extern const size_t mw_xid_catalog_builtin_len;

/* Parse a catalog into cat, merging over what cat holds (start from
 * mw_xid_catalog_load_builtin or a zeroed struct). Every error names
 * name:line:col. Returns 0 or -1. */
int mw_xid_catalog_parse(mw_xid_catalog *cat, const char *name, const char *text, size_t len,
                         char *err, size_t errsize);
/* The built-in catalog, then the operator's file over it (path "" or NULL:
 * none). Returns 0 or -1 with the reason. */
int mw_xid_catalog_load(mw_xid_catalog *cat, const char *path, char *err, size_t errsize);
/* The entry for an XID (sxid = 0) or SXID; never NULL (the default). For an
 * SXID not listed: fatal or non-fatal by the line's text. */
const mw_xid_entry *mw_xid_catalog_find(const mw_xid_catalog *cat, uint32_t code, int sxid,
                                        const char *text);

/* ---- the kernel log reader (kmsg.c) ---- */

typedef struct mw_kmsg_reader {
    int fd;
    int caught_up; /* the ring's old records have been read */
    int have_seq;
    uint64_t next_seq; /* the sequence number expected next */
    uint64_t records;  /* records read */
    uint64_t lost;     /* records the ring overwrote before we read them */
    uint64_t overruns; /* EPIPE answers */
    uint64_t malformed;
    char *pending; /* a partial line (regular files) */
    size_t npending;
    /* read(2) unless a test puts a fake here. */
    ssize_t (*read_fn)(int fd, void *buf, size_t n);
} mw_kmsg_reader;

/* Open path (under host's root, "/dev/kmsg") for non-blocking reads from
 * the oldest record the ring holds. Returns 0, or -1 with why. */
int mw_kmsg_open(mw_kmsg_reader *r, const mw_hostfs *host, const char *path, char *why,
                 size_t whysize);
/* Read what is there, at most max records, without waiting; each record
 * goes to fn with before_start set while the ring's old records are read
 * (until the first time nothing is left). Returns the records delivered, or
 * -1 on a read error (why says which). */
typedef void (*mw_kmsg_fn)(void *ctx, const mw_kmsg_record *rec, int before_start);
long mw_kmsg_drain(mw_kmsg_reader *r, size_t max, mw_kmsg_fn fn, void *ctx, char *why,
                   size_t whysize);
void mw_kmsg_close(mw_kmsg_reader *r);

#endif
