/* store_internal.h - the store's state, shared by its implementation files
 * (store.c: open, recovery, maintenance, reads; store_append.c: writes;
 * snapshot.c: head snapshots; block.c: blocks). Not for other modules. */
#ifndef MW_STORE_INTERNAL_H
#define MW_STORE_INTERNAL_H

#include "../core/series_memory.h"
#include "../core/worker.h"
#include "block.h"
#include "head.h"
#include "store.h"
#include "wal.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

/* WAL record types. */
enum { MW_REC_SERIES = 1, MW_REC_SAMPLES = 2 };

struct mw_store {
    char dir[PATH_MAX];
    mw_store_options opt;
    int lock_fd;
    pthread_rwlock_t lock; /* head: appends write, reads read */
    mw_head head;
    mw_wal *wal;
    /* What the snapshot covers: the WAL is kept from snap_lsn on (the
     * segments before it are deleted once it is on disk), and the chunk
     * files before snap_chunk_seq are sealed and may be compacted
     * (snapshot.c). */
    uint64_t snap_lsn;
    uint32_t snap_chunk_seq;
    int restored_from_previous; /* at open: the latest snapshot was unusable */
    /* Blocks, oldest first; readers hold a reference while they read. */
    pthread_mutex_t blocks_mu;
    mw_block **blocks;
    size_t nblocks;
    uint64_t next_block_seq;
    pthread_mutex_t maint_mu; /* one snapshot or compaction at a time */
    mw_worker maintainer;     /* the maintenance thread (store.c) */
    /* counters */
    _Atomic uint64_t refused[MW_REFUSE_COUNT];
    _Atomic uint64_t samples_appended, samples_duplicate, series_created;
    uint64_t replayed_records, wal_bytes_cut;
    uint64_t unknown_series_samples; /* replay: samples of series never defined */
    int64_t last_snapshot_ns;        /* CLOCK_MONOTONIC: an interval, not a date */
    /* The agent's own series of the last snapshot (agent thread only): each
     * one missing from the next gets a staleness marker (store_append.c). */
    mw_series_memory own_last;
    mw_buf own_key;
    struct mw_hstore *hist; /* native histograms' file, opened on first use (histogram.c) */
};

/* Paths inside the data folder. */
void mw_store_path(const mw_store *s, const char *name, char *out, size_t size);

/* snapshot.c */
#define MW_SNAPSHOT_FILE "head.snapshot"
#define MW_SNAPSHOT_PREV_FILE "head.snapshot.prev"
int mw_snapshot_write(mw_store *s);
/* Restore the head from snapshot file `name` of the data folder: 0
 * restored, 1 no such file, -1 unusable (reported; the head may then hold
 * part of it and must be reset). */
int mw_snapshot_load(mw_store *s, const char *name, uint64_t *lsn, uint32_t *chunk_seq,
                     uint64_t *chunk_size);

/* compact.c: a new block joins the list (readers see it); the paths of
 * block seq, temporary and final; at open, blocks that a merged block of
 * their resolution lists as its sources (a crash between its rename and
 * their deletion) are deleted. */
void mw_store_add_block(mw_store *s, mw_block *b);
void mw_store_block_paths(mw_store *s, uint64_t seq, char *tmp, char *final, size_t size);
void mw_store_drop_covered_blocks(mw_store *s);

/* store.c: a selection with hints (NULL: raw samples only). */
int mw_store_select_ex(mw_store *s, const mw_matcher *ms, size_t nm, int64_t mint, int64_t maxt,
                       size_t max_samples, const mw_select_hint *hint, mw_select_result *out,
                       char *err, size_t errsize);

/* store_append.c: the newest sample of the series with these labels (as
 * a writer sends them: empty values dropped and sorted here, as appends
 * do), for the histograms' duplicate check (rw_histogram.c): 0 with its
 * time and value bits, -1 when there is no such series or sample. */
int mw_store_last_sample(mw_store *s, const mw_label *labels, size_t n, int64_t *t, uint64_t *bits);

/* store_append.c: apply one WAL record during replay. */
int mw_store_replay_record(void *arg, uint8_t type, const uint8_t *p, size_t n);

#endif
