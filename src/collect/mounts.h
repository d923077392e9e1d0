/* mounts.h - parser for /proc/<pid>/mounts and the filesystem collector's
 * filters (exposed for tests and fuzzing). */
#ifndef MW_MOUNTS_H
#define MW_MOUNTS_H

typedef struct mw_mount {
    char *device, *mountpoint, *fstype, *options;
} mw_mount;

/* Parse the line at *p, in place: the fields are NUL-terminated inside the
 * text and their octal escapes ("\040" for a space) decoded. Advances *p past
 * the line.
 *
 *   "/dev/nvme0n1p2 / ext4 rw,relatime,errors=remount-ro 0 0\n"
 *
 * Returns 1 with *out pointing into the text, 0 at the end of the text, -1
 * for a malformed line (fewer than four fields; already skipped). Blank lines
 * are ignored. */
int mw_parse_mount_line(char **p, mw_mount *out);

/* Decode the kernel's octal escapes (\040 space, \011 tab, \012 newline,
 * \134 backslash) in place. A backslash not followed by three octal digits
 * giving 1..255 is kept as it is. */
void mw_unescape_octal(char *s);

/* 1 when the comma-separated OPTIONS contain exactly OPT ("ro"). */
int mw_mount_has_option(const char *options, const char *opt);

/* 1 when the filesystem type is pseudo (proc, tmpfs, overlay, ...) or
 * network (nfs, cifs, fuse.*, ...) and is not reported. */
int mw_fs_type_skipped(const char *fstype);
/* 1 when the mount point is in an area that holds no disks worth reporting
 * (/proc, /sys, /dev, /run/credentials and anything below them) or only
 * container plumbing (anything strictly below /var/lib/kubelet/pods,
 * /var/lib/docker or /var/lib/containerd; a disk mounted at /var/lib/docker
 * itself is reported). */
int mw_fs_mountpoint_skipped(const char *mountpoint);

#endif
