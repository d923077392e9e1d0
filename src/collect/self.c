/* self.c - the agent's own CPU, memory, threads and file descriptors.
 *
 * The one collector that does not read under --root: it measures mlwatch
 * itself, so it opens /proc/self of the running process directly. The
 * directory is opened once in init. */
#include "collector.h"
#include "self.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* clang-format off */
MW_METRIC(CPU, MW_COUNTER, "mlwatch_process_cpu_seconds_total", "seconds", "CPU time (user and system) used by the agent.");
MW_METRIC(RSS, MW_GAUGE, "mlwatch_process_resident_memory_bytes", "bytes", "Resident memory of the agent.");
MW_METRIC(VSZ, MW_GAUGE, "mlwatch_process_virtual_memory_bytes", "bytes", "Virtual memory of the agent.");
MW_METRIC(FDS, MW_GAUGE, "mlwatch_process_open_fds", "", "File descriptors the agent has open.");
MW_METRIC(MAX_FDS, MW_GAUGE, "mlwatch_process_max_fds", "", "The agent's limit on open file descriptors (RLIMIT_NOFILE).");
MW_METRIC(THREADS, MW_GAUGE, "mlwatch_process_threads", "", "Threads of the agent.");
/* clang-format on */

/* Listing /proc/self/fd costs about 0.5 us per descriptor, and the cgroup
 * collector keeps hundreds open on a busy node; the count changes slowly, so
 * it is refreshed every FD_REFRESH_CYCLES cycles (Linux >= 6.2 reports it in
 * st_size, for free, and then every cycle). */
#define FD_REFRESH_CYCLES 10

typedef struct self_state {
    int fd; /* /proc/self, i.e. /proc/<our pid> */
    double tick_s, page_bytes;
    long fds; /* last count, -errno when it failed */
    unsigned cycle;
} self_state;

int mw_parse_proc_stat(const char *text, mw_proc_stat *out)
{
    const char *p = strrchr(text, ')'), *open = strchr(text, '(');
    if (!p || !open || open > p) return -1;
    size_t n = (size_t)(p - open - 1);
    if (n >= sizeof(out->comm)) n = sizeof(out->comm) - 1;
    memcpy(out->comm, open + 1, n);
    out->comm[n] = '\0';
    p++;
    /* p is before field 3 (state); count fields from there. */
    uint64_t v[24] = {0};
    for (int field = 3; field <= 24; field++) {
        if (*p != ' ') return -1;
        p++;
        if (field == 3) {
            if (!*p || *p == ' ' || *p == '\n') return -1;
            p++; /* one-letter state */
            continue;
        }
        int64_t x;
        /* Some fields (priority, nice, ppid of init) may be negative. */
        if (mw_parse_i64(&p, &x) < 0) return -1;
        v[field - 1] = (uint64_t)x;
    }
    out->flags = v[8];
    out->starttime_ticks = v[21];
    out->utime_ticks = v[13];
    out->stime_ticks = v[14];
    out->threads = v[19];
    out->vsize_bytes = v[22];
    out->rss_pages = v[23];
    return 0;
}

static int self_init(const mw_env *env, void **state)
{
    (void)env;
    /* Not under --root: this is the agent's own process. */
    int fd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        mw_log(MW_LOG_INFO, "self", "/proc/self is not available (%s): no process metrics",
               strerror(errno));
        return MW_COLLECTOR_ABSENT;
    }
    self_state *st = mw_xcalloc(1, sizeof(*st));
    st->fd = fd;
    long tck = sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    st->tick_s = 1.0 / (double)(tck > 0 ? tck : 100);
    st->page_bytes = (double)(page > 0 ? page : 4096);
    *state = st;
    return 0;
}

static void self_destroy(void *state)
{
    self_state *st = state;
    if (!st) return;
    close(st->fd);
    free(st);
}

/* Open descriptors, not counting the one used to list them; -errno on error. */
static long count_fds(int selffd)
{
    int fd = openat(selffd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0) { /* Linux >= 6.2: the count itself */
        close(fd);
        return (long)sb.st_size - 1;
    }
    DIR *d = mw_fdopendir(fd);
    if (!d) return -errno;
    long n = 0;
    const struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n > 0 ? n - 1 : 0;
}

static void self_collect(void *state, mw_collect_ctx *ctx)
{
    self_state *st = state;
    int rc = mw_readat(st->fd, "stat", ctx->scratch, 4096);
    mw_proc_stat ps;
    if (rc < 0)
        mw_collect_error(ctx, "/proc/self/stat", rc, NULL);
    else if (mw_parse_proc_stat(ctx->scratch->data, &ps) < 0)
        mw_collect_error(ctx, "/proc/self/stat", 0, "malformed content");
    else {
        mw_emit(ctx->snap, &CPU, (double)(ps.utime_ticks + ps.stime_ticks) * st->tick_s, MW_END);
        mw_emit(ctx->snap, &RSS, (double)ps.rss_pages * st->page_bytes, MW_END);
        mw_emit(ctx->snap, &VSZ, (double)ps.vsize_bytes, MW_END);
        mw_emit(ctx->snap, &THREADS, (double)ps.threads, MW_END);
    }
    if (st->cycle++ % FD_REFRESH_CYCLES == 0) st->fds = count_fds(st->fd);
    long fds = st->fds;
    if (fds < 0)
        mw_collect_error(ctx, "/proc/self/fd", (int)fds, NULL);
    else
        mw_emit(ctx->snap, &FDS, (double)fds, MW_END);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        mw_emit(ctx->snap, &MAX_FDS, (double)rl.rlim_cur, MW_END); /* unlimited: 2^64-1 */
}

const mw_collector mw_collector_self = {
    .name = "self",
    .help = "The agent's own CPU, memory, threads and file descriptors (/proc/self)",
    .init = self_init,
    .collect = self_collect,
    .destroy = self_destroy,
};
