/* test_hostfs.c - bounded reads under a root prefix (src/core/hostfs.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/hostfs.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/mlwatch-hostfs-XXXXXX");
    if (!mkdtemp(root)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* Write exactly n bytes of a repeating pattern to root/rel. */
static void write_n(const char *rel, size_t n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc('a' + (int)(i % 26), f);
    assert_int_equal(fclose(f), 0);
}

static void check_pattern(const mw_buf *b, size_t n)
{
    assert_int_equal(b->len, n);
    for (size_t i = 0; i < n; i++)
        if (b->data[i] != 'a' + (int)(i % 26)) fail_msg("byte %zu differs", i);
    assert_int_equal(b->data[n], '\0');
}

static void open_close(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    assert_true(h.rootfd >= 0);
    assert_string_equal(h.root, root);
    mw_hostfs_close(&h);
    assert_int_equal(h.rootfd, -1);
    mw_hostfs_close(&h); /* twice is harmless */

    char missing[300];
    snprintf(missing, sizeof(missing), "%s/nope", root);
    assert_int_equal(mw_hostfs_open(&h, missing), -ENOENT);
    tu_write(root, "plainfile", "x");
    char file[300];
    snprintf(file, sizeof(file), "%s/plainfile", root);
    assert_int_equal(mw_hostfs_open(&h, file), -ENOTDIR);

    /* NULL or empty root means the real root. */
    assert_int_equal(mw_hostfs_open(&h, ""), 0);
    assert_string_equal(h.root, "/");
    mw_hostfs_close(&h);
}

static void read_whole_files(void **state)
{
    (void)state;
    tu_write(root, "proc/loadavg", "0.52 0.58 1.59 3/1054 123456\n");
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    mw_buf b;
    mw_buf_init(&b, 0);
    assert_int_equal(mw_hostfs_read(&h, "proc/loadavg", &b, 0), 0);
    assert_string_equal(b.data, "0.52 0.58 1.59 3/1054 123456\n");
    assert_int_equal(b.len, 29);
    /* A leading '/' is relative to the root, not the real "/". */
    assert_int_equal(mw_hostfs_read(&h, "///proc/loadavg", &b, 0), 0);
    assert_int_equal(b.len, 29);

    /* Errors: -errno, and the buffer holds nothing from an earlier read. */
    assert_int_equal(mw_hostfs_read(&h, "proc/missing", &b, 0), -ENOENT);
    assert_int_equal(b.len, 0);
    assert_int_equal(mw_hostfs_read(&h, "proc/loadavg", &b, 0), 0);
    assert_int_equal(mw_hostfs_read(&h, "proc", &b, 0), -EISDIR);
    assert_int_equal(b.len, 0);
    assert_int_equal(mw_hostfs_read(&h, "/", &b, 0), -EISDIR);

    /* An empty file is an empty string. */
    tu_write(root, "empty", "");
    assert_int_equal(mw_hostfs_read(&h, "empty", &b, 0), 0);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    mw_buf_free(&b);
    mw_hostfs_close(&h);
}

static void size_limits(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    mw_buf b;
    mw_buf_init(&b, 0);

    /* The max argument: exactly max is fine, one byte more is -EFBIG. */
    write_n("f10000", 10000);
    assert_int_equal(mw_hostfs_read(&h, "f10000", &b, 10000), 0);
    check_pattern(&b, 10000);
    assert_int_equal(mw_hostfs_read(&h, "f10000", &b, 9999), -EFBIG);
    assert_int_equal(b.len, 0);

    /* Default bound (max 0): MW_HOSTFS_MAX_FILE. */
    write_n("big", MW_HOSTFS_MAX_FILE);
    assert_int_equal(mw_hostfs_read(&h, "big", &b, 0), 0);
    check_pattern(&b, MW_HOSTFS_MAX_FILE);
    write_n("big", MW_HOSTFS_MAX_FILE + 1);
    assert_int_equal(mw_hostfs_read(&h, "big", &b, 0), -EFBIG);
    assert_int_equal(b.len, 0);
    mw_buf_free(&b);

    /* The buffer's own bound. A collector's scratch buffer is bounded (see
     * collector.c); a file that fits in it must be read whole, whatever its
     * size relative to the read chunk, and one that does not is -EFBIG. */
    const size_t bounds[] = {100, 4096, 8192, MW_HOSTFS_MAX_FILE + 1};
    const size_t sizes[] = {0,
                            10,
                            99,
                            100,
                            101,
                            4095,
                            4096,
                            4097,
                            5000,
                            8191,
                            8192,
                            8193,
                            MW_HOSTFS_MAX_FILE - 100,
                            MW_HOSTFS_MAX_FILE};
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
            mw_buf_init(&b, bounds[i]);
            write_n("sized", sizes[j]);
            int rc = mw_hostfs_read(&h, "sized", &b, 0);
            int want = sizes[j] <= bounds[i] ? 0 : -EFBIG;
            if (rc != want)
                fail_msg("buffer max %zu, file %zu bytes: got %d, want %d", bounds[i], sizes[j], rc,
                         want);
            if (rc == 0) check_pattern(&b, sizes[j]);
            if (rc < 0) assert_int_equal(b.len, 0);
            assert_true(b.cap <= bounds[i] + 1);
            mw_buf_free(&b);
        }
    }
    mw_hostfs_close(&h);
}

static void procfs_files(void **state)
{
    (void)state;
    /* procfs reports size 0: the reader must not trust st_size. */
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, "/"), 0);
    mw_buf b;
    mw_buf_init(&b, 0);
    assert_int_equal(mw_hostfs_read(&h, "/proc/self/status", &b, 0), 0);
    assert_true(b.len > 100);
    assert_non_null(strstr(b.data, "\nPid:\t"));
    assert_int_equal(b.data[b.len], '\0');
    mw_buf_free(&b);
    mw_hostfs_close(&h);
}

/* Under a root other than "/", an absolute symlink or ".." resolves inside
 * the root, as it would on the host the root is a mount of. */
static void symlinks_stay_in_root(void **state)
{
    (void)state;
    char path[1024], sub[512];
    snprintf(sub, sizeof(sub), "%s/usr/lib", root);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' '%s/etc'", sub, root);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/os-release", sub);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("ID=fixture\n", f);
    fclose(f);
    /* /etc/os-release -> /usr/lib/os-release: the root's, not this machine's. */
    snprintf(path, sizeof(path), "%s/etc/os-release", root);
    assert_int_equal(symlink("/usr/lib/os-release", path), 0);
    /* /etc/escape -> ../../../../etc/hostname: ".." stops at the root. */
    snprintf(path, sizeof(path), "%s/etc/escape", root);
    assert_int_equal(symlink("../../../../../usr/lib/os-release", path), 0);
    /* /etc/libdir -> /usr/lib, a directory. */
    snprintf(path, sizeof(path), "%s/etc/libdir", root);
    assert_int_equal(symlink("/usr/lib", path), 0);

    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    mw_buf b;
    mw_buf_init(&b, 0);
    assert_int_equal(mw_hostfs_read(&h, "/etc/os-release", &b, 0), 0);
    assert_string_equal(b.data, "ID=fixture\n");
    assert_int_equal(mw_hostfs_read(&h, "etc/escape", &b, 0), 0);
    assert_string_equal(b.data, "ID=fixture\n");
    assert_int_equal(mw_hostfs_read(&h, "../../usr/lib/os-release", &b, 0), 0);
    assert_string_equal(b.data, "ID=fixture\n");
    int fd = mw_hostfs_opendirfd(&h, "etc/libdir");
    assert_true(fd >= 0);
    assert_int_equal(mw_readat(fd, "os-release", &b, 0), 0);
    assert_string_equal(b.data, "ID=fixture\n");
    close(fd);
    assert_int_equal(mw_hostfs_read(&h, "etc/missing", &b, 0), -ENOENT);
    assert_int_equal(b.len, 0);
    mw_buf_free(&b);
    mw_hostfs_close(&h);
}

static void small_files(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    tu_write(root, "sys/a/u_plain", "123456789\n");
    tu_write(root, "sys/a/u_nonl", "42");
    tu_write(root, "sys/a/u_spaces", "7  \n\n");
    tu_write(root, "sys/a/u_max", "18446744073709551615\n");
    tu_write(root, "sys/a/u_over", "18446744073709551616\n");
    tu_write(root, "sys/a/u_text", "max\n");
    tu_write(root, "sys/a/u_neg", "-1\n");
    tu_write(root, "sys/a/u_two", "1 2\n");
    tu_write(root, "sys/a/u_empty", "");
    tu_write(root, "sys/a/line", "Intel(R) Xeon(R)\nsecond line\n");
    tu_write(root, "sys/a/line_nonl", "no newline");
    int dfd = mw_hostfs_opendirfd(&h, "/sys/a");
    assert_true(dfd >= 0);

    uint64_t v = 99;
    assert_int_equal(mw_read_u64at(dfd, "u_plain", &v), 0);
    assert_true(v == 123456789);
    assert_int_equal(mw_read_u64at(dfd, "u_nonl", &v), 0);
    assert_true(v == 42);
    assert_int_equal(mw_read_u64at(dfd, "u_spaces", &v), 0);
    assert_true(v == 7);
    assert_int_equal(mw_read_u64at(dfd, "u_max", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(mw_read_u64at(dfd, "u_over", &v), -EINVAL);
    assert_int_equal(mw_read_u64at(dfd, "u_text", &v), -EINVAL);
    assert_int_equal(mw_read_u64at(dfd, "u_neg", &v), -EINVAL);
    assert_int_equal(mw_read_u64at(dfd, "u_two", &v), -EINVAL);
    assert_int_equal(mw_read_u64at(dfd, "u_empty", &v), -EINVAL);
    assert_int_equal(mw_read_u64at(dfd, "u_missing", &v), -ENOENT);

    char line[64];
    assert_int_equal(mw_read_lineat(dfd, "line", line, sizeof(line)), 0);
    assert_string_equal(line, "Intel(R) Xeon(R)");
    assert_int_equal(mw_read_lineat(dfd, "line_nonl", line, sizeof(line)), 0);
    assert_string_equal(line, "no newline");
    assert_int_equal(mw_read_lineat(dfd, "u_empty", line, sizeof(line)), 0);
    assert_string_equal(line, "");
    char tiny[6];
    assert_int_equal(mw_read_lineat(dfd, "line", tiny, sizeof(tiny)), 0);
    assert_string_equal(tiny, "Intel"); /* cut, still terminated */
    assert_int_equal(mw_read_lineat(dfd, "nope", line, sizeof(line)), -ENOENT);

    /* mw_readat relative to the directory. */
    mw_buf b;
    mw_buf_init(&b, 0);
    assert_int_equal(mw_readat(dfd, "u_plain", &b, 0), 0);
    assert_string_equal(b.data, "123456789\n");
    mw_buf_free(&b);

    /* Listing through a dup: the caller's fd stays usable after closedir. */
    DIR *d = mw_fdopendir_dup(dfd);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    assert_int_equal(n, 11);
    assert_int_equal(mw_read_u64at(dfd, "u_nonl", &v), 0);
    assert_int_equal(fcntl(dfd, F_GETFD), FD_CLOEXEC);
    close(dfd);

    assert_int_equal(mw_hostfs_opendirfd(&h, "sys/a/line"), -ENOTDIR);
    assert_int_equal(mw_hostfs_opendirfd(&h, "sys/none"), -ENOENT);
    assert_null(mw_fdopendir_dup(-1));
    assert_int_equal(errno, EBADF);

    /* A folder under the root as a stream; its fd serves openat. */
    d = mw_hostfs_opendir(&h, "sys/a");
    assert_non_null(d);
    n = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    assert_int_equal(n, 11);
    assert_int_equal(mw_read_u64at(dirfd(d), "u_plain", &v), 0);
    assert_true(v == 123456789);
    closedir(d);
    errno = 0;
    assert_null(mw_hostfs_opendir(&h, "sys/none"));
    assert_int_equal(errno, ENOENT);
    assert_null(mw_hostfs_opendir(&h, "sys/a/line"));
    assert_int_equal(errno, ENOTDIR);
    /* fdopendir of a file fails, and the fd it was given is closed. */
    int ffd = openat(h.rootfd, "sys/a/line", O_RDONLY | O_CLOEXEC);
    assert_true(ffd >= 0);
    assert_null(mw_fdopendir(ffd));
    assert_int_equal(errno, ENOTDIR);
    assert_int_equal(fcntl(ffd, F_GETFD), -1);
    assert_int_equal(errno, EBADF);
    mw_hostfs_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(open_close),  cmocka_unit_test(read_whole_files),
        cmocka_unit_test(size_limits), cmocka_unit_test(procfs_files),
        cmocka_unit_test(small_files), cmocka_unit_test(symlinks_stay_in_root),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
