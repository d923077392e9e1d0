/* test_store_wal_damage.c - a damaged WAL record loses that record only
 * (src/store/wal.c replay), on a segment in today's format.
 *
 * tests/fixtures/store-wal-v1/0000000000000000 is a WAL segment written by
 * the store before records were skipped one by one (write_fixture below,
 * run with MW_WAL_FIXTURE_OUT=folder, made it): 60 writes of 5 series each,
 * one sample per series, every value different. Replayed whole it gives
 * back all 300 samples; with one byte flipped inside a record's payload
 * exactly that write's 5 samples are missing and the 295 others are there,
 * bit for bit; with the record's length field damaged nothing after it can
 * be framed, and the segment is cut there as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store/store.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITES 60
#define SERIES 5
#define FIXTURE "tests/fixtures/store-wal-v1/0000000000000000"

static char dir[256], seg[320];

static double value_of(int w, int k)
{
    return 1e12 + w * 1000.0 + k + 0.5;
}

static int64_t time_of(int w)
{
    return 1700000000000LL + (int64_t)w * 15000;
}

static mw_store *open_store(const char *where)
{
    mw_store_options o = {.dir = where, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    char err[256] = "";
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    if (!s) fprintf(stderr, "open: %s\n", err);
    return s;
}

/* The writes the fixture holds; the process then ends without closing the
 * store, so that the WAL is all there is. */
static void write_fixture(const char *where)
{
    mw_store *s = open_store(where);
    if (!s) exit(1);
    for (int w = 0; w < WRITES; w++) {
        mw_label lab[SERIES][2];
        mw_store_sample sm[SERIES];
        mw_store_ts ts[SERIES];
        char names[SERIES][8];
        for (int k = 0; k < SERIES; k++) {
            snprintf(names[k], sizeof(names[k]), "s%d", k);
            lab[k][0] = (mw_label){"__name__", "walfix"};
            lab[k][1] = (mw_label){"k", names[k]};
            sm[k] = (mw_store_sample){time_of(w), value_of(w, k)};
            ts[k] = (mw_store_ts){lab[k], 2, &sm[k], 1};
        }
        char msg[512];
        if (mw_store_append(s, ts, SERIES, MW_STORE_WAIT, msg, sizeof(msg)) != 0) exit(2);
    }
    _exit(0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-waldamage-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char cmd[700];
    snprintf(seg, sizeof(seg), "%s/wal/0000000000000000", dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/wal' && cp '%s' '%s'", dir, FIXTURE, seg);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static long file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (long)st.st_size;
}

/* The offset and length of the record of write w in the segment (the one
 * holding value_of(w, 0)), walking the records' headers. */
static void record_of(int w, long *at, long *len)
{
    FILE *f = fopen(seg, "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    double v = value_of(w, 0);
    size_t off = 8; /* the segment's magic */
    while (off + 9 <= n) {
        size_t l = (size_t)buf[off] | (size_t)buf[off + 1] << 8 | (size_t)buf[off + 2] << 16 |
                   (size_t)buf[off + 3] << 24;
        assert_true(off + 9 + l <= n);
        for (size_t i = off + 9; i + sizeof(v) <= off + 9 + l; i++)
            if (memcmp(buf + i, &v, sizeof(v)) == 0) {
                *at = (long)off;
                *len = (long)(9 + l);
                return;
            }
        off += 9 + l;
    }
    fail_msg("write %d is in no record of %s", w, seg);
}

static void flip_byte(long at)
{
    int fd = open(seg, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x10;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

/* Every write of the fixture but those in lost[0..nlost) is in the store
 * with its exact values, and nothing else. */
static void expect_writes(mw_store *s, const int *lost, size_t nlost)
{
    mw_matcher m;
    char err[256];
    assert_int_equal(mw_matcher_init(&m, MW_MATCH_EQ, "__name__", "walfix", err, sizeof(err)), 0);
    mw_select_result r;
    assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)), 0);
    mw_matcher_free(&m);
    assert_int_equal(r.nseries, SERIES);
    for (size_t i = 0; i < r.nseries; i++) {
        int k = atoi(r.series[i].labels[1].value + 1);
        size_t at = 0;
        for (int w = 0; w < WRITES; w++) {
            int gone = 0;
            for (size_t j = 0; j < nlost; j++)
                gone |= lost[j] == w;
            if (gone) continue;
            if (at >= r.series[i].n || r.series[i].t[at] != time_of(w))
                fail_msg("series s%d: write %d is missing", k, w);
            double v = value_of(w, k);
            assert_memory_equal(&r.series[i].v[at], &v, sizeof(v));
            at++;
        }
        assert_int_equal(r.series[i].n, at);
    }
    mw_select_result_free(&r);
}

static void fixture_replays_whole(void **state)
{
    (void)state;
    mw_store *s = open_store(dir);
    assert_non_null(s);
    expect_writes(s, NULL, 0);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_records_replayed, WRITES + 1); /* and the series record */
    assert_int_equal(st.wal_bytes_cut, 0);
    mw_store_close(s);
}

static void flipped_payload_byte_loses_that_record_only(void **state)
{
    (void)state;
    long at, len, size = file_size(seg);
    record_of(30, &at, &len);
    flip_byte(at + len / 2);
    mw_store *s = open_store(dir);
    assert_non_null(s);
    const int lost[] = {30};
    expect_writes(s, lost, 1);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_records_replayed, WRITES);
    assert_int_equal(st.wal_bytes_cut, len);
    assert_int_equal(file_size(seg), size); /* the records after it stay */
    mw_store_close(s);
}

static void flipped_checksum_or_type_byte_too(void **state)
{
    (void)state;
    long at, len;
    record_of(0, &at, &len); /* the first samples record, after the series record */
    flip_byte(at + 5);       /* in its checksum */
    record_of(45, &at, &len);
    flip_byte(at + 8); /* its type */
    mw_store *s = open_store(dir);
    assert_non_null(s);
    const int lost[] = {0, 45};
    expect_writes(s, lost, 2);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_records_replayed, WRITES - 1);
    mw_store_close(s);
}

static void damaged_length_cuts_the_rest(void **state)
{
    (void)state;
    long at, len;
    record_of(30, &at, &len);
    flip_byte(at + 2); /* the length now points past the end */
    mw_store *s = open_store(dir);
    assert_non_null(s);
    int lost[WRITES - 30];
    for (int w = 30; w < WRITES; w++)
        lost[w - 30] = w;
    expect_writes(s, lost, WRITES - 30);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(file_size(seg), at); /* cut where framing was lost */
    assert_int_equal(st.wal_bytes_cut, file_size(FIXTURE) - at);
    mw_store_close(s);
}

int main(void)
{
    const char *out = getenv("MW_WAL_FIXTURE_OUT");
    if (out) write_fixture(out);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(fixture_replays_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_payload_byte_loses_that_record_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(flipped_checksum_or_type_byte_too, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_length_cuts_the_rest, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
