/* queue.h - the bounded, crash-safe on-disk queue of one remote-write shard.
 *
 * Records (already encoded remote-write series) are appended to numbered
 * segment files in one folder and read back in order by one sender. Each
 * record carries its length, its sample count, its newest timestamp and a
 * CRC-32, so a torn or corrupt tail found at open is cut off (and reported)
 * instead of being sent or making the agent fail.
 *
 * Durability: mw_rwq_sync() fdatasync()s the segment being written; the
 * shipper calls it once per collection interval after enqueuing, so a crash
 * loses at most the interval being written. Segment creation fsyncs the
 * folder. The read position (file "cursor") is replaced atomically with
 * rename() after each acknowledged batch but not fsynced: after a power
 * loss a batch may be sent twice (receivers accept identical duplicates),
 * never skipped. Delivery is at least once.
 *
 * Bounds: the folder never holds more than `capacity` bytes; to make room,
 * whole segments are dropped oldest first and their unsent samples counted
 * (mw_rwq_stats.dropped_full). Memory does not grow with the queue. */
#ifndef MW_RWQ_H
#define MW_RWQ_H

#include "../core/buf.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mw_rwq mw_rwq;

#define MW_RWQ_MAX_RECORD (16u << 20)

typedef struct mw_rwq_stats {
    uint64_t bytes;           /* on disk, segment headers included */
    uint64_t pending_samples; /* queued and not acknowledged */
    uint64_t segments;
    uint64_t dropped_full;  /* samples dropped to make room */
    uint64_t corrupt_bytes; /* cut off at open or skipped while reading */
} mw_rwq_stats;

/* What mw_rwq_peek handed out, to acknowledge with mw_rwq_ack. */
typedef struct mw_rwq_batch {
    uint64_t records, samples;
    int64_t max_ts;
    uint64_t end_seg, end_off, end_seg_samples, gen;
    int full; /* stopped at a limit: more records are waiting */
} mw_rwq_batch;

/* Open (creating) the queue in dir. segment_size 0 = capacity/8, between
 * 64 KiB and 32 MiB. Returns 0 or -1 with a message. */
int mw_rwq_open(const char *dir, uint64_t capacity, uint64_t segment_size, mw_rwq **out, char *err,
                size_t errsize);
void mw_rwq_close(mw_rwq *q);

/* Append one record. Returns 0, or -1 when the record can never fit (its
 * samples are counted as dropped) or the disk refused it (errno-style
 * message logged by the caller via err). */
int mw_rwq_append(mw_rwq *q, const void *payload, size_t len, uint32_t nsamples, int64_t max_ts,
                  char *err, size_t errsize);
int mw_rwq_sync(mw_rwq *q);

/* Copy the oldest unacknowledged records, concatenated, into out (which is
 * cleared): at least one record when any is queued, then more while the
 * total stays within max_samples and max_bytes. Returns the number of
 * records (0 = empty). */
size_t mw_rwq_peek(mw_rwq *q, uint64_t max_samples, size_t max_bytes, mw_buf *out, mw_rwq_batch *b);
/* The batch was delivered (or given up): move past it. */
void mw_rwq_ack(mw_rwq *q, const mw_rwq_batch *b);

void mw_rwq_get_stats(mw_rwq *q, mw_rwq_stats *st);

/* Parse one record at p[0..n): returns its total length (header included)
 * and fills the fields, or 0 when there is no complete valid record. Used
 * by the reader and fuzzed on its own. */
size_t mw_rwq_parse_record(const unsigned char *p, size_t n, uint32_t *nsamples, int64_t *max_ts,
                           const unsigned char **payload, uint32_t *len);

#endif
