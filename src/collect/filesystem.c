/* filesystem.c - size and free space of the host's local filesystems.
 *
 * The mount table is PID 1's (proc/1/mounts under --root, so an agent in a
 * container sees the host's mounts, not its own), falling back to
 * proc/mounts. Every kept mount point is measured with statvfs() on
 * --root + mount point.
 *
 * Network filesystems (nfs, cifs, ceph, lustre, fuse.*, ...) are skipped on
 * purpose: statvfs() on a mount whose server is dead or unreachable blocks in
 * the kernel (a hard NFS mount blocks for ever, uninterruptibly), which would
 * stall the whole collection cycle and every collector after this one. Pseudo
 * filesystems (proc, tmpfs, overlay, ...) are skipped because they hold no
 * disk space worth alerting on, and container plumbing below
 * /var/lib/kubelet/pods, /var/lib/docker and /var/lib/containerd because a
 * node with 200 containers would otherwise report hundreds of copies of the
 * same disk. */
#include "collector.h"
#include "mounts.h"
#include "../core/hash.h"
#include "../core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define FS_MAX 1024   /* mount points reported */
#define FS_SLOTS 2048 /* hash slots, a power of two > FS_MAX */

/* clang-format off */
MW_METRIC(SIZE, MW_GAUGE, "mlwatch_filesystem_size_bytes", "bytes", "Size of the filesystem.");
MW_METRIC(FREE, MW_GAUGE, "mlwatch_filesystem_free_bytes", "bytes", "Free space, including the blocks reserved for root.");
MW_METRIC(AVAIL, MW_GAUGE, "mlwatch_filesystem_available_bytes", "bytes", "Space available to unprivileged users.");
MW_METRIC(FILES, MW_GAUGE, "mlwatch_filesystem_files", "", "Inodes of the filesystem.");
MW_METRIC(FILES_FREE, MW_GAUGE, "mlwatch_filesystem_files_free", "", "Free inodes.");
MW_METRIC(READONLY, MW_GAUGE, "mlwatch_filesystem_readonly", "", "1 when the filesystem is mounted read-only.");
/* clang-format on */

typedef struct fs_entry {
    const char *device, *mountpoint, *fstype; /* into ctx->scratch */
    int readonly;
    int hidden; /* a later, unreported mount (a tmpfs, ...) covers this one */
} fs_entry;

typedef struct fs_state {
    fs_entry entries[FS_MAX];
    int slots[FS_SLOTS]; /* index + 1 into entries, by mount point */
} fs_state;

/* --- parsing -------------------------------------------------------- */

static int is_octal(char c)
{
    return c >= '0' && c <= '7';
}

void mw_unescape_octal(char *s)
{
    char *w = s;
    for (const char *r = s; *r;) {
        if (r[0] == '\\' && is_octal(r[1]) && is_octal(r[2]) && is_octal(r[3])) {
            int v = (r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0');
            if (v > 0 && v < 256) {
                *w++ = (char)v;
                r += 4;
                continue;
            }
        }
        *w++ = *r++;
    }
    *w = '\0';
}

static char *next_field(char **q, char *end)
{
    while (*q < end && (**q == ' ' || **q == '\t'))
        (*q)++;
    if (*q >= end) return NULL;
    char *f = *q;
    while (*q < end && **q != ' ' && **q != '\t')
        (*q)++;
    if (*q < end) *(*q)++ = '\0';
    return f;
}

int mw_parse_mount_line(char **p, mw_mount *out)
{
    char *s = *p;
    for (;;) {
        if (!*s) {
            *p = s;
            return 0;
        }
        char *end = strchr(s, '\n');
        if (end) {
            *end = '\0';
            *p = end + 1;
        } else {
            end = s + strlen(s);
            *p = end;
        }
        char *q = s;
        out->device = next_field(&q, end);
        if (!out->device) {
            s = *p;
            continue; /* blank line */
        }
        out->mountpoint = next_field(&q, end);
        out->fstype = next_field(&q, end);
        out->options = next_field(&q, end);
        if (!out->mountpoint || !out->fstype || !out->options) return -1;
        mw_unescape_octal(out->device);
        mw_unescape_octal(out->mountpoint);
        if (out->mountpoint[0] != '/') return -1;
        return 1;
    }
}

int mw_mount_has_option(const char *options, const char *opt)
{
    size_t n = strlen(opt);
    for (const char *p = options; p;) {
        if (strncmp(p, opt, n) == 0 && (p[n] == ',' || p[n] == '\0')) return 1;
        p = strchr(p, ',');
        if (p) p++;
    }
    return 0;
}

int mw_fs_type_skipped(const char *fstype)
{
    static const char *const skipped[] = {
        /* pseudo */
        "proc", "sysfs", "cgroup", "cgroup2", "devpts", "devtmpfs", "debugfs", "tracefs",
        "securityfs", "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "mqueue", "nsfs",
        "overlay", "squashfs", "autofs", "binfmt_misc", "rpc_pipefs", "selinuxfs", "tmpfs", "ramfs",
        "rootfs", "efivarfs", "pipefs", "sockfs",
        /* network: statvfs may block on an unreachable server */
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs", "9p", "afs",
        "fuse"};
    for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++)
        if (strcmp(fstype, skipped[i]) == 0) return 1;
    return strncmp(fstype, "fuse.", 5) == 0;
}

/* 1 when PATH is PREFIX or below it; with strict, only below it. */
static int under(const char *path, const char *prefix, int strict)
{
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0) return 0;
    return path[n] == '/' || (!strict && path[n] == '\0');
}

int mw_fs_mountpoint_skipped(const char *mp)
{
    static const char *const areas[] = {"/proc", "/sys", "/dev", "/run/credentials"};
    static const char *const plumbing[] = {"/var/lib/kubelet/pods", "/var/lib/docker",
                                           "/var/lib/containerd"};
    for (size_t i = 0; i < sizeof(areas) / sizeof(areas[0]); i++)
        if (under(mp, areas[i], 0)) return 1;
    for (size_t i = 0; i < sizeof(plumbing) / sizeof(plumbing[0]); i++)
        if (under(mp, plumbing[i], 1)) return 1;
    return 0;
}

/* --- collector ------------------------------------------------------ */

static int fs_init(const mw_env *env, void **state)
{
    (void)env;
    *state = mw_xcalloc(1, sizeof(fs_state));
    return 0;
}

static void fs_destroy(void *state)
{
    free(state);
}

static uint32_t hash_str(const char *s)
{
    return mw_fnv1a32_str(MW_FNV1A32_BASIS, s);
}

/* Slot of MP in the table: the one holding it, or the empty one where it
 * goes. */
static size_t slot_of(const fs_state *st, const char *mp)
{
    size_t i = hash_str(mp) & (FS_SLOTS - 1);
    while (st->slots[i] && strcmp(st->entries[st->slots[i] - 1].mountpoint, mp) != 0)
        i = (i + 1) & (FS_SLOTS - 1);
    return i;
}

static void emit_fs(mw_collect_ctx *ctx, const fs_entry *e)
{
    const char *root = ctx->env->cfg->root;
    char path[PATH_MAX];
    int len;
    if (!root[0] || (root[0] == '/' && !root[1]))
        len = snprintf(path, sizeof(path), "%s", e->mountpoint);
    else
        len = snprintf(path, sizeof(path), "%s%s", root, e->mountpoint);
    if (len < 0 || (size_t)len >= sizeof(path)) {
        mw_collect_error(ctx, e->mountpoint, -ENAMETOOLONG, "statvfs");
        return;
    }
    struct statvfs sv;
    if (statvfs(path, &sv) < 0) {
        mw_collect_error(ctx, path, -errno, "statvfs");
        return;
    }
    double frsize = (double)(sv.f_frsize ? sv.f_frsize : sv.f_bsize);
    mw_label l[3] = {{"device", e->device}, {"mountpoint", e->mountpoint}, {"fstype", e->fstype}};
    mw_emitv(ctx->snap, &SIZE, (double)sv.f_blocks * frsize, 3, l);
    mw_emitv(ctx->snap, &FREE, (double)sv.f_bfree * frsize, 3, l);
    mw_emitv(ctx->snap, &AVAIL, (double)sv.f_bavail * frsize, 3, l);
    mw_emitv(ctx->snap, &FILES, (double)sv.f_files, 3, l);
    mw_emitv(ctx->snap, &FILES_FREE, (double)sv.f_ffree, 3, l);
    mw_emitv(ctx->snap, &READONLY, e->readonly ? 1.0 : 0.0, 3, l);
}

static void fs_collect(void *state, mw_collect_ctx *ctx)
{
    fs_state *st = state;
    const char *path = "proc/1/mounts";
    int rc = mw_hostfs_read(ctx->env->host, path, ctx->scratch, 0);
    if (rc == -ENOENT) {
        path = "proc/mounts";
        rc = mw_hostfs_read(ctx->env->host, path, ctx->scratch, 0);
    }
    if (rc < 0) {
        mw_collect_error(ctx, path, rc, NULL);
        return;
    }
    memset(st->slots, 0, sizeof(st->slots));
    size_t n = 0;
    int full = 0;
    char empty[1] = "";
    char *p = ctx->scratch->data ? ctx->scratch->data : empty;
    mw_mount m;
    while ((rc = mw_parse_mount_line(&p, &m)) != 0) {
        if (rc < 0) {
            mw_collect_error(ctx, path, 0, "malformed line");
            continue;
        }
        if (mw_fs_mountpoint_skipped(m.mountpoint)) continue;
        size_t i = slot_of(st, m.mountpoint);
        fs_entry *e = st->slots[i] ? &st->entries[st->slots[i] - 1] : NULL;
        if (mw_fs_type_skipped(m.fstype)) {
            /* Mounted over a reported filesystem: statvfs would now measure
             * this one, so the one below is no longer visible. */
            if (e) e->hidden = 1;
            continue;
        }
        if (!e) {
            if (n == FS_MAX) {
                full = 1;
                continue;
            }
            e = &st->entries[n];
            st->slots[i] = (int)++n;
        }
        /* The last mount on a mount point is the one visible there. */
        e->device = m.device;
        e->mountpoint = m.mountpoint;
        e->fstype = m.fstype;
        e->readonly = mw_mount_has_option(m.options, "ro");
        e->hidden = 0;
    }
    if (full)
        mw_collect_error(ctx, path, 0, "more than 1024 filesystems; the rest are not reported");
    for (size_t i = 0; i < n; i++)
        if (!st->entries[i].hidden) emit_fs(ctx, &st->entries[i]);
}

const mw_collector mw_collector_filesystem = {
    .name = "filesystem",
    .help = "Size and free space of local filesystems (statvfs of PID 1's mounts)",
    .init = fs_init,
    .collect = fs_collect,
    .destroy = fs_destroy,
};
