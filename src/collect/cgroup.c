/* cgroup.c - per-container CPU, memory, pressure and processes, from the
 * cgroup v2 or v1 hierarchy, named with Kubernetes namespace/pod/container.
 *
 * Each cycle walks the hierarchy from sys/fs/cgroup (v2) or from the v1
 * cpuacct hierarchy, classifying each directory from its name and its
 * parent's classification (cgroup_path.h) and descending only into groups
 * that can hold something reported: slices, kubepods, QoS and pod groups,
 * /docker, Slurm's groups. Reported cgroups are Kubernetes containers (the
 * pod sandbox included), systemd services, Docker containers and Slurm jobs;
 * nothing below them is walked. docs/containers.md lists the metrics, the
 * labels and the cost figures.
 *
 * Cost (the whole agent must stay under 2 ms of CPU per cycle on a node with
 * 200 containers, and a read of a small file costs ~0.5 us of system time):
 *  - a reported cgroup's record (IDs, names, label arrays, limits, open
 *    files) persists across cycles in a hash table by path: no allocation
 *    per cycle once the set of cgroups is stable;
 *  - the control files read every cycle stay open and are re-read with one
 *    pread() at offset 0 (the kernel regenerates cgroup files on each read
 *    from 0): most cycles open no file and no directory of a container. The
 *    number of open files is bounded (fd_budget); past it files are opened
 *    per read;
 *  - every cycle reads what changes every second and what attribution needs
 *    (cpu.stat, memory.current, memory.stat, cgroup.procs); the pressure
 *    files every PSI_EVERY cycles; the limits (cpu.max, memory.max and their
 *    v1 equivalents) every REFRESH_EVERY cycles; all staggered by cgroup so
 *    that every cycle costs the same. Values read earlier are emitted again
 *    in between, so no series flaps;
 *  - directories are listed with getdents64() into per-depth buffers
 *    allocated once; only entries of type DT_DIR are classified;
 *  - samples are emitted after the walk, family by family, cgroups sorted
 *    by path (sorted again only when cgroups appear);
 *  - a container's names come from its runtime's OCI bundle (bundle.h),
 *    read until it names it, then from the Kubernetes names index (pods.h),
 *    rebuilt only when a new container cannot be named from it, while an
 *    unnamed one is young, and every PODS_RESCAN_MS otherwise; what neither
 *    names is inferred from the pod's other cgroups (infer_names) or left
 *    empty, never guessed.
 *
 * Errors: an unreadable, truncated or malformed control file, or a cgroup
 * that disappears between being listed and being read, is counted and logged
 * (mw_collect_error) and that cgroup is skipped for the cycle (or, for memory,
 * pressure and limits, only that part). Files that exist only with a
 * controller or PSI enabled (memory.*, cpu.max, *.pressure) are silently
 * absent when missing. */
#include "bundle.h"
#include "cgroup_path.h"
#include "cgroup_stat.h"
#include "pods.h"
#include "procmap.h"
#include "psi.h"
#include "../core/log.h"
#include "../core/sources.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "cgroup_int.h"

/* --- control files -------------------------------------------------------- */

static const cg_file FILES_V2[NFILES] = {
    [F_CPU] = {"cpu.stat", H_WALK, 0, 0},         [F_MEM] = {"memory.current", H_WALK, 1, 0},
    [F_MEMSTAT] = {"memory.stat", H_WALK, 1, 0},  [F_PROCS] = {"cgroup.procs", H_WALK, 0, 1},
    [F_PSI_CPU] = {"cpu.pressure", H_WALK, 1, 0}, [F_PSI_MEM] = {"memory.pressure", H_WALK, 1, 0},
    [F_PSI_IO] = {"io.pressure", H_WALK, 1, 0},   [F_QUOTA] = {"cpu.max", H_WALK, 1, 0},
    [F_MEMLIMIT] = {"memory.max", H_WALK, 1, 0},
};

static const cg_file FILES_V1[NFILES] = {
    [F_CPU] = {"cpuacct.usage", H_WALK, 0, 0},
    [F_THROTTLE] = {"cpu.stat", H_CPU, 1, 0},
    [F_MEM] = {"memory.usage_in_bytes", H_MEM, 1, 0},
    [F_MEMSTAT] = {"memory.stat", H_MEM, 1, 0},
    [F_PROCS] = {"cgroup.procs", H_WALK, 0, 1},
    [F_QUOTA] = {"cpu.cfs_quota_us", H_CPU, 1, 0},
    [F_PERIOD] = {"cpu.cfs_period_us", H_CPU, 1, 0},
    [F_MEMLIMIT] = {"memory.limit_in_bytes", H_MEM, 1, 0},
    [F_PSI_CPU] = {"cpu.pressure", H_UNIFIED, 1, 0},
    [F_PSI_MEM] = {"memory.pressure", H_UNIFIED, 1, 0},
    [F_PSI_IO] = {"io.pressure", H_UNIFIED, 1, 0},
};

/* --- errors -------------------------------------------------------------- */

static void item_error(cg_state *st, mw_collect_ctx *ctx, int hier, const char *file, int err,
                       const char *what)
{
    char p[PATH_SIZE + 128];
    snprintf(p, sizeof(p), "%s%s%s%s", st->prefix[hier], st->path, file ? "/" : "",
             file ? file : "");
    mw_collect_error(ctx, p, err, what);
}

static int malformed(cg_state *st, mw_collect_ctx *ctx, int slot)
{
    item_error(st, ctx, st->files[slot].hier, st->files[slot].name, 0, "malformed content");
    return -1;
}

static void bound_error(cg_state *st, mw_collect_ctx *ctx, const char *what)
{
    if (st->overflowed) return;
    st->overflowed = 1;
    mw_collect_error(ctx, st->prefix[H_WALK], 0, what);
}

/* --- init ---------------------------------------------------------------- */

static int same_dir(int a, int b)
{
    struct stat sa, sb;
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int open_first(int dirfd, const char *const *names, size_t n, const char **which)
{
    for (size_t i = 0; i < n; i++) {
        int fd = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            *which = names[i];
            return fd;
        }
    }
    return -1;
}

/* Control files stay open between cycles (up to NFILES per cgroup). The
 * budget is half the soft RLIMIT_NOFILE, after raising the soft limit towards
 * the hard one, as systemd's 1024:524288 default intends for programs that
 * need many descriptors (the HTTP server uses epoll, not select). Past the
 * budget, files are opened and closed at each read: slower, never wrong. */
static size_t fd_budget(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return 0;
    const rlim_t want = 65536;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want &&
        (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > rl.rlim_cur)) {
        struct rlimit raised = rl;
        raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
    }
    rlim_t soft = rl.rlim_cur == RLIM_INFINITY ? want : rl.rlim_cur;
    return soft > 512 ? (size_t)(soft - 256) / 2 : 0;
}

static int cg_init(const mw_env *env, void **state)
{
    int root = mw_hostfs_opendirfd(env->host, "sys/fs/cgroup");
    if (root < 0) {
        mw_log(MW_LOG_INFO, "cgroup", "no sys/fs/cgroup: container metrics are off");
        mw_source_note("cgroup", MW_SOURCE_ABSENT,
                       "no sys/fs/cgroup: no services, containers, jobs or pods are seen");
        return MW_COLLECTOR_ABSENT;
    }
    cg_state *st = mw_xcalloc(1, sizeof(*st));
    st->env = env;
    for (int h = 0; h < NHIER; h++) {
        st->rootfd[h] = -1;
        st->prefix[h] = "sys/fs/cgroup";
    }
    if (faccessat(root, "cgroup.controllers", F_OK, 0) == 0) {
        /* Unified hierarchy. A hybrid host has it at unified/ and counts as v1. */
        st->files = FILES_V2;
        st->rootfd[H_WALK] = root;
    } else {
        static const char *const acct[] = {"cpu,cpuacct", "cpuacct,cpu", "cpuacct"};
        static const char *const cpu[] = {"cpu", "cpu,cpuacct", "cpuacct,cpu"};
        static const char *const mem[] = {"memory"};
        static char names[NHIER][64];
        const char *which = NULL;
        st->v1 = 1;
        st->files = FILES_V1;
        st->rootfd[H_WALK] = open_first(root, acct, 3, &which);
        if (st->rootfd[H_WALK] < 0) {
            close(root);
            free(st);
            mw_log(MW_LOG_INFO, "cgroup",
                   "sys/fs/cgroup has neither cgroup v2 nor a v1 cpuacct hierarchy: container "
                   "metrics are off");
            mw_source_note("cgroup", MW_SOURCE_ABSENT,
                           "sys/fs/cgroup has neither cgroup v2 nor a v1 cpuacct hierarchy");
            return MW_COLLECTOR_ABSENT;
        }
        snprintf(names[H_WALK], sizeof(names[0]), "sys/fs/cgroup/%s", which);
        st->prefix[H_WALK] = st->prefix[H_CPU] = names[H_WALK];
        st->rootfd[H_CPU] = open_first(root, cpu, 3, &which);
        if (st->rootfd[H_CPU] >= 0 && same_dir(st->rootfd[H_CPU], st->rootfd[H_WALK])) {
            close(st->rootfd[H_CPU]); /* cpu and cpuacct share a hierarchy */
            st->rootfd[H_CPU] = -1;
        } else if (st->rootfd[H_CPU] >= 0) {
            snprintf(names[H_CPU], sizeof(names[0]), "sys/fs/cgroup/%s", which);
            st->prefix[H_CPU] = names[H_CPU];
        }
        st->rootfd[H_MEM] = open_first(root, mem, 1, &which);
        st->prefix[H_MEM] = "sys/fs/cgroup/memory";
        /* Hybrid: systemd mirrors its units in the v2 hierarchy at unified/. */
        int uni = openat(root, "unified", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (uni >= 0 && faccessat(uni, "cgroup.controllers", F_OK, 0) == 0) {
            st->rootfd[H_UNIFIED] = uni;
            st->prefix[H_UNIFIED] = "sys/fs/cgroup/unified";
        } else if (uni >= 0) {
            close(uni);
        }
        close(root);
    }
    struct statfs sfs;
    st->kernfs = fstatfs(st->rootfd[H_WALK], &sfs) == 0 &&
                 (sfs.f_type == CGROUP2_SUPER_MAGIC || sfs.f_type == CGROUP_SUPER_MAGIC);
    st->nbuckets = 256;
    st->buckets = mw_xcalloc(st->nbuckets, sizeof(*st->buckets));
    st->pods = mw_pods_new();
    st->fd_budget = fd_budget();
    mw_log(MW_LOG_DEBUG, "cgroup", "cgroup %s, walking %s, keeping up to %zu files open",
           st->v1 ? "v1" : "v2", st->prefix[H_WALK], st->fd_budget);
    if (!st->v1)
        mw_source_note("cgroup", MW_SOURCE_SEEN, "cgroup v2 (unified) at sys/fs/cgroup");
    else if (st->rootfd[H_UNIFIED] >= 0)
        mw_source_note("cgroup", MW_SOURCE_SEEN,
                       "hybrid: cgroup v1 controllers at %s, cgroup v2 at sys/fs/cgroup/unified",
                       st->prefix[H_WALK]);
    else
        mw_source_note("cgroup", MW_SOURCE_SEEN, "cgroup v1 at %s", st->prefix[H_WALK]);
    *state = st;
    return 0;
}

static void slot_close(cg_state *st, cg_entry *e, int slot, int to)
{
    if (e->fd[slot] >= 0) {
        close(e->fd[slot]);
        st->nfds--;
    }
    e->fd[slot] = to;
}

static void entry_free(cg_state *st, cg_entry *e)
{
    for (int i = 0; i < NFILES; i++)
        slot_close(st, e, i, FD_NONE);
    free(e->cgroup);
    free(e->namespace_);
    free(e->pod);
    free(e->container);
    free(e);
}

static void cg_destroy(void *state)
{
    cg_state *st = state;
    if (!st) return;
    for (size_t i = 0; i < st->nentries; i++)
        entry_free(st, st->entries[i]);
    free(st->entries);
    free(st->buckets);
    for (int i = 0; i < MAX_DEPTH; i++)
        free(st->dents[i]);
    mw_pods_free(st->pods);
    mw_buf_free(&st->bundle_buf);
    for (int h = 0; h < NHIER; h++)
        if (st->rootfd[h] >= 0) close(st->rootfd[h]);
    free(st);
}

/* --- entries --------------------------------------------------------------- */

static void rehash(cg_state *st)
{
    size_t n = st->nbuckets * 2;
    cg_entry **b = mw_xcalloc(n, sizeof(*b));
    for (size_t i = 0; i < st->nentries; i++) {
        cg_entry *e = st->entries[i];
        e->hnext = b[e->hash & (n - 1)];
        b[e->hash & (n - 1)] = e;
    }
    free(st->buckets);
    st->buckets = b;
    st->nbuckets = n;
}

/* The record of the cgroup at st->path, created when new; NULL past the bound. */
static cg_entry *entry_get(cg_state *st, mw_collect_ctx *ctx, const mw_cg_node *node)
{
    uint64_t h = mw_cg_hash(st->path);
    for (cg_entry *e = st->buckets[h & (st->nbuckets - 1)]; e; e = e->hnext)
        if (e->hash == h && strcmp(e->cgroup, st->path) == 0) return e;
    if (st->nentries >= MAX_ENTRIES) {
        bound_error(st, ctx, "more cgroups than the collector's bound; the rest is skipped");
        return NULL;
    }
    if (st->nentries == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 64;
        st->entries = mw_xrealloc(st->entries, st->cap * sizeof(*st->entries));
    }
    cg_entry *e = mw_xcalloc(1, sizeof(*e));
    e->hash = h;
    e->node = *node;
    e->cgroup = mw_xstrdup(st->path);
    e->namespace_ = mw_xstrdup("");
    e->pod = mw_xstrdup("");
    e->container = mw_xstrdup("");
    e->born = st->cycle;
    e->first_ms = st->now_ms;
    for (int i = 0; i < NFILES; i++)
        e->fd[i] = FD_NONE;
    mw_cgroup_set_labels(e);
    st->entries[st->nentries++] = e;
    st->unsorted = 1;
    if (st->nentries > st->nbuckets) rehash(st);
    size_t b = h & (st->nbuckets - 1);
    e->hnext = st->buckets[b];
    st->buckets[b] = e;
    return e;
}

/* Drop the records (and close the files) of cgroups the walk did not meet. */
static void sweep(cg_state *st)
{
    size_t w = 0;
    for (size_t i = 0; i < st->nentries; i++) {
        cg_entry *e = st->entries[i];
        if (e->seen == st->cycle) {
            st->entries[w++] = e;
            continue;
        }
        cg_entry **pp = &st->buckets[e->hash & (st->nbuckets - 1)];
        while (*pp != e)
            pp = &(*pp)->hnext;
        *pp = e->hnext;
        entry_free(st, e);
    }
    st->nentries = w;
}

/* --- reading a cgroup ---------------------------------------------------- */

/* Directories of the cgroup being read, opened only when a file must be
 * (re)opened: on a steady host a cycle opens no directory of a container. */
typedef struct cg_dirs {
    int parentfd;     /* the walk's parent directory */
    const char *name; /* the cgroup's name in it */
    int fd[NHIER];    /* -1: not opened yet; -2: absent in that hierarchy */
} cg_dirs;

static int dir_fd(cg_state *st, cg_dirs *d, int h)
{
    if (h == H_CPU && st->rootfd[H_CPU] < 0) h = H_WALK; /* cpu,cpuacct: one hierarchy */
    if (d->fd[h] != -1) return d->fd[h];
    int fd = -1;
    if (h == H_WALK)
        fd = openat(d->parentfd, d->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    else if (st->rootfd[h] >= 0)
        fd = openat(st->rootfd[h], st->path + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d->fd[h] = fd >= 0 ? fd : -2;
    return d->fd[h];
}

static void dirs_close(cg_dirs *d)
{
    for (int h = 0; h < NHIER; h++)
        if (d->fd[h] >= 0) close(d->fd[h]);
}

/* Read a whole file from offset 0 into b. A short read ends a file holding a
 * single record (cpu.stat, memory.stat, *.pressure: the kernel formats them
 * at once, and a regular file returns less only at its end). An iterated
 * seq_file (cgroup.procs) returns at most one page per read, up to the last
 * record that fits: a read shorter than half a page is its end, otherwise it
 * is read until 0. */
static int pread_all(int fd, mw_buf *b, size_t max, int iterated)
{
    mw_buf_clear(b);
    if (mw_buf_reserve(b, MAX_FILE) < 0) return -ENOMEM;
    for (;;) {
        size_t room = b->cap - b->len - 1;
        ssize_t n = pread(fd, b->data + b->len, room, (off_t)b->len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        b->len += (size_t)n;
        b->data[b->len] = '\0';
        if (n == 0 || (size_t)n < (iterated ? 2048 : room)) return 0;
        if (b->len > max || mw_buf_reserve(b, 4096) < 0) return -EFBIG;
    }
}

/* Read control file SLOT of e into ctx->scratch: 1 when read, 0 when an
 * optional file is absent, -1 after reporting an error. */
static int read_slot(cg_state *st, mw_collect_ctx *ctx, cg_entry *e, cg_dirs *d, int slot)
{
    const cg_file *f = &st->files[slot];
    if (!f->name || e->fd[slot] == FD_ABSENT) return 0;
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = e->fd[slot], kept = 1;
        if (fd < 0) {
            int dfd = dir_fd(st, d, f->hier);
            if (dfd < 0 && f->hier != H_WALK) {
                e->fd[slot] = FD_ABSENT; /* not in that v1 hierarchy */
                return 0;
            }
            fd = dfd < 0 ? -1 : openat(dfd, f->name, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                rc = dfd < 0 ? -ENOENT : -errno;
                if (f->optional && dfd >= 0 && (rc == -ENOENT || rc == -EOPNOTSUPP)) {
                    e->fd[slot] = FD_ABSENT;
                    return 0;
                }
                item_error(st, ctx, f->hier, f->name, rc,
                           rc == -ENOENT ? "missing (the cgroup vanished?)" : NULL);
                return -1;
            }
            kept = KEPT(slot) && st->nfds < st->fd_budget;
            if (kept) {
                e->fd[slot] = fd;
                st->nfds++;
            }
        }
        rc = pread_all(fd, ctx->scratch, f->iterated ? MAX_PROCS : MAX_FILE, f->iterated);
        if (!kept) close(fd);
        if (rc == 0) return 1;
        slot_close(st, e, slot, FD_NONE);
        /* ENODEV: the file was removed (cgroup gone, controller disabled,
         * service restarted into a new cgroup): open it again, once. */
        if (rc != -ENODEV && rc != -ENOENT && rc != -ESTALE) break;
    }
    item_error(st, ctx, f->hier, f->name, rc, NULL);
    return -1;
}

/* A file holding one number ("max" for none): 1 read, 0 absent, -1 reported. */
static int read_number(cg_state *st, mw_collect_ctx *ctx, cg_entry *e, cg_dirs *d, int slot,
                       int64_t *out)
{
    int rc = read_slot(st, ctx, e, d, slot);
    if (rc > 0 && mw_parse_cg_value(ctx->scratch->data, out) < 0) rc = malformed(st, ctx, slot);
    return rc;
}

typedef struct procs_arg {
    mw_procmap *pm;
    const mw_container_ref *ref;
} procs_arg;

static void on_pid(int pid, void *arg)
{
    procs_arg *a = arg;
    mw_procmap_set(a->pm, pid, a->ref);
}

/* CPU quota and memory limit. v1 writes "no memory limit" as PAGE_COUNTER_MAX
 * pages (2^63 - 4096 on x86-64): anything from 2^62 up is unlimited. */
static void read_limits(cg_state *st, mw_collect_ctx *ctx, cg_entry *e, cg_dirs *d)
{
    int64_t quota = -1, period = 0, mem = INT64_MAX;
    if (!st->v1) {
        uint64_t p;
        int rc = read_slot(st, ctx, e, d, F_QUOTA);
        if (rc > 0 && (mw_parse_cg2_cpu_max(ctx->scratch->data, &quota, &p) < 0 || p > INT64_MAX))
            malformed(st, ctx, F_QUOTA);
        else if (rc > 0)
            period = (int64_t)p;
    } else if (read_number(st, ctx, e, d, F_PERIOD, &period) <= 0 ||
               read_number(st, ctx, e, d, F_QUOTA, &quota) <= 0) {
        period = 0;
    }
    if (read_number(st, ctx, e, d, F_MEMLIMIT, &mem) <= 0 || (st->v1 && mem >= (int64_t)1 << 62))
        mem = INT64_MAX;
    e->has_quota = period > 0 && quota >= 0;
    e->quota_s = (double)quota / 1e6;
    e->period_s = (double)period / 1e6;
    e->has_mem_limit = mem >= 0 && mem != INT64_MAX;
    e->mem_limit = (double)mem;
}

static void read_psi(cg_state *st, mw_collect_ctx *ctx, cg_entry *e, cg_dirs *d)
{
    for (int i = 0; i < 3; i++) {
        mw_psi psi;
        int rc = read_slot(st, ctx, e, d, F_PSI_CPU + i);
        if (rc > 0 && mw_parse_psi(ctx->scratch->data, &psi) < 0)
            rc = malformed(st, ctx, F_PSI_CPU + i);
        e->psi_some[i] = rc > 0 && psi.has_some;
        e->psi_full[i] = rc > 0 && psi.has_full;
        if (rc > 0) {
            e->psi_some_us[i] = psi.some_total_us;
            e->psi_full_us[i] = psi.full_total_us;
        }
    }
}

/* At each refresh, before reading: look again for optional files that were
 * absent. On a real cgroup file system a kept file reports its removal with
 * ENODEV. On a fixture of ordinary files a deleted or replaced file stays
 * readable through an open fd: there, when the cgroup's directory changed
 * (its mtime), all its files are reopened. */
static void refresh_files(cg_state *st, cg_entry *e, cg_dirs *d)
{
    struct stat sb;
    int64_t mtime = 0;
    if (!st->kernfs && fstatat(d->parentfd, d->name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
        mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    for (int i = 0; i < NFILES; i++)
        if (e->fd[i] == FD_ABSENT || mtime != e->dir_mtime_ns) slot_close(st, e, i, FD_NONE);
    e->dir_mtime_ns = mtime;
}

/* This cycle's values of e; e->ok says whether it is reported (CPU usage read). */
static void read_cgroup(cg_state *st, mw_collect_ctx *ctx, cg_entry *e, cg_dirs *d)
{
    e->ok = 0;
    e->has_mem = e->has_memstat = 0;
    e->nprocs = -1;
    e->cpu.has_throttling = 0;
    uint64_t stagger = e->hash >> 32;
    int fresh = e->born == st->cycle;
    int refresh = fresh || (st->cycle + stagger) % REFRESH_EVERY == 0;
    if (refresh) refresh_files(st, e, d);

    /* CPU usage first: a cgroup that vanished is reported once, here. */
    if (read_slot(st, ctx, e, d, F_CPU) <= 0) return;
    if (st->v1) {
        int64_t ns;
        if (mw_parse_cg_value(ctx->scratch->data, &ns) < 0 || ns < 0 || ns == INT64_MAX) {
            malformed(st, ctx, F_CPU);
            return;
        }
        e->cpu.usage_ns = (uint64_t)ns;
        if (read_slot(st, ctx, e, d, F_THROTTLE) > 0 &&
            mw_parse_cg1_cpu_stat(ctx->scratch->data, &e->cpu) < 0)
            malformed(st, ctx, F_THROTTLE);
    } else if (mw_parse_cg2_cpu_stat(ctx->scratch->data, &e->cpu) < 0) {
        malformed(st, ctx, F_CPU);
        return;
    }
    e->ok = 1;
    if (refresh) read_limits(st, ctx, e, d);
    if (fresh || (st->cycle + stagger) % PSI_EVERY == 0) read_psi(st, ctx, e, d);

    int64_t usage;
    int rc = read_number(st, ctx, e, d, F_MEM, &usage);
    if (rc > 0 && (usage < 0 || usage == INT64_MAX)) rc = malformed(st, ctx, F_MEM);
    if (rc > 0) {
        e->has_mem = 1;
        e->mem_usage = (uint64_t)usage;
        rc = read_slot(st, ctx, e, d, F_MEMSTAT);
        if (rc == 0) /* memory.current without memory.stat */
            item_error(st, ctx, st->files[F_MEMSTAT].hier, st->files[F_MEMSTAT].name, -ENOENT,
                       NULL);
        else if (rc > 0 && mw_parse_cg_memory_stat(ctx->scratch->data, st->v1, &e->memstat) < 0)
            malformed(st, ctx, F_MEMSTAT);
        else if (rc > 0)
            e->has_memstat = 1;
    }

    mw_procmap *pm = st->env->procmap;
    mw_container_ref ref;
    if (pm) {
        mw_strlcpy(ref.id, e->node.id, sizeof(ref.id));
        mw_strlcpy(ref.pod_uid, e->node.pod_uid, sizeof(ref.pod_uid));
        mw_strlcpy(ref.namespace_, e->namespace_, sizeof(ref.namespace_));
        mw_strlcpy(ref.pod, e->pod, sizeof(ref.pod));
        mw_strlcpy(ref.container, e->container, sizeof(ref.container));
        mw_strlcpy(ref.cgroup, e->cgroup, sizeof(ref.cgroup));
        mw_procmap_set(pm, 0, &ref); /* known even while empty */
    }
    if (read_slot(st, ctx, e, d, F_PROCS) > 0) {
        procs_arg a = {pm, &ref};
        e->nprocs = mw_parse_cg_procs(ctx->scratch->data, pm ? on_pid : NULL, &a);
        if (e->nprocs < 0) malformed(st, ctx, F_PROCS);
    }
}

/* One reported cgroup, NAME in the directory parentfd (its path in st->path). */
static void report(cg_state *st, mw_collect_ctx *ctx, int parentfd, const char *name,
                   const mw_cg_node *node)
{
    cg_entry *e = entry_get(st, ctx, node);
    if (!e || e->seen == st->cycle) return;
    e->seen = st->cycle;
    mw_cgroup_name_entry(st, ctx, e);
    cg_dirs d = {parentfd, name, {0}};
    for (int h = 0; h < NHIER; h++)
        d.fd[h] = -1;
    read_cgroup(st, ctx, e, &d);
    dirs_close(&d);
}

/* --- the walk ------------------------------------------------------------ */

static int is_dir(int dirfd, const struct dirent64 *d)
{
    if (d->d_type == DT_DIR) return 1;
    if (d->d_type != DT_UNKNOWN) return 0;
    struct stat sb;
    return fstatat(dirfd, d->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode);
}

static void walk(cg_state *st, mw_collect_ctx *ctx, int fd, const mw_cg_node *parent,
                 size_t pathlen, int depth)
{
    if (!st->dents[depth]) st->dents[depth] = mw_xmalloc(DENTS_SIZE);
    char *buf = st->dents[depth];
    for (;;) {
        ssize_t n = getdents64(fd, buf, DENTS_SIZE);
        if (n < 0) {
            item_error(st, ctx, H_WALK, NULL, -errno, "cannot list (vanished?)");
            return;
        }
        if (n == 0) return;
        for (ssize_t off = 0; off < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] == '.' || !is_dir(fd, d)) continue;
            size_t len = strlen(d->d_name);
            mw_cg_node node;
            mw_cg_kind kind = mw_cg_classify(parent, d->d_name, len, &node);
            int reported = mw_cg_reported(kind);
            if (!reported && (!mw_cg_walked(kind) || depth + 1 >= MAX_DEPTH)) continue;
            if (pathlen + 1 + len >= PATH_SIZE) {
                item_error(st, ctx, H_WALK, NULL, -ENAMETOOLONG, "path too long; skipped");
                continue;
            }
            if (++st->dirs > MAX_DIRS) {
                bound_error(st, ctx, "more cgroup folders than the collector's bound; walk cut");
                return;
            }
            st->path[pathlen] = '/';
            memcpy(st->path + pathlen + 1, d->d_name, len + 1);
            if (reported) {
                report(st, ctx, fd, d->d_name, &node);
            } else {
                int cfd = openat(fd, d->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (cfd < 0) {
                    item_error(st, ctx, H_WALK, NULL, -errno, "vanished during the walk");
                } else {
                    walk(st, ctx, cfd, &node, pathlen + 1 + len, depth + 1);
                    close(cfd);
                }
            }
            st->path[pathlen] = '\0';
        }
    }
}

static void cg_collect(void *state, mw_collect_ctx *ctx)
{
    cg_state *st = state;
    st->cycle++;
    st->now_ms = mw_mono_ns() / 1000000;
    st->dirs = 0;
    st->overflowed = 0;
    st->path[0] = '\0';
    mw_procmap *pm = st->env->procmap;
    if (pm) mw_procmap_begin(pm);
    if (lseek(st->rootfd[H_WALK], 0, SEEK_SET) < 0) {
        mw_collect_error(ctx, st->prefix[H_WALK], -errno, "cannot rewind");
    } else {
        mw_cg_node root;
        mw_cg_root(&root);
        walk(st, ctx, st->rootfd[H_WALK], &root, 0, 0);
    }
    uint64_t gen = mw_pods_generation(st->pods);
    if (st->unsorted || gen != st->inferred_gen) mw_cgroup_infer_names(st);
    st->inferred_gen = gen;
    if (pm) mw_procmap_end(pm);
    sweep(st);
    mw_cgroup_emit_all(st, ctx);
}

const mw_collector mw_collector_cgroup = {
    .name = "cgroup",
    .help = "Per-container CPU, memory, pressure and processes from cgroups (v1 and v2), "
            "named from the runtimes' OCI bundles and the kubelet's log folders",
    .init = cg_init,
    .collect = cg_collect,
    .destroy = cg_destroy,
};
