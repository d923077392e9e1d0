/* store.h - mlwatch's embedded time-series store: the public API.
 *
 * A series is a label set sorted by name; its samples are float values with
 * millisecond timestamps. Writes go to the write-ahead log and the in-memory
 * head (store_append.c); the head's full chunks go to chunk files, which are
 * compacted into immutable, mmap'ed blocks (block.c) that retention deletes
 * by age and by total size. On open the head is restored from the latest
 * snapshot and the WAL after it (snapshot.c, wal.c). docs/store.md
 * describes the format on disk, the durability policy, the limits and the
 * out-of-order policy.
 *
 * Thread-safe: any number of writers and readers. */
#ifndef MW_STORE_H
#define MW_STORE_H

#include "../core/options.h"
#include "../core/snapshot.h"
#include "matcher.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mw_store mw_store;

typedef struct mw_store_limits {
    uint64_t max_series;            /* active series in the head; 0 = no limit */
    uint64_t max_series_per_tenant; /* per value of tenant_label; 0 = no limit */
    char tenant_label[128];         /* "" = no tenant limit */
    uint32_t max_label_name_len;    /* bytes; 0 = no limit */
    uint32_t max_label_value_len;
    uint32_t max_labels; /* per series (at most 255) */
    uint64_t max_samples_per_request;
    /* Samples stamped more than this after the store's clock are refused
     * (400): one far in the future would make every later sample of its
     * series out of order. 0 = no limit. */
    int64_t max_future_ms;
} mw_store_limits;

/* Downsampling (downsample.c, docs/store.md): blocks whose samples are
 * older than retention_ms become per-window aggregates at each resolution
 * res_ms, each kept until its samples are keep_ms old. */
#define MW_STORE_MAX_RESOLUTIONS 4
typedef struct mw_store_resolution {
    int64_t res_ms, keep_ms;
} mw_store_resolution;
/* Parse "5m:30d,1h:1y" (resolutions increasing, each kept longer than the
 * one before); "" is none. 0, or -1 with the reason in why. */
int mw_store_parse_downsample(const char *text, mw_store_resolution *out, size_t *n, char *why,
                              size_t whysize);

typedef struct mw_store_options {
    const char *dir;
    int64_t retention_ms; /* 0 = keep forever (raw samples, when downsampling) */
    mw_store_resolution downsample[MW_STORE_MAX_RESOLUTIONS];
    size_t ndownsample;
    uint64_t retention_bytes; /* 0 = no size limit */
    mw_store_limits limits;
    int no_sync; /* tests and benchmarks only: never fsync */
    /* Snapshot the head once the WAL has grown this much (0 = default). */
    uint64_t snapshot_wal_bytes;
    /* WAL segment size (0 = 64 MiB); tests make it small to rotate often. */
    uint64_t wal_segment_bytes;
    int64_t background_ms; /* period of the maintenance thread; 0 = 1 s, -1 = none */
} mw_store_options;

/* The limits the store's options (store_module.c) default to. */
void mw_store_default_limits(mw_store_limits *l);

/* Open (creating) the store in o->dir and recover it. NULL with a one-line
 * reason in err when the folder cannot be used (or another process holds
 * it). */
mw_store *mw_store_open(const mw_store_options *o, char *err, size_t errsize);
/* Flush, snapshot the head for a fast restart, and close. */
void mw_store_close(mw_store *s);

/* One series of a write, in the shape of a remote-write TimeSeries. The
 * store may reorder the labels and drop those with empty values. */
typedef struct mw_store_sample {
    int64_t t;
    double v;
} mw_store_sample;
typedef struct mw_store_ts {
    mw_label *labels;
    size_t nlabels;
    const mw_store_sample *samples;
    size_t nsamples;
} mw_store_ts;

/* How a write ended: 0 stored (and durable when wait was set); 400 invalid,
 * out of order, too far in the future or into one of the agent's own
 * series, 429 over a series limit, 503 storage unavailable (disk full). For
 * 400 and 429 nothing of the write was stored. */
enum { MW_STORE_WAIT = 1 };
int mw_store_append(mw_store *s, mw_store_ts *ts, size_t n, int flags, char *msg, size_t msgsize);
/* Append a collection snapshot (the agent's own metrics, __name__ from the
 * family); does not wait for the fsync. Returns as mw_store_append. */
int mw_store_append_snapshot(mw_store *s, const mw_snapshot *snap, char *msg, size_t msgsize);

/* Reading: the series that match every matcher, with their samples in
 * [mint, maxt], sorted by labels. At most max_samples samples in all (0 =
 * no limit): beyond it the call fails with a message. */
typedef struct mw_series_data {
    mw_label *labels;
    size_t nlabels;
    int64_t *t;
    double *v;
    size_t n;
    /* With downsampled data (mw_store_select_hinted): how many raw samples
     * each sample stands for (1 for raw ones, 0 for a staleness marker);
     * NULL: all raw. */
    double *w;
} mw_series_data;
typedef struct mw_select_result {
    mw_series_data *series;
    size_t nseries;
    size_t nsamples;
    /* Chunks that failed their checksum: their samples are missing from
     * the result (queries answer with a warning). */
    size_t damaged_chunks;
    /* The downsampled resolution some samples came from (0: raw only). */
    int64_t resolution_ms;
    void *priv;
} mw_select_result;
int mw_store_select(mw_store *s, const mw_matcher *ms, size_t nm, int64_t mint, int64_t maxt,
                    size_t max_samples, mw_select_result *out, char *err, size_t errsize);
/* mw_store_select with scope (NULL: none) ANDed with ms: how a
 * namespace-scoped reader's every selector is narrowed (docs/security.md). */
int mw_store_select_scoped(mw_store *s, const mw_matcher *scope, const mw_matcher *ms, size_t nm,
                           int64_t mint, int64_t maxt, size_t max_samples, mw_select_result *out,
                           char *err, size_t errsize);
/* A selection that may read downsampled data for the time before the raw
 * samples (docs/store.md "Downsampling"): the resolution is picked for
 * want_ms (the query's step or range window; 0: raw only), and what a
 * downsampled window gives: MW_SEL_SAMPLES its first and last raw samples
 * and those around resets (rate, increase, plain selectors), MW_SEL_SUM its
 * sum (sum/count/avg_over_time), MW_SEL_MIN, MW_SEL_MAX; each weighted by
 * the raw samples it stands for. */
enum { MW_SEL_SAMPLES, MW_SEL_SUM, MW_SEL_MIN, MW_SEL_MAX };
typedef struct mw_select_hint {
    int64_t want_ms;
    int what; /* MW_SEL_* */
} mw_select_hint;
int mw_store_select_hinted(mw_store *s, const mw_matcher *scope, const mw_matcher *ms, size_t nm,
                           int64_t mint, int64_t maxt, size_t max_samples,
                           const mw_select_hint *hint, mw_select_result *out, char *err,
                           size_t errsize);
void mw_select_result_free(mw_select_result *r);
/* The series' label strings, detached from r so that they outlive it
 * (mw_select_result_free then leaves them): a query engine refers to them
 * instead of copying every label. Released by mw_select_labels_free. */
void *mw_select_result_take_labels(mw_select_result *r);
void mw_select_labels_free(void *labels);

/* Maintenance, normally run by the store's own thread; exposed for tests
 * and the benchmark: snapshot the head (and drop the WAL it covers),
 * compact chunk files and blocks, apply retention. */
int mw_store_snapshot(mw_store *s);
int mw_store_compact(mw_store *s, int force);

typedef enum {
    MW_REFUSE_MALFORMED,
    MW_REFUSE_OUT_OF_ORDER,
    MW_REFUSE_DUPLICATE,
    MW_REFUSE_SERIES_LIMIT,
    MW_REFUSE_TENANT_LIMIT,
    MW_REFUSE_LABEL_LIMIT,
    MW_REFUSE_SAMPLES_LIMIT,
    MW_REFUSE_DISK_FULL,
    MW_REFUSE_TOO_LARGE,  /* over the decoding budget (remote_write.h) */
    MW_REFUSE_FUTURE,     /* a sample too far in the future */
    MW_REFUSE_OWN_SERIES, /* a remote write into one of the agent's own series */
    MW_REFUSE_COUNT,
} mw_store_refusal;
typedef struct mw_store_stats {
    uint64_t series; /* active series in the head */
    uint64_t series_created;
    uint64_t samples_appended;
    uint64_t samples_duplicate; /* exact duplicates skipped */
    uint64_t wal_fsyncs, wal_write_errors;
    uint64_t bytes_on_disk; /* WAL + chunk files + blocks + snapshot */
    uint64_t blocks;
    uint64_t head_memory_bytes;
    uint64_t refused[MW_REFUSE_COUNT]; /* by mw_store_refusal */
    uint64_t wal_records_replayed, wal_bytes_cut;
    uint64_t unknown_series_samples; /* replay: samples of series never defined */
    int restored_from_previous;      /* the latest head snapshot was unusable */
    int disk_full;
} mw_store_stats;
extern const char *const mw_store_refusal_names[MW_REFUSE_COUNT];
void mw_store_get_stats(mw_store *s, mw_store_stats *out);
/* 0 while the WAL can be written, or -1 with why not ("cannot write the
 * WAL in DIR: No space left on device"); cheap, for readiness checks. */
int mw_store_writable(mw_store *s, char *why, size_t size);
/* Count a refusal that happened before the store saw the request (a body
 * that does not decode). */
void mw_store_count_refusal(mw_store *s, mw_store_refusal r);

/* The store module's settings (store_module.c): on or off, retention, and
 * the limits of what it accepts. Counts are doubles (a number flag), whole
 * numbers from 0 (no limit) to 1e15. */
typedef struct mw_store_settings {
    int store; /* 0: no store and no /api/v1/write */
    int64_t retention_ms;
    uint64_t retention_size; /* bytes; 0 = no limit */
    double max_series, max_series_per_tenant;
    char tenant_label[128];
    double max_label_name_length, max_label_value_length, max_labels;
    double max_samples_per_request;
    int64_t max_future_ms; /* --store-max-future */
    char downsample[256];  /* --downsample: "RES:KEEP,..." */
} mw_store_settings;
extern const mw_option_group mw_store_module_options;

#endif
