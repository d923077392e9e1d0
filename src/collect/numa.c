/* numa.c - per-NUMA-node memory, CPUs and allocation counters from
 * sys/devices/system/node/nodeN/{meminfo,cpulist,numastat}.
 *
 * The nodes are listed once in init and listed again after a cycle that met
 * an error (memory hot-unplug). A host without sys/devices/system/node (a
 * kernel built without NUMA) has nothing to report: the collector is absent. */
#include "collector.h"
#include "numa.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NODE_DIR "sys/devices/system/node"
#define MAX_NODES 1024 /* the kernel's MAX_NUMNODES at NODES_SHIFT=10 */
#define MAX_CPUS 8192
#define NODE_FILE_MAX (64u << 10)

/* clang-format off */
MW_METRIC(MEM_TOTAL, MW_GAUGE, "mlwatch_numa_node_memory_total_bytes", "bytes", "Usable memory of the NUMA node (MemTotal).");
MW_METRIC(MEM_FREE, MW_GAUGE, "mlwatch_numa_node_memory_free_bytes", "bytes", "Unused memory of the NUMA node (MemFree).");
MW_METRIC(MEM_USED, MW_GAUGE, "mlwatch_numa_node_memory_used_bytes", "bytes", "Memory of the NUMA node in use (MemUsed).");
MW_METRIC(CPUS, MW_GAUGE, "mlwatch_numa_node_cpus", "", "CPUs of the NUMA node (cpulist).");
MW_METRIC(INFO, MW_INFO, "mlwatch_numa_node_info", "", "The CPU list of each NUMA node; the value is always 1.");
MW_METRIC(HITS, MW_COUNTER, "mlwatch_numa_node_hits_total", "", "Pages allocated on this node as intended (numa_hit).");
MW_METRIC(MISSES, MW_COUNTER, "mlwatch_numa_node_misses_total", "", "Pages allocated on this node though intended for another (numa_miss).");
MW_METRIC(FOREIGN, MW_COUNTER, "mlwatch_numa_node_foreign_total", "", "Pages intended for this node but allocated on another (numa_foreign).");
/* clang-format on */

/* ---- parsers ---- */

static int key_is(const char *key, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(key, want, len) == 0;
}

int mw_parse_node_meminfo(const char *text, mw_node_meminfo *out)
{
    memset(out, 0, sizeof(*out));
    unsigned found = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (!nl || strncmp(p, "Node ", 5) != 0) return -1;
        p += 5;
        mw_skip_blanks(&p);
        uint64_t node;
        if (mw_parse_u64(&p, &node) < 0 || (found && node != out->node)) return -1;
        out->node = node;
        found |= 8;
        if (*p != ' ' && *p != '\t') return -1;
        mw_skip_blanks(&p);
        const char *key = p;
        const char *colon = memchr(p, ':', (size_t)(nl - p));
        if (!colon || colon == key) return -1;
        size_t klen = (size_t)(colon - key);
        if (memchr(key, ' ', klen) || memchr(key, '\t', klen)) return -1;
        p = colon + 1;
        mw_skip_blanks(&p);
        uint64_t v;
        if (mw_parse_u64(&p, &v) < 0) return -1;
        int kb = strncmp(p, " kB", 3) == 0;
        if (kb) p += 3;
        mw_skip_blanks(&p);
        if (p != nl) return -1;
        uint64_t *dst = NULL;
        unsigned bit = 0;
        if (key_is(key, klen, "MemTotal"))
            dst = &out->total, bit = 1;
        else if (key_is(key, klen, "MemFree"))
            dst = &out->free, bit = 2;
        else if (key_is(key, klen, "MemUsed"))
            dst = &out->used, bit = 4;
        if (dst) {
            if (!kb || (found & bit) || v > UINT64_MAX / 1024) return -1;
            *dst = v * 1024;
            found |= bit;
        }
        p = nl + 1;
    }
    if ((found & 3) != 3) return -1;
    out->has_used = (found & 4) != 0;
    if (!out->has_used) out->used = out->total >= out->free ? out->total - out->free : 0;
    return 0;
}

int mw_parse_numastat(const char *text, mw_numastat *out)
{
    memset(out, 0, sizeof(*out));
    unsigned found = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (!nl) return -1;
        const char *sp = memchr(p, ' ', (size_t)(nl - p));
        if (!sp || sp == p) return -1;
        const char *v = sp + 1;
        uint64_t x;
        if (mw_parse_u64(&v, &x) < 0 || v != nl) return -1;
        size_t klen = (size_t)(sp - p);
        uint64_t *dst = NULL;
        unsigned bit = 0;
        if (key_is(p, klen, "numa_hit"))
            dst = &out->hit, bit = 1;
        else if (key_is(p, klen, "numa_miss"))
            dst = &out->miss, bit = 2;
        else if (key_is(p, klen, "numa_foreign"))
            dst = &out->foreign, bit = 4;
        if (dst) {
            if (found & bit) return -1;
            *dst = x;
            found |= bit;
        }
        p = nl + 1;
    }
    return found == 7 ? 0 : -1;
}

/* ---- collector ---- */

typedef struct numa_state {
    int dirfd;       /* sys/devices/system/node */
    uint32_t *nodes; /* ascending */
    size_t nnodes, cap;
    int rescan;
    uint64_t cpubits[MAX_CPUS / 64];
} numa_state;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void scan(numa_state *st)
{
    st->nnodes = 0;
    DIR *d = mw_fdopendir_dup(st->dirfd);
    if (!d) return;
    /* The dup shares the file offset that the previous listing left at the
     * end of the directory. */
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *p = e->d_name;
        uint64_t id;
        if (strncmp(p, "node", 4) != 0) continue;
        p += 4;
        if ((p[0] == '0' && p[1]) || mw_parse_u64(&p, &id) < 0 || *p || id >= UINT32_MAX) continue;
        if (st->nnodes == st->cap) {
            if (st->cap >= MAX_NODES) break;
            st->cap = st->cap ? st->cap * 2 : 8;
            st->nodes = mw_xrealloc(st->nodes, st->cap * sizeof(*st->nodes));
        }
        st->nodes[st->nnodes++] = (uint32_t)id;
    }
    closedir(d);
    if (st->nnodes > 1) qsort(st->nodes, st->nnodes, sizeof(*st->nodes), cmp_u32);
}

static void numa_destroy(void *state)
{
    numa_state *st = state;
    if (!st) return;
    close(st->dirfd);
    free(st->nodes);
    free(st);
}

static int numa_init(const mw_env *env, void **state)
{
    int fd = mw_hostfs_opendirfd(env->host, NODE_DIR);
    if (fd < 0) {
        mw_log(MW_LOG_INFO, "numa", "no %s (%s): kernel without NUMA, collector off", NODE_DIR,
               strerror(-fd));
        return MW_COLLECTOR_ABSENT;
    }
    numa_state *st = mw_xcalloc(1, sizeof(*st));
    st->dirfd = fd;
    scan(st);
    if (st->nnodes == 0) {
        mw_log(MW_LOG_INFO, "numa", "no node folder in %s: collector off", NODE_DIR);
        numa_destroy(st);
        return MW_COLLECTOR_ABSENT;
    }
    *state = st;
    return 0;
}

static void report(mw_collect_ctx *ctx, const char *rel, int rc)
{
    char path[128];
    snprintf(path, sizeof(path), NODE_DIR "/%s", rel);
    if (rc == 0)
        mw_collect_error(ctx, path, 0, "malformed content");
    else
        mw_collect_error(ctx, path, rc, NULL);
}

static void collect_node(numa_state *st, mw_collect_ctx *ctx, uint32_t node)
{
    char id[16], path[64];
    snprintf(id, sizeof(id), "%u", (unsigned)node);
    size_t dirlen = (size_t)snprintf(path, sizeof(path), "node%s/", id);
    mw_buf *b = ctx->scratch;

    mw_strlcpy(path + dirlen, "meminfo", sizeof(path) - dirlen);
    int rc = mw_readat(st->dirfd, path, b, NODE_FILE_MAX);
    mw_node_meminfo m;
    if (rc < 0 || mw_parse_node_meminfo(b->data ? b->data : "", &m) < 0 || m.node != node) {
        report(ctx, path, rc);
    } else {
        mw_emit(ctx->snap, &MEM_TOTAL, (double)m.total, "numa_node", id, MW_END);
        mw_emit(ctx->snap, &MEM_FREE, (double)m.free, "numa_node", id, MW_END);
        mw_emit(ctx->snap, &MEM_USED, (double)m.used, "numa_node", id, MW_END);
    }

    mw_strlcpy(path + dirlen, "cpulist", sizeof(path) - dirlen);
    rc = mw_readat(st->dirfd, path, b, NODE_FILE_MAX);
    int ncpus = rc < 0 ? -1 : mw_parse_cpulist(b->data ? b->data : "", st->cpubits, MAX_CPUS);
    if (ncpus < 0) {
        report(ctx, path, rc);
    } else {
        while (b->len > 0 && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == ' '))
            b->data[--b->len] = '\0';
        mw_emit(ctx->snap, &CPUS, ncpus, "numa_node", id, MW_END);
        mw_emit(ctx->snap, &INFO, 1, "numa_node", id, "cpulist", b->data ? b->data : "", MW_END);
    }

    mw_strlcpy(path + dirlen, "numastat", sizeof(path) - dirlen);
    rc = mw_readat(st->dirfd, path, b, NODE_FILE_MAX);
    mw_numastat ns;
    if (rc < 0 || mw_parse_numastat(b->data ? b->data : "", &ns) < 0) {
        report(ctx, path, rc);
    } else {
        mw_emit(ctx->snap, &HITS, (double)ns.hit, "numa_node", id, MW_END);
        mw_emit(ctx->snap, &MISSES, (double)ns.miss, "numa_node", id, MW_END);
        mw_emit(ctx->snap, &FOREIGN, (double)ns.foreign, "numa_node", id, MW_END);
    }
}

static void numa_collect(void *state, mw_collect_ctx *ctx)
{
    numa_state *st = state;
    if (st->rescan) {
        scan(st);
        st->rescan = 0;
    }
    uint64_t errors_before = ctx->errors;
    for (size_t i = 0; i < st->nnodes; i++)
        collect_node(st, ctx, st->nodes[i]);
    if (ctx->errors != errors_before) st->rescan = 1;
}

const mw_collector mw_collector_numa = {
    .name = "numa",
    .help = "Per-NUMA-node memory, CPUs and allocation counters from sys/devices/system/node",
    .init = numa_init,
    .collect = numa_collect,
    .destroy = numa_destroy,
};
