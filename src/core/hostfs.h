/* hostfs.h - reading the host's files under a root prefix.
 *
 * Every reader of /proc, /sys, /var/log/pods and /var/lib/kubelet goes
 * through here, relative to a directory descriptor for --root, so the same
 * code runs against the real host ("/") and against fixture trees in tests.
 * Reads are bounded: a file larger than its limit is an error (-EFBIG), not
 * an allocation. */
#ifndef MW_HOSTFS_H
#define MW_HOSTFS_H

#include "buf.h"

#include <dirent.h>
#include <limits.h>
#include <stdint.h>

#define MW_HOSTFS_MAX_FILE (4u << 20) /* default bound for one host file */

typedef struct mw_hostfs {
    int rootfd;
    int in_root; /* root is not "/": resolve absolute symlinks inside it */
    char root[PATH_MAX];
} mw_hostfs;

/* Returns 0 or -errno. */
int mw_hostfs_open(mw_hostfs *h, const char *root);
void mw_hostfs_close(mw_hostfs *h);

/* Read a whole file (path relative to the root; a leading '/' is ignored;
 * with a root other than "/", symlinks and ".." cannot leave the root)
 * into buf, replacing its contents (left empty on any error). Returns 0,
 * -errno, or -EFBIG when the file is larger than max (0 = MW_HOSTFS_MAX_FILE)
 * or than buf's own bound. */
int mw_hostfs_read(const mw_hostfs *h, const char *path, mw_buf *buf, size_t max);
/* Same, relative to an already open directory. */
int mw_readat(int dirfd, const char *name, mw_buf *buf, size_t max);
/* Read a small file holding one unsigned integer (sysfs style). Returns 0,
 * -errno, or -EINVAL when the content is not a number. */
int mw_read_u64at(int dirfd, const char *name, uint64_t *out);
/* Read a small file holding one line of text, newline stripped. */
int mw_read_lineat(int dirfd, const char *name, char *out, size_t size);

/* Open a directory under the root: returns an fd (O_DIRECTORY) or -errno. */
int mw_hostfs_opendirfd(const mw_hostfs *h, const char *path);
/* A directory under the root as a DIR stream (dirfd() gives its fd for
 * openat); NULL with errno set. */
DIR *mw_hostfs_opendir(const mw_hostfs *h, const char *path);
/* fdopendir(fd) that closes fd when it fails: NULL with errno set, and
 * nothing left open either way but the stream. */
DIR *mw_fdopendir(int fd);
/* A DIR stream over the directory fd refers to, with its own offset (each call
 * lists from the start); the caller keeps fd. NULL with errno set. */
DIR *mw_fdopendir_dup(int fd);

#endif
