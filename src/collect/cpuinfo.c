/* cpuinfo.c - CPU model, microcode and topology from /proc/cpuinfo, for
 * energy estimation (TDP by model) and for spotting mixed or outdated
 * microcode across a fleet.
 *
 * Reading /proc/cpuinfo is expensive on big hosts (the kernel samples each
 * CPU's frequency: milliseconds on 200+ CPUs), and the content only changes
 * with CPU hotplug or a microcode update, so it is read at init and then at
 * most every 60 s; the cycles in between emit the cached values. */
#include "collector.h"
#include "cpuinfo.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CPUINFO_PATH "proc/cpuinfo"
#define CPUINFO_REREAD_NS (60LL * 1000000000LL)

/* clang-format off */
MW_METRIC(INFO, MW_INFO, "mlwatch_cpu_info", "", "CPU identity from /proc/cpuinfo (package = physical id, core = core id; arm64: vendor = implementer, family = architecture, model = part, stepping = revision); the value is 1.");
MW_METRIC(PACKAGES, MW_GAUGE, "mlwatch_cpu_physical_packages", "", "CPU packages (sockets) with an online CPU.");
MW_METRIC(CORES, MW_GAUGE, "mlwatch_cpu_cores", "", "Physical cores with an online CPU.");
MW_METRIC(THREADS, MW_GAUGE, "mlwatch_cpu_threads", "", "Online logical CPUs (hardware threads).");
/* clang-format on */

/* --- parser ---------------------------------------------------------- */

#define FIELD(name) offsetof(mw_cpuinfo_cpu, name), sizeof(((mw_cpuinfo_cpu *)0)->name)

static const struct {
    const char *key;
    size_t off, size;
} KEYS[] = {
    {"vendor_id", FIELD(vendor)},        {"CPU implementer", FIELD(vendor)},
    {"model name", FIELD(model_name)},   {"cpu family", FIELD(family)},
    {"CPU architecture", FIELD(family)}, {"model", FIELD(model)},
    {"CPU part", FIELD(model)},          {"stepping", FIELD(stepping)},
    {"CPU revision", FIELD(stepping)},   {"microcode", FIELD(microcode)},
    {"physical id", FIELD(package)},     {"core id", FIELD(core)},
};

static void copy(char *dst, size_t size, const char *s, size_t len)
{
    if (len >= size) len = size - 1;
    memcpy(dst, s, len);
    dst[len] = '\0';
}

int mw_parse_cpuinfo(const char *text, mw_cpuinfo_cpu *cpus, size_t max, size_t *n)
{
    int bad = 0, full = 0;
    long last = -1; /* the kernel lists CPUs in increasing order */
    mw_cpuinfo_cpu *cur = NULL;
    *n = 0;
    const char *p = text, *s, *e;
    while (mw_next_line(&p, &s, &e)) {
        if (s == e) continue;
        const char *colon = memchr(s, ':', (size_t)(e - s));
        if (!colon) {
            bad++;
            continue;
        }
        const char *ke = colon;
        while (ke > s && (ke[-1] == ' ' || ke[-1] == '\t'))
            ke--;
        const char *v = colon + 1;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        const char *ve = e;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
            ve--;
        size_t klen = (size_t)(ke - s), vlen = (size_t)(ve - v);
        if (klen == 9 && memcmp(s, "processor", 9) == 0) {
            cur = NULL;
            int digits = vlen > 0 && vlen < sizeof(cpus[0].cpu);
            for (size_t i = 0; digits && i < vlen; i++)
                if (v[i] < '0' || v[i] > '9') digits = 0;
            long num = digits ? strtol(v, NULL, 10) : -1;
            if (!digits || num <= last) {
                /* Not a number, or a repeated CPU (its labels would clash). */
                bad++;
                continue;
            }
            last = num;
            if (*n == max) {
                if (!full) bad++;
                full = 1;
                continue;
            }
            cur = &cpus[(*n)++];
            memset(cur, 0, sizeof(*cur));
            copy(cur->cpu, sizeof(cur->cpu), v, vlen);
            continue;
        }
        if (!cur) continue;
        for (size_t i = 0; i < sizeof(KEYS) / sizeof(KEYS[0]); i++) {
            if (strlen(KEYS[i].key) != klen || memcmp(KEYS[i].key, s, klen) != 0) continue;
            copy((char *)cur + KEYS[i].off, KEYS[i].size, v, vlen);
            break;
        }
    }
    return bad;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t distinct(const char **v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof(*v), cmp_str);
    size_t d = 1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i], v[i - 1]) != 0) d++;
    return d;
}

void mw_cpuinfo_topology(const mw_cpuinfo_cpu *cpus, size_t n, size_t *packages, size_t *cores)
{
    const char **pk = mw_xcalloc(n ? n : 1, sizeof(*pk));
    char *pc = mw_xcalloc(n ? n : 1, 40);
    const char **pcv = mw_xcalloc(n ? n : 1, sizeof(*pcv));
    size_t npk = 0, npc = 0;
    for (size_t i = 0; i < n; i++) {
        if (cpus[i].package[0]) pk[npk++] = cpus[i].package;
        if (cpus[i].core[0]) {
            snprintf(pc + 40 * npc, 40, "%s/%s", cpus[i].package, cpus[i].core);
            pcv[npc] = pc + 40 * npc;
            npc++;
        }
    }
    *packages = npk ? distinct(pk, npk) : (n ? 1 : 0);
    *cores = npc ? distinct(pcv, npc) : n;
    free(pk);
    free(pc);
    free(pcv);
}

/* --- collection ----------------------------------------------------- */

typedef struct cpuinfo_state {
    mw_cpuinfo_cpu *cpus;
    size_t n, cap;
    size_t packages, cores;
    int64_t read_ns; /* monotonic time of the last read; 0: never */
} cpuinfo_state;

/* Read and parse again; problems are counted in ctx. */
static void reread(cpuinfo_state *st, const mw_hostfs *host, mw_buf *buf, mw_collect_ctx *ctx)
{
    int rc = mw_hostfs_read(host, CPUINFO_PATH, buf, 0);
    if (rc < 0) {
        /* Keep the last good copy: the identity of the CPUs has not changed. */
        if (ctx) mw_collect_error(ctx, CPUINFO_PATH, rc, NULL);
        return;
    }
    const char *text = buf->data ? buf->data : "";
    /* One CPU per "processor" line: count them to size the array. */
    size_t want = 1;
    for (const char *q = strstr(text, "processor"); q; q = strstr(q + 9, "processor"))
        want++;
    if (want > MW_CPUINFO_MAX_CPUS) want = MW_CPUINFO_MAX_CPUS;
    if (want > st->cap) {
        st->cpus = mw_xrealloc(st->cpus, want * sizeof(*st->cpus));
        st->cap = want;
    }
    int bad = mw_parse_cpuinfo(text, st->cpus, st->cap, &st->n);
    for (int i = 0; ctx && i < bad; i++)
        mw_collect_error(ctx, CPUINFO_PATH, 0, "malformed line");
    mw_cpuinfo_topology(st->cpus, st->n, &st->packages, &st->cores);
}

static int cpuinfo_init(const mw_env *env, void **state)
{
    if (faccessat(env->host->rootfd, CPUINFO_PATH, R_OK, 0) < 0) {
        mw_log(MW_LOG_INFO, "cpuinfo", "no %s (%s)", CPUINFO_PATH, strerror(errno));
        return MW_COLLECTOR_ABSENT;
    }
    /* The first read happens in the first collect, right after init, where
     * its errors are counted. */
    *state = mw_xcalloc(1, sizeof(cpuinfo_state));
    return 0;
}

static void cpuinfo_collect(void *state, mw_collect_ctx *ctx)
{
    cpuinfo_state *st = state;
    int64_t now = mw_mono_ns();
    if (st->read_ns == 0 || now - st->read_ns >= CPUINFO_REREAD_NS) {
        st->read_ns = now;
        reread(st, ctx->env->host, ctx->scratch, ctx);
    }
    for (size_t i = 0; i < st->n; i++) {
        const mw_cpuinfo_cpu *c = &st->cpus[i];
        mw_emit(ctx->snap, &INFO, 1, "cpu", c->cpu, "vendor", c->vendor, "model_name",
                c->model_name, "family", c->family, "model", c->model, "stepping", c->stepping,
                "microcode", c->microcode, "package", c->package, "core", c->core, MW_END);
    }
    if (st->n == 0) return;
    mw_emit(ctx->snap, &PACKAGES, (double)st->packages, MW_END);
    mw_emit(ctx->snap, &CORES, (double)st->cores, MW_END);
    mw_emit(ctx->snap, &THREADS, (double)st->n, MW_END);
}

static void cpuinfo_destroy(void *state)
{
    cpuinfo_state *st = state;
    if (!st) return;
    free(st->cpus);
    free(st);
}

const mw_collector mw_collector_cpuinfo = {
    .name = "cpuinfo",
    .help = "CPU model, microcode and topology from /proc/cpuinfo (re-read every 60 s)",
    .init = cpuinfo_init,
    .collect = cpuinfo_collect,
    .destroy = cpuinfo_destroy,
};
