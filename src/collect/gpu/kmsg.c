/* kmsg.c - reading the kernel log (/dev/kmsg) without blocking (xid.h).
 *
 * /dev/kmsg answers one record per read(2); opened, it starts at the oldest
 * record the ring still holds, so the records logged before the agent
 * started come first (marked before_start until the first read that finds
 * nothing left). When the kernel overwrites records we had not read yet,
 * read(2) fails once with EPIPE and then goes on with the oldest record
 * left: the jump of the sequence numbers is how many were lost. Under
 * --root the path is a regular file in the same format (test fixtures): a
 * read then returns many records, split here at newlines, and the end of
 * the file is "nothing left"; records appended later are read later. */
#include "xid.h"
#include "../../core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KMSG_READ 16384 /* a record is at most 8 KiB (the kernel's buffer advice) */
#define KMSG_LINE_MAX 8192

int mw_kmsg_open(mw_kmsg_reader *r, const mw_hostfs *host, const char *path, char *why,
                 size_t whysize)
{
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    r->read_fn = read;
    const char *rel = path;
    while (*rel == '/')
        rel++;
    int fd = host ? openat(host->rootfd, rel, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                  : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whysize, "%s: %s%s", path, strerror(errno),
                 errno == EPERM || errno == EACCES
                     ? " (reading the kernel log needs CAP_SYSLOG when kernel.dmesg_restrict=1)"
                     : "");
        return -1;
    }
    r->fd = fd;
    r->pending = mw_xcalloc(1, KMSG_LINE_MAX);
    return 0;
}

void mw_kmsg_close(mw_kmsg_reader *r)
{
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    free(r->pending);
    r->pending = NULL;
}

/* One line (a record header, or a continuation " KEY=value" skipped). */
static void one_line(mw_kmsg_reader *r, const char *line, size_t len, mw_kmsg_fn fn, void *ctx)
{
    if (len == 0 || line[0] == ' ') return;
    mw_kmsg_record rec;
    if (mw_kmsg_parse_record(line, len, &rec) < 0) {
        r->malformed++;
        return;
    }
    if (r->have_seq && rec.seq > r->next_seq) r->lost += rec.seq - r->next_seq;
    r->have_seq = 1;
    r->next_seq = rec.seq + 1;
    r->records++;
    fn(ctx, &rec, !r->caught_up);
}

long mw_kmsg_drain(mw_kmsg_reader *r, size_t max, mw_kmsg_fn fn, void *ctx, char *why,
                   size_t whysize)
{
    if (r->fd < 0) return 0;
    char buf[KMSG_READ];
    long delivered = 0;
    while ((size_t)delivered < max) {
        ssize_t got = r->read_fn(r->fd, buf, sizeof(buf));
        if (got < 0) {
            if (errno == EINTR) continue;
            if (errno == EPIPE) { /* overwritten: the next read has the oldest left */
                r->overruns++;
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                r->caught_up = 1;
                break;
            }
            snprintf(why, whysize, "reading the kernel log: %s", strerror(errno));
            return -1;
        }
        if (got == 0) { /* a regular file's end */
            r->caught_up = 1;
            break;
        }
        uint64_t before = r->records;
        const char *p = buf, *end = buf + got;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (r->npending + n >= KMSG_LINE_MAX) { /* a line longer than any record */
                r->malformed++;
                r->npending = 0;
                n = 0;
                if (!nl) break;
            }
            if (!nl) { /* the rest of it comes with the next read */
                memcpy(r->pending + r->npending, p, n);
                r->npending += n;
                break;
            }
            if (r->npending) {
                memcpy(r->pending + r->npending, p, n);
                one_line(r, r->pending, r->npending + n, fn, ctx);
                r->npending = 0;
            } else {
                one_line(r, p, n, fn, ctx);
            }
            p = nl + 1;
        }
        delivered += (long)(r->records - before);
    }
    return delivered;
}
