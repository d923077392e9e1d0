/* diskstats.h - parser for /proc/diskstats (exposed for tests and fuzzing). */
#ifndef MW_DISKSTATS_H
#define MW_DISKSTATS_H

#include <stdint.h>

#define MW_DISK_NAME_MAX 64 /* the kernel's DISK_NAME_LEN is 32 */

typedef struct mw_diskstat {
    unsigned major, minor;
    char name[MW_DISK_NAME_MAX];
    uint64_t reads, reads_merged, read_sectors, read_ms;
    uint64_t writes, writes_merged, write_sectors, write_ms;
    uint64_t io_now, io_ms, weighted_io_ms;
    uint64_t discards, discards_merged, discard_sectors, discard_ms; /* nfields >= 15 */
    uint64_t flushes, flush_ms;                                      /* nfields >= 17 */
    int nfields; /* values after the name: 11 (< 4.18), 15 (4.18+), 17 (5.5+) */
} mw_diskstat;

/* Parse the line at *p and advance *p past it:
 *
 *   " 259  0 nvme0n1 81234 1203 9876543 40321 ... \n"
 *
 * Accepts 11 values after the name (kernels before 4.18: 14 fields in all),
 * 15 (discard counters, 4.18+: 18 fields) and 17 (flush counters, 5.5+: 20
 * fields), and more than 17 (a future kernel appending counters). Other
 * counts (a cut line) are malformed. Returns 1 with *out filled, 0 at the end
 * of the text, -1 for a malformed line (already skipped). Blank lines are
 * ignored. */
int mw_parse_diskstats_line(const char **p, mw_diskstat *out);

/* 1 when NAME is a whole disk worth reporting, 0 for a partition (sda1,
 * vda1, xvda1, nvme0n1p1, mmcblk0p1, nbd0p1, md0p1) or a virtual device that
 * only mirrors other I/O (loop*, ram*, zram*, fd*). dm-*, md*, sr*, nbd*
 * are whole devices. Decided from the name alone, as /proc/diskstats gives
 * nothing else. */
int mw_disk_is_whole(const char *name);

#endif
