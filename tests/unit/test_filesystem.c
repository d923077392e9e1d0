/* test_filesystem.c - mount table parsing and filters, and the filesystem
 * collector on fixtures. statvfs runs on the fixture's real folders, so the
 * sizes are compared with statvfs of the same folder computed here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/mounts.h"
#include "core/buf.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

/* The sample set of one mount point matches statvfs(root + mp). */
static void check_fs(const mw_snapshot *snap, const char *root, const char *mp, const char *device,
                     const char *fstype, int readonly)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s%s", root, mp);
    struct statvfs sv;
    assert_int_equal(statvfs(path, &sv), 0);
    double fr = (double)sv.f_frsize;
#define L "device", device, "mountpoint", mp, "fstype", fstype, MW_END
    double size = tu_value(snap, "mlwatch_filesystem_size_bytes", L);
    assert_true(size > 0);
    assert_value(size, (double)sv.f_blocks * fr);
    /* Free space moves as other tests write; the inode total does not. */
    assert_true(tu_value(snap, "mlwatch_filesystem_free_bytes", L) <= size);
    assert_true(tu_value(snap, "mlwatch_filesystem_available_bytes", L) <= size);
    assert_value(tu_value(snap, "mlwatch_filesystem_files", L), (double)sv.f_files);
    assert_true(tu_value(snap, "mlwatch_filesystem_files_free", L) <= (double)sv.f_files);
    assert_value(tu_value(snap, "mlwatch_filesystem_readonly", L), readonly);
#undef L
}

static void unescapes_octal(void **state)
{
    (void)state;
    char a[] = "/mnt/my\\040disk";
    mw_unescape_octal(a);
    assert_string_equal(a, "/mnt/my disk");
    char b[] = "/a\\011b\\012c\\134d";
    mw_unescape_octal(b);
    assert_string_equal(b, "/a\tb\nc\\d");
    char c[] = "/keep\\9\\04\\000\\x";
    mw_unescape_octal(c);
    assert_string_equal(c, "/keep\\9\\04\\000\\x");
    char d[] = "\\";
    mw_unescape_octal(d);
    assert_string_equal(d, "\\");
}

static void parses_mount_lines(void **state)
{
    (void)state;
    char text[] = "/dev/sda1 / ext4 rw,relatime 0 0\n"
                  "\n"
                  "server:/x /mnt/with\\040space nfs4 ro,hard 0 0\n"
                  "short /line\n"
                  "tmpfs /tmp tmpfs rw";
    char *p = text;
    mw_mount m;
    assert_int_equal(mw_parse_mount_line(&p, &m), 1);
    assert_string_equal(m.device, "/dev/sda1");
    assert_string_equal(m.mountpoint, "/");
    assert_string_equal(m.fstype, "ext4");
    assert_string_equal(m.options, "rw,relatime");
    assert_int_equal(mw_parse_mount_line(&p, &m), 1);
    assert_string_equal(m.mountpoint, "/mnt/with space");
    assert_string_equal(m.fstype, "nfs4");
    assert_int_equal(mw_parse_mount_line(&p, &m), -1);
    assert_int_equal(mw_parse_mount_line(&p, &m), 1);
    assert_string_equal(m.device, "tmpfs");
    assert_string_equal(m.options, "rw");
    assert_int_equal(mw_parse_mount_line(&p, &m), 0);

    char rel[] = "dev relative ext4 rw 0 0\n";
    p = rel;
    assert_int_equal(mw_parse_mount_line(&p, &m), -1);
}

static void filters(void **state)
{
    (void)state;
    assert_true(mw_mount_has_option("ro,relatime", "ro"));
    assert_true(mw_mount_has_option("rw,nosuid,ro", "ro"));
    assert_false(mw_mount_has_option("rw,errors=remount-ro", "ro"));
    assert_false(mw_mount_has_option("rw,rootcontext", "ro"));
    assert_false(mw_mount_has_option("", "ro"));

    static const char *const skipped[] = {"proc", "sysfs", "cgroup2", "tmpfs",      "overlay",
                                          "nfs",  "nfs4",  "cifs",    "fuse.sshfs", "squashfs"};
    for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++)
        assert_true(mw_fs_type_skipped(skipped[i]));
    static const char *const kept[] = {"ext4", "xfs", "vfat", "btrfs", "zfs", "fuseblk"};
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        assert_false(mw_fs_type_skipped(kept[i]));

    assert_true(mw_fs_mountpoint_skipped("/proc"));
    assert_true(mw_fs_mountpoint_skipped("/sys/fs/cgroup"));
    assert_true(mw_fs_mountpoint_skipped("/dev/shm"));
    assert_true(mw_fs_mountpoint_skipped("/run/credentials/systemd-journald.service"));
    assert_true(mw_fs_mountpoint_skipped("/var/lib/kubelet/pods/u/volumes/x"));
    assert_true(mw_fs_mountpoint_skipped("/var/lib/docker/overlay2/abc/merged"));
    assert_true(mw_fs_mountpoint_skipped("/var/lib/containerd/x/rootfs"));
    assert_false(mw_fs_mountpoint_skipped("/"));
    assert_false(mw_fs_mountpoint_skipped("/processing"));
    assert_false(mw_fs_mountpoint_skipped("/devel"));
    assert_false(mw_fs_mountpoint_skipped("/var/lib/docker")); /* a disk of its own */
    assert_false(mw_fs_mountpoint_skipped("/var/lib/kubelet"));
    assert_false(mw_fs_mountpoint_skipped("/var/lib/dockerfiles"));
}

static void collects_fixtures(void **state)
{
    (void)state;
    const char *root = tu_fixture("rapl-cpufreq");
    tu_session *s = tu_open(root, "filesystem");
    mw_snapshot *snap = tu_run(s);
    /* / and /boot; proc, sysfs, devtmpfs, tmpfs, cgroup2 and nfs4 are not. */
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 2);
    check_fs(snap, root, "/", "/dev/nvme0n1p2", "ext4", 0);
    check_fs(snap, root, "/boot", "/dev/nvme0n1p1", "vfat", 0);
    assert_false(
        tu_has(snap, "mlwatch_filesystem_size_bytes", "mountpoint", "/mnt/datasets", MW_END));
    assert_int_equal(tu_errors(s, "filesystem"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    root = tu_fixture("bare-vm");
    s = tu_open(root, "filesystem");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 1);
    check_fs(snap, root, "/", "/dev/vda1", "ext4", 0);
    assert_int_equal(tu_errors(s, "filesystem"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* A containerd disk is reported; the container plumbing below it is not. */
    root = tu_fixture("k8s-v2-systemd");
    s = tu_open(root, "filesystem");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 2);
    check_fs(snap, root, "/", "/dev/nvme0n1p1", "ext4", 0);
    check_fs(snap, root, "/var/lib/containerd", "/dev/nvme1n1", "xfs", 0);
    assert_int_equal(tu_errors(s, "filesystem"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* "rootfs /" then the real root: the last mount on / wins. */
    root = tu_fixture("k8s-v1-cgroupfs");
    s = tu_open(root, "filesystem");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 2);
    check_fs(snap, root, "/", "/dev/sda1", "xfs", 0);
    check_fs(snap, root, "/var/lib/docker", "/dev/sdb", "ext4", 0);
    assert_int_equal(tu_errors(s, "filesystem"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void escapes_duplicates_and_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_write(root, "srv/my disk/.keep", "");
    tu_write(root, "data/.keep", "");
    tu_write(root, "scratch/.keep", "");
    tu_write(root, "proc/1/mounts",
             "/dev/vda1 / ext4 rw,relatime 0 0\n"
             "/dev/vdb /srv/my\\040disk xfs ro,relatime 0 0\n"
             "/dev/vdc /data ext4 rw 0 0\n"
             "/dev/vdd /data xfs ro,noatime 0 0\n"
             "/dev/vde /scratch ext4 rw 0 0\n"
             "tmpfs /scratch tmpfs rw,size=1g 0 0\n"
             "garbage\n"
             "/dev/vdf /mnt/unplugged ext4 rw 0 0\n");
    tu_session *s = tu_open(root, "filesystem");
    mw_snapshot *snap = tu_run(s);
    check_fs(snap, root, "/srv/my disk", "/dev/vdb", "xfs", 1);
    /* Mounted twice: the last one is the one visible. */
    check_fs(snap, root, "/data", "/dev/vdd", "xfs", 1);
    assert_false(tu_has(snap, "mlwatch_filesystem_size_bytes", "device", "/dev/vdc", MW_END));
    /* Covered by a tmpfs: neither is reported. */
    assert_false(tu_has(snap, "mlwatch_filesystem_size_bytes", "mountpoint", "/scratch", MW_END));
    /* The malformed line and the statvfs failure are counted; the rest is
     * reported. */
    assert_false(
        tu_has(snap, "mlwatch_filesystem_size_bytes", "mountpoint", "/mnt/unplugged", MW_END));
    assert_int_equal(tu_errors(s, "filesystem"), 2);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 3);
    check_fs(snap, root, "/", "/dev/vda1", "ext4", 0);
    mw_snapshot_free(snap);

    /* The disk is unmounted between cycles. */
    tu_write(root, "proc/1/mounts", "/dev/vda1 / ext4 rw,relatime 0 0\n");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 1);
    assert_int_equal(tu_errors(s, "filesystem"), 2);
    mw_snapshot_free(snap);

    /* No proc/1/mounts: proc/mounts is used. Neither: an error. */
    tu_remove(root, "proc/1/mounts");
    tu_write(root, "proc/mounts", "/dev/vdb /data ext4 ro 0 0\n");
    snap = tu_run(s);
    check_fs(snap, root, "/data", "/dev/vdb", "ext4", 1);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 1);
    assert_int_equal(tu_errors(s, "filesystem"), 2);
    mw_snapshot_free(snap);
    tu_remove(root, "proc/mounts");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "filesystem"), 3);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void mounts_are_capped(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    char path[4096];
    snprintf(path, sizeof(path), "%s/m", root);
    assert_int_equal(mkdir(path, 0755), 0);
    mw_buf b;
    mw_buf_init(&b, 0);
    for (int i = 0; i < 1030; i++) {
        snprintf(path, sizeof(path), "%s/m/%d", root, i);
        assert_int_equal(mkdir(path, 0755), 0);
        mw_buf_printf(&b, "/dev/vd%d /m/%d ext4 rw 0 0\n", i, i);
    }
    tu_write(root, "proc/1/mounts", b.data);
    mw_buf_free(&b);
    tu_session *s = tu_open(root, "filesystem");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_filesystem_size_bytes"), 1024);
    assert_int_equal(tu_errors(s, "filesystem"), 1);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unescapes_octal),
        cmocka_unit_test(parses_mount_lines),
        cmocka_unit_test(filters),
        cmocka_unit_test(collects_fixtures),
        cmocka_unit_test(escapes_duplicates_and_errors),
        cmocka_unit_test(mounts_are_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
