/* hostfs.c - bounded reads of host files under a root prefix, see hostfs.h. */
#include "hostfs.h"
#include "parse.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int mw_hostfs_open(mw_hostfs *h, const char *root)
{
    if (!root || !*root) root = "/";
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    h->rootfd = fd;
    mw_strlcpy(h->root, root, sizeof(h->root));
    /* Under a host mount (--root /host), an absolute symlink such as
     * /host/etc/localtime -> /usr/share/... means the HOST's /usr, not ours. */
    h->in_root = strcmp(root, "/") != 0;
    return 0;
}

void mw_hostfs_close(mw_hostfs *h)
{
    if (h->rootfd >= 0) close(h->rootfd);
    h->rootfd = -1;
}

static const char *rel(const char *path)
{
    while (*path == '/')
        path++;
    return *path ? path : ".";
}

/* Read the open file FD whole into buf (cleared first); closes nothing. */
static int read_whole(int fd, mw_buf *buf, size_t max)
{
    if (!max) max = MW_HOSTFS_MAX_FILE;
    mw_buf_clear(buf); /* on every error too: never leave an earlier file's bytes */
    int rc = 0;
    for (;;) {
        /* sysfs and procfs files are small; one page is the common case. Ask
         * for no more than the buffer's own bound allows, so that a file that
         * fits in a bounded buffer is read whole. */
        size_t want = 4096;
        if (buf->max) {
            if (buf->len >= buf->max) {
                /* The buffer is full: the file fits only if this is its end. */
                char c;
                ssize_t n;
                do
                    n = read(fd, &c, 1);
                while (n < 0 && errno == EINTR);
                if (n != 0) rc = n < 0 ? -errno : -EFBIG;
                break;
            }
            if (buf->max - buf->len < want) want = buf->max - buf->len;
        }
        if (mw_buf_reserve(buf, want) < 0) {
            rc = -ENOMEM;
            break;
        }
        size_t room = buf->cap - buf->len - 1;
        ssize_t n = read(fd, buf->data + buf->len, room);
        if (n < 0) {
            if (errno == EINTR) continue;
            rc = -errno;
            break;
        }
        if (n == 0) break;
        buf->len += (size_t)n;
        if (buf->len > max) {
            rc = -EFBIG;
            break;
        }
    }
    if (buf->data) buf->data[buf->len] = '\0';
    if (rc < 0) mw_buf_clear(buf);
    return rc;
}

int mw_readat(int dirfd, const char *name, mw_buf *buf, size_t max)
{
    mw_buf_clear(buf);
    int fd = openat(dirfd, rel(name), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return -errno;
    int rc = read_whole(fd, buf, max);
    close(fd);
    return rc;
}

/* 1 until openat2 turns out to be missing (kernel < 5.6, or a seccomp
 * profile that refuses it): then plain openat, as before. */
static atomic_int have_openat2 = 1;

/* Open PATH relative to the root, resolving "..", and absolute symlinks
 * inside the root (RESOLVE_IN_ROOT) when the root is not "/". */
static int open_rooted(const mw_hostfs *h, const char *path, int flags)
{
    const char *name = rel(path);
    if (h->in_root && atomic_load(&have_openat2)) {
        struct open_how how = {.flags = (uint64_t)flags, .resolve = RESOLVE_IN_ROOT};
        long fd = syscall(SYS_openat2, h->rootfd, name, &how, sizeof(how));
        if (fd >= 0) return (int)fd;
        if (errno != ENOSYS && errno != EPERM) return -errno;
        if (errno == ENOSYS) atomic_store(&have_openat2, 0);
    }
    int fd = openat(h->rootfd, name, flags);
    return fd < 0 ? -errno : fd;
}

int mw_hostfs_read(const mw_hostfs *h, const char *path, mw_buf *buf, size_t max)
{
    if (!h->in_root) return mw_readat(h->rootfd, path, buf, max);
    mw_buf_clear(buf);
    int fd = open_rooted(h, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return fd;
    int rc = read_whole(fd, buf, max);
    close(fd);
    return rc;
}

static int read_small(int dirfd, const char *name, char *tmp, size_t size)
{
    int fd = openat(dirfd, rel(name), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return -errno;
    ssize_t n;
    do
        n = read(fd, tmp, size - 1);
    while (n < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    if (n < 0) return -e;
    tmp[n] = '\0';
    return (int)n;
}

int mw_read_u64at(int dirfd, const char *name, uint64_t *out)
{
    char tmp[64];
    int n = read_small(dirfd, name, tmp, sizeof(tmp));
    if (n < 0) return n;
    const char *p = tmp;
    if (mw_parse_u64(&p, out) < 0) return -EINVAL;
    while (*p == ' ' || *p == '\n')
        p++;
    return *p ? -EINVAL : 0;
}

int mw_read_lineat(int dirfd, const char *name, char *out, size_t size)
{
    char tmp[512];
    int n = read_small(dirfd, name, tmp, sizeof(tmp));
    if (n < 0) return n;
    char *nl = memchr(tmp, '\n', (size_t)n);
    if (nl) *nl = '\0';
    mw_strlcpy(out, tmp, size);
    return 0;
}

int mw_hostfs_opendirfd(const mw_hostfs *h, const char *path)
{
    return open_rooted(h, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

DIR *mw_fdopendir(int fd)
{
    if (fd < 0) return NULL;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return dir;
}

DIR *mw_hostfs_opendir(const mw_hostfs *h, const char *path)
{
    int fd = mw_hostfs_opendirfd(h, path);
    if (fd < 0) {
        errno = -fd;
        return NULL;
    }
    return mw_fdopendir(fd);
}

DIR *mw_fdopendir_dup(int fd)
{
    /* A fresh open of "." rather than dup(): a dup shares the file offset, so
     * a second listing of the same directory would start at its end. */
    return mw_fdopendir(openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}
