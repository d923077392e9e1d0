/* rapl.c - CPU package, core, DRAM and platform energy from the powercap
 * RAPL zones (sys/class/powercap/intel-rapl:N and intel-rapl:N:M; AMD CPUs
 * expose the same names).
 *
 * intel-rapl-mmio:* zones are skipped: they are the same package counter
 * read through MMIO. Zones are discovered once in init and their folders
 * kept open. energy_uj wraps at max_energy_range_uj; the collector keeps per
 * zone the last raw value and an accumulated total so that
 * mlwatch_rapl_energy_joules_total is a true monotonic counter (see
 * mw_rapl_delta). The first reading sets total = raw. A zone whose folder
 * vanished is reopened by path on later cycles; its first reading after that
 * is a new baseline (the energy used meanwhile is unknown and not counted),
 * so the counter never goes backwards.
 *
 * Since Linux 5.10 (CVE-2020-8694, "Platypus") energy_uj is readable by root
 * only. */
#include "collector.h"
#include "rapl.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/sources.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAPL_CLASS "sys/class/powercap"
#define RAPL_MAX_ZONES 64

/* clang-format off */
MW_METRIC(ENERGY, MW_COUNTER, "mlwatch_rapl_energy_joules_total", "joules", "Energy used by the RAPL zone since the counter started (wraps accounted for).");
MW_METRIC(MAX_RANGE, MW_GAUGE, "mlwatch_rapl_max_energy_range_joules", "joules", "Value at which the zone's hardware energy counter wraps.");
/* clang-format on */

typedef struct rapl_zone {
    char entry[32];     /* "intel-rapl:0:1" */
    char label[160];    /* "package-0/dram" */
    int pkg, sub;       /* sub -1 for a top-level zone */
    int fd;             /* the zone's folder; -1 while it is gone */
    uint64_t max_range; /* 0 until read */
    uint64_t last;      /* last raw energy_uj */
    uint64_t total_uj;  /* accumulated counter */
    int have;           /* total and last are set */
    int rebase;         /* next reading is a new baseline */
} rapl_zone;

typedef struct rapl_state {
    rapl_zone zones[RAPL_MAX_ZONES];
    size_t n;
} rapl_state;

uint64_t mw_rapl_delta(uint64_t last, uint64_t now, uint64_t max_range)
{
    if (now >= last) return now - last;
    if (max_range >= last) return (max_range - last) + now;
    return now;
}

static int parse_index(const char **p, int *out)
{
    uint64_t v;
    if (mw_parse_u64(p, &v) < 0 || v > 4096) return -1;
    *out = (int)v;
    return 0;
}

int mw_rapl_parse_entry(const char *name, int *pkg, int *sub)
{
    static const char prefix[] = "intel-rapl:";
    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0) return -1;
    const char *p = name + sizeof(prefix) - 1;
    if (parse_index(&p, pkg) < 0) return -1;
    *sub = -1;
    if (*p == ':') {
        p++;
        if (parse_index(&p, sub) < 0) return -1;
    }
    return *p ? -1 : 0;
}

static int cmp_zone(const void *a, const void *b)
{
    const rapl_zone *x = a, *y = b;
    if (x->pkg != y->pkg) return x->pkg < y->pkg ? -1 : 1;
    return x->sub < y->sub ? -1 : x->sub > y->sub;
}

static void read_max(rapl_zone *z)
{
    uint64_t v;
    z->max_range = mw_read_u64at(z->fd, "max_energy_range_uj", &v) == 0 ? v : 0;
}

/* Labels: top-level zones by name, subzones "<parent name>/<name>"; a label
 * met twice (firmware that names every package "package-0") gets the entry
 * appended. */
static void make_labels(rapl_state *st, char (*names)[64])
{
    for (size_t i = 0; i < st->n; i++) {
        rapl_zone *z = &st->zones[i];
        size_t parent = st->n;
        if (z->sub >= 0)
            for (size_t j = 0; j < st->n; j++)
                if (st->zones[j].sub < 0 && st->zones[j].pkg == z->pkg) parent = j;
        if (parent < st->n) {
            /* Names are under 64 bytes: "<parent>/<name>" fits the label. */
            if (snprintf(z->label, sizeof(z->label), "%s/%s", names[parent], names[i]) < 0)
                z->label[0] = '\0';
        } else
            mw_strlcpy(z->label, names[i], sizeof(z->label));
    }
    for (size_t i = 0; i < st->n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(st->zones[i].label, st->zones[j].label) == 0) {
                rapl_zone *z = &st->zones[i];
                char buf[sizeof(z->label) + sizeof(z->entry) + 4];
                snprintf(buf, sizeof(buf), "%s (%s)", z->label, z->entry);
                mw_strlcpy(z->label, buf, sizeof(z->label));
                break;
            }
}

static int rapl_init(const mw_env *env, void **state)
{
    DIR *d = mw_hostfs_opendir(env->host, RAPL_CLASS);
    int classfd = d ? dirfd(d) : -1;
    if (!d) {
        mw_log(MW_LOG_INFO, "rapl", "no RAPL energy counters: %s is missing", RAPL_CLASS);
        mw_source_note("rapl", MW_SOURCE_ABSENT,
                       "no RAPL energy counters (%s is missing): the CPU's energy is estimated "
                       "from CPU time",
                       RAPL_CLASS);
        return MW_COLLECTOR_ABSENT;
    }
    rapl_state *st = mw_xcalloc(1, sizeof(*st));
    char names[RAPL_MAX_ZONES][64];
    const struct dirent *de;
    while ((de = readdir(d)) && st->n < RAPL_MAX_ZONES) {
        int pkg, sub;
        if (mw_rapl_parse_entry(de->d_name, &pkg, &sub) < 0) continue;
        int fd = openat(classfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) continue;
        rapl_zone *z = &st->zones[st->n];
        mw_strlcpy(z->entry, de->d_name, sizeof(z->entry));
        z->pkg = pkg;
        z->sub = sub;
        z->fd = fd;
        read_max(z);
        st->n++;
    }
    closedir(d);
    if (st->n == 0) {
        mw_log(MW_LOG_INFO, "rapl", "no RAPL energy counters: no intel-rapl zones in %s",
               RAPL_CLASS);
        mw_source_note("rapl", MW_SOURCE_ABSENT,
                       "no RAPL energy counters (no intel-rapl zones in %s): the CPU's energy is "
                       "estimated from CPU time",
                       RAPL_CLASS);
        free(st);
        return MW_COLLECTOR_ABSENT;
    }
    qsort(st->zones, st->n, sizeof(rapl_zone), cmp_zone);
    for (size_t i = 0; i < st->n; i++)
        if (mw_read_lineat(st->zones[i].fd, "name", names[i], sizeof(names[i])) < 0 || !names[i][0])
            mw_strlcpy(names[i], st->zones[i].entry, sizeof(names[i]));
    make_labels(st, names);
    mw_source_note("rapl", MW_SOURCE_SEEN, "RAPL energy counters: %zu zone%s in %s", st->n,
                   st->n == 1 ? "" : "s", RAPL_CLASS);
    *state = st;
    return 0;
}

static void rapl_destroy(void *state)
{
    rapl_state *st = state;
    if (!st) return;
    for (size_t i = 0; i < st->n; i++)
        if (st->zones[i].fd >= 0) close(st->zones[i].fd);
    free(st);
}

static void zone_error(mw_collect_ctx *ctx, const rapl_zone *z, const char *file, int err)
{
    char path[128];
    snprintf(path, sizeof(path), RAPL_CLASS "/%s/%s", z->entry, file);
    mw_collect_error(ctx, path, err == -EINVAL ? 0 : err,
                     err == -EINVAL ? "malformed content" : NULL);
}

static void collect_zone(mw_collect_ctx *ctx, rapl_zone *z)
{
    if (z->fd < 0) {
        /* Gone at an earlier cycle (counted then): back yet? */
        char path[64];
        snprintf(path, sizeof(path), RAPL_CLASS "/%s", z->entry);
        int fd = mw_hostfs_opendirfd(ctx->env->host, path);
        if (fd < 0) return;
        z->fd = fd;
        z->rebase = 1;
        read_max(z);
    }
    uint64_t raw;
    int rc = mw_read_u64at(z->fd, "energy_uj", &raw);
    if (rc == -ENOENT || rc == -ENODEV) {
        zone_error(ctx, z, "energy_uj", rc);
        close(z->fd);
        z->fd = -1;
        z->max_range = 0;
        return;
    }
    if (!z->max_range) {
        uint64_t v;
        int mrc = mw_read_u64at(z->fd, "max_energy_range_uj", &v);
        if (mrc < 0)
            zone_error(ctx, z, "max_energy_range_uj", mrc);
        else
            z->max_range = v;
    }
    if (z->max_range)
        mw_emit(ctx->snap, &MAX_RANGE, (double)z->max_range / 1e6, "zone", z->label, MW_END);
    if (rc == -EACCES || rc == -EPERM) {
        /* One key for all zones: one log line, not one per zone. */
        mw_collect_error(ctx, RAPL_CLASS "/intel-rapl:*/energy_uj", rc,
                         "readable by root only since Linux 5.10 (CVE-2020-8694); run mlwatch as "
                         "root to get RAPL energy");
        return;
    }
    if (rc < 0) {
        zone_error(ctx, z, "energy_uj", rc);
        return;
    }
    if (!z->have) {
        z->total_uj = raw;
        z->have = 1;
    } else if (!z->rebase) {
        z->total_uj += mw_rapl_delta(z->last, raw, z->max_range);
    }
    z->rebase = 0;
    z->last = raw;
    mw_emit(ctx->snap, &ENERGY, (double)z->total_uj / 1e6, "zone", z->label, MW_END);
}

static void rapl_collect(void *state, mw_collect_ctx *ctx)
{
    rapl_state *st = state;
    for (size_t i = 0; i < st->n; i++)
        collect_zone(ctx, &st->zones[i]);
}

const mw_collector mw_collector_rapl = {
    .name = "rapl",
    .help = "CPU package, core, DRAM and platform energy from powercap RAPL (wrap-safe)",
    .init = rapl_init,
    .collect = rapl_collect,
    .destroy = rapl_destroy,
};
