/* series_memory.h - which series of the last round are gone in this one.
 *
 * Prometheus writes a staleness marker (a NaN with the bits
 * 0x7ff0000000000002) for every series a scrape no longer returns, so that
 * queries stop showing it at once instead of for the 5-minute lookback, and
 * forwards the markers through remote write. mlwatch's own series end the
 * same way (a container or an idle session ends, a process leaves the top
 * N): the store and each remote-write endpoint remember the series of the
 * last round here and write a marker for each one that is missing from the
 * next, so the local UI, the hub, VictoriaMetrics and Prometheus all stop
 * counting an ended container within one interval.
 *
 * A series is known by a 64-bit hash of its labels, which its owner computes
 * anyway (the store's series hash, the remote-write shard hash), and keeps a
 * byte string (mw_series_key_*: its labels, plus anything else the marker
 * needs, such as the remote-write shard) from the round it first appeared.
 * The memory holds one entry per series of the last round: it is bounded by
 * the size of one round. Not thread-safe: one owner (the agent's thread). */
#ifndef MW_SERIES_MEMORY_H
#define MW_SERIES_MEMORY_H

#include "buf.h"
#include "snapshot.h"

#include <stddef.h>
#include <stdint.h>

/* The staleness marker's bits (Prometheus's value.StaleNaN). */
#define MW_STALE_NAN_BITS 0x7ff0000000000002ULL
double mw_stale_nan(void);
int mw_is_stale_nan(double v);

typedef struct mw_series_entry mw_series_entry;

typedef struct mw_series_memory {
    mw_series_entry *pool; /* entries; an index stays valid while it lives */
    uint32_t npool, pool_cap, free_head, n;
    uint32_t *table; /* open addressing by hash: pool index + 1, 0 empty */
    uint32_t tslots;
    uint32_t *order, *seq; /* last round's and this round's entries, in order */
    uint32_t norder, order_cap, nseq, seq_cap, cursor;
    uint32_t round;    /* never 0: 0 marks a free entry */
    uint32_t last_new; /* pool index + 1 of the entry mw_series_memory_keep_key fills */
} mw_series_memory;

void mw_series_memory_init(mw_series_memory *m);
void mw_series_memory_destroy(mw_series_memory *m);

/* The series with this 64-bit hash of its labels is in this round. Returns
 * 1 when it was not in the last round: the caller then hands its key to
 * mw_series_memory_keep_key (the labels its marker will need; built only
 * for new series). A round in the same order as the last costs one
 * sequential comparison per series; a series out of place, one probe of
 * the table. Series are told
 * apart by the hash alone: two of n series share one with a chance of about
 * n^2 / 2^65 (1 in 3.7e11 for 10,000), and then the end of one of them
 * would go unmarked (it ages out after the lookback, as before). */
int mw_series_memory_mark(mw_series_memory *m, uint64_t hash);
void mw_series_memory_keep_key(mw_series_memory *m, const void *key, size_t len);

/* Call ended(arg, key, len) for every series of the last round that was not
 * marked in this one, forget them, and begin the next round. Returns how
 * many ended. */
size_t mw_series_memory_sweep(mw_series_memory *m,
                              void (*ended)(void *arg, const char *key, size_t len), void *arg);

/* Keys as label lists: "name\0value\0" for each label, in the order given. */
void mw_series_key_add(mw_buf *key, const char *name, const char *value);
/* The labels of key[0..len) (pointers into key), at most max; returns how
 * many. */
size_t mw_series_key_labels(const char *key, size_t len, mw_label *out, size_t max);

#endif
