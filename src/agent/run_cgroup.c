/* run_cgroup.c - the cgroup `mlwatch run` puts its command in; see
 * run_cgroup.h. */
#include "run_cgroup.h"
#include "../core/buf.h"
#include "../core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A comma-separated list holds the word. */
static int has_word(const char *list, size_t len, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && list[j] != ',')
            j++;
        if (j - i == w && memcmp(list + i, word, w) == 0) return 1;
        i = j + 1;
    }
    return 0;
}

/* The mount of the hierarchy: its root within the hierarchy and its mount
 * point. mountinfo fields: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - TYPE
 * SOURCE SUPEROPTS. */
static int find_mount(const char *mountinfo, int version, char *root, size_t rsize, char *point,
                      size_t psize)
{
    for (const char *line = mountinfo; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[2 * PATH_MAX];
        if (len < sizeof(buf)) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            char *sep = strstr(buf, " - ");
            char r[PATH_MAX], m[PATH_MAX], type[32], opts[512] = "";
            if (sep && sscanf(buf, "%*s %*s %*s %4095s %4095s", r, m) == 2 &&
                sscanf(sep + 3, "%31s %*s %511s", type, opts) >= 1) {
                int hit = version == 2 ? strcmp(type, "cgroup2") == 0
                                       : strcmp(type, "cgroup") == 0 &&
                                             has_word(opts, strlen(opts), "cpuacct");
                if (hit) {
                    mw_strlcpy(root, r, rsize);
                    mw_strlcpy(point, m, psize);
                    return 0;
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

/* The own cgroup's path in the hierarchy from /proc/self/cgroup. */
static int find_self(const char *self_cgroup, int version, char *path, size_t size)
{
    for (const char *line = self_cgroup; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            int hit = version == 2 ? c1 - line == 1 && line[0] == '0' && c2 == c1 + 1
                                   : has_word(c1 + 1, (size_t)(c2 - c1 - 1), "cpuacct");
            size_t plen = len - (size_t)(c2 + 1 - line);
            if (hit && plen < size) {
                memcpy(path, c2 + 1, plen);
                path[plen] = '\0';
                return 0;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

int mw_run_cgroup_locate(const char *mountinfo, const char *self_cgroup, int version, char *dir,
                         size_t size, char *why, size_t whysize)
{
    const char *what = version == 2 ? "cgroup v2" : "cgroup v1 cpuacct";
    char root[PATH_MAX], point[PATH_MAX], path[PATH_MAX];
    if (find_mount(mountinfo, version, root, sizeof(root), point, sizeof(point)) < 0) {
        snprintf(why, whysize, "no %s hierarchy is mounted", what);
        return -1;
    }
    if (find_self(self_cgroup, version, path, sizeof(path)) < 0) {
        snprintf(why, whysize, "/proc/self/cgroup names no %s cgroup", what);
        return -1;
    }
    const char *rest = path;
    size_t rl = strlen(root);
    if (strcmp(root, "/") != 0) { /* a bind mount of a sub-tree */
        if (strncmp(path, root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0')) {
            snprintf(why, whysize,
                     "the own %s cgroup %.200s is outside its mount %.200s (root %.200s)", what,
                     path, point, root);
            return -1;
        }
        rest = path + rl;
    }
    if (strcmp(rest, "/") == 0) rest = "";
    if ((size_t)snprintf(dir, size, "%s%s", point, rest) >= size) {
        snprintf(why, whysize, "the %s path is too long", what);
        return -1;
    }
    return 0;
}

/* A /proc/self file, NUL-terminated (at most 1 MiB: a mountinfo of
 * thousands of mounts fits). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    mw_buf b;
    mw_buf_init(&b, 1u << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && mw_buf_append(&b, chunk, n) == 0) {
    }
    fclose(f);
    return mw_buf_steal(&b, NULL); /* NUL-terminated */
}

static int try_version(mw_run_cgroup *cg, int version, const char *mountinfo, const char *self,
                       const char *name, char *why, size_t whysize)
{
    char own[PATH_MAX];
    if (mw_run_cgroup_locate(mountinfo, self, version, own, sizeof(own), why, whysize) < 0)
        return -1;
    if ((size_t)snprintf(cg->dir, sizeof(cg->dir), "%s/%s", own, name) >= sizeof(cg->dir)) {
        snprintf(why, whysize, "the cgroup path under %.400s is too long", own);
        return -1;
    }
    if (mkdir(cg->dir, 0755) < 0) {
        snprintf(why, whysize, "cannot create %.400s: %s", cg->dir, strerror(errno));
        cg->dir[0] = '\0';
        return -1;
    }
    /* A folder in a tmpfs is not a cgroup (a v1 host's /sys/fs/cgroup). */
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg->dir);
    if (access(procs, W_OK) < 0) {
        snprintf(why, whysize, "%.400s is not a writable cgroup: %s", cg->dir, strerror(errno));
        rmdir(cg->dir);
        cg->dir[0] = '\0';
        return -1;
    }
    cg->version = version;
    return 0;
}

void mw_run_cgroup_create(mw_run_cgroup *cg, mw_run_cg_mode mode, const char *name)
{
    memset(cg, 0, sizeof(*cg));
    if (mode == MW_RUN_CG_NONE) {
        snprintf(cg->why, sizeof(cg->why), "--run-cgroup none");
        return;
    }
    char *mountinfo = slurp("/proc/self/mountinfo"), *self = slurp("/proc/self/cgroup");
    if (!mountinfo || !self) {
        snprintf(cg->why, sizeof(cg->why),
                 "cannot read /proc/self/mountinfo and /proc/self/cgroup");
        free(mountinfo);
        free(self);
        return;
    }
    char why2[480] = "", why1[480] = "";
    if (mode == MW_RUN_CG_SYSTEMD) mode = MW_RUN_CG_AUTO; /* the fallback */
    if (mode != MW_RUN_CG_V1 && try_version(cg, 2, mountinfo, self, name, why2, sizeof(why2)) == 0)
        goto out;
    if (mode != MW_RUN_CG_V2 && try_version(cg, 1, mountinfo, self, name, why1, sizeof(why1)) == 0)
        goto out;
    snprintf(cg->why, sizeof(cg->why), "no cgroup of its own (%s%s%s)", why2,
             why2[0] && why1[0] ? "; " : "", why1);
out:
    free(mountinfo);
    free(self);
}

int mw_run_cgroup_adopt(mw_run_cgroup *cg, int pid, const char *unit, char *why, size_t whysize)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
    char *mountinfo = slurp("/proc/self/mountinfo"), *self = slurp(path);
    int rc = -1;
    if (!mountinfo || !self) {
        snprintf(why, whysize, "cannot read /proc/self/mountinfo and %s", path);
        goto out;
    }
    char dir[PATH_MAX], why2[480] = "";
    for (int version = 2; version >= 1 && rc < 0; version--) {
        if (mw_run_cgroup_locate(mountinfo, self, version, dir, sizeof(dir), why2, sizeof(why2)) <
            0)
            continue;
        const char *base = strrchr(dir, '/');
        if (!base || strcmp(base + 1, unit) != 0) {
            snprintf(why, whysize, "process %d is in %.400s, not in %s", pid, dir, unit);
            continue;
        }
        mw_strlcpy(cg->dir, dir, sizeof(cg->dir));
        mw_strlcpy(cg->scope, unit, sizeof(cg->scope));
        cg->version = version;
        rc = 0;
    }
    if (rc < 0 && !why[0]) snprintf(why, whysize, "%s", why2);
out:
    free(mountinfo);
    free(self);
    return rc;
}

int mw_run_cgroup_enter(const mw_run_cgroup *cg)
{
    if (!cg->version) return -1;
    char path[PATH_MAX + 16];
    /* snprintf is not async-signal-safe: the path is assembled by hand. */
    size_t n = strlen(cg->dir);
    memcpy(path, cg->dir, n);
    memcpy(path + n, "/cgroup.procs", sizeof("/cgroup.procs"));
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t w = write(fd, "0\n", 2); /* 0: the writing process (v1 and v2) */
    close(fd);
    return w == 2 ? 0 : -1;
}

static double field(const char *text, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = text; (p = strstr(p, key)); p += k)
        if ((p == text || p[-1] == '\n') && p[k] == ' ') return strtod(p + k + 1, NULL);
    return 0;
}

int mw_run_cgroup_cpu(const mw_run_cgroup *cg, double *cpu, double *user, double *sys)
{
    char path[PATH_MAX + 32], buf[4096];
    if (cg->version == 2) {
        snprintf(path, sizeof(path), "%s/cpu.stat", cg->dir);
        if (mw_read_small_file(path, buf, sizeof(buf)) < 0) return -1;
        *cpu = field(buf, "usage_usec") / 1e6;
        *user = field(buf, "user_usec") / 1e6;
        *sys = field(buf, "system_usec") / 1e6;
        return 0;
    }
    if (cg->version != 1) return -1;
    snprintf(path, sizeof(path), "%s/cpuacct.usage", cg->dir);
    if (mw_read_small_file(path, buf, sizeof(buf)) < 0) return -1;
    *cpu = strtod(buf, NULL) / 1e9; /* nanoseconds */
    snprintf(path, sizeof(path), "%s/cpuacct.stat", cg->dir);
    if (mw_read_small_file(path, buf, sizeof(buf)) < 0) return -1;
    double hz = (double)sysconf(_SC_CLK_TCK); /* USER_HZ ticks */
    *user = field(buf, "user") / hz;
    *sys = field(buf, "system") / hz;
    return 0;
}

size_t mw_run_cgroup_pids(const mw_run_cgroup *cg, int *pids, size_t cap)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/cgroup.procs", cg->dir);
    FILE *f = cg->version ? fopen(path, "r") : NULL;
    if (!f) return 0;
    size_t n = 0;
    int pid;
    while (n < cap && fscanf(f, "%d", &pid) == 1)
        pids[n++] = pid;
    fclose(f);
    return n;
}

int mw_run_cgroup_remove(mw_run_cgroup *cg)
{
    if (!cg->version) return 0;
    if (cg->scope[0]) { /* systemd's: it goes when its last process ends */
        int one;
        if (mw_run_cgroup_pids(cg, &one, 1) > 0) {
            errno = EBUSY;
            return -1;
        }
        cg->version = 0;
        return 0;
    }
    if (rmdir(cg->dir) < 0) return -1;
    cg->version = 0;
    return 0;
}

void mw_run_cgroup_describe(const mw_run_cgroup *cg, char *out, size_t size)
{
    char no[600] = "";
    if (cg->systemd_why[0]) snprintf(no, sizeof(no), " (no systemd scope: %s)", cg->systemd_why);
    if (cg->version && cg->scope[0])
        snprintf(out, size, "systemd scope %s, cgroup v%d %s", cg->scope, cg->version, cg->dir);
    else if (cg->version)
        snprintf(out, size, "cgroup v%d %s%s", cg->version, cg->dir, no);
    else
        snprintf(out, size, "process tree: %s%s", cg->why, no);
}
