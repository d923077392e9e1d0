/* diskstats.c - block device I/O counters from /proc/diskstats. */
#include "collector.h"
#include "diskstats.h"
#include "../core/parse.h"

#include <string.h>

#define DISK_MAX 4096 /* devices reported per cycle */

/* clang-format off */
MW_METRIC(READS, MW_COUNTER, "mlwatch_disk_reads_completed_total", "", "Reads completed by the device.");
MW_METRIC(WRITES, MW_COUNTER, "mlwatch_disk_writes_completed_total", "", "Writes completed by the device.");
MW_METRIC(READ_BYTES, MW_COUNTER, "mlwatch_disk_read_bytes_total", "bytes", "Bytes read from the device (512-byte sectors).");
MW_METRIC(WRITTEN_BYTES, MW_COUNTER, "mlwatch_disk_written_bytes_total", "bytes", "Bytes written to the device (512-byte sectors).");
MW_METRIC(READ_TIME, MW_COUNTER, "mlwatch_disk_read_time_seconds_total", "seconds", "Time spent on reads, summed over all reads (overlapping requests add up).");
MW_METRIC(WRITE_TIME, MW_COUNTER, "mlwatch_disk_write_time_seconds_total", "seconds", "Time spent on writes, summed over all writes (overlapping requests add up).");
MW_METRIC(IO_TIME, MW_COUNTER, "mlwatch_disk_io_time_seconds_total", "seconds", "Time during which the device had I/O in flight.");
MW_METRIC(IO_NOW, MW_GAUGE, "mlwatch_disk_io_now", "", "I/O requests currently in flight.");

MW_METRIC(READS_MERGED, MW_COUNTER, "mlwatch_disk_reads_merged_total", "", "Adjacent reads merged into one request.");
MW_METRIC(WRITES_MERGED, MW_COUNTER, "mlwatch_disk_writes_merged_total", "", "Adjacent writes merged into one request.");
MW_METRIC(IO_WEIGHTED, MW_COUNTER, "mlwatch_disk_io_time_weighted_seconds_total", "seconds", "I/O time weighted by the requests in flight (its rate is the average queue length).");
MW_METRIC(DISCARDS, MW_COUNTER, "mlwatch_disk_discards_completed_total", "", "Discards (TRIM) completed by the device (Linux 4.18+).");
MW_METRIC(DISCARDS_MERGED, MW_COUNTER, "mlwatch_disk_discards_merged_total", "", "Adjacent discards merged into one request.");
MW_METRIC(DISCARDED_BYTES, MW_COUNTER, "mlwatch_disk_discarded_bytes_total", "bytes", "Bytes discarded (512-byte sectors).");
MW_METRIC(DISCARD_TIME, MW_COUNTER, "mlwatch_disk_discard_time_seconds_total", "seconds", "Time spent on discards, summed over all discards.");
MW_METRIC(FLUSHES, MW_COUNTER, "mlwatch_disk_flush_requests_total", "", "Cache flush requests completed (Linux 5.5+).");
MW_METRIC(FLUSH_TIME, MW_COUNTER, "mlwatch_disk_flush_requests_time_seconds_total", "seconds", "Time spent on cache flushes.");
/* clang-format on */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!is_digit(*s)) return 0;
    return 1;
}

static int has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int mw_disk_is_whole(const char *name)
{
    static const char *const skipped[] = {"loop", "ram", "zram", "fd"};
    for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++)
        if (has_prefix(name, skipped[i])) return 0;
    /* SCSI, IDE, virtio and Xen disks: letters, then the partition number. */
    static const char *const lettered[] = {"sd", "hd", "vd", "xvd"};
    for (size_t i = 0; i < sizeof(lettered) / sizeof(lettered[0]); i++) {
        if (!has_prefix(name, lettered[i])) continue;
        const char *p = name + strlen(lettered[i]);
        if (*p < 'a' || *p > 'z') break;
        while (*p >= 'a' && *p <= 'z')
            p++;
        return !all_digits(p);
    }
    /* Devices whose names end in a digit write "p<N>" for partitions:
     * nvme0n1p1, mmcblk0p1, nbd0p1, md0p1, loop0p1. */
    size_t len = strlen(name);
    size_t i = len;
    while (i > 0 && is_digit(name[i - 1]))
        i--;
    if (i < len && i >= 2 && name[i - 1] == 'p' && is_digit(name[i - 2])) return 0;
    return 1;
}

static const char *line_end(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl ? nl : p + strlen(p);
}

static int parse_uint(const char **q, unsigned *out)
{
    uint64_t v;
    if (mw_parse_u64(q, &v) < 0 || v > 0xffffffffu) return -1;
    *out = (unsigned)v;
    return 0;
}

int mw_parse_diskstats_line(const char **p, mw_diskstat *out)
{
    const char *s = *p;
    for (;;) {
        if (!*s) {
            *p = s;
            return 0;
        }
        const char *end = line_end(s);
        *p = *end ? end + 1 : end;
        const char *q = s;
        mw_skip_blanks(&q);
        if (q == end) {
            s = *p;
            continue;
        }
        if (parse_uint(&q, &out->major) < 0 || (*q != ' ' && *q != '\t')) return -1;
        mw_skip_blanks(&q);
        if (parse_uint(&q, &out->minor) < 0 || (*q != ' ' && *q != '\t')) return -1;
        mw_skip_blanks(&q);
        const char *name = q;
        while (q < end && *q != ' ' && *q != '\t')
            q++;
        size_t nlen = (size_t)(q - name);
        if (nlen == 0 || nlen >= sizeof(out->name)) return -1;
        memcpy(out->name, name, nlen);
        out->name[nlen] = '\0';
        uint64_t v[17] = {0};
        int n = 0;
        for (;;) {
            mw_skip_blanks(&q);
            if (q == end) break;
            uint64_t x;
            if (mw_parse_u64(&q, &x) < 0) return -1;
            if (*q != ' ' && *q != '\t' && q != end) return -1;
            if (n < 17) v[n] = x;
            if (n < 1000) n++;
        }
        if (n != 11 && n != 15 && n < 17) return -1;
        out->nfields = n;
        out->reads = v[0];
        out->reads_merged = v[1];
        out->read_sectors = v[2];
        out->read_ms = v[3];
        out->writes = v[4];
        out->writes_merged = v[5];
        out->write_sectors = v[6];
        out->write_ms = v[7];
        out->io_now = v[8];
        out->io_ms = v[9];
        out->weighted_io_ms = v[10];
        out->discards = v[11];
        out->discards_merged = v[12];
        out->discard_sectors = v[13];
        out->discard_ms = v[14];
        out->flushes = v[15];
        out->flush_ms = v[16];
        return 1;
    }
}

static void diskstats_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/diskstats";
    const char *text = mw_collect_read(ctx, path, 0);
    if (!text) return;
    int rc;
    const char *p = text;
    size_t n = 0;
    mw_diskstat d;
    while ((rc = mw_parse_diskstats_line(&p, &d)) != 0) {
        if (rc < 0) {
            mw_collect_error(ctx, path, 0, "malformed line");
            continue;
        }
        if (!mw_disk_is_whole(d.name)) continue;
        if (n++ == DISK_MAX) {
            mw_collect_error(ctx, path, 0, "more than 4096 disks; the rest are not reported");
            break;
        }
        const char *dev = d.name;
        mw_emit(ctx->snap, &READS, (double)d.reads, "device", dev, MW_END);
        mw_emit(ctx->snap, &WRITES, (double)d.writes, "device", dev, MW_END);
        mw_emit(ctx->snap, &READ_BYTES, (double)d.read_sectors * 512.0, "device", dev, MW_END);
        mw_emit(ctx->snap, &WRITTEN_BYTES, (double)d.write_sectors * 512.0, "device", dev, MW_END);
        mw_emit(ctx->snap, &READ_TIME, (double)d.read_ms / 1000.0, "device", dev, MW_END);
        mw_emit(ctx->snap, &WRITE_TIME, (double)d.write_ms / 1000.0, "device", dev, MW_END);
        mw_emit(ctx->snap, &IO_TIME, (double)d.io_ms / 1000.0, "device", dev, MW_END);
        mw_emit(ctx->snap, &IO_NOW, (double)d.io_now, "device", dev, MW_END);
        mw_emit(ctx->snap, &READS_MERGED, (double)d.reads_merged, "device", dev, MW_END);
        mw_emit(ctx->snap, &WRITES_MERGED, (double)d.writes_merged, "device", dev, MW_END);
        mw_emit(ctx->snap, &IO_WEIGHTED, (double)d.weighted_io_ms / 1000.0, "device", dev, MW_END);
        if (d.nfields >= 15) {
            mw_emit(ctx->snap, &DISCARDS, (double)d.discards, "device", dev, MW_END);
            mw_emit(ctx->snap, &DISCARDS_MERGED, (double)d.discards_merged, "device", dev, MW_END);
            mw_emit(ctx->snap, &DISCARDED_BYTES, (double)d.discard_sectors * 512.0, "device", dev,
                    MW_END);
            mw_emit(ctx->snap, &DISCARD_TIME, (double)d.discard_ms / 1000.0, "device", dev, MW_END);
        }
        if (d.nfields >= 17) {
            mw_emit(ctx->snap, &FLUSHES, (double)d.flushes, "device", dev, MW_END);
            mw_emit(ctx->snap, &FLUSH_TIME, (double)d.flush_ms / 1000.0, "device", dev, MW_END);
        }
    }
}

const mw_collector mw_collector_diskstats = {
    .name = "diskstats",
    .help = "Whole-disk I/O counters from /proc/diskstats",
    .collect = diskstats_collect,
};
