/* test_store_readpath.c - the store's fast read path against the plain one:
 * mw_crc32 against zlib's crc32 (ISA-L loaded only by the first query),
 * mw_gorilla_decode against mw_gorilla_next
 * (also on truncated and garbage streams), and mw_head_read_batch (chunk
 * records read in file order through a window) against mw_head_read per
 * series, over several chunk files, records larger than the window's part,
 * a damaged record, a truncated file and the sample budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "testutil.h"
#include "store/crc.h"
#include "store/gorilla.h"
#include "store/head.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_crc_values(void)
{
    uint8_t buf[1200];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)next_rand();
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof(buf); n++)
            assert_int_equal(mw_crc32(buf + off, n), (uint32_t)crc32(0, buf + off, (uInt)n));
    /* Known value: CRC-32 of "123456789". */
    assert_int_equal(mw_crc32((const uint8_t *)"123456789", 9), 0xcbf43926u);
    uint8_t zeros[256] = {0};
    assert_int_equal(mw_crc32(zeros, sizeof(zeros)), (uint32_t)crc32(0, zeros, sizeof(zeros)));
}

/* The same values from zlib before the first query and from ISA-L after it;
 * ISA-L is not in memory until then (it is loaded, not linked). */
static void crc_matches_zlib(void **state)
{
    (void)state;
    assert_false(tu_library_mapped("libisal.so"));
    check_crc_values();
    assert_false(tu_library_mapped("libisal.so"));
    mw_crc32_for_queries();
    check_crc_values();
    assert_true(tu_library_mapped("libisal.so"));
}

/* Both decoders on the same bytes: the same count and the same samples. */
static void same_decoding(const uint8_t *buf, size_t nbytes, uint32_t n)
{
    int64_t *t = malloc((n ? n : 1) * sizeof(int64_t));
    double *v = malloc((n ? n : 1) * sizeof(double));
    size_t got = mw_gorilla_decode(buf, nbytes, n, t, v);
    mw_gorilla_dec d;
    mw_gorilla_dec_init(&d, buf, nbytes, n);
    size_t k = 0;
    int64_t tt;
    double vv;
    while (mw_gorilla_next(&d, &tt, &vv) == 1) {
        assert_true(k < got);
        assert_int_equal(tt, t[k]);
        assert_memory_equal(&vv, &v[k], sizeof(double));
        k++;
    }
    assert_int_equal(k, got);
    free(t);
    free(v);
}

static void gorilla_decode_matches_next(void **state)
{
    (void)state;
    for (int pattern = 0; pattern < 6; pattern++) {
        enum { N = 300 };
        uint8_t *buf = calloc(N * MW_GORILLA_MAX_SAMPLE_BYTES + 32, 1);
        mw_gorilla_enc e;
        mw_gorilla_enc_init(&e);
        int64_t t = 1700000000000;
        double v = 1.5;
        for (int i = 0; i < N; i++) {
            switch (pattern) {
            case 0:
                t += 15000;
                break; /* regular, constant */
            case 1:
                t += 15000 + (int64_t)(next_rand() % 200) - 100;
                v += 1;
                break;
            case 2:
                t += (int64_t)(next_rand() % 5000000);
                v = (double)next_rand();
                break;
            case 3:
                t += (int64_t)(next_rand() % (1ull << 40));
                v = -v * 3.7;
                break;
            case 4:
                t += 1 + (int64_t)(next_rand() % 1000000);
                v = (double)(next_rand() % 7);
                break;
            default:
                t += 15000;
                v = i % 2 ? 0.0 : 1e300;
                break;
            }
            mw_gorilla_append(&e, buf, t, v);
        }
        size_t nbytes = mw_gorilla_bytes(&e);
        same_decoding(buf, nbytes, N);
        /* Cut short anywhere, or asked for more samples than written. */
        for (size_t cut = 0; cut <= nbytes; cut++)
            same_decoding(buf, cut, N);
        same_decoding(buf, nbytes, N + 7);
        free(buf);
    }
    /* Garbage. */
    uint8_t junk[512];
    for (int round = 0; round < 2000; round++) {
        size_t len = next_rand() % sizeof(junk);
        for (size_t i = 0; i < len; i++)
            junk[i] = (uint8_t)next_rand();
        same_decoding(junk, len, (uint32_t)(next_rand() % 200));
    }
}

typedef struct fixture {
    char dir[64];
    mw_head h;
    uint32_t ids[400];
    size_t n;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/mlwatch-test-readpath-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(mw_head_init(&f->h, f->dir, NULL), 0);
    assert_int_equal(mw_head_chunks_open(&f->h, 0, 0), 0);
    /* Series whose chunks are cut at different moments (values of
     * different entropy), over three chunk files, with a few records of a
     * few KiB (as written while the chunk files could not be). */
    f->n = 400;
    for (size_t i = 0; i < f->n; i++) {
        char v[32];
        snprintf(v, sizeof(v), "s%zu", i);
        mw_label l[2] = {{"__name__", "m"}, {"id", v}};
        f->ids[i] = mw_head_create(&f->h, l, 2, mw_labels_hash(l, 2), UINT32_MAX);
    }
    for (int round = 0; round < 600; round++) {
        if (round == 200 || round == 400) assert_int_equal(mw_head_chunks_rotate(&f->h), 0);
        f->h.chunk_errno = round >= 300 && round < 360 ? 28 : 0;
        for (size_t i = 0; i < f->n; i++) {
            double v = i % 3 == 0   ? (double)round
                       : i % 3 == 1 ? (double)(next_rand() % 1000) / 7
                                    : (double)next_rand();
            if (i % 50 == 7 && round % 5) continue; /* sparse series */
            mw_head_append(&f->h, f->ids[i], 1000000 + round * 15000 + (int64_t)(i % 13), v);
        }
    }
    f->h.chunk_errno = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mw_head_free(&f->h);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Chunk records the last compare's batch read skipped for their checksum. */
static size_t last_damaged;

/* The batch read of ids equals one mw_head_read per id; returns the total. */
static size_t compare(fixture *f, const uint32_t *ids, size_t n, int64_t mint, int64_t maxt)
{
    int64_t **t = calloc(n, sizeof(*t));
    double **v = calloc(n, sizeof(*v));
    size_t *cnt = calloc(n, sizeof(*cnt)), total = 0, sum = 0;
    last_damaged = 0;
    assert_int_equal(
        mw_head_read_batch(&f->h, ids, n, mint, maxt, 0, &total, t, v, cnt, &last_damaged), 0);
    mw_samples sm = {0};
    for (size_t i = 0; i < n; i++) {
        sm.n = 0;
        assert_int_equal(mw_head_read(&f->h, ids[i], mint, maxt, &sm), 0);
        assert_int_equal(cnt[i], sm.n);
        if (sm.n) {
            assert_memory_equal(t[i], sm.t, sm.n * sizeof(int64_t));
            assert_memory_equal(v[i], sm.v, sm.n * sizeof(double));
        }
        sum += sm.n;
        free(t[i]);
        free(v[i]);
    }
    free(sm.t);
    free(sm.v);
    free(t);
    free(v);
    free(cnt);
    return sum;
}

static void batch_matches_single_reads(void **state)
{
    fixture *f = *state;
    assert_true(f->h.seq == 3);
    size_t all = compare(f, f->ids, f->n, INT64_MIN, INT64_MAX);
    assert_true(all > 200000);
    assert_int_equal(last_damaged, 0);
    compare(f, f->ids, f->n, 1000000 + 100 * 15000, 1000000 + 450 * 15000 + 5);
    compare(f, f->ids, f->n, 1000000 + 599 * 15000, INT64_MAX); /* the open chunks */
    assert_int_equal(compare(f, f->ids, f->n, 0, 999999), 0);
    /* A few series, in another order. */
    uint32_t some[5] = {f->ids[399], f->ids[7], f->ids[0], f->ids[200], f->ids[57]};
    compare(f, some, 5, 1000000 + 250 * 15000, 1000000 + 380 * 15000);
    /* Budget: exactly enough, one short. */
    int64_t **t = calloc(f->n, sizeof(*t));
    double **v = calloc(f->n, sizeof(*v));
    size_t *cnt = calloc(f->n, sizeof(*cnt)), total = 0, damaged = 0;
    assert_int_equal(mw_head_read_batch(&f->h, f->ids, f->n, INT64_MIN, INT64_MAX, all, &total, t,
                                        v, cnt, &damaged),
                     0);
    assert_int_equal(total, all);
    for (size_t i = 0; i < f->n; i++) {
        free(t[i]);
        free(v[i]);
        t[i] = NULL;
        v[i] = NULL;
    }
    total = 0;
    assert_int_equal(mw_head_read_batch(&f->h, f->ids, f->n, INT64_MIN, INT64_MAX, all - 1, &total,
                                        t, v, cnt, &damaged),
                     -1);
    for (size_t i = 0; i < f->n; i++) {
        free(t[i]);
        free(v[i]);
    }
    free(t);
    free(v);
    free(cnt);
}

static void damaged_and_truncated_files(void **state)
{
    fixture *f = *state;
    size_t all = compare(f, f->ids, f->n, INT64_MIN, INT64_MAX);
    /* A flipped byte in the middle of file 2: that record is skipped by
     * both, and the chain goes on past it. */
    char path[128];
    snprintf(path, sizeof(path), "%s/%08u", f->dir, 2u);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    off_t size = lseek(fd, 0, SEEK_END);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, size / 2), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, size / 2), 1);
    size_t damaged = compare(f, f->ids, f->n, INT64_MIN, INT64_MAX);
    assert_true(damaged < all);
    assert_int_equal(last_damaged, 1); /* counted, for the query's warning */
    /* File 1 cut short: chains end where its data does. */
    close(fd);
    snprintf(path, sizeof(path), "%s/%08u", f->dir, 1u);
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    size = lseek(fd, 0, SEEK_END);
    assert_int_equal(ftruncate(fd, size / 3 + 17), 0);
    close(fd);
    assert_true(compare(f, f->ids, f->n, INT64_MIN, INT64_MAX) < damaged);
    compare(f, f->ids, f->n, 1000000 + 50 * 15000, 1000000 + 250 * 15000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc_matches_zlib),
        cmocka_unit_test(gorilla_decode_matches_next),
        cmocka_unit_test_setup_teardown(batch_matches_single_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_and_truncated_files, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
