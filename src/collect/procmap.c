/* procmap.c - process-to-container map, see procmap.h.
 *
 * Two tables: `cur`, which lookups read (under the mutex), and `next`, which
 * the walk fills between begin() and end() without the mutex (begin, set and
 * end are called from one thread, the cgroup collector's); end() swaps them
 * under the mutex, so a lookup always sees one complete walk. The old table's
 * memory is reused by the next walk: no allocation per cycle once warm.
 *
 * Each table holds the distinct cgroups set in the walk (by path: the
 * container records are stored once, not per PID, and their strings at
 * their own length, ~250 bytes instead of the 1,168 of a mw_container_ref)
 * and an open-addressing PID -> cgroup index. set(m, 0, ref) registers a cgroup
 * without a process, so that processes that appear in it (or in a cgroup
 * below it) after the walk are still resolved.
 *
 * A PID missing from the table (started since the walk, or living in a
 * sub-cgroup of a container) is resolved from /proc/<pid>/cgroup: the path
 * (mw_parse_proc_cgroup) and then each parent path are looked up among the
 * cgroups of the last walk; a path seen from another cgroup namespace
 * ("/../../kubepods...") is resolved by the container ID in its components.
 * Results, positive and negative, are cached until the next end(), in a
 * fixed direct-mapped cache. A PID that no longer exists returns -1.
 *
 * Bounds: MAX_PIDS processes and MAX_REFS cgroups per walk (the rest is
 * dropped and counted), CACHE_SLOTS cached fallback results. */
#include "procmap.h"
#include "cgroup_path.h"
#include "../core/buf.h"
#include "../core/log.h"
#include "../core/util.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIDS (1u << 20)
#define MAX_REFS (1u << 16)
#define CACHE_SLOTS 1024

typedef struct pm_pid {
    int32_t pid; /* 0 = empty slot */
    uint32_t ref;
} pm_pid;

/* A container record: offsets of its strings in the table's strs. */
enum { PM_ID, PM_POD_UID, PM_NAMESPACE, PM_POD, PM_CONTAINER, PM_CGROUP, PM_NFIELDS };
typedef struct pm_ref {
    uint32_t off[PM_NFIELDS];
} pm_ref;

typedef struct pm_table {
    pm_ref *refs;
    size_t nrefs, cap_refs;
    char *strs; /* the records' strings, each ending in '\0' */
    size_t nstrs, cap_strs;
    uint32_t *ref_slots; /* ref index + 1, by cgroup path */
    size_t nref_slots;
    pm_pid *pids;
    size_t npids, npid_slots;
    size_t last_ref; /* the ref of the previous set(), valid when nrefs > 0 */
} pm_table;

typedef struct pm_cached {
    int32_t pid;
    int32_t ref; /* -1: not in any known cgroup */
    uint64_t gen;
} pm_cached;

struct mw_procmap {
    pthread_mutex_t lock;
    const mw_hostfs *host;
    pm_table tables[2];
    pm_table *cur, *next;
    uint64_t gen; /* walks completed; cache entries of older walks are stale */
    pm_cached cache[CACHE_SLOTS];
    uint64_t dropped; /* PIDs or cgroups beyond the bounds in the walk being built */
};

static size_t hash_pid(int pid, size_t mask)
{
    return (size_t)(((uint64_t)(uint32_t)pid * 0x9E3779B97F4A7C15ULL) >> 20) & mask;
}

mw_procmap *mw_procmap_new(const mw_hostfs *host)
{
    mw_procmap *m = mw_xcalloc(1, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
    m->host = host;
    m->cur = &m->tables[0];
    m->next = &m->tables[1];
    return m;
}

static void table_free(pm_table *t)
{
    free(t->refs);
    free(t->strs);
    free(t->ref_slots);
    free(t->pids);
}

void mw_procmap_free(mw_procmap *m)
{
    if (!m) return;
    table_free(&m->tables[0]);
    table_free(&m->tables[1]);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* --- building (walk thread) --------------------------------------------- */

void mw_procmap_begin(mw_procmap *m)
{
    pm_table *t = m->next;
    /* Shrink a PID table that the last walks left far larger than needed. */
    if (t->npid_slots > 4096 && m->cur->npids * 8 < t->npid_slots) {
        free(t->pids);
        t->pids = NULL;
        t->npid_slots = 0;
    }
    if (t->pids) memset(t->pids, 0, t->npid_slots * sizeof(pm_pid));
    if (t->ref_slots) memset(t->ref_slots, 0, t->nref_slots * sizeof(uint32_t));
    t->npids = 0;
    t->nrefs = 0;
    t->nstrs = 0;
    m->dropped = 0;
}

static const char *ref_str(const pm_table *t, size_t r, int field)
{
    return t->strs + t->refs[r].off[field];
}

static void ref_unpack(const pm_table *t, size_t r, mw_container_ref *out)
{
    mw_strlcpy(out->id, ref_str(t, r, PM_ID), sizeof(out->id));
    mw_strlcpy(out->pod_uid, ref_str(t, r, PM_POD_UID), sizeof(out->pod_uid));
    mw_strlcpy(out->namespace_, ref_str(t, r, PM_NAMESPACE), sizeof(out->namespace_));
    mw_strlcpy(out->pod, ref_str(t, r, PM_POD), sizeof(out->pod));
    mw_strlcpy(out->container, ref_str(t, r, PM_CONTAINER), sizeof(out->container));
    mw_strlcpy(out->cgroup, ref_str(t, r, PM_CGROUP), sizeof(out->cgroup));
}

/* Appends s (at most max - 1 bytes of it: the field's size) to t->strs. */
static uint32_t put_str(pm_table *t, const char *s, size_t max)
{
    size_t len = strnlen(s, max - 1);
    if (t->nstrs + len + 1 > t->cap_strs) {
        size_t cap = t->cap_strs ? t->cap_strs : 16384;
        while (cap < t->nstrs + len + 1)
            cap *= 2;
        t->strs = mw_xrealloc(t->strs, cap);
        t->cap_strs = cap;
    }
    uint32_t off = (uint32_t)t->nstrs;
    memcpy(t->strs + off, s, len);
    t->strs[off + len] = '\0';
    t->nstrs += len + 1;
    return off;
}

static size_t ref_slot(const pm_table *t, const char *path)
{
    size_t mask = t->nref_slots - 1;
    size_t i = mw_cg_hash(path) & mask;
    while (t->ref_slots[i] && strcmp(ref_str(t, t->ref_slots[i] - 1, PM_CGROUP), path) != 0)
        i = (i + 1) & mask;
    return i;
}

static void refs_rehash(pm_table *t, size_t nslots)
{
    free(t->ref_slots);
    t->ref_slots = mw_xcalloc(nslots, sizeof(uint32_t));
    t->nref_slots = nslots;
    for (size_t r = 0; r < t->nrefs; r++)
        t->ref_slots[ref_slot(t, ref_str(t, r, PM_CGROUP))] = r + 1;
}

/* Index of REF in t, added when new; -1 past the bound. */
static long intern_ref(pm_table *t, const mw_container_ref *ref)
{
    if (t->nrefs && strcmp(ref_str(t, t->last_ref, PM_CGROUP), ref->cgroup) == 0)
        return (long)t->last_ref;
    if ((t->nrefs + 1) * 2 > t->nref_slots) refs_rehash(t, t->nref_slots ? t->nref_slots * 2 : 64);
    size_t i = ref_slot(t, ref->cgroup);
    if (!t->ref_slots[i]) {
        if (t->nrefs >= MAX_REFS) return -1;
        if (t->nrefs == t->cap_refs) {
            t->cap_refs = t->cap_refs ? t->cap_refs * 2 : 64;
            t->refs = mw_xrealloc(t->refs, t->cap_refs * sizeof(*t->refs));
        }
        pm_ref *p = &t->refs[t->nrefs];
        p->off[PM_ID] = put_str(t, ref->id, sizeof(ref->id));
        p->off[PM_POD_UID] = put_str(t, ref->pod_uid, sizeof(ref->pod_uid));
        p->off[PM_NAMESPACE] = put_str(t, ref->namespace_, sizeof(ref->namespace_));
        p->off[PM_POD] = put_str(t, ref->pod, sizeof(ref->pod));
        p->off[PM_CONTAINER] = put_str(t, ref->container, sizeof(ref->container));
        p->off[PM_CGROUP] = put_str(t, ref->cgroup, sizeof(ref->cgroup));
        t->ref_slots[i] = (uint32_t)++t->nrefs;
    }
    t->last_ref = t->ref_slots[i] - 1;
    return (long)t->last_ref;
}

static void pids_insert(pm_pid *slots, size_t mask, int pid, uint32_t ref)
{
    size_t i = hash_pid(pid, mask);
    while (slots[i].pid && slots[i].pid != pid)
        i = (i + 1) & mask;
    slots[i].pid = pid;
    slots[i].ref = ref;
}

void mw_procmap_set(mw_procmap *m, int pid, const mw_container_ref *ref)
{
    pm_table *t = m->next;
    long r = intern_ref(t, ref);
    if (r < 0) {
        m->dropped++;
        return;
    }
    if (pid <= 0) return;
    if (t->npids >= MAX_PIDS) {
        m->dropped++;
        return;
    }
    if ((t->npids + 1) * 2 > t->npid_slots) {
        size_t n = t->npid_slots ? t->npid_slots * 2 : 1024;
        pm_pid *slots = mw_xcalloc(n, sizeof(pm_pid));
        for (size_t i = 0; i < t->npid_slots; i++)
            if (t->pids[i].pid) pids_insert(slots, n - 1, t->pids[i].pid, t->pids[i].ref);
        free(t->pids);
        t->pids = slots;
        t->npid_slots = n;
    }
    size_t mask = t->npid_slots - 1;
    size_t i = hash_pid(pid, mask);
    while (t->pids[i].pid && t->pids[i].pid != pid)
        i = (i + 1) & mask;
    if (!t->pids[i].pid) t->npids++;
    t->pids[i].pid = pid;
    t->pids[i].ref = (uint32_t)r;
}

void mw_procmap_rename(mw_procmap *m, const char *cgroup, const char *container)
{
    pm_table *t = m->next;
    if (!t->nref_slots) return;
    size_t i = ref_slot(t, cgroup);
    if (!t->ref_slots[i]) return;
    t->refs[t->ref_slots[i] - 1].off[PM_CONTAINER] =
        put_str(t, container, sizeof(((mw_container_ref *)0)->container));
}

void mw_procmap_end(mw_procmap *m)
{
    if (m->dropped)
        mw_log_once(MW_LOG_WARN, "procmap", "procmap-bounds",
                    "%llu processes or cgroups beyond the map's bounds (%u processes, %u cgroups) "
                    "were left out",
                    (unsigned long long)m->dropped, MAX_PIDS, MAX_REFS);
    pthread_mutex_lock(&m->lock);
    pm_table *t = m->cur;
    m->cur = m->next;
    m->next = t;
    m->gen++;
    pthread_mutex_unlock(&m->lock);
}

/* --- lookups (any thread) ----------------------------------------------- */

static long find_pid(const pm_table *t, int pid)
{
    if (!t->npid_slots) return -1;
    size_t mask = t->npid_slots - 1;
    for (size_t i = hash_pid(pid, mask); t->pids[i].pid; i = (i + 1) & mask)
        if (t->pids[i].pid == pid) return t->pids[i].ref;
    return -1;
}

static long find_path(const pm_table *t, const char *path)
{
    if (!t->nref_slots) return -1;
    size_t i = ref_slot(t, path);
    return t->ref_slots[i] ? (long)t->ref_slots[i] - 1 : -1;
}

/* PATH or its closest known ancestor; then, for a path seen from another
 * cgroup namespace, the container named by one of its components. */
static long resolve(const pm_table *t, const char *cgpath)
{
    char path[sizeof(((mw_container_ref *)0)->cgroup)];
    mw_strlcpy(path, cgpath, sizeof(path));
    int foreign = 0;
    while (strncmp(path, "/..", 3) == 0 && (path[3] == '/' || path[3] == '\0')) {
        memmove(path, path + 3, strlen(path + 3) + 1);
        foreign = 1;
    }
    if (!foreign) {
        size_t len = strlen(path);
        while (len > 1) {
            long r = find_path(t, path);
            if (r >= 0) return r;
            while (len > 0 && path[len - 1] != '/')
                len--;
            if (len > 1) len--; /* drop the '/' too, except the root's */
            path[len] = '\0';
        }
        return -1;
    }
    /* Deepest component naming a container first. */
    size_t end = strlen(path);
    while (end > 0) {
        size_t start = end;
        while (start > 0 && path[start - 1] != '/')
            start--;
        char id[MW_CG_ID_MAX];
        if (mw_cg_component_id(path + start, end - start, id) == 0)
            for (size_t r = 0; r < t->nrefs; r++)
                if (strcmp(ref_str(t, r, PM_ID), id) == 0) return (long)r;
        end = start > 0 ? start - 1 : 0;
    }
    return -1;
}

int mw_procmap_lookup(mw_procmap *m, int pid, mw_container_ref *out)
{
    if (pid <= 0) return -1;
    pthread_mutex_lock(&m->lock);
    long r = find_pid(m->cur, pid);
    pm_cached *c = &m->cache[(uint32_t)pid % CACHE_SLOTS];
    if (r < 0 && c->pid == pid && c->gen == m->gen) {
        if (c->ref < 0) {
            pthread_mutex_unlock(&m->lock);
            return -1;
        }
        r = c->ref;
    }
    if (r >= 0) {
        ref_unpack(m->cur, (size_t)r, out);
        pthread_mutex_unlock(&m->lock);
        return 0;
    }
    pthread_mutex_unlock(&m->lock);

    /* Not seen by the walk: ask the kernel where the process is. */
    char rel[64], path[sizeof(out->cgroup)];
    snprintf(rel, sizeof(rel), "proc/%d/cgroup", pid);
    mw_buf buf;
    mw_buf_init(&buf, 64 * 1024);
    int rc = mw_hostfs_read(m->host, rel, &buf, 64 * 1024);
    int parsed = rc == 0 && buf.data && mw_parse_proc_cgroup(buf.data, path, sizeof(path)) == 0;
    mw_buf_free(&buf);
    if (rc < 0) return -1; /* exited (or never existed): nothing to cache */

    pthread_mutex_lock(&m->lock);
    r = parsed ? resolve(m->cur, path) : -1;
    c = &m->cache[(uint32_t)pid % CACHE_SLOTS];
    c->pid = pid;
    c->ref = (int32_t)r;
    c->gen = m->gen;
    if (r >= 0) ref_unpack(m->cur, (size_t)r, out);
    pthread_mutex_unlock(&m->lock);
    return r >= 0 ? 0 : -1;
}

size_t mw_procmap_size(mw_procmap *m)
{
    pthread_mutex_lock(&m->lock);
    size_t n = m->cur->npids;
    pthread_mutex_unlock(&m->lock);
    return n;
}
