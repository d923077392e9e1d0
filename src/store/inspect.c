/* inspect.c - `mlwatch store inspect DIR`: what a data folder holds, as
 * `promtool tsdb analyze` tells for Prometheus: each block with its time
 * range, resolution, series, samples, bytes per sample and the encodings
 * of its chunks, then the totals and the head's files. Reads the blocks
 * through their own checks (read-only, no lock: it may run beside the
 * agent). */
#include "inspect.h"
#include "../core/units.h"
#include "../core/util.h"
#include "block.h"
#include "tscodec.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct codec_mix {
    uint64_t chunks[MW_TSC_KINDS + 2]; /* + format-1 Gorilla, undecodable */
    uint64_t samples[MW_TSC_KINDS + 2];
    int64_t *t;
    double *v;
} codec_mix;

enum { MIX_V1 = MW_TSC_KINDS, MIX_BAD = MW_TSC_KINDS + 1 };
static const char *const mix_names[MW_TSC_KINDS + 2] = {"dictionary", "decimal", "gorilla",
                                                        "gorilla (format 1)", "undecodable"};

typedef struct chunk_walk {
    codec_mix *mix;
    uint32_t version;
} chunk_walk;

static void count_chunk(void *arg, const uint8_t *p, size_t len, uint32_t n)
{
    chunk_walk *w = arg;
    int kind = MIX_V1;
    if (w->version >= 2) {
        int k = -1;
        kind = n <= MW_TSC_MAX_SAMPLES && mw_tsc_decode(p, len, n, w->mix->t, w->mix->v, &k) == 0
                   ? k
                   : MIX_BAD;
    }
    w->mix->chunks[kind]++;
    w->mix->samples[kind] += n;
}

static void fmt_time(int64_t ms, char *out, size_t size)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Bytes and count of the files in dir (0 when absent). */
static uint64_t dir_bytes(const char *dir, uint64_t *nfiles)
{
    uint64_t total = 0;
    *nfiles = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATH_MAX + 300];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            total += (uint64_t)st.st_size;
            (*nfiles)++;
        }
    }
    closedir(d);
    return total;
}

static void print_mix(FILE *out, const codec_mix *m, const char *indent)
{
    uint64_t all = 0;
    for (int k = 0; k < MW_TSC_KINDS + 2; k++)
        all += m->chunks[k];
    for (int k = 0; k < MW_TSC_KINDS + 2; k++)
        if (m->chunks[k])
            fprintf(out, "%s%-19s %10llu chunks (%5.1f %%) %14llu samples\n", indent, mix_names[k],
                    (unsigned long long)m->chunks[k], 100.0 * (double)m->chunks[k] / (double)all,
                    (unsigned long long)m->samples[k]);
}

typedef struct res_total {
    int64_t res, tmin, tmax;
    uint64_t nblocks, tseries, tsamples, tbytes;
} res_total;

int mw_store_inspect(const char *dir_arg, FILE *out, FILE *errout)
{
    /* The data folder itself, or the --data-dir that holds it. */
    char dir[PATH_MAX], bdir[PATH_MAX + 16];
    struct stat st;
    snprintf(bdir, sizeof(bdir), "%s/data/blocks", dir_arg);
    if (stat(bdir, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(dir, sizeof(dir), "%s/data", dir_arg);
    else
        snprintf(dir, sizeof(dir), "%s", dir_arg);
    snprintf(bdir, sizeof(bdir), "%s/blocks", dir);
    DIR *d = opendir(bdir);
    if (!d) {
        fprintf(errout, "mlwatch store inspect: %s is not a data folder: cannot open %s: %s\n",
                dir_arg, bdir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".blk") == 0) {
            names = mw_xrealloc(names, (nn + 1) * sizeof(char *));
            names[nn++] = mw_xstrdup(e->d_name);
        }
    }
    closedir(d);
    if (nn) qsort(names, nn, sizeof(char *), cmp_str);
    fprintf(out, "data folder %s\n\n", dir);
    fprintf(out, "%-16s %6s %5s %10s %-20s %-20s %9s %9s %12s %12s %8s\n", "block", "format",
            "level", "resolution", "from", "to", "series", "chunks", "samples", "bytes",
            "B/sample");
    codec_mix total = {0};
    total.t = mw_xmalloc(MW_TSC_MAX_SAMPLES * sizeof(int64_t));
    total.v = mw_xmalloc(MW_TSC_MAX_SAMPLES * sizeof(double));
    /* Totals per resolution: [0] raw, then each downsampled one seen. */
    res_total tot[9] = {{0, INT64_MAX, INT64_MIN, 0, 0, 0, 0}};
    size_t ntot = 1;
    uint64_t nbad = 0;
    int rc = 0;
    for (size_t i = 0; i < nn; i++) {
        char path[PATH_MAX + 300], err[512];
        snprintf(path, sizeof(path), "%s/%s", bdir, names[i]);
        mw_block *b = mw_block_open(path, err, sizeof(err));
        if (!b) {
            fprintf(out, "%-16s %s\n", names[i], err);
            nbad++;
            continue;
        }
        const mw_block_meta *m = mw_block_get_meta(b);
        chunk_walk w = {&total, mw_block_version(b)};
        for (uint64_t id = 0; id < m->nseries; id++)
            if (mw_block_chunks(b, (uint32_t)id, count_chunk, &w) < 0) total.chunks[MIX_BAD]++;
        char from[32], to[32];
        fmt_time(m->mint, from, sizeof(from));
        fmt_time(m->maxt, to, sizeof(to));
        char res[32] = "raw";
        if (m->resolution_ms) mw_format_duration(m->resolution_ms, res, sizeof(res));
        size_t k = 0;
        while (k < ntot && tot[k].res != m->resolution_ms)
            k++;
        if (k == ntot && ntot < 9)
            tot[ntot++] = (res_total){m->resolution_ms, INT64_MAX, INT64_MIN, 0, 0, 0, 0};
        if (k == 9) k = 8;
        fprintf(out, "%-16s %6u %5u %10s %-20s %-20s %9llu %9llu %12llu %12llu %8.3f\n", names[i],
                mw_block_version(b), m->level, res, from, to, (unsigned long long)m->nseries,
                (unsigned long long)m->nchunks, (unsigned long long)m->nsamples,
                (unsigned long long)m->size,
                m->nsamples ? (double)m->size / (double)m->nsamples : 0.0);
        tot[k].nblocks++;
        tot[k].tseries += m->nseries;
        tot[k].tsamples += m->nsamples;
        tot[k].tbytes += m->size;
        if (m->nsamples && m->mint < tot[k].tmin) tot[k].tmin = m->mint;
        if (m->nsamples && m->maxt > tot[k].tmax) tot[k].tmax = m->maxt;
        mw_block_unref(b);
    }
    fprintf(out, "\n");
    for (size_t k = 0; k < ntot; k++) {
        char from[32] = "-", to[32] = "-", res[32] = "raw";
        if (tot[k].tmin <= tot[k].tmax) {
            fmt_time(tot[k].tmin, from, sizeof(from));
            fmt_time(tot[k].tmax, to, sizeof(to));
        }
        if (tot[k].res) mw_format_duration(tot[k].res, res, sizeof(res));
        /* Downsampled blocks' "samples" are their stored values: per window
         * count, sum, min and max, and the raw samples rate needs. */
        if (k == 0)
            fprintf(out, "%llu blocks (%llu not readable), ",
                    (unsigned long long)(tot[0].nblocks + nbad), (unsigned long long)nbad);
        else
            fprintf(out, "%llu blocks, ", (unsigned long long)tot[k].nblocks);
        fprintf(out,
                "%s resolution, %s to %s: %llu series (summed over blocks), %llu %s, %llu bytes, "
                "%.3f bytes per %s\n",
                res, from, to, (unsigned long long)tot[k].tseries,
                (unsigned long long)tot[k].tsamples, k ? "stored values" : "samples",
                (unsigned long long)tot[k].tbytes,
                tot[k].tsamples ? (double)tot[k].tbytes / (double)tot[k].tsamples : 0.0,
                k ? "value" : "sample");
    }
    fprintf(out, "codec mix (chunks by value encoding):\n");
    print_mix(out, &total, "  ");
    if (total.chunks[MIX_BAD]) rc = 1;
    char sub[PATH_MAX + 32];
    uint64_t nf, bytes;
    snprintf(sub, sizeof(sub), "%s/wal", dir);
    bytes = dir_bytes(sub, &nf);
    fprintf(out, "head: WAL %llu bytes in %llu segments", (unsigned long long)bytes,
            (unsigned long long)nf);
    snprintf(sub, sizeof(sub), "%s/chunks", dir);
    bytes = dir_bytes(sub, &nf);
    fprintf(out, ", chunk files %llu bytes in %llu files", (unsigned long long)bytes,
            (unsigned long long)nf);
    uint64_t snap = 0;
    static const char *const snaps[] = {"head.snapshot", "head.snapshot.prev"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(sub, sizeof(sub), "%s/%s", dir, snaps[i]);
        if (stat(sub, &st) == 0) snap += (uint64_t)st.st_size;
    }
    fprintf(out, ", snapshots %llu bytes\n", (unsigned long long)snap);
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    free(total.t);
    free(total.v);
    return rc || nbad ? 1 : 0;
}

int mw_store_command(const mw_config *cfg, char **rest, size_t nrest)
{
    (void)cfg;
    if (nrest != 2 || strcmp(rest[0], "inspect") != 0) {
        fprintf(stderr, "usage: mlwatch store inspect DIR (a data folder, or the --data-dir "
                        "holding one)\n");
        return 2;
    }
    return mw_store_inspect(rest[1], stdout, stderr);
}
