/* faultfs.c - fault injection, event recording and power-loss simulation
 * under the store's file system calls (tests only; see faultfs.h). */
#include "faultfs.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- the C library's functions ---- */

typedef int (*open_fn)(const char *, int, ...);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*fd_fn)(int);
typedef int (*ftruncate_fn)(int, off_t);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*unlink_fn)(const char *);

static struct {
    open_fn open;
    write_fn write;
    pwrite_fn pwrite;
    fd_fn fsync, fdatasync, close, dup;
    ftruncate_fn ftruncate;
    rename_fn rename;
    unlink_fn unlink;
} real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void resolve_real(void)
{
    /* dlsym returns void *; the cast to a function pointer is what POSIX
     * promises works. */
    *(void **)&real.open = dlsym(RTLD_NEXT, "open");
    *(void **)&real.write = dlsym(RTLD_NEXT, "write");
    *(void **)&real.pwrite = dlsym(RTLD_NEXT, "pwrite");
    *(void **)&real.fsync = dlsym(RTLD_NEXT, "fsync");
    *(void **)&real.fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    *(void **)&real.close = dlsym(RTLD_NEXT, "close");
    *(void **)&real.dup = dlsym(RTLD_NEXT, "dup");
    *(void **)&real.ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    *(void **)&real.rename = dlsym(RTLD_NEXT, "rename");
    *(void **)&real.unlink = dlsym(RTLD_NEXT, "unlink");
}

static void need_real(void)
{
    pthread_once(&real_once, resolve_real);
}

/* ---- state ---- */

#define FD_SLOTS 65536

typedef struct tracked_file {
    char path[PATH_MAX];
    dev_t dev;
    ino_t ino;
    int is_dir;
} tracked_file;

typedef enum { UNDO_DATA, UNDO_CREATE, UNDO_RENAME, UNDO_UNLINK } undo_kind;

typedef struct undo_rec {
    uint64_t seq;
    undo_kind kind;
    int file;     /* UNDO_DATA */
    int durable;  /* a completed sync covers it: a power loss keeps it */
    char *path;   /* the file's path when it happened; rename: the old one */
    char *path2;  /* rename: the new path */
    char *stash;  /* the replaced or unlinked file, kept aside */
    uint64_t off; /* UNDO_DATA: the bytes [off, off + nold) were old[] */
    uint8_t *old;
    uint64_t nold;
    uint64_t old_size; /* the size before the write */
    uint64_t len;      /* bytes written (0: a truncation, never torn) */
    int keep;          /* the crash keeps it: 1 whole, 2 its first torn bytes */
    uint64_t torn;
} undo_rec;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Every watched call holds it shared; a crash takes it exclusively, so that
 * no call is half done while the undo runs. */
static pthread_rwlock_t gate;
static pthread_once_t gate_once = PTHREAD_ONCE_INIT;

static char prefix[PATH_MAX];
static size_t prefix_len;
static atomic_int fd_file[FD_SLOTS]; /* file index + 1; 0 = not watched */
static tracked_file *files;
static size_t nfiles, files_cap;
static faultfs_event *events;
static size_t nevents, events_cap;
static int recording;
static uint64_t seq;
static atomic_uint_fast64_t counts[FAULTFS_NOPS];
static atomic_uint delays[FAULTFS_NOPS];
static int fail_err[FAULTFS_NOPS];
static uint64_t fail_skip[FAULTFS_NOPS];
static undo_rec *undos;
static size_t nundos, undos_cap;
static int crash_on;
static char stash_dir[PATH_MAX];
static faultfs_loss crash_loss;
static unsigned crash_seed;
static atomic_uint_fast64_t crash_countdown;
static atomic_int crashing;

static void init_gate(void)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    /* A crash must not wait behind a stream of new calls. */
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&gate, &a);
    pthread_rwlockattr_destroy(&a);
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t c = *cap ? *cap * 2 : 256;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (!q) abort();
    *cap = c;
    return q;
}

static int watched_path(const char *path)
{
    return prefix_len && path && strncmp(path, prefix, prefix_len) == 0;
}

static int watched_fd(int fd)
{
    if (fd < 0 || fd >= FD_SLOTS) return -1;
    return atomic_load(&fd_file[fd]) - 1;
}

/* With mu held. */
static uint64_t add_event(faultfs_event_kind kind, faultfs_op op, int file, uint64_t off,
                          uint64_t len)
{
    uint64_t s = ++seq;
    if (recording) {
        events = grow(events, &events_cap, nevents + 1, sizeof(*events));
        events[nevents++] = (faultfs_event){s, kind, op, file, off, len};
    }
    return s;
}

/* With mu held. */
static undo_rec *add_undo(undo_kind kind, uint64_t s)
{
    undos = grow(undos, &undos_cap, nundos + 1, sizeof(*undos));
    undo_rec *u = &undos[nundos++];
    memset(u, 0, sizeof(*u));
    u->kind = kind;
    u->seq = s;
    return u;
}

static char *dup_str(const char *s)
{
    char *d = strdup(s);
    if (!d) abort();
    return d;
}

static void free_undos(void)
{
    for (size_t i = 0; i < nundos; i++) {
        free(undos[i].path);
        free(undos[i].path2);
        free(undos[i].stash);
        free(undos[i].old);
    }
    nundos = 0;
}

/* Before a watched call: crash when due, count, fail, delay, and hold the
 * gate shared. Returns 0 to go on, or -1 with errno set (an injected
 * failure; the gate is not held then). */
static int enter(faultfs_op op)
{
    need_real();
    pthread_once(&gate_once, init_gate);
    if (atomic_load(&crashing)) faultfs_crash_now(FAULTFS_CRASH_EXIT);
    uint_fast64_t left = atomic_load(&crash_countdown);
    while (left > 0 && !atomic_compare_exchange_weak(&crash_countdown, &left, left - 1)) {
    }
    if (left == 1) faultfs_crash_now(FAULTFS_CRASH_EXIT);
    uint64_t n = atomic_fetch_add(&counts[op], 1);
    pthread_mutex_lock(&mu);
    int err = fail_err[op] && n >= fail_skip[op] ? fail_err[op] : 0;
    pthread_mutex_unlock(&mu);
    unsigned us = atomic_load(&delays[op]);
    if (us) {
        struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
    if (err) {
        errno = err;
        return -1;
    }
    pthread_rwlock_rdlock(&gate);
    return 0;
}

static void leave(void)
{
    pthread_rwlock_unlock(&gate);
}

/* The file fd refers to, added to the table when new (mu held). */
static int file_of(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return -1;
    for (size_t i = 0; i < nfiles; i++)
        if (files[i].dev == st.st_dev && files[i].ino == st.st_ino) {
            snprintf(files[i].path, sizeof(files[i].path), "%s", path);
            return (int)i;
        }
    files = grow(files, &files_cap, nfiles + 1, sizeof(*files));
    tracked_file *f = &files[nfiles];
    snprintf(f->path, sizeof(f->path), "%s", path);
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->is_dir = S_ISDIR(st.st_mode);
    return (int)nfiles++;
}

/* Keep the bytes of path aside (a hard link in the stash); NULL when it
 * does not exist (mu held). */
static char *stash_file(const char *path, uint64_t s)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/%llu", stash_dir, (unsigned long long)s);
    if (link(path, p) < 0) return NULL;
    return dup_str(p);
}

/* Save what a write of [off, off + n) to fd overwrites (mu held). */
static void save_before_write(int fd, int file, uint64_t off, uint64_t n, uint64_t s)
{
    struct stat st;
    if (!crash_on || fstat(fd, &st) < 0) return;
    undo_rec *u = add_undo(UNDO_DATA, s);
    u->file = file;
    u->path = dup_str(files[file].path);
    u->off = off;
    u->old_size = (uint64_t)st.st_size;
    u->len = n;
    uint64_t end = off + n < u->old_size ? off + n : u->old_size;
    if (off < end) {
        u->nold = end - off;
        u->old = malloc(u->nold);
        if (!u->old) abort();
        int rfd = real.open(u->path, O_RDONLY | O_CLOEXEC);
        if (rfd < 0 || pread(rfd, u->old, u->nold, (off_t)off) != (ssize_t)u->nold) abort();
        real.close(rfd);
    }
}

/* ---- the interposed calls ---- */

static int open_common(const char *path, int flags, mode_t mode)
{
    need_real();
    if (!watched_path(path)) return real.open(path, flags, mode);
    if (enter(FAULTFS_OPEN) < 0) return -1;
    struct stat st;
    int existed = stat(path, &st) == 0;
    pthread_mutex_lock(&mu);
    uint64_t s = ++seq;
    if (crash_on && (flags & O_CREAT) && !existed) add_undo(UNDO_CREATE, s)->path = dup_str(path);
    /* O_TRUNC throws the old bytes away: a write of the whole file. */
    int truncates = crash_on && existed && (flags & O_TRUNC) && S_ISREG(st.st_mode) && st.st_size;
    pthread_mutex_unlock(&mu);
    uint8_t *old = NULL;
    if (truncates) {
        old = malloc((size_t)st.st_size);
        int rfd = real.open(path, O_RDONLY | O_CLOEXEC, 0);
        if (!old || rfd < 0 || pread(rfd, old, (size_t)st.st_size, 0) != st.st_size) abort();
        real.close(rfd);
    }
    int fd = real.open(path, flags, mode);
    int e = errno;
    if (fd >= 0 && fd < FD_SLOTS) {
        pthread_mutex_lock(&mu);
        int file = file_of(fd, path);
        if (file >= 0 && old) {
            undo_rec *u = add_undo(UNDO_DATA, ++seq);
            u->file = file;
            u->path = dup_str(path);
            u->old_size = (uint64_t)st.st_size;
            u->old = old;
            u->nold = (uint64_t)st.st_size;
            old = NULL;
        }
        atomic_store(&fd_file[fd], file + 1);
        pthread_mutex_unlock(&mu);
    }
    free(old);
    leave();
    errno = e;
    return fd;
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return open_common(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return open_common(path, flags, mode);
}

int __open_2(const char *path, int flags);
int __open_2(const char *path, int flags)
{
    return open_common(path, flags, 0);
}

int close(int fd)
{
    need_real();
    if (fd >= 0 && fd < FD_SLOTS) atomic_store(&fd_file[fd], 0);
    return real.close(fd);
}

int dup(int fd)
{
    need_real();
    int d = real.dup(fd);
    if (d >= 0 && d < FD_SLOTS && watched_fd(fd) >= 0)
        atomic_store(&fd_file[d], atomic_load(&fd_file[fd]));
    return d;
}

static ssize_t write_common(int fd, const void *buf, size_t n, off_t off, int positional)
{
    int file = watched_fd(fd);
    if (file < 0) return positional ? real.pwrite(fd, buf, n, off) : real.write(fd, buf, n);
    if (enter(FAULTFS_WRITE) < 0) return -1;
    if (!positional) {
        off = lseek(fd, 0, SEEK_CUR);
        if (fcntl(fd, F_GETFL) & O_APPEND) {
            struct stat st;
            off = fstat(fd, &st) == 0 ? st.st_size : off;
        }
    }
    pthread_mutex_lock(&mu);
    uint64_t s = ++seq;
    save_before_write(fd, file, (uint64_t)off, n, s);
    size_t mine = nundos; /* its undo record, if any, is the last one */
    pthread_mutex_unlock(&mu);
    ssize_t k = positional ? real.pwrite(fd, buf, n, off) : real.write(fd, buf, n);
    int e = errno;
    pthread_mutex_lock(&mu);
    if (k > 0) {
        add_event(FAULTFS_EV_WRITE, FAULTFS_WRITE, file, (uint64_t)off, (uint64_t)k);
    } else if (crash_on && mine && undos[mine - 1].seq == s) {
        undos[mine - 1].durable = 1; /* nothing was written */
    }
    pthread_mutex_unlock(&mu);
    leave();
    errno = e;
    return k;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    need_real();
    return write_common(fd, buf, n, 0, 0);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    need_real();
    return write_common(fd, buf, n, off, 1);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off);
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    need_real();
    return write_common(fd, buf, n, off, 1);
}

static int sync_common(int fd, faultfs_op op)
{
    int file = watched_fd(fd);
    if (file < 0) return op == FAULTFS_FSYNC ? real.fsync(fd) : real.fdatasync(fd);
    if (enter(op) < 0) return -1;
    pthread_mutex_lock(&mu);
    uint64_t began = add_event(FAULTFS_EV_SYNC_BEGIN, op, file, 0, 0);
    pthread_mutex_unlock(&mu);
    int rc = op == FAULTFS_FSYNC ? real.fsync(fd) : real.fdatasync(fd);
    int e = errno;
    pthread_mutex_lock(&mu);
    if (rc == 0) {
        /* What was written to the file before the sync began is on disk
         * now; a directory's sync commits every name change before it. */
        for (size_t i = 0; i < nundos; i++) {
            undo_rec *u = &undos[i];
            if (u->seq >= began) continue;
            if (files[file].is_dir ? u->kind != UNDO_DATA : u->kind == UNDO_DATA && u->file == file)
                u->durable = 1;
        }
    }
    add_event(FAULTFS_EV_SYNC_END, op, file, 0, rc == 0 ? 0 : (uint64_t)e);
    pthread_mutex_unlock(&mu);
    leave();
    errno = e;
    return rc;
}

int fsync(int fd)
{
    need_real();
    return sync_common(fd, FAULTFS_FSYNC);
}

int fdatasync(int fd)
{
    need_real();
    return sync_common(fd, FAULTFS_FDATASYNC);
}

int ftruncate(int fd, off_t size)
{
    need_real();
    int file = watched_fd(fd);
    if (file < 0) return real.ftruncate(fd, size);
    if (enter(FAULTFS_FTRUNCATE) < 0) return -1;
    struct stat st;
    pthread_mutex_lock(&mu);
    uint64_t s = ++seq;
    if (fstat(fd, &st) == 0) {
        save_before_write(fd, file, (uint64_t)(size < st.st_size ? size : st.st_size),
                          (uint64_t)(size < st.st_size ? st.st_size - size : 0), s);
        if (crash_on) undos[nundos - 1].len = 0; /* all or nothing */
    }
    pthread_mutex_unlock(&mu);
    int rc = real.ftruncate(fd, size);
    leave();
    return rc;
}

int ftruncate64(int fd, off_t size);
int ftruncate64(int fd, off_t size)
{
    return ftruncate(fd, size);
}

int rename(const char *from, const char *to)
{
    need_real();
    if (!watched_path(from) && !watched_path(to)) return real.rename(from, to);
    if (enter(FAULTFS_RENAME) < 0) return -1;
    pthread_mutex_lock(&mu);
    uint64_t s = ++seq;
    undo_rec *u = NULL;
    size_t mine = 0;
    if (crash_on) {
        char *kept = stash_file(to, s);
        u = add_undo(UNDO_RENAME, s);
        mine = nundos;
        u->path = dup_str(from);
        u->path2 = dup_str(to);
        u->stash = kept;
    }
    pthread_mutex_unlock(&mu);
    int rc = real.rename(from, to);
    int e = errno;
    pthread_mutex_lock(&mu);
    if (rc < 0 && mine) undos[mine - 1].durable = 1; /* nothing happened */
    if (rc == 0) {
        int moved = -1;
        for (size_t i = 0; i < nfiles; i++)
            if (strcmp(files[i].path, from) == 0) {
                snprintf(files[i].path, PATH_MAX, "%s", to);
                moved = (int)i;
            }
        add_event(FAULTFS_EV_RENAME, FAULTFS_RENAME, moved, 0, 0);
    }
    pthread_mutex_unlock(&mu);
    leave();
    errno = e;
    return rc;
}

int unlink(const char *path)
{
    need_real();
    if (!watched_path(path)) return real.unlink(path);
    if (enter(FAULTFS_UNLINK) < 0) return -1;
    pthread_mutex_lock(&mu);
    uint64_t s = ++seq;
    size_t mine = 0;
    if (crash_on) {
        char *kept = stash_file(path, s);
        if (kept) {
            undo_rec *u = add_undo(UNDO_UNLINK, s);
            mine = nundos;
            u->path = dup_str(path);
            u->stash = kept;
        }
    }
    pthread_mutex_unlock(&mu);
    int rc = real.unlink(path);
    int e = errno;
    pthread_mutex_lock(&mu);
    if (rc < 0 && mine) undos[mine - 1].durable = 1;
    if (rc == 0) {
        int gone = -1;
        for (size_t i = 0; i < nfiles; i++)
            if (strcmp(files[i].path, path) == 0) gone = (int)i;
        add_event(FAULTFS_EV_UNLINK, FAULTFS_UNLINK, gone, 0, 0);
    }
    pthread_mutex_unlock(&mu);
    leave();
    errno = e;
    return rc;
}

/* ---- control ---- */

void faultfs_watch(const char *p)
{
    need_real();
    pthread_mutex_lock(&mu);
    snprintf(prefix, sizeof(prefix), "%s", p ? p : "");
    prefix_len = strlen(prefix);
    for (int i = 0; i < FD_SLOTS; i++)
        atomic_store(&fd_file[i], 0);
    nfiles = 0;
    nevents = 0;
    seq = 0;
    for (int i = 0; i < FAULTFS_NOPS; i++) {
        atomic_store(&counts[i], 0);
        atomic_store(&delays[i], 0);
        fail_err[i] = 0;
    }
    free_undos();
    crash_on = 0;
    crash_loss = FAULTFS_LOSE_ALL;
    atomic_store(&crash_countdown, 0);
    pthread_mutex_unlock(&mu);
}

void faultfs_delay(faultfs_op op, unsigned us)
{
    atomic_store(&delays[op], us);
}

void faultfs_fail(faultfs_op op, int err, uint64_t skip)
{
    pthread_mutex_lock(&mu);
    fail_err[op] = err;
    fail_skip[op] = atomic_load(&counts[op]) + skip;
    pthread_mutex_unlock(&mu);
}

uint64_t faultfs_count(faultfs_op op)
{
    return atomic_load(&counts[op]);
}

void faultfs_record(int on)
{
    pthread_mutex_lock(&mu);
    recording = on;
    pthread_mutex_unlock(&mu);
}

uint64_t faultfs_mark(uint64_t tag)
{
    pthread_mutex_lock(&mu);
    uint64_t s = add_event(FAULTFS_EV_MARK, FAULTFS_NOPS, -1, tag, 0);
    pthread_mutex_unlock(&mu);
    return s;
}

const faultfs_event *faultfs_events(size_t *n)
{
    pthread_mutex_lock(&mu);
    *n = nevents;
    const faultfs_event *e = events;
    pthread_mutex_unlock(&mu);
    return e;
}

const char *faultfs_file_path(int file)
{
    return file >= 0 && (size_t)file < nfiles ? files[file].path : "";
}

void faultfs_crash_init(const char *stash)
{
    pthread_mutex_lock(&mu);
    snprintf(stash_dir, sizeof(stash_dir), "%s", stash);
    mkdir(stash_dir, 0755);
    crash_on = 1;
    pthread_mutex_unlock(&mu);
}

void faultfs_crash_arm(uint64_t calls)
{
    atomic_store(&crash_countdown, calls);
}

void faultfs_crash_soon(void)
{
    atomic_store(&crashing, 1);
}

/* Put one lost change back the way it was before it (gate held). */
static void undo_one(const undo_rec *u)
{
    switch (u->kind) {
    case UNDO_DATA: {
        if (u->keep == 1) break;
        /* Torn: the first u->torn bytes of the write stay. */
        uint64_t kept = u->keep == 2 ? u->torn : 0;
        /* The file by its identity: under the name it had when written, or
         * under the one a rename that is kept gave it since (a file written,
         * renamed over another and never synced loses its bytes too). */
        const tracked_file *tf = &files[u->file];
        const char *names[2] = {u->path, tf->path};
        int fd = -1;
        for (int i = 0; i < 2 && fd < 0; i++) {
            struct stat st;
            if (stat(names[i], &st) == 0 && st.st_dev == tf->dev && st.st_ino == tf->ino)
                fd = real.open(names[i], O_WRONLY | O_CLOEXEC, 0);
        }
        if (fd < 0) return; /* the file is gone in the state being restored */
        if (u->nold > kept && real.pwrite(fd, u->old + kept, u->nold - kept,
                                          (off_t)(u->off + kept)) != (ssize_t)(u->nold - kept))
            abort();
        uint64_t size = u->off + kept > u->old_size ? u->off + kept : u->old_size;
        if (real.ftruncate(fd, (off_t)size) < 0) abort();
        real.close(fd);
        break;
    }
    case UNDO_CREATE:
        real.unlink(u->path);
        break;
    case UNDO_RENAME:
        real.rename(u->path2, u->path);
        if (u->stash && link(u->stash, u->path2) < 0) abort();
        break;
    case UNDO_UNLINK:
        if (link(u->stash, u->path) < 0) abort();
        break;
    }
}

void faultfs_crash_loss(faultfs_loss loss, unsigned seed)
{
    pthread_mutex_lock(&mu);
    crash_loss = loss;
    crash_seed = seed;
    pthread_mutex_unlock(&mu);
}

/* FAULTFS_KEEP_SOME_TORN: choose, file by file, how many of the writes no
 * sync covers survive, and how much of the next one (mu held). */
static void choose_survivors(void)
{
    for (size_t f = 0; f < nfiles; f++) {
        size_t lost = 0;
        for (size_t i = 0; i < nundos; i++)
            lost += undos[i].kind == UNDO_DATA && undos[i].file == (int)f && !undos[i].durable;
        if (!lost) continue;
        size_t keep = (size_t)rand_r(&crash_seed) % (lost + 1), k = 0;
        for (size_t i = 0; i < nundos; i++) {
            undo_rec *u = &undos[i];
            if (u->kind != UNDO_DATA || u->file != (int)f || u->durable) continue;
            if (k < keep) {
                u->keep = 1;
            } else if (k == keep && u->len > 0) {
                u->keep = 2;
                u->torn = (uint64_t)rand_r(&crash_seed) % u->len;
            }
            k++;
        }
    }
}

void faultfs_crash_now(int status)
{
    need_real();
    pthread_once(&gate_once, init_gate);
    atomic_store(&crashing, 1);
    pthread_rwlock_wrlock(&gate); /* every call in flight has returned */
    pthread_mutex_lock(&mu);
    if (crash_on && crash_loss == FAULTFS_KEEP_SOME_TORN) choose_survivors();
    if (crash_on)
        for (size_t i = nundos; i-- > 0;)
            if (!undos[i].durable) undo_one(&undos[i]);
    _exit(status);
}
