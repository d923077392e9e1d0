/* store_internal.h - the store's state, shared by its implementation files
 * (store.c: open, recovery, maintenance, reads; store_append.c: writes;
 * snapshot.c: head snapshots; block.c: blocks). Not for other modules. */
#ifndef MW_STORE_INTERNAL_H
#define MW_STORE_INTERNAL_H

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
    /* What the latest snapshot covers. */
    uint64_t snap_lsn;
    uint32_t snap_chunk_seq; /* chunk files before it are sealed and covered */
    /* Blocks, oldest first; readers hold a reference while they read. */
    pthread_mutex_t blocks_mu;
    mw_block **blocks;
    size_t nblocks;
    uint64_t next_block_seq;
    pthread_mutex_t maint_mu; /* one snapshot or compaction at a time */
    /* maintenance thread */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t bg_mu;
    pthread_cond_t bg_cv;
    int stopping;
    /* counters */
    _Atomic uint64_t refused[8];
    _Atomic uint64_t samples_appended, samples_duplicate, series_created;
    uint64_t replayed_records, wal_bytes_cut;
    uint64_t unknown_series_samples; /* replay: samples of series never defined */
    int64_t last_snapshot_ms;
};

/* Paths inside the data folder. */
void mw_store_path(const mw_store *s, const char *name, char *out, size_t size);

/* snapshot.c */
int mw_snapshot_write(mw_store *s);
/* 0 restored, 1 no snapshot, -1 unusable (reported, ignored). */
int mw_snapshot_load(mw_store *s, uint64_t *lsn, uint32_t *chunk_seq, uint64_t *chunk_size);

/* store_append.c: apply one WAL record during replay. */
int mw_store_replay_record(void *arg, uint8_t type, const uint8_t *p, size_t n);

#endif
