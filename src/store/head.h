/* head.h - the in-memory head of the store: series, postings, open chunks.
 *
 * Every active series lives here with its label set (label-pair ids), the
 * Gorilla state of its open chunk and the bytes of that chunk. A chunk that
 * reaches MW_HEAD_CHUNK_BYTES is cut: written to the head's chunk files
 * (append-only, read back with pread when queried) and linked from the
 * series by reference, so that memory per series stays small and constant
 * however long a series lives. Chunk files are later compacted into blocks.
 *
 * Not thread-safe: the store serialises access (one writer, or readers). */
#ifndef MW_HEAD_H
#define MW_HEAD_H

#include "../core/snapshot.h"
#include "gorilla.h"
#include "index.h"
#include "symtab.h"

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Open chunks are cut at this size. Small enough that the open chunk of a
 * million series fits the memory budget (docs/store.md); blocks re-encode
 * the small chunks into large ones. */
#define MW_HEAD_CHUNK_BYTES 128
/* Chunk files rotate at this size. */
#define MW_CHUNK_FILE_MAX (256u << 20)

/* MW_SERIES_OWN: the agent appends its own samples to the series
 * (mw_store_append_snapshot), so remote writers may not; kept in the head
 * snapshot with the other flags. */
enum { MW_SERIES_LIVE = 1, MW_SERIES_HAS_LAST = 2, MW_SERIES_OWN = 4 };

typedef struct mw_series {
    uint8_t *chunk;     /* open chunk bytes (NULL when empty) */
    uint64_t last_ref;  /* newest chunk in a chunk file: seq << 32 | offset; 0 = none */
    mw_gorilla_enc enc; /* open chunk; t and vbits hold the last sample */
    uint32_t labels;    /* offset of the label-pair ids in the label pool */
    uint16_t chunk_cap; /* bytes allocated for chunk */
    uint8_t nlabels;
    uint8_t flags;
} mw_series;

/* A chunk record in a chunk file. */
typedef struct mw_chunk_hdr {
    uint32_t series;
    uint16_t n, nbytes;
    int64_t mint, maxt;
    uint64_t prev_ref;
} mw_chunk_hdr;
#define MW_CHUNK_HDR_SIZE 32

typedef struct mw_postings {
    uint32_t *ids;
    uint32_t n, cap;
} mw_postings;

typedef struct mw_head {
    mw_symtab sym;
    mw_series **slabs;
    uint32_t nslabs;
    uint32_t next_id; /* ids are never reused */
    uint32_t nlive;
    uint64_t *slots; /* series hash index: hash32 << 32 | (id + 1) */
    uint32_t nslots;
    mw_postings *post; /* by label pair id */
    uint32_t post_cap;
    uint32_t **lpool; /* label pool pieces */
    uint32_t nlpool, lpos;
    /* tenant label: per-value series counts */
    uint32_t tenant_name; /* symbol, or UINT32_MAX when no tenant label */
    uint32_t *tenant_count;
    uint32_t tenant_cap;
    /* chunk files */
    char chunk_dir[PATH_MAX];
    int fd;                /* active chunk file */
    uint32_t seq;          /* active file's sequence number */
    uint64_t size;         /* active file's size */
    uint32_t min_seq;      /* oldest chunk file still present */
    int *fds;              /* read descriptors by seq - min_seq (-1 = not open) */
    pthread_mutex_t fd_mu; /* readers share the descriptor cache */
    uint32_t nfds;
    /* accounting */
    uint64_t chunk_bytes; /* bytes allocated for open chunks */
    uint64_t chunks_cut, chunk_write_errors, samples;
    int chunk_errno; /* last chunk write error, 0 when the last one worked */
} mw_head;

/* tenant_label may be NULL or "". */
int mw_head_init(mw_head *h, const char *chunk_dir, const char *tenant_label);
void mw_head_free(mw_head *h);

static inline mw_series *mw_head_series(const mw_head *h, uint32_t id)
{
    return &h->slabs[id >> 12][id & 4095];
}
static inline const uint32_t *mw_head_labels(const mw_head *h, const mw_series *s)
{
    return h->lpool[s->labels >> 20] + (s->labels & 0xfffff);
}

/* The hash of a stored series recomputed from its strings, as
 * mw_labels_hash computes it (index growth, snapshots). */
uint64_t mw_head_series_hash(const mw_head *h, const mw_series *s);

/* Hash of a label set (names and values), the key of the series index. */
uint64_t mw_labels_hash(const mw_label *labels, size_t n);
/* Find the series with exactly these labels (sorted by name). */
int mw_head_lookup(const mw_head *h, const mw_label *labels, size_t n, uint64_t hash, uint32_t *id);
/* Add a series. id is UINT32_MAX for a new id, or the id to restore (WAL
 * replay, snapshot); returns the id. Labels sorted by name, unique. */
uint32_t mw_head_create(mw_head *h, const mw_label *labels, size_t n, uint64_t hash, uint32_t id);
/* Tenant value symbol of a series' labels (UINT32_MAX when none). */
uint32_t mw_head_tenant_of(const mw_head *h, const mw_label *labels, size_t n);

/* Whether (t, v) may follow the series' last sample: 0 append, 1 an exact
 * duplicate (skip), -1 out of order, -2 same timestamp with another value. */
int mw_head_check(const mw_series *s, int64_t t, double v);
/* Append a sample that mw_head_check accepted (0). */
void mw_head_append(mw_head *h, uint32_t id, int64_t t, double v);
/* Write every open chunk with samples to the chunk files (compaction). */
int mw_head_cut_all(mw_head *h);

/* Selection and reading. */
extern const mw_index_ops mw_head_index_ops;
/* Samples of series id with mint <= t <= maxt appended to (t, v) arrays;
 * returns 0, or -1 when more than max would be needed. */
typedef struct mw_samples {
    int64_t *t;
    double *v;
    size_t n, cap, max;
    size_t damaged; /* chunks skipped for failing their checks (queries warn) */
} mw_samples;
int mw_samples_push(mw_samples *s, int64_t t, double v);
/* One series on its own (a pread per chunk); queries use mw_head_read_batch. */
int mw_head_read(mw_head *h, uint32_t id, int64_t mint, int64_t maxt, mw_samples *out);
/* Samples of series ids[0..n) in [mint, maxt], read together in chunk-file
 * order (head_read.c): per series i exact-size arrays t[i], v[i] of cnt[i]
 * samples (left as they are for a series without samples). *total is shared
 * with concurrent callers (atomic) and counts against max (0 = no limit);
 * *damaged counts the chunk records skipped for failing their checksum.
 * Returns 0, or -1 once more than max samples would be needed. */
int mw_head_read_batch(mw_head *h, const uint32_t *ids, size_t n, int64_t mint, int64_t maxt,
                       size_t max, size_t *total, int64_t **t, double **v, size_t *cnt,
                       size_t *damaged);

/* Chunk files. */
int mw_head_chunks_open(mw_head *h, uint32_t active_seq, uint64_t active_size);
int mw_head_chunks_rotate(mw_head *h);
/* Chunk files before seq are gone (compacted into a block). */
void mw_head_forget_files_before(mw_head *h, uint32_t seq);
int mw_head_chunk_read(mw_head *h, uint64_t ref, mw_chunk_hdr *hdr, uint8_t *buf, size_t bufsize);
/* Read descriptor of chunk file seq (owned by the head), or -1. */
int mw_head_read_fd(mw_head *h, uint32_t seq);
/* Parse a chunk record at p (n bytes available): 0 and the header, or -1. */
int mw_chunk_parse(const uint8_t *p, size_t n, mw_chunk_hdr *hdr);
/* Size in bytes at which the open chunk of series id is cut. */
uint32_t mw_head_cut_size(const mw_series *s, uint32_t id);
/* Resize the open-chunk buffer of s to cap bytes (0 frees it). */
void mw_head_chunk_resize(mw_head *h, mw_series *s, size_t cap);
/* Memory held by the head, bytes (self-metrics). */
size_t mw_head_memory(const mw_head *h);

#endif
