/* block_codec.c - compression and decompression speed of compacted blocks,
 * per core, and bytes per sample, for block format 2 (src/store/tscodec.c)
 * against format 1 (Gorilla chunks of 480 samples), on the values of
 * ../shared/bench/rwload.c (the same formulas: RWLOAD_VALUES=telemetry, or
 * its sine waves). One thread, timed by its CPU clock (a per-core figure
 * on a shared machine); MB/s counts 16 bytes (timestamp and value)
 * per sample. Then the same series downsampled (src/store/downsample.c) at
 * 5m and 1h: bytes per window and per raw sample, for docs/store.md's
 * one-year projection. Writes /tmp/bench-block-codec.blk.
 *   build/bench_block_codec SERIES ROUNDS telemetry|sine */
#include "store/block.h"
#include "store/downsample.h"
#include "store/gorilla.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double rwload_value(long i, long r, int telemetry)
{
    double val = (i % 10 == 5 || i % 10 == 7 || i % 10 == 9) ? (double)(r * 15 + i % 97)
                                                             : 50 + 40 * sin((r + i) * 0.1);
    if (!telemetry) return val;
    double w = sin((r + i) * 0.05);
    switch (i % 10) {
    case 0:
        return floor(80 + 20 * w);
    case 1:
        return floor((350 + 150 * w) * 1000) / 1000;
    case 2:
        return 64424509440.0 + 2097152.0 * (double)((r / 8) % 16);
    case 3:
        return floor(60 + 8 * w);
    case 4:
        return (r / 40) % 2 ? 1755e6 : 1980e6;
    case 5:
        return (double)r * 15 * 0.95 + i % 97;
    case 6:
        return 8589934592.0 + 4096.0 * (double)((r + i) % 64);
    case 7:
        return floor((double)r * 15 * 350.0) + i % 97;
    case 8:
        return (r / 20) % 3 ? 3.7e9 : 1.5e9;
    default:
        return floor((double)r * 15 * 350.0 / 3.6e6 * 56 * 1000) / 1000;
    }
}

static double secs(struct timespec a, struct timespec b)
{
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_block_codec SERIES ROUNDS telemetry|sine\n");
        return 2;
    }
    long ns = atol(argv[1]), nr = atol(argv[2]);
    int tele = strcmp(argv[3], "telemetry") == 0;
    double total = (double)ns * (double)nr, mb = total * 16 / 1e6;
    int64_t *t = malloc((size_t)nr * sizeof(int64_t));
    double *v = malloc((size_t)nr * sizeof(double));
    for (long r = 0; r < nr; r++)
        t[r] = 1700000000000LL + r * 15000;
    /* Format 2 through the block writer and reader. */
    const char *path = "/tmp/bench-block-codec.blk";
    int err = 0;
    mw_block_writer *w = mw_block_writer_new("/tmp/bench-block-codec.blk.tmp", &err);
    if (!w) return 1;
    char name[16], inst[32], ns_[32], pod[64], gpu[16];
    struct timespec a, b;
    double enc_s = 0;
    for (long i = 0; i < ns; i++) {
        long k = i / 10;
        snprintf(name, sizeof(name), "m%ld", i % 10);
        snprintf(inst, sizeof(inst), "node-%04ld", k / 400);
        snprintf(ns_, sizeof(ns_), "team-%02ld", (k / 8) % 37);
        snprintf(pod, sizeof(pod), "train-%ld-worker-%ld", k / 8, k % 8);
        snprintf(gpu, sizeof(gpu), "%ld", k % 8);
        mw_label l[6] = {{"__name__", name}, {"gpu", gpu},       {"instance", inst},
                         {"job", "rwload"},  {"namespace", ns_}, {"pod", pod}};
        for (long r = 0; r < nr; r++)
            v[r] = rwload_value(i, r, tele);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        mw_block_writer_add(w, l, 6, t, v, (size_t)nr);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        enc_s += secs(a, b);
    }
    mw_block_meta m = {.seq = 1, .level = 1};
    if (mw_block_writer_finish(w, &m, path) != 0) return 1;
    char e[256];
    mw_block *blk = mw_block_open(path, e, sizeof(e));
    if (!blk) {
        fprintf(stderr, "%s: %s\n", path, e);
        return 1;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    mw_samples sm = {0};
    size_t got = 0;
    for (long i = 0; i < ns; i++) {
        sm.n = 0;
        mw_block_read(blk, (uint32_t)i, INT64_MIN, INT64_MAX, &sm);
        got += sm.n;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    double dec_s = secs(a, b);
    mw_block_unref(blk);
    printf("format 2 %s: %ld series x %ld rounds, block %llu bytes = %.3f bytes/sample "
           "(dictionary %llu, decimal %llu, gorilla %llu chunks); encode %.1f MB/s, decode %.1f "
           "MB/s per core%s\n",
           argv[3], ns, nr, (unsigned long long)m.size, (double)m.size / total,
           (unsigned long long)m.kinds[MW_TSC_DICT], (unsigned long long)m.kinds[MW_TSC_DECIMAL],
           (unsigned long long)m.kinds[MW_TSC_GORILLA], mb / enc_s, mb / dec_s,
           got == (size_t)total ? "" : " (SAMPLES MISSING)");
    /* Format 1: Gorilla chunks of 480 samples, decoded as its blocks are. */
    uint8_t *buf = malloc(480 * MW_GORILLA_MAX_SAMPLE_BYTES + 64);
    double genc = 0, gdec = 0, gbytes = 0;
    for (long i = 0; i < ns; i++) {
        for (long r = 0; r < nr; r++)
            v[r] = rwload_value(i, r, tele);
        for (long from = 0; from < nr; from += 480) {
            long to = from + 480 < nr ? from + 480 : nr;
            mw_gorilla_enc g;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
            mw_gorilla_enc_init(&g);
            for (long r = from; r < to; r++)
                mw_gorilla_append(&g, buf, t[r], v[r]);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
            genc += secs(a, b);
            gbytes += (double)mw_gorilla_bytes(&g);
            mw_gorilla_dec d;
            int64_t tt;
            double vv, sum = 0;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
            mw_gorilla_dec_init(&d, buf, mw_gorilla_bytes(&g), (uint32_t)(to - from));
            while (mw_gorilla_next(&d, &tt, &vv) == 1)
                sum += vv;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
            gdec += secs(a, b);
            if (sum == 0.5) putchar(' ');
        }
    }
    printf("format 1 %s: chunk data %.3f bytes/sample (without the index); encode %.1f MB/s, "
           "decode %.1f MB/s per core\n",
           argv[3], gbytes / total, mb / genc, mb / gdec);
    /* Downsampled blocks of the same series. */
    static const int64_t res[] = {300000, 3600000};
    for (size_t k = 0; k < 2; k++) {
        w = mw_block_writer_new("/tmp/bench-block-codec.blk.tmp", &err);
        if (!w) return 1;
        uint64_t windows = 0;
        for (long i = 0; i < ns; i++) {
            long q = i / 10;
            snprintf(name, sizeof(name), "m%ld", i % 10);
            snprintf(inst, sizeof(inst), "node-%04ld", q / 400);
            snprintf(ns_, sizeof(ns_), "team-%02ld", (q / 8) % 37);
            snprintf(pod, sizeof(pod), "train-%ld-worker-%ld", q / 8, q % 8);
            snprintf(gpu, sizeof(gpu), "%ld", q % 8);
            mw_label l[6] = {{"__name__", name}, {"gpu", gpu},       {"instance", inst},
                             {"job", "rwload"},  {"namespace", ns_}, {"pod", pod}};
            for (long r = 0; r < nr; r++)
                v[r] = rwload_value(i, r, tele);
            mw_ds_series d;
            mw_ds_compute(t, v, (size_t)nr, res[k], &d);
            windows += d.na;
            mw_block_stream st[5] = {{MW_AGGR_COUNT, d.at, d.cnt, d.na},
                                     {MW_AGGR_SUM, d.at, d.sum, d.na},
                                     {MW_AGGR_MIN, d.at, d.min, d.na},
                                     {MW_AGGR_MAX, d.at, d.max, d.na},
                                     {MW_AGGR_SUBSET, d.st, d.sv, d.ns}};
            mw_block_writer_add_streams(w, l, 6, st, 5);
            mw_ds_series_free(&d);
        }
        mw_block_meta dm = {.seq = 2, .level = 1, .resolution_ms = res[k]};
        if (mw_block_writer_finish(w, &dm, path) != 0) return 1;
        printf("downsampled %s at %s: block %llu bytes = %.3f bytes per window (%llu windows, "
               "%llu stored values), %.4f bytes per raw sample\n",
               argv[3], k ? "1h" : "5m", (unsigned long long)dm.size,
               (double)dm.size / (double)windows, (unsigned long long)windows,
               (unsigned long long)dm.nsamples, (double)dm.size / total);
    }
    free(buf);
    free(sm.t);
    free(sm.v);
    free(t);
    free(v);
    unlink(path);
    return 0;
}
