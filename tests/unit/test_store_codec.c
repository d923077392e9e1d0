/* test_store_codec.c - the chunk codec of compacted blocks
 * (src/store/tscodec.c) and block format versions (src/store/block.c):
 * seeded property tests that every codec path gives back every timestamp
 * and every value's bits (value families of telemetry, random floats, NaN
 * payloads, +-Inf, -0, subnormals, stale markers), which encoding each
 * family gets, hostile bytes and zstd frames refused, the blocks of format
 * 1 in tests/fixtures/store-blocks-v1 read and rewritten in format 2 by
 * compaction, and a block of a newer format refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/bytes.h"
#include "core/util.h"
#include "store/block.h"
#include "store/inspect.h"
#include "store/store.h"
#include "store/tscodec.h"
#include "store_fixture_values.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define STALE 0x7ff0000000000002ull

static uint64_t rng = 20261202;
static uint64_t next_u64(void)
{
    rng += 0x9e3779b97f4a7c15ull;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t n)
{
    return next_u64() % n;
}

static uint64_t bits_of(double v)
{
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
}

static double from_bits(uint64_t b)
{
    double v;
    memcpy(&v, &b, 8);
    return v;
}

/* Encode, decode, require every timestamp and value's bits back; return
 * the kind the encoder chose. */
static int roundtrip(mw_tsc_enc *e, const int64_t *t, const double *v, size_t n, size_t *lenp)
{
    size_t len;
    int kind = -1, dkind = -1;
    const uint8_t *p = mw_tsc_encode(e, t, v, n, &len, &kind);
    uint8_t *copy = malloc(len);
    memcpy(copy, p, len); /* exactly len bytes: ASan sees any read past them */
    int64_t *dt = malloc(n * sizeof(int64_t));
    double *dv = malloc(n * sizeof(double));
    assert_int_equal(mw_tsc_decode(copy, len, (uint32_t)n, dt, dv, &dkind), 0);
    assert_int_equal(kind, dkind);
    for (size_t i = 0; i < n; i++) {
        if (dt[i] != t[i] || bits_of(dv[i]) != bits_of(v[i]))
            fail_msg("sample %zu of %zu (kind %s): t %lld -> %lld, bits %016llx -> %016llx", i, n,
                     mw_tsc_kind_names[kind], (long long)t[i], (long long)dt[i],
                     (unsigned long long)bits_of(v[i]), (unsigned long long)bits_of(dv[i]));
    }
    free(copy);
    free(dt);
    free(dv);
    if (lenp) *lenp = len;
    return kind;
}

enum {
    F_INTEGER,
    F_DECIMAL,
    F_COUNTER,
    F_REPEATED,
    F_STATES,
    F_RANDOM,
    F_NAN,
    F_INF,
    F_NEGZERO,
    F_SUBNORMAL,
    F_STALE_IN_COUNTER,
    F_MIXED_SPECIALS,
    F_SINE,
    F_NEAR_DECIMAL,
    F_COUNT
};

static double family_value(int f, size_t i, int d, double base)
{
    static const double p10[] = {1, 10, 100, 1000, 1e4, 1e5, 1e6};
    switch (f) {
    case F_INTEGER:
        return floor(base + (double)below(200) - 100);
    case F_DECIMAL:
        return floor((base + (double)below(1000)) * p10[d]) / p10[d];
    case F_COUNTER:
        return base + (double)i * 0.25 * p10[d];
    case F_REPEATED:
        return base;
    case F_STATES:
        return (double)(below(4) * 1000) + 0.5;
    case F_RANDOM:
        return from_bits(next_u64());
    case F_NAN:
        return from_bits(0x7ff0000000000001ull + below(0x000fffffffffffffull));
    case F_INF:
        return below(3) == 0 ? INFINITY : below(2) ? -INFINITY : base;
    case F_NEGZERO:
        return below(2) ? -0.0 : 0.0;
    case F_SUBNORMAL:
        return from_bits(below(0x000fffffffffffffull) | (below(2) << 63));
    case F_STALE_IN_COUNTER:
        return i % 97 == 96 ? from_bits(STALE) : base + (double)i * 3;
    case F_MIXED_SPECIALS: {
        static const uint64_t sp[] = {STALE,
                                      0x7ff8000000000000ull,
                                      0xfff8000000000001ull,
                                      0x7ff0000000000000ull,
                                      0xfff0000000000000ull,
                                      0x8000000000000000ull,
                                      1,
                                      0x000fffffffffffffull};
        return below(4) ? (double)(i % 50) : from_bits(sp[below(8)]);
    }
    case F_SINE:
        return 50 + 40 * sin((double)i * 0.1 + base);
    default: /* values a naive decimal test would round: 0.1 + 0.2 and kin */
        return (double)(i % 10) / 10 + (below(3) ? 0.2 : 0.0);
    }
}

static void make_times(int64_t *t, size_t n)
{
    int shape = (int)below(4);
    int64_t t0 = shape == 3 ? (int64_t)next_u64() : 1700000000000LL + (int64_t)below(1000000);
    for (size_t i = 0; i < n; i++) {
        if (shape == 0)
            t[i] = t0 + (int64_t)i * 15000; /* regular */
        else if (shape == 1)
            t[i] = i ? t[i - 1] + 15000 + (int64_t)below(21) - 10 : t0; /* jitter */
        else if (shape == 2)
            t[i] = i ? t[i - 1] + 1 + (int64_t)below(1000000) : t0;
        else
            t[i] = (int64_t)((uint64_t)t0 + next_u64() * i); /* any int64, wrapping */
    }
}

/* Thousands of chunks: every family, sizes 1 to a full block chunk. */
static void property_roundtrip(void **state)
{
    (void)state;
    mw_tsc_enc *e = mw_tsc_enc_new();
    int64_t *t = malloc(MW_TSC_MAX_SAMPLES * sizeof(int64_t));
    double *v = malloc(MW_TSC_MAX_SAMPLES * sizeof(double));
    int kinds[F_COUNT][MW_TSC_KINDS] = {{0}};
    for (int c = 0; c < 3000; c++) {
        int f = c % F_COUNT;
        size_t n = below(6) == 0 ? 1 + below(4) : 1 + below(c % 7 == 0 ? MW_TSC_MAX_SAMPLES : 600);
        int d = (int)below(7);
        double base = (double)below(1000000);
        make_times(t, n);
        for (size_t i = 0; i < n; i++)
            v[i] = family_value(f, i, d, base);
        kinds[f][roundtrip(e, t, v, n, NULL)]++;
    }
    if (getenv("CODEC_KINDS"))
        for (int f = 0; f < F_COUNT; f++)
            fprintf(stderr, "family %d: %d %d %d\n", f, kinds[f][0], kinds[f][1], kinds[f][2]);
    /* What each family is encoded as, in most of its 214 chunks (small
     * chunks with irregular timestamps may go any way: the smallest wins). */
    assert_true(kinds[F_INTEGER][MW_TSC_DECIMAL] > 150);
    assert_true(kinds[F_DECIMAL][MW_TSC_DECIMAL] > 100);
    assert_true(kinds[F_COUNTER][MW_TSC_DECIMAL] > 150);
    assert_true(kinds[F_REPEATED][MW_TSC_DICT] > 150);
    assert_true(kinds[F_STATES][MW_TSC_DICT] > 100);
    assert_true(kinds[F_RANDOM][MW_TSC_GORILLA] > 150);
    assert_true(kinds[F_NAN][MW_TSC_GORILLA] > 150);
    assert_true(kinds[F_STALE_IN_COUNTER][MW_TSC_DECIMAL] > 150);
    assert_true(kinds[F_SINE][MW_TSC_GORILLA] > 150);
    free(t);
    free(v);
    mw_tsc_enc_free(e);
}

/* Families at the sizes blocks use, with what they cost. */
static void telemetry_sizes(void **state)
{
    (void)state;
    mw_tsc_enc *e = mw_tsc_enc_new();
    enum { N = 2880 };
    static int64_t t[N];
    static double v[N];
    for (size_t i = 0; i < N; i++)
        t[i] = 1700000000000LL + (int64_t)i * 15000;
    size_t len;
    /* Integer utilisation drifting slowly. */
    for (size_t i = 0; i < N; i++)
        v[i] = floor(80 + 20 * sin((double)i * 0.05));
    assert_int_equal(roundtrip(e, t, v, N, &len), MW_TSC_DECIMAL);
    assert_true(len < N / 4);
    /* A counter with a regular step at two decimals: a few bytes. */
    for (size_t i = 0; i < N; i++)
        v[i] = (double)i * 15 * 0.95 + 7;
    assert_int_equal(roundtrip(e, t, v, N, &len), MW_TSC_DECIMAL);
    assert_true(len < 32);
    /* The same counter ending in a stale marker (its target went away). */
    v[N - 1] = from_bits(STALE);
    assert_int_equal(roundtrip(e, t, v, N, &len), MW_TSC_DECIMAL);
    assert_true(len < 48);
    /* Two states. */
    for (size_t i = 0; i < N; i++)
        v[i] = (i / 40) % 2 ? 1755e6 : 1980e6;
    roundtrip(e, t, v, N, &len);
    assert_true(len < 64);
    /* Full-precision floats: Gorilla, no larger than Gorilla alone. */
    for (size_t i = 0; i < N; i++)
        v[i] = 50 + 40 * sin((double)i * 0.1);
    assert_int_equal(roundtrip(e, t, v, N, &len), MW_TSC_GORILLA);
    mw_gorilla_enc g;
    mw_gorilla_enc_init(&g);
    uint8_t *buf = malloc(N * MW_GORILLA_MAX_SAMPLE_BYTES);
    for (size_t i = 0; i < N; i++)
        mw_gorilla_append(&g, buf, t[i], v[i]);
    assert_true(len <= mw_gorilla_bytes(&g) + 2);
    free(buf);
    mw_tsc_enc_free(e);
}

/* Values whose shortest decimal would round: each must come back as it
 * was (the encoder checks the decoded double, not the digits). */
static void decimal_exactness(void **state)
{
    (void)state;
    mw_tsc_enc *e = mw_tsc_enc_new();
    int64_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = 1000 * i;
    double v1[8] = {0.1, 0.2, 0.1 + 0.2, 0.3, 1.1, 2.2, 1.1 + 2.2, 3.3};
    roundtrip(e, t, v1, 8, NULL);
    double v2[8] = {1e15 + 0.5,
                    9007199254740992.0,
                    9007199254740993.0,
                    -1e300,
                    5e-324,
                    1.7976931348623157e308,
                    123.456,
                    -0.001};
    roundtrip(e, t, v2, 8, NULL);
    /* -0 among decimals is an exception, not 0. */
    double v3[8] = {1, 2, -0.0, 4, 5, 6, 7, 8};
    assert_int_equal(roundtrip(e, t, v3, 8, NULL), MW_TSC_DECIMAL);
    mw_tsc_enc_free(e);
}

/* Hostile bytes: every mutation of valid chunks decodes or is refused,
 * within the bytes given (ASan in CI). */
static void hostile_chunks(void **state)
{
    (void)state;
    mw_tsc_enc *e = mw_tsc_enc_new();
    int64_t t[600], dt[600];
    double v[600], dv[600];
    for (int c = 0; c < 2000; c++) {
        size_t n = 1 + below(600);
        make_times(t, n);
        int f = (int)below(F_COUNT);
        for (size_t i = 0; i < n; i++)
            v[i] = family_value(f, i, 2, 1000);
        size_t len;
        const uint8_t *p = mw_tsc_encode(e, t, v, n, &len, NULL);
        uint8_t *copy = malloc(len);
        memcpy(copy, p, len);
        int flips = 1 + (int)below(4);
        for (int k = 0; k < flips; k++)
            copy[below(len)] ^= (uint8_t)(1 + below(255));
        size_t cut = below(3) == 0 ? below(len + 1) : len;
        (void)mw_tsc_decode(copy, cut, (uint32_t)n, dt, dv, NULL);
        free(copy);
    }
    uint8_t junk[64];
    for (int c = 0; c < 2000; c++) {
        size_t len = below(sizeof(junk) + 1);
        for (size_t i = 0; i < len; i++)
            junk[i] = (uint8_t)next_u64();
        (void)mw_tsc_decode(junk, len, (uint32_t)(1 + below(600)), dt, dv, NULL);
    }
    /* Counts beyond what a chunk may hold are refused up front. */
    assert_int_equal(mw_tsc_decode(junk, sizeof(junk), 0, dt, dv, NULL), -1);
    assert_int_equal(mw_tsc_decode(junk, sizeof(junk), MW_TSC_MAX_SAMPLES + 1, dt, dv, NULL), -1);
    mw_tsc_enc_free(e);
}

/* zstd frames: trailing bytes, a content size beyond n samples' bound, or
 * none declared, are refused. */
static void zstd_frames(void **state)
{
    (void)state;
    mw_tsc_enc *e = mw_tsc_enc_new();
    enum { N = 500 };
    int64_t t[N], dt[N];
    double v[N], dv[N];
    for (size_t i = 0; i < N; i++) {
        t[i] = 1000 * (int64_t)i;
        v[i] = floor(80 + 20 * sin((double)i * 0.05));
    }
    size_t len;
    const uint8_t *p = mw_tsc_encode(e, t, v, N, &len, NULL);
    assert_int_equal(p[0], 1); /* compressed */
    uint8_t *buf = malloc(len + 8);
    memcpy(buf, p, len);
    assert_int_equal(mw_tsc_decode(buf, len, N, dt, dv, NULL), 0);
    /* Extra bytes after the frame: garbage, or an empty skippable frame
     * (which zstd itself would skip): a chunk is exactly one frame. */
    memcpy(buf + len, buf + 1, 8);
    assert_int_equal(mw_tsc_decode(buf, len + 8, N, dt, dv, NULL), -1);
    static const uint8_t skippable[8] = {0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0};
    memcpy(buf + len, skippable, 8);
    assert_int_equal(mw_tsc_decode(buf, len + 8, N, dt, dv, NULL), -1);
    /* The raw chunk back, then reframed without a content size. */
    uint8_t raw[8192];
    size_t rawlen = ZSTD_decompress(raw, sizeof(raw), buf + 1, len - 1);
    assert_false(ZSTD_isError(rawlen));
    uint8_t frame[8192];
    ZSTD_CCtx *zc = ZSTD_createCCtx();
    frame[0] = 1;
    size_t fl = ZSTD_compressCCtx(zc, frame + 1, sizeof(frame) - 1, raw, rawlen, 3);
    /* ZSTD_compressCCtx writes the content size: the frame decodes. */
    assert_int_equal(mw_tsc_decode(frame, fl + 1, N, dt, dv, NULL), 0);
    ZSTD_CCtx_reset(zc, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(zc, ZSTD_c_contentSizeFlag, 0);
    ZSTD_inBuffer in = {raw, rawlen, 0};
    ZSTD_outBuffer out = {frame + 1, sizeof(frame) - 1, 0};
    assert_int_equal(ZSTD_compressStream2(zc, &out, &in, ZSTD_e_end), 0);
    assert_int_equal(ZSTD_getFrameContentSize(frame + 1, out.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    assert_int_equal(mw_tsc_decode(frame, out.pos + 1, N, dt, dv, NULL), -1);
    /* A frame that declares (and holds) more than N samples can take. */
    static uint8_t big[200000], bigz[8192];
    memset(big, 0, sizeof(big));
    memcpy(big, raw, rawlen);
    size_t bl = ZSTD_compress(bigz + 1, sizeof(bigz) - 1, big, sizeof(big), 3);
    assert_false(ZSTD_isError(bl));
    bigz[0] = 1;
    assert_int_equal(mw_tsc_decode(bigz, bl + 1, N, dt, dv, NULL), -1);
    ZSTD_freeCCtx(zc);
    free(buf);
    mw_tsc_enc_free(e);
}

/* ---- block formats ---- */

static void copy_dir_blocks(const char *from, const char *to)
{
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/blocks' && cp '%s'/blocks/*.blk '%s/blocks/'", to,
             from, to);
    assert_int_equal(system(cmd), 0);
}

static const char *fixture_dir(void)
{
    static char p[1024];
    const char *f = getenv("MLWATCH_FIXTURES");
    snprintf(p, sizeof(p), "%s/store-blocks-v1", f ? f : "tests/fixtures");
    return p;
}

/* Every sample the fixture's blocks hold, through a store over a copy. */
static void check_fixture_samples(mw_store *s)
{
    for (int k = 0; k < FIX_SERIES; k++) {
        mw_matcher m[2];
        char err[256];
        assert_int_equal(mw_matcher_init(&m[0], MW_MATCH_EQ, "__name__", "fixture", err, 256), 0);
        assert_int_equal(mw_matcher_init(&m[1], MW_MATCH_EQ, "family", fix_family(k), err, 256), 0);
        mw_select_result set;
        assert_int_equal(mw_store_select(s, m, 2, INT64_MIN, INT64_MAX, 0, &set, err, 256), 0);
        assert_int_equal(set.nseries, 1);
        assert_int_equal(set.series[0].n, FIX_BLOCKS * FIX_SAMPLES);
        for (int r = 0; r < FIX_BLOCKS * FIX_SAMPLES; r++) {
            assert_true(set.series[0].t[r] == fix_time(r / FIX_SAMPLES, r % FIX_SAMPLES));
            if (bits_of(set.series[0].v[r]) != bits_of(fix_value(k, r)))
                fail_msg("%s sample %d: %016llx, want %016llx", fix_family(k), r,
                         (unsigned long long)bits_of(set.series[0].v[r]),
                         (unsigned long long)bits_of(fix_value(k, r)));
        }
        mw_select_result_free(&set);
        mw_matcher_free(&m[0]);
        mw_matcher_free(&m[1]);
    }
}

/* `mlwatch store inspect` of data into a string (caller frees). */
static char *inspect(const char *data, int want_rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_int_equal(mw_store_inspect(data, out, stderr), want_rc);
    fclose(out);
    return text;
}

static void old_format_blocks(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw-codec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char data[1200];
    snprintf(data, sizeof(data), "%s/data", dir);
    copy_dir_blocks(fixture_dir(), data);
    char err[512];
    /* Each fixture block is format 1. */
    for (int b = 1; b <= FIX_BLOCKS; b++) {
        char path[1400];
        snprintf(path, sizeof(path), "%s/blocks/%010d.blk", data, b);
        mw_block *blk = mw_block_open(path, err, sizeof(err));
        assert_non_null(blk);
        assert_int_equal(mw_block_version(blk), 1);
        mw_block_unref(blk);
    }
    char *text = inspect(data, 0);
    assert_non_null(strstr(text, "0000000001.blk        1     1        raw 2023-11-14T22:13:20Z "
                                 "2023-11-14T23:28:05Z        12        12         3600        "
                                 "15912    4.420\n"));
    assert_non_null(strstr(text, "4 blocks (0 not readable), raw resolution, 2023-11-14T22:13:20Z "
                                 "to 2023-11-15T03:13:05Z: 48 series (summed over blocks), 14400 "
                                 "samples, 63832 bytes, 4.433 bytes per sample\n"));
    assert_non_null(strstr(text, "  gorilla (format 1)          48 chunks (100.0 %)          "
                                 "14400 samples\n"));
    free(text);
    mw_store_options o = {.dir = data, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    check_fixture_samples(s);
    /* Four level-1 blocks: compaction merges them into one of format 2. */
    assert_int_equal(mw_store_compact(s, 1), 0);
    check_fixture_samples(s);
    mw_store_close(s);
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "ls %s/blocks | wc -l", data);
    FILE *p = popen(cmd, "r");
    int nfiles = 0;
    assert_int_equal(fscanf(p, "%d", &nfiles), 1);
    pclose(p);
    assert_int_equal(nfiles, 1);
    snprintf(cmd, sizeof(cmd), "%s/blocks/%010d.blk", data, FIX_BLOCKS + 1);
    mw_block *blk = mw_block_open(cmd, err, sizeof(err));
    assert_non_null(blk);
    assert_int_equal(mw_block_version(blk), MW_BLOCK_FORMAT);
    assert_int_equal(mw_block_get_meta(blk)->level, 2);
    assert_int_equal(mw_block_get_meta(blk)->nsamples, FIX_SERIES * FIX_BLOCKS * FIX_SAMPLES);
    mw_block_unref(blk);
    /* Inspected from the --data-dir above the data folder too. */
    text = inspect(dir, 0);
    if (getenv("CODEC_PRINT")) fputs(text, stderr); /* docs/store.md's example */
    assert_non_null(strstr(text, "0000000005.blk        3     2        raw 2023-11-14T22:13:20Z "
                                 "2023-11-15T03:13:05Z        12        12        14400"));
    assert_non_null(strstr(text, "  dictionary                   4 chunks ( 33.3 %)           "
                                 "4800 samples\n  decimal                      4 chunks ( 33.3 %)"
                                 "           4800 samples\n  gorilla                      4 "
                                 "chunks ( 33.3 %)           4800 samples\n"));
    free(text);
    free(inspect("/nonexistent-mlwatch-dir", 1));
    /* And it reads back after a restart, in the new format. */
    s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    check_fixture_samples(s);
    mw_store_close(s);
    /* A crash after the new block's rename, before the old ones went:
     * both hold the samples; each is read once, and the next compaction
     * leaves format 2 only. */
    copy_dir_blocks(fixture_dir(), data);
    s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    check_fixture_samples(s);
    assert_int_equal(mw_store_compact(s, 1), 0);
    check_fixture_samples(s);
    mw_store_close(s);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A block whose footer says format 4: refused by name, kept in place, and
 * the store does not open over it. */
static void newer_format_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw-codec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char data[1200], path[1400], err[512];
    snprintf(data, sizeof(data), "%s/data", dir);
    copy_dir_blocks(fixture_dir(), data);
    snprintf(path, sizeof(path), "%s/blocks/%010d.blk", data, 2);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    uint8_t *b = malloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fread(b, 1, (size_t)size, f), (size_t)size);
    /* Footer: 19 u64 words, u32 crc, "MWBLKEND"; word 17 the version. The
     * crc is recomputed, as a newer build would write it. */
    uint8_t *foot = b + size - (19 * 8 + 12);
    mw_put_le64(foot + 17 * 8, 4);
    uint64_t sym_off = mw_get_le64(foot);
    uint32_t crc = (uint32_t)crc32(0, b + sym_off, (uInt)((size_t)size - 12 - sym_off));
    mw_put_le32(foot + 19 * 8, crc);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fwrite(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    free(b);
    errno = 0;
    assert_null(mw_block_open(path, err, sizeof(err)));
    assert_int_equal(errno, ENOTSUP);
    assert_string_equal(err, "written in block format 4, newer than this build reads (formats 1 "
                             "to 3): run a newer mlwatch on this data folder, or move the block "
                             "away");
    mw_store_options o = {.dir = data, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    assert_null(mw_store_open(&o, err, sizeof(err)));
    char want[2048];
    snprintf(want, sizeof(want),
             "block %s: written in block format 4, newer than this build reads (formats 1 to 3): "
             "run a newer mlwatch on this data folder, or move the block away",
             path);
    assert_string_equal(err, want);
    assert_int_equal(access(path, F_OK), 0); /* not renamed .corrupt */
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* What blocks/ holds: format-1 blocks, format-2 blocks, temporary files. */
static void count_block_files(const char *data, int *v1, int *v2, int *tmp)
{
    char bdir[1400], path[1800], err[512];
    snprintf(bdir, sizeof(bdir), "%s/blocks", data);
    *v1 = *v2 = *tmp = 0;
    DIR *d = opendir(bdir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) (*tmp)++;
        if (len < 5 || strcmp(e->d_name + len - 4, ".blk") != 0) continue;
        snprintf(path, sizeof(path), "%s/%s", bdir, e->d_name);
        mw_block *b = mw_block_open(path, err, sizeof(err));
        assert_non_null(b);
        if (mw_block_version(b) == 1)
            (*v1)++;
        else
            (*v2)++;
        mw_block_unref(b);
    }
    closedir(d);
}

/* kill -9 at random moments while compaction rewrites the format-1
 * fixture into a format-2 block: after each, the store opens with every
 * sample once, bit for bit, and compacts to one format-2 block. */
static void kill9_during_rewrite(void **state)
{
    (void)state;
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int mid = 0, before = 0, after = 0, sources_deleted = 0;
    for (int round = 0; round < 16; round++) {
        char dir[] = "/tmp/mw-codec-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char data[1200], err[512];
        snprintf(data, sizeof(data), "%s/data", dir);
        copy_dir_blocks(fixture_dir(), data);
        /* No fsync: a kill keeps the page cache, and the kills should land
         * in the rewrite rather than in the snapshots' syncs before it. */
        mw_store_options o = {.dir = data, .background_ms = -1, .no_sync = 1};
        mw_store_default_limits(&o.limits);
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            mw_store *s = mw_store_open(&o, err, sizeof(err));
            if (!s) _exit(3);
            if (write(p[1], "o", 1) != 1) _exit(4);
            int64_t t0 = mw_mono_ns();
            if (mw_store_compact(s, 1) != 0) _exit(5);
            if (getenv("CODEC_TIMING"))
                fprintf(stderr, "compaction %.1f ms\n", (double)(mw_mono_ns() - t0) / 1e6);
            if (write(p[1], "c", 1) != 1) _exit(4);
            for (;;)
                pause();
        }
        close(p[1]);
        char c;
        assert_int_equal(read(p[0], &c, 1), 1); /* opened */
        struct timespec d = {0, (rand() % 12000) * 1000L};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        int done = read(p[0], &c, 1) == 1;
        close(p[0]);
        int v1, v2, tmp;
        count_block_files(data, &v1, &v2, &tmp);
        if (!done && (v2 || tmp))
            mid++;
        else if (!done)
            before++;
        else
            after++;
        /* Killed between the merged block's rename and the last delete of
         * its format-1 sources: the merged block lists them, and the open
         * deletes them (before, they stayed beside it). */
        int killed_among_sources = !done && v2 && v1;
        mw_store *s = mw_store_open(&o, err, sizeof(err));
        assert_non_null(s);
        if (killed_among_sources) {
            int w1, w2, wt;
            count_block_files(data, &w1, &w2, &wt);
            assert_int_equal(w1, 0);
            assert_int_equal(w2, 1);
            sources_deleted++;
        }
        check_fixture_samples(s);
        assert_int_equal(mw_store_compact(s, 1), 0);
        check_fixture_samples(s);
        mw_store_close(s);
        count_block_files(data, &v1, &v2, &tmp);
        assert_int_equal(v1, 0);
        assert_int_equal(v2, 1);
        assert_int_equal(tmp, 0);
        char cmd[1400];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
    }
    fprintf(stderr,
            "kill -9: %d before the rewrite, %d during it (%d among the sources' deletes), %d "
            "after\n",
            before, mid, sources_deleted, after);
}

/* The state a kill between a merged block's rename and its sources'
 * deletion leaves, made on purpose: the four format-1 sources back beside
 * the block merged from them. The open deletes them (the merged block lists
 * them), and every sample reads once. */
static void covered_sources_deleted_at_open(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw-codec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char data[1200], err[512];
    snprintf(data, sizeof(data), "%s/data", dir);
    copy_dir_blocks(fixture_dir(), data);
    mw_store_options o = {.dir = data, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    assert_int_equal(mw_store_compact(s, 1), 0);
    mw_store_close(s);
    int v1, v2, tmp;
    count_block_files(data, &v1, &v2, &tmp);
    assert_int_equal(v1, 0);
    assert_int_equal(v2, 1);
    copy_dir_blocks(fixture_dir(), data); /* the sources are back */
    count_block_files(data, &v1, &v2, &tmp);
    assert_int_equal(v1, 4);
    s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    count_block_files(data, &v1, &v2, &tmp);
    assert_int_equal(v1, 0);
    assert_int_equal(v2, 1);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.blocks, 1);
    check_fixture_samples(s);
    mw_store_close(s);
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(property_roundtrip),
        cmocka_unit_test(telemetry_sizes),
        cmocka_unit_test(decimal_exactness),
        cmocka_unit_test(hostile_chunks),
        cmocka_unit_test(zstd_frames),
        cmocka_unit_test(old_format_blocks),
        cmocka_unit_test(newer_format_refused),
        cmocka_unit_test(kill9_during_rewrite),
        cmocka_unit_test(covered_sources_deleted_at_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
