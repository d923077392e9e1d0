/* queue.c - on-disk segment queue of a remote-write shard, see queue.h.
 *
 * Layout of a folder: NNNNNNNNNNNNNNNNNNNN.seg files (decimal sequence
 * numbers), each starting with an 8-byte magic, then records:
 *   u32 payload length | u32 samples | i64 newest timestamp (ms) |
 *   u32 CRC-32 of the 16 bytes before it and of the payload | payload
 * all little-endian; and "cursor": u64 segment | u64 offset | u32 CRC-32. */
#include "queue.h"
#include "../core/bytes.h"
#include "../core/log.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SEG_MAGIC "MWRWQ01\n"
#define SEG_HDR 8u
#define REC_HDR 20u
#define MAX_SEGMENTS 100000

typedef struct seg {
    uint64_t seq, bytes, samples;
} seg;

struct mw_rwq {
    pthread_mutex_t mu;
    char dir[4096];
    uint64_t capacity, seg_size;
    seg *segs;
    size_t nsegs, cap;
    int wfd; /* the last segment, appending */
    int rfd; /* the segment being read */
    uint64_t rfd_seq;
    uint64_t cur_seg, cur_off; /* first unacknowledged record */
    uint64_t head_consumed;    /* samples acknowledged in segment cur_seg */
    uint64_t gen;              /* bumped when the cursor is moved by a drop */
    uint64_t total_bytes, total_samples;
    uint64_t dropped_full, corrupt_bytes;
};

size_t mw_rwq_parse_record(const unsigned char *p, size_t n, uint32_t *nsamples, int64_t *max_ts,
                           const unsigned char **payload, uint32_t *len)
{
    if (n < REC_HDR) return 0;
    uint32_t l = mw_get_le32(p);
    if (l > MW_RWQ_MAX_RECORD || l > n - REC_HDR) return 0;
    uLong crc = crc32(0L, p, 16);
    crc = crc32(crc, p + REC_HDR, l);
    if ((uint32_t)crc != mw_get_le32(p + 16)) return 0;
    *nsamples = mw_get_le32(p + 4);
    *max_ts = (int64_t)mw_get_le64(p + 8);
    *payload = p + REC_HDR;
    *len = l;
    return REC_HDR + (size_t)l;
}

static void seg_path(const mw_rwq *q, uint64_t seq, char *out, size_t n)
{
    snprintf(out, n, "%s/%020llu.seg", q->dir, (unsigned long long)seq);
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

static int mkdirs(const char *path)
{
    char tmp[4096];
    if (mw_strlcpy(tmp, path, sizeof(tmp)) >= sizeof(tmp)) return -ENAMETOOLONG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0700) < 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST) return -errno;
    return 0;
}

static int read_all(int fd, unsigned char *p, size_t n, off_t off)
{
    while (n) {
        ssize_t r = pread(fd, p, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Read the record at off of fd (file size fsize) into buf; returns its
 * total length or 0 when it is missing or invalid. */
static size_t read_record(int fd, uint64_t off, uint64_t fsize, mw_buf *buf, uint32_t *nsamples,
                          int64_t *max_ts)
{
    unsigned char hdr[REC_HDR];
    if (fsize < off + REC_HDR || read_all(fd, hdr, REC_HDR, (off_t)off) < 0) return 0;
    uint32_t l = mw_get_le32(hdr);
    if (l > MW_RWQ_MAX_RECORD || fsize - off - REC_HDR < l) return 0;
    mw_buf_clear(buf);
    if (mw_buf_reserve(buf, REC_HDR + (size_t)l) < 0) return 0;
    memcpy(buf->data, hdr, REC_HDR);
    if (read_all(fd, (unsigned char *)buf->data + REC_HDR, l, (off_t)(off + REC_HDR)) < 0) return 0;
    buf->len = REC_HDR + l;
    const unsigned char *payload;
    uint32_t plen;
    return mw_rwq_parse_record((const unsigned char *)buf->data, buf->len, nsamples, max_ts,
                               &payload, &plen);
}

/* Validate a segment at open: count its samples, cut a bad tail. */
static int scan_segment(mw_rwq *q, seg *s)
{
    char path[4200];
    seg_path(q, s->seq, path, sizeof(path));
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    unsigned char magic[SEG_HDR];
    if (fstat(fd, &st) < 0 || st.st_size < (off_t)SEG_HDR || read_all(fd, magic, SEG_HDR, 0) < 0 ||
        memcmp(magic, SEG_MAGIC, SEG_HDR) != 0) {
        mw_log(MW_LOG_WARN, "remote-write", "%s: not a queue segment, removed (%lld bytes)", path,
               (long long)(fstat(fd, &st) == 0 ? st.st_size : 0));
        q->corrupt_bytes += fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        close(fd);
        unlink(path);
        return 1;
    }
    uint64_t fsize = (uint64_t)st.st_size, off = SEG_HDR;
    mw_buf rec;
    mw_buf_init(&rec, MW_RWQ_MAX_RECORD + REC_HDR);
    s->samples = 0;
    for (;;) {
        uint32_t ns;
        int64_t ts;
        size_t n = read_record(fd, off, fsize, &rec, &ns, &ts);
        if (!n) break;
        s->samples += ns;
        off += n;
    }
    mw_buf_free(&rec);
    if (off < fsize) {
        mw_log(MW_LOG_WARN, "remote-write",
               "%s: torn or corrupt data at offset %llu, %llu bytes cut off", path,
               (unsigned long long)off, (unsigned long long)(fsize - off));
        q->corrupt_bytes += fsize - off;
        if (ftruncate(fd, (off_t)off) < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        (void)fdatasync(fd);
    }
    s->bytes = off;
    close(fd);
    return 0;
}

static int seg_cmp(const void *a, const void *b)
{
    uint64_t x = ((const seg *)a)->seq, y = ((const seg *)b)->seq;
    return x < y ? -1 : x > y;
}

static int new_segment(mw_rwq *q, uint64_t seq)
{
    char path[4200];
    seg_path(q, seq, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    if (write(fd, SEG_MAGIC, SEG_HDR) != (ssize_t)SEG_HDR) {
        int e = errno ? errno : EIO;
        close(fd);
        unlink(path);
        return -e;
    }
    fsync_dir(q->dir);
    if (q->wfd >= 0) {
        (void)fdatasync(q->wfd);
        close(q->wfd);
    }
    q->wfd = fd;
    if (q->nsegs == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 16;
        q->segs = mw_xrealloc(q->segs, q->cap * sizeof(seg));
    }
    q->segs[q->nsegs++] = (seg){seq, SEG_HDR, 0};
    q->total_bytes += SEG_HDR;
    return 0;
}

static void persist_cursor(mw_rwq *q)
{
    unsigned char b[20];
    mw_put_le64(b, q->cur_seg);
    mw_put_le64(b + 8, q->cur_off);
    mw_put_le32(b + 16, (uint32_t)crc32(0L, b, 16));
    char tmp[4200], path[4200];
    snprintf(tmp, sizeof(tmp), "%s/cursor.tmp", q->dir);
    snprintf(path, sizeof(path), "%s/cursor", q->dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    int ok = write(fd, b, sizeof(b)) == (ssize_t)sizeof(b);
    close(fd);
    if (ok) rename(tmp, path);
}

/* Put the cursor at the start of segment index i. */
static void cursor_to(mw_rwq *q, size_t i)
{
    q->cur_seg = q->segs[i].seq;
    q->cur_off = SEG_HDR;
    q->head_consumed = 0;
}

/* Remove segment 0 (never the one being written). */
static void drop_head(mw_rwq *q, int count_dropped)
{
    seg s = q->segs[0];
    uint64_t unsent = s.samples;
    if (q->cur_seg == s.seq)
        unsent -= q->head_consumed;
    else if (q->cur_seg > s.seq)
        unsent = 0; /* already acknowledged */
    if (count_dropped) q->dropped_full += unsent;
    char path[4200];
    seg_path(q, s.seq, path, sizeof(path));
    unlink(path);
    if (q->rfd >= 0 && q->rfd_seq == s.seq) {
        close(q->rfd);
        q->rfd = -1;
    }
    memmove(q->segs, q->segs + 1, (q->nsegs - 1) * sizeof(seg));
    q->nsegs--;
    q->total_bytes -= s.bytes;
    q->total_samples -= s.samples;
    if (q->cur_seg <= s.seq) {
        cursor_to(q, 0);
        q->gen++;
    }
}

static void load_cursor(mw_rwq *q)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/cursor", q->dir);
    cursor_to(q, 0);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    unsigned char b[20];
    int ok =
        read_all(fd, b, sizeof(b), 0) == 0 && mw_get_le32(b + 16) == (uint32_t)crc32(0L, b, 16);
    close(fd);
    if (!ok) {
        mw_log(MW_LOG_WARN, "remote-write", "%s: unreadable, sending the queue from its start",
               path);
        return;
    }
    uint64_t cseg = mw_get_le64(b), coff = mw_get_le64(b + 8);
    size_t i;
    for (i = 0; i < q->nsegs; i++)
        if (q->segs[i].seq >= cseg) break;
    if (i == q->nsegs) { /* everything was acknowledged */
        while (q->nsegs > 1)
            drop_head(q, 0);
        if (q->nsegs) {
            q->cur_seg = q->segs[0].seq;
            q->cur_off = q->segs[0].bytes;
            q->head_consumed = q->segs[0].samples;
        }
        return;
    }
    while (i-- > 0)
        drop_head(q, 0); /* acknowledged before the restart */
    if (q->segs[0].seq != cseg) return;
    /* Walk to the offset so that it is a record boundary and the consumed
     * samples are known; anything else means a damaged cursor: resend. */
    char sp[4200];
    seg_path(q, cseg, sp, sizeof(sp));
    fd = open(sp, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    mw_buf rec;
    mw_buf_init(&rec, MW_RWQ_MAX_RECORD + REC_HDR);
    uint64_t off = SEG_HDR, consumed = 0;
    while (off < coff) {
        uint32_t ns;
        int64_t ts;
        size_t n = read_record(fd, off, q->segs[0].bytes, &rec, &ns, &ts);
        if (!n) break;
        off += n;
        consumed += ns;
    }
    mw_buf_free(&rec);
    close(fd);
    if (off == coff) {
        q->cur_off = coff;
        q->head_consumed = consumed;
    }
}

int mw_rwq_open(const char *dir, uint64_t capacity, uint64_t segment_size, mw_rwq **out, char *err,
                size_t errsize)
{
    int rc = mkdirs(dir);
    if (rc < 0) {
        snprintf(err, errsize, "%s: cannot create: %s", dir, strerror(-rc));
        return -1;
    }
    mw_rwq *q = mw_xcalloc(1, sizeof(*q));
    pthread_mutex_init(&q->mu, NULL);
    mw_strlcpy(q->dir, dir, sizeof(q->dir));
    q->capacity = capacity < 4 * SEG_HDR ? 4 * SEG_HDR : capacity;
    if (!segment_size) {
        segment_size = capacity / 8;
        if (segment_size < (64u << 10)) segment_size = 64u << 10;
        if (segment_size > (32u << 20)) segment_size = 32u << 20;
    }
    q->seg_size = segment_size;
    q->wfd = q->rfd = -1;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errsize, "%s: cannot read: %s", dir, strerror(errno));
        mw_rwq_close(q);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        unsigned long long seq = strtoull(e->d_name, &end, 10);
        if (end == e->d_name || strcmp(end, ".seg") != 0 || end - e->d_name != 20) continue;
        if (q->nsegs >= MAX_SEGMENTS) break;
        if (q->nsegs == q->cap) {
            q->cap = q->cap ? q->cap * 2 : 16;
            q->segs = mw_xrealloc(q->segs, q->cap * sizeof(seg));
        }
        q->segs[q->nsegs++] = (seg){seq, 0, 0};
    }
    closedir(d);
    if (q->nsegs) qsort(q->segs, q->nsegs, sizeof(seg), seg_cmp);
    for (size_t i = 0; i < q->nsegs;) {
        rc = scan_segment(q, &q->segs[i]);
        if (rc < 0) {
            snprintf(err, errsize, "%s: segment %llu: %s", dir, (unsigned long long)q->segs[i].seq,
                     strerror(-rc));
            mw_rwq_close(q);
            return -1;
        }
        if (rc == 1) { /* removed */
            memmove(&q->segs[i], &q->segs[i + 1], (q->nsegs - i - 1) * sizeof(seg));
            q->nsegs--;
            continue;
        }
        q->total_bytes += q->segs[i].bytes;
        q->total_samples += q->segs[i].samples;
        i++;
    }
    if (q->nsegs) {
        load_cursor(q);
        char path[4200];
        seg_path(q, q->segs[q->nsegs - 1].seq, path, sizeof(path));
        q->wfd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (q->wfd < 0) {
            snprintf(err, errsize, "%s: %s", path, strerror(errno));
            mw_rwq_close(q);
            return -1;
        }
    } else {
        rc = new_segment(q, 1);
        if (rc < 0) {
            snprintf(err, errsize, "%s: cannot create a segment: %s", dir, strerror(-rc));
            mw_rwq_close(q);
            return -1;
        }
        cursor_to(q, 0);
    }
    *out = q;
    return 0;
}

void mw_rwq_close(mw_rwq *q)
{
    if (!q) return;
    if (q->wfd >= 0) {
        (void)fdatasync(q->wfd);
        close(q->wfd);
    }
    if (q->rfd >= 0) close(q->rfd);
    pthread_mutex_destroy(&q->mu);
    free(q->segs);
    free(q);
}

int mw_rwq_append(mw_rwq *q, const void *payload, size_t len, uint32_t nsamples, int64_t max_ts,
                  char *err, size_t errsize)
{
    uint64_t need = REC_HDR + (uint64_t)len;
    pthread_mutex_lock(&q->mu);
    if (len > MW_RWQ_MAX_RECORD || need + SEG_HDR > q->capacity) {
        q->dropped_full += nsamples;
        pthread_mutex_unlock(&q->mu);
        snprintf(err, errsize, "a record of %zu bytes is larger than the queue allows", len);
        return -1;
    }
    seg *tail = &q->segs[q->nsegs - 1];
    if (tail->bytes > SEG_HDR && tail->bytes + need > q->seg_size) {
        int rc = new_segment(q, tail->seq + 1);
        if (rc < 0) {
            q->dropped_full += nsamples;
            pthread_mutex_unlock(&q->mu);
            snprintf(err, errsize, "%s: cannot create a segment: %s", q->dir, strerror(-rc));
            return -1;
        }
    }
    while (q->total_bytes + need > q->capacity && q->nsegs > 1)
        drop_head(q, 1);
    tail = &q->segs[q->nsegs - 1];
    unsigned char hdr[REC_HDR];
    mw_put_le32(hdr, (uint32_t)len);
    mw_put_le32(hdr + 4, nsamples);
    mw_put_le64(hdr + 8, (uint64_t)max_ts);
    uLong crc = crc32(0L, hdr, 16);
    crc = crc32(crc, payload, (uInt)len);
    mw_put_le32(hdr + 16, (uint32_t)crc);
    struct iovec_like {
        const void *p;
        size_t n;
    } parts[2] = {{hdr, REC_HDR}, {payload, len}};
    /* One buffer, one write: a record is never interleaved or half-visible
     * to the reader, which holds the same lock. */
    mw_buf w;
    mw_buf_init(&w, 0);
    for (int i = 0; i < 2; i++)
        mw_buf_append(&w, parts[i].p, parts[i].n);
    ssize_t wr = write(q->wfd, w.data, w.len);
    mw_buf_free(&w);
    if (wr != (ssize_t)need) {
        int e = wr < 0 ? errno : ENOSPC;
        if (wr > 0 && ftruncate(q->wfd, (off_t)tail->bytes) < 0) {
            /* The torn record will be cut off at the next open. */
        }
        q->dropped_full += nsamples;
        pthread_mutex_unlock(&q->mu);
        snprintf(err, errsize, "%s: write failed: %s", q->dir, strerror(e));
        return -1;
    }
    tail->bytes += need;
    tail->samples += nsamples;
    q->total_bytes += need;
    q->total_samples += nsamples;
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int mw_rwq_sync(mw_rwq *q)
{
    pthread_mutex_lock(&q->mu);
    int rc = q->wfd >= 0 ? fdatasync(q->wfd) : 0;
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static int reader_fd(mw_rwq *q, uint64_t seq)
{
    if (q->rfd >= 0 && q->rfd_seq == seq) return q->rfd;
    if (q->rfd >= 0) close(q->rfd);
    char path[4200];
    seg_path(q, seq, path, sizeof(path));
    q->rfd = open(path, O_RDONLY | O_CLOEXEC);
    q->rfd_seq = seq;
    return q->rfd;
}

size_t mw_rwq_peek(mw_rwq *q, uint64_t max_samples, size_t max_bytes, mw_buf *out, mw_rwq_batch *b)
{
    mw_buf_clear(out);
    memset(b, 0, sizeof(*b));
    mw_buf rec;
    mw_buf_init(&rec, MW_RWQ_MAX_RECORD + REC_HDR);
    pthread_mutex_lock(&q->mu);
    b->gen = q->gen;
    b->end_seg = q->cur_seg;
    b->end_off = q->cur_off;
    size_t i = 0;
    while (i < q->nsegs && q->segs[i].seq < q->cur_seg)
        i++;
    while (i < q->nsegs) {
        seg *s = &q->segs[i];
        if (b->end_off >= s->bytes) {
            if (i + 1 == q->nsegs) break; /* the tail: nothing more yet */
            if (!b->records) {
                /* The cursor is at the end of a finished segment: retire
                 * it now (nothing is in flight). */
                drop_head(q, 0);
                b->gen = q->gen;
                b->end_seg = q->cur_seg;
                b->end_off = q->cur_off;
                i = 0;
                continue;
            }
            i++;
            b->end_seg = q->segs[i].seq;
            b->end_off = SEG_HDR;
            b->end_seg_samples = 0;
            continue;
        }
        int fd = reader_fd(q, s->seq);
        uint32_t ns;
        int64_t ts;
        size_t n = fd < 0 ? 0 : read_record(fd, b->end_off, s->bytes, &rec, &ns, &ts);
        if (!n) {
            if (b->records) break; /* deal with it as the first record next time */
            /* Damaged after it was validated (disk error): skip the rest. */
            mw_log(MW_LOG_WARN, "remote-write", "%s: segment %llu unreadable at %llu, skipped",
                   q->dir, (unsigned long long)s->seq, (unsigned long long)b->end_off);
            q->corrupt_bytes += s->bytes - b->end_off;
            q->cur_off = b->end_off = s->bytes;
            q->head_consumed = s->samples;
            continue;
        }
        if (b->records && (b->samples + ns > max_samples || out->len + n - REC_HDR > max_bytes)) {
            b->full = 1;
            break;
        }
        mw_buf_append(out, rec.data + REC_HDR, n - REC_HDR);
        b->records++;
        b->samples += ns;
        b->end_seg_samples += ns;
        if (b->records == 1 || ts > b->max_ts) b->max_ts = ts;
        b->end_off += n;
    }
    pthread_mutex_unlock(&q->mu);
    mw_buf_free(&rec);
    return b->records;
}

void mw_rwq_ack(mw_rwq *q, const mw_rwq_batch *b)
{
    pthread_mutex_lock(&q->mu);
    if (b->gen == q->gen &&
        (b->end_seg > q->cur_seg || (b->end_seg == q->cur_seg && b->end_off > q->cur_off))) {
        q->head_consumed =
            b->end_seg == q->cur_seg ? q->head_consumed + b->end_seg_samples : b->end_seg_samples;
        q->cur_seg = b->end_seg;
        q->cur_off = b->end_off;
        while (q->nsegs > 1 && q->segs[0].seq < q->cur_seg)
            drop_head(q, 0);
        persist_cursor(q);
    }
    pthread_mutex_unlock(&q->mu);
}

void mw_rwq_get_stats(mw_rwq *q, mw_rwq_stats *st)
{
    pthread_mutex_lock(&q->mu);
    st->bytes = q->total_bytes;
    st->pending_samples = q->total_samples - q->head_consumed;
    st->segments = q->nsegs;
    st->dropped_full = q->dropped_full;
    st->corrupt_bytes = q->corrupt_bytes;
    pthread_mutex_unlock(&q->mu);
}
