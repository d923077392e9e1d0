/* wal.h - the store's write-ahead log with group commit.
 *
 * Records are appended to an in-memory buffer under the store's lock (cheap)
 * and made durable by whichever waiting writer gets there first: it writes
 * everything buffered so far with one write() and one fdatasync() while the
 * others wait, so concurrent writers share each fsync (group commit). A
 * writer is told its records are durable only after that fsync returned.
 *
 * Positions are LSNs: bytes of records ever appended. Segments are files
 * named by the LSN of their first record (16 hex digits) that start with an
 * 8-byte magic; each record is [u32 length][u32 crc32][u8 type][payload],
 * little-endian, crc over type and payload. A segment rotates at
 * MW_WAL_SEGMENT_MAX (or the size given to mw_wal_open). When a write or
 * fsync fails (disk full), the file is cut back to its last durable size,
 * the bytes stay buffered for a retry, and the waiters get the error. */
#ifndef MW_WAL_H
#define MW_WAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MW_WAL_SEGMENT_MAX (64u << 20)
#define MW_WAL_MAX_RECORD (256u << 20)

typedef struct mw_wal mw_wal;

/* Start writing a new segment at start_lsn (the end of what replay found).
 * Segments rotate at segment_bytes (0 = MW_WAL_SEGMENT_MAX). */
mw_wal *mw_wal_open(const char *dir, uint64_t start_lsn, int sync, uint64_t segment_bytes,
                    int *err);
void mw_wal_close(mw_wal *w); /* flushes what is buffered */
/* Buffer one record; returns the LSN just past it. */
uint64_t mw_wal_append(mw_wal *w, uint8_t type, const void *payload, size_t len);
/* Block until everything up to lsn is durable: 0, or a negative errno. */
int mw_wal_wait(mw_wal *w, uint64_t lsn);
/* Make everything buffered durable (background flushes). */
int mw_wal_flush(mw_wal *w);
/* Where the log stands, read in one go under its lock. */
typedef struct mw_wal_status {
    int error;         /* the last write error (negative errno) while it persists, else 0 */
    uint64_t appended; /* LSN of the last record appended */
    size_t buffered;   /* bytes appended and not yet written */
} mw_wal_status;
mw_wal_status mw_wal_status_of(mw_wal *w);
/* Buffered bytes at which appenders that do not wait ask for a flush. */
#define MW_WAL_EARLY_FLUSH (256u << 10)
/* Start a new segment at lsn, the LSN past the last buffered record (call
 * it with the appends held off): the next flush ends the current segment
 * there, and mw_wal_flush does so even with nothing buffered. Then
 * mw_wal_truncate_before(lsn) can delete every segment before it. */
void mw_wal_cut_at(mw_wal *w, uint64_t lsn);
/* Delete segments that hold only records before lsn. */
void mw_wal_truncate_before(mw_wal *w, uint64_t lsn);

typedef struct mw_wal_stats {
    uint64_t fsyncs, bytes, write_errors, segments;
    uint64_t disk_bytes; /* size of the segments on disk */
} mw_wal_stats;
void mw_wal_get_stats(mw_wal *w, mw_wal_stats *out);

typedef struct mw_wal_replay_report {
    uint64_t records, bytes, segments;
    uint64_t cut_bytes;                      /* torn or corrupt bytes cut off */
    char cut_segment[64];                    /* the segment that was cut ("" when none) */
    uint64_t cut_offset;                     /* where */
    char reason[128];                        /* why */
    uint64_t skipped_records, skipped_bytes; /* damaged records skipped */
} mw_wal_replay_report;

/* Called for each record at or after from_lsn; a nonzero return stops. */
typedef int (*mw_wal_record_fn)(void *arg, uint8_t type, const uint8_t *p, size_t n);

/* Read every segment in order and hand over the records at or after
 * from_lsn. A record failing its checksum whose length still leads to a
 * valid record is skipped alone (one flipped byte loses one record); a
 * torn record, or one whose length leads nowhere valid, ends its segment:
 * the rest is cut off (the file truncated) and reported, never fatal. *end_lsn is where writing
 * resumes. Returns 0, or a negative errno when the folder cannot be read. */
int mw_wal_replay(const char *dir, uint64_t from_lsn, mw_wal_record_fn fn, void *arg,
                  uint64_t *end_lsn, mw_wal_replay_report *rep);
/* Parse records from a byte range (the replay's loop; the fuzz target).
 * Returns the number of bytes of whole, valid records. */
size_t mw_wal_parse(const uint8_t *p, size_t n, mw_wal_record_fn fn, void *arg, uint64_t *records,
                    char *reason, size_t reasonsize);

#endif
