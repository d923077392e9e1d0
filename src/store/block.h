/* block.h - immutable block files, read through mmap.
 *
 * A block holds the chunks of many series over some time, re-encoded into
 * large Gorilla chunks, with its own symbol table, series table and
 * postings. Blocks are written once (to a temporary name, fsynced, renamed)
 * and never changed; compaction merges blocks into larger ones and retention
 * deletes whole blocks. File layout: docs/store.md. */
#ifndef MW_BLOCK_H
#define MW_BLOCK_H

#include "../core/snapshot.h"
#include "head.h"
#include "index.h"
#include "tscodec.h"

#include <stddef.h>
#include <stdint.h>

#define MW_BLOCK_MAX_SOURCES 16

/* What a chunk of a block holds (format 3 tags each chunk): raw samples,
 * or one aggregate of a downsampled block (downsample.c). COUNT, SUM, MIN
 * and MAX share their timestamps (each window's last sample); SUBSET holds
 * raw samples: each window's first and last, and those around counter resets
 * and NaNs. */
enum {
    MW_AGGR_RAW,
    MW_AGGR_COUNT,
    MW_AGGR_SUM,
    MW_AGGR_MIN,
    MW_AGGR_MAX,
    MW_AGGR_SUBSET,
    MW_AGGRS
};

typedef struct mw_block_meta {
    uint64_t seq;
    int64_t mint, maxt;
    uint64_t nseries, nchunks, nsamples;
    uint32_t level;
    uint32_t chunk_seq_min, chunk_seq_max; /* chunk files it was made from (level 1) */
    uint64_t size;                         /* bytes on disk */
    uint32_t version;                      /* block format */
    uint64_t kinds[MW_TSC_KINDS];          /* chunks per value encoding (writer only) */
    /* Format 3: the resolution of its samples (0: raw; else downsampled
     * aggregates, downsample.c) and the blocks it was made from (a merge's
     * inputs, or the raw block a downsampled one comes from). */
    int64_t resolution_ms;
    uint32_t nsources;
    uint64_t sources[MW_BLOCK_MAX_SOURCES];
} mw_block_meta;

/* The block format this build writes; it reads 1 (Gorilla chunks, before
 * the version was recorded) to this. 3 adds each chunk's aggregate tag, the
 * resolution and the source blocks. */
#define MW_BLOCK_FORMAT 3

typedef struct mw_block mw_block;

/* Open and check a block file; NULL with a reason, and errno ENOTSUP when
 * the block is of a newer format than this build reads (not corrupt: keep
 * it), EINVAL when it fails its checks. */
mw_block *mw_block_open(const char *path, char *err, size_t errsize);
/* The same over bytes in memory (the fuzz target); the bytes must outlive
 * the block. */
mw_block *mw_block_open_mem(const uint8_t *p, size_t n, char *err, size_t errsize);
void mw_block_ref(mw_block *b);
/* Drop a reference; the last one unmaps it, and deletes the file when
 * mw_block_doom() was called. */
void mw_block_unref(mw_block *b);
void mw_block_doom(mw_block *b);
const mw_block_meta *mw_block_get_meta(const mw_block *b);

extern const mw_index_ops mw_block_index_ops; /* ctx: mw_block * */
/* Labels of series id (strings point into the mapping). 0, or -1. */
int mw_block_labels(const mw_block *b, uint32_t id, mw_label *out, size_t cap, size_t *n);
/* Samples of series id in [mint, maxt]; 0, -1 over the limit, -2 corrupt. */
int mw_block_read(const mw_block *b, uint32_t id, int64_t mint, int64_t maxt, mw_samples *out);
/* The same for the chunks tagged aggr (MW_AGGR_*; blocks before format 3
 * hold raw chunks only). */
int mw_block_read_aggr(const mw_block *b, uint32_t id, int aggr, int64_t mint, int64_t maxt,
                       mw_samples *out);

/* The block's format version. */
uint32_t mw_block_version(const mw_block *b);
/* Each chunk of series id as stored (for `mlwatch store inspect`); -1 when
 * the series record is damaged. */
typedef void (*mw_block_chunk_fn)(void *arg, const uint8_t *p, size_t len, uint32_t n);
int mw_block_chunks(const mw_block *b, uint32_t id, mw_block_chunk_fn fn, void *arg);

/* Writing: series must come in increasing label order. */
typedef struct mw_block_writer mw_block_writer;
mw_block_writer *mw_block_writer_new(const char *path, int *err);
int mw_block_writer_add(mw_block_writer *w, const mw_label *labels, size_t n, const int64_t *t,
                        const double *v, size_t nsamples);
/* A series of several streams (a downsampled block's aggregates). */
typedef struct mw_block_stream {
    int aggr; /* MW_AGGR_* */
    const int64_t *t;
    const double *v;
    size_t n;
} mw_block_stream;
int mw_block_writer_add_streams(mw_block_writer *w, const mw_label *labels, size_t n,
                                const mw_block_stream *st, size_t nst);
/* Finish, fsync and rename the file to its final path. */
int mw_block_writer_finish(mw_block_writer *w, mw_block_meta *meta, const char *final_path);
void mw_block_writer_abort(mw_block_writer *w);

/* Compare label sets (name, then value, then length). */
int mw_labels_cmp(const mw_label *a, size_t na, const mw_label *b, size_t nb);

#endif
