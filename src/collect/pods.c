/* pods.c - index of /var/log/pods and /var/log/containers, see pods.h. */
#include "pods.h"
#include "cgroup_path.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DENTS_SIZE (32 * 1024)

typedef struct table {
    uint32_t *slots; /* record index + 1; 0 = empty */
    size_t nslots;
} table;

struct mw_pods {
    mw_pod_info *pods;
    size_t npods, cap_pods;
    mw_ctr_info *ctrs;
    size_t nctrs, cap_ctrs;
    table pod_index, ctr_index;
    uint64_t generation;
    char *dents; /* getdents64 buffer, reused by every scan */
};

mw_pods *mw_pods_new(void)
{
    mw_pods *p = mw_xcalloc(1, sizeof(*p));
    p->dents = mw_xmalloc(DENTS_SIZE);
    return p;
}

void mw_pods_free(mw_pods *p)
{
    if (!p) return;
    free(p->pods);
    free(p->ctrs);
    free(p->pod_index.slots);
    free(p->ctr_index.slots);
    free(p->dents);
    free(p);
}

uint64_t mw_pods_generation(const mw_pods *p)
{
    return p->generation;
}

size_t mw_pods_npods(const mw_pods *p)
{
    return p->npods;
}

size_t mw_pods_ncontainers(const mw_pods *p)
{
    return p->nctrs;
}

/* --- name parsing ------------------------------------------------------- */

static int dns_char(char c, int dots)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (dots && c == '.');
}

/* Copy s[0..n) into out[size] when it is a DNS label (or subdomain when
 * dots): lower-case alphanumerics, '-' (and '.'), 1 to size-1 characters. */
static int take_dns(const char *s, size_t n, int dots, char *out, size_t size)
{
    if (n == 0 || n >= size) return -1;
    for (size_t i = 0; i < n; i++)
        if (!dns_char(s[i], dots)) return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

static int take_hexdash(const char *s, size_t n, size_t min, int dash, char *out, size_t size)
{
    if (n < min || n >= size) return -1;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (dash && c == '-'))) return -1;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int mw_parse_pod_log_dir(const char *name, mw_pod_info *out)
{
    const char *u1 = strchr(name, '_');
    if (!u1) return -1;
    const char *u2 = strchr(u1 + 1, '_');
    if (!u2 || strchr(u2 + 1, '_')) return -1;
    if (take_dns(name, (size_t)(u1 - name), 0, out->namespace_, sizeof(out->namespace_)) < 0 ||
        take_dns(u1 + 1, (size_t)(u2 - u1 - 1), 1, out->name, sizeof(out->name)) < 0 ||
        take_hexdash(u2 + 1, strlen(u2 + 1), 8, 1, out->uid, 37) < 0) /* a UUID at most */
        return -1;
    return 0;
}

int mw_parse_container_log_name(const char *name, mw_ctr_info *out)
{
    size_t n = strlen(name);
    if (n < 4 || memcmp(name + n - 4, ".log", 4) != 0) return -1;
    n -= 4;
    const char *u1 = memchr(name, '_', n);
    if (!u1) return -1;
    const char *u2 = memchr(u1 + 1, '_', n - (size_t)(u1 + 1 - name));
    if (!u2) return -1;
    const char *rest = u2 + 1;
    size_t rlen = n - (size_t)(rest - name);
    if (memchr(rest, '_', rlen)) return -1;
    const char *dash = NULL;
    for (size_t i = rlen; i > 0; i--)
        if (rest[i - 1] == '-') {
            dash = rest + i - 1;
            break;
        }
    if (!dash) return -1;
    if (take_dns(name, (size_t)(u1 - name), 1, out->pod, sizeof(out->pod)) < 0 ||
        take_dns(u1 + 1, (size_t)(u2 - u1 - 1), 0, out->namespace_, sizeof(out->namespace_)) < 0 ||
        take_dns(rest, (size_t)(dash - rest), 0, out->name, sizeof(out->name)) < 0 ||
        take_hexdash(dash + 1, rlen - (size_t)(dash + 1 - rest), 12, 0, out->id, 65) < 0)
        return -1;
    return 0;
}

/* --- index -------------------------------------------------------------- */

static int grow_records(void **arr, size_t *cap, size_t n, size_t elem, size_t max)
{
    if (n < *cap) return 0;
    if (n >= max) return -1;
    size_t c = *cap ? *cap * 2 : 64;
    if (c > max) c = max;
    *arr = mw_xrealloc(*arr, c * elem);
    *cap = c;
    return 0;
}

/* Size the table for n keys (load at most 1/2) and empty it. */
static void table_reset(table *t, size_t n)
{
    size_t want = 64;
    while (want < n * 2)
        want *= 2;
    if (want != t->nslots) {
        free(t->slots);
        t->slots = mw_xcalloc(want, sizeof(uint32_t));
        t->nslots = want;
    } else {
        memset(t->slots, 0, want * sizeof(uint32_t));
    }
}

static void table_put(table *t, const char *key, uint32_t idx)
{
    size_t i = mw_cg_hash(key) & (t->nslots - 1);
    while (t->slots[i])
        i = (i + 1) & (t->nslots - 1);
    t->slots[i] = idx + 1;
}

typedef int (*scan_fn)(mw_pods *p, const struct dirent64 *d, void *arg);

static int add_pod(mw_pods *p, const struct dirent64 *d, void *arg)
{
    (void)arg;
    if (d->d_type != DT_DIR && d->d_type != DT_UNKNOWN) return 0;
    mw_pod_info info;
    if (mw_parse_pod_log_dir(d->d_name, &info) < 0) return 0;
    info.ncontainers = 0;
    info.sole[0] = '\0';
    if (grow_records((void **)&p->pods, &p->cap_pods, p->npods, sizeof(mw_pod_info), MW_PODS_MAX) <
        0)
        return -1;
    p->pods[p->npods++] = info;
    return 0;
}

static int add_ctr(mw_pods *p, const struct dirent64 *d, void *arg)
{
    (void)arg;
    mw_ctr_info info;
    if (mw_parse_container_log_name(d->d_name, &info) < 0) return 0;
    if (grow_records((void **)&p->ctrs, &p->cap_ctrs, p->nctrs, sizeof(mw_ctr_info),
                     MW_PODS_MAX_CONTAINERS) < 0)
        return -1;
    p->ctrs[p->nctrs++] = info;
    return 0;
}

/* A container folder of a pod's log folder: counted, the first one kept. */
static int add_folder(mw_pods *p, const struct dirent64 *d, void *arg)
{
    (void)p;
    mw_pod_info *pod = arg;
    if (d->d_type != DT_DIR && d->d_type != DT_UNKNOWN) return 0;
    char name[64];
    if (take_dns(d->d_name, strlen(d->d_name), 0, name, sizeof(name)) < 0) return 0;
    if (pod->ncontainers++ == 0) mw_strlcpy(pod->sole, name, sizeof(pod->sole));
    return 0;
}

static int list(mw_pods *p, const mw_hostfs *host, const char *path, scan_fn fn, void *arg,
                mw_pods_error *err)
{
    int fd = mw_hostfs_opendirfd(host, path);
    if (fd == -ENOENT) return 0;
    int rc = 0;
    if (fd < 0) {
        rc = fd;
        goto fail;
    }
    for (;;) {
        ssize_t n = getdents64(fd, p->dents, DENTS_SIZE);
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0) break;
        for (ssize_t off = 0; off < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(p->dents + off);
            off += d->d_reclen;
            if (d->d_name[0] == '.') continue;
            if (fn(p, d, arg) < 0) {
                close(fd);
                if (err) *err = (mw_pods_error){path, 0, "too many entries; the rest is ignored"};
                return -1;
            }
        }
    }
    close(fd);
    if (rc == 0) return 0;
fail:
    if (err) *err = (mw_pods_error){path, rc, "cannot list"};
    return -1;
}

int mw_pods_scan(mw_pods *p, const mw_hostfs *host, mw_pods_error *err)
{
    p->npods = p->nctrs = 0;
    int rc = list(p, host, "var/log/pods", add_pod, NULL, err);
    mw_pods_error err2;
    for (size_t i = 0; i < p->npods; i++) {
        mw_pod_info *pod = &p->pods[i];
        char path[sizeof("var/log/pods/") + sizeof(pod->namespace_) + sizeof(pod->name) +
                  sizeof(pod->uid)];
        snprintf(path, sizeof(path), "var/log/pods/%s_%s_%s", pod->namespace_, pod->name, pod->uid);
        /* An unreadable pod folder (removed since) counts no container. */
        if (list(p, host, path, add_folder, pod, &err2) < 0) pod->ncontainers = 0;
        if (pod->ncontainers != 1) pod->sole[0] = '\0';
    }
    if (list(p, host, "var/log/containers", add_ctr, NULL, &err2) < 0) {
        if (err && rc == 0) *err = err2;
        rc = -1;
    }
    table_reset(&p->pod_index, p->npods);
    for (size_t i = 0; i < p->npods; i++)
        table_put(&p->pod_index, p->pods[i].uid, (uint32_t)i);
    table_reset(&p->ctr_index, p->nctrs);
    for (size_t i = 0; i < p->nctrs; i++)
        table_put(&p->ctr_index, p->ctrs[i].id, (uint32_t)i);
    p->generation++;
    return rc;
}

const mw_pod_info *mw_pods_find_pod(const mw_pods *p, const char *uid)
{
    if (!p->pod_index.nslots) return NULL;
    size_t mask = p->pod_index.nslots - 1;
    for (size_t i = mw_cg_hash(uid) & mask; p->pod_index.slots[i]; i = (i + 1) & mask) {
        const mw_pod_info *r = &p->pods[p->pod_index.slots[i] - 1];
        if (strcmp(r->uid, uid) == 0) return r;
    }
    return NULL;
}

const mw_ctr_info *mw_pods_find_container(const mw_pods *p, const char *id)
{
    if (!p->ctr_index.nslots) return NULL;
    size_t mask = p->ctr_index.nslots - 1;
    for (size_t i = mw_cg_hash(id) & mask; p->ctr_index.slots[i]; i = (i + 1) & mask) {
        const mw_ctr_info *r = &p->ctrs[p->ctr_index.slots[i] - 1];
        if (strcmp(r->id, id) == 0) return r;
    }
    return NULL;
}
