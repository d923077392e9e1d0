/* test_store.c - the embedded store (src/store/): writes and reads,
 * matchers, the out-of-order policy, limits with their exact statuses and
 * messages, recovery from the WAL and snapshots after a crash, torn WAL
 * tails, compaction and retention, and the spread of first chunk cuts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store/block.h"
#include "store/head.h"
#include "store/index.h"
#include "store/store.h"
#include "store/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
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

static mw_store *open_store(const mw_store_limits *lim)
{
    /* No fsync: a killed process loses nothing the kernel has (power loss
     * is what fsync is for); the crash test and the HTTP tests sync. */
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1};
    if (lim)
        o.limits = *lim;
    else
        mw_store_default_limits(&o.limits);
    char err[256] = "";
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    if (!s) fprintf(stderr, "open: %s\n", err);
    assert_non_null(s);
    return s;
}

/* Append one sample to the series {__name__=name, k=v}. */
static int put(mw_store *s, const char *name, const char *k, const char *v, int64_t t, double val,
               char *msg)
{
    mw_label l[2] = {{"__name__", name}, {k, v}};
    mw_store_sample sm = {t, val};
    mw_store_ts ts = {l, 2, &sm, 1};
    return mw_store_append(s, &ts, 1, MW_STORE_WAIT, msg, 512);
}

/* Samples of {__name__=name} in the store. */
static size_t count(mw_store *s, const char *name, size_t *nseries)
{
    mw_matcher m;
    char err[256];
    assert_int_equal(mw_matcher_init(&m, MW_MATCH_EQ, "__name__", name, err, sizeof(err)), 0);
    mw_select_result r;
    assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)), 0);
    size_t n = r.nsamples;
    if (nseries) *nseries = r.nseries;
    mw_select_result_free(&r);
    mw_matcher_free(&m);
    return n;
}

static void append_and_select(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    char msg[512];
    for (int i = 0; i < 300; i++) {
        assert_int_equal(put(s, "up", "job", "a", 1000 + i * 1000, i, msg), 0);
        assert_int_equal(put(s, "up", "job", "b", 1000 + i * 1000, -i, msg), 0);
        assert_int_equal(put(s, "temp", "gpu", i % 2 ? "1" : "0", 1000 + i * 1000, 0.5, msg), 0);
    }
    char err[256];
    mw_matcher m[2];
    mw_select_result r;
    /* = and the time range */
    mw_matcher_init(&m[0], MW_MATCH_EQ, "__name__", "up", err, sizeof(err));
    assert_int_equal(mw_store_select(s, m, 1, 5000, 9000, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.nseries, 2);
    assert_string_equal(r.series[0].labels[1].value, "a"); /* sorted by labels */
    assert_int_equal(r.series[0].n, 5);
    assert_true(r.series[0].t[0] == 5000 && r.series[0].v[0] == 4.0);
    assert_true(r.series[1].t[4] == 9000 && r.series[1].v[4] == -8.0);
    mw_select_result_free(&r);
    /* != (an absent label matches as ""), =~ anchored, !~ */
    mw_matcher_init(&m[1], MW_MATCH_NEQ, "job", "a", err, sizeof(err));
    assert_int_equal(mw_store_select(s, &m[1], 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)),
                     0);
    assert_int_equal(r.nseries, 3); /* up{job=b}, temp{gpu=0}, temp{gpu=1} */
    mw_select_result_free(&r);
    mw_matcher_free(&m[1]);
    assert_int_equal(mw_matcher_init(&m[1], MW_MATCH_RE, "job", "a|b", err, sizeof(err)), 0);
    assert_int_equal(mw_store_select(s, m, 2, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.nseries, 2);
    assert_int_equal(r.nsamples, 600);
    mw_select_result_free(&r);
    mw_matcher_free(&m[1]);
    assert_int_equal(mw_matcher_init(&m[1], MW_MATCH_RE, "job", "", err, sizeof(err)), 0);
    assert_int_equal(mw_store_select(s, &m[1], 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)),
                     0);
    assert_int_equal(r.nseries, 2); /* only series without job */
    mw_select_result_free(&r);
    mw_matcher_free(&m[1]);
    assert_int_equal(mw_matcher_init(&m[1], MW_MATCH_NRE, "gpu", "\\d", err, sizeof(err)), 0);
    assert_int_equal(mw_store_select(s, &m[1], 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)),
                     0);
    assert_int_equal(r.nseries, 2); /* the two up series */
    mw_select_result_free(&r);
    mw_matcher_free(&m[1]);
    /* anchoring: "b" does not match "ab", ".*b" does */
    mw_matcher_init(&m[1], MW_MATCH_RE, "__name__", "m", err, sizeof(err));
    assert_int_equal(mw_store_select(s, &m[1], 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)),
                     0);
    assert_int_equal(r.nseries, 0);
    mw_select_result_free(&r);
    mw_matcher_free(&m[1]);
    /* RE2 syntax (core/regex.h): flags, anchored; a bad pattern in RE2's words */
    assert_int_equal(mw_matcher_init(&m[1], MW_MATCH_RE, "a", "(?i)x", err, sizeof(err)), 0);
    assert_int_equal(mw_matcher_matches(&m[1], "X"), 1);
    assert_int_equal(mw_matcher_matches(&m[1], "xX"), 0);
    assert_int_equal(m[1].matches_empty, 0);
    mw_matcher_free(&m[1]);
    assert_int_equal(mw_matcher_init(&m[1], MW_MATCH_RE, "a", "x(", err, sizeof(err)), -1);
    assert_string_equal(err, "error parsing regexp: missing ): x(");
    /* the sample limit */
    assert_int_equal(mw_store_select(s, m, 1, INT64_MIN, INT64_MAX, 100, &r, err, sizeof(err)), -1);
    assert_string_equal(err, "the selection needs more than 100 samples");
    mw_matcher_free(&m[0]);
    mw_store_close(s);
}

/* The head's memory gauge counts what the head uses: the series slabs and
 * the label pool are large allocations touched only as far as they are
 * filled (it said 4.2 MB for an empty store, 5.9 MB for 5,986 series). */
static void head_memory_counts_what_is_used(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    uint64_t empty = st.head_memory_bytes;
    char msg[512], v[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(v, sizeof(v), "%d", i);
        assert_int_equal(put(s, "m", "k", v, 1000, i, msg), 0);
    }
    mw_store_get_stats(s, &st);
    assert_true(empty < 64 * 1024);
    /* each series: its 56-byte entry and two label-pair ids at least */
    assert_true(st.head_memory_bytes - empty >= 1000 * (56 + 2 * 4));
    assert_true(st.head_memory_bytes < 256 * 1024);
    mw_store_close(s);
}

static void out_of_order_policy(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    char msg[512];
    assert_int_equal(put(s, "m", "a", "1", 2000, 1.0, msg), 0);
    /* exact duplicate: accepted, skipped */
    assert_int_equal(put(s, "m", "a", "1", 2000, 1.0, msg), 0);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.samples_duplicate, 1);
    assert_int_equal(st.samples_appended, 1);
    /* same timestamp, other value */
    assert_int_equal(put(s, "m", "a", "1", 2000, 2.0, msg), 400);
    assert_string_equal(msg, "duplicate sample for timestamp 2000 with a different value for "
                             "series {__name__=\"m\", a=\"1\"}; nothing of this request was "
                             "stored");
    /* older: refused, and the whole request with it (a new series too) */
    mw_label l1[2] = {{"__name__", "m"}, {"a", "2"}}, l2[2] = {{"__name__", "m"}, {"a", "1"}};
    mw_store_sample s1 = {5000, 1}, s2 = {1000, 1};
    mw_store_ts ts[2] = {{l1, 2, &s1, 1}, {l2, 2, &s2, 1}};
    assert_int_equal(mw_store_append(s, ts, 2, MW_STORE_WAIT, msg, 512), 400);
    assert_string_equal(msg, "out of order sample for series {__name__=\"m\", a=\"1\"}: timestamp "
                             "1000 is before the newest stored or sent timestamp 2000; nothing "
                             "of this request was stored");
    size_t nser;
    assert_int_equal(count(s, "m", &nser), 1);
    assert_int_equal(nser, 1);
    /* out of order within one request's series */
    mw_store_sample two[2] = {{9000, 1}, {8000, 2}};
    mw_store_ts t3 = {l1, 2, two, 2};
    assert_int_equal(mw_store_append(s, &t3, 1, MW_STORE_WAIT, msg, 512), 400);
    mw_store_get_stats(s, &st);
    assert_int_equal(st.refused[MW_REFUSE_OUT_OF_ORDER], 2);
    assert_int_equal(st.refused[MW_REFUSE_DUPLICATE], 1);
    /* the same series twice in a request, in order: fine */
    mw_store_sample a = {3000, 1}, b = {4000, 2};
    mw_label l3[2] = {{"a", "1"}, {"__name__", "m"}}; /* unsorted: sorted by the store */
    mw_store_ts t4[2] = {{l2, 2, &a, 1}, {l3, 2, &b, 1}};
    assert_int_equal(mw_store_append(s, t4, 2, MW_STORE_WAIT, msg, 512), 0);
    assert_int_equal(count(s, "m", &nser), 3);
    assert_int_equal(nser, 1);
    mw_store_close(s);
}

static void limits(void **state)
{
    (void)state;
    mw_store_limits lim;
    mw_store_default_limits(&lim);
    lim.max_series = 3;
    lim.max_series_per_tenant = 2;
    strcpy(lim.tenant_label, "ns");
    lim.max_label_name_len = 8;
    lim.max_label_value_len = 10;
    lim.max_labels = 3;
    lim.max_samples_per_request = 4;
    mw_store *s = open_store(&lim);
    char msg[512];
    assert_int_equal(put(s, "m", "ns", "t1", 1000, 1, msg), 0);
    assert_int_equal(put(s, "n", "ns", "t1", 1000, 1, msg), 0);
    assert_int_equal(put(s, "o", "ns", "t1", 1000, 1, msg), 429);
    assert_string_equal(msg, "series limit of 2 per ns reached for ns=\"t1\" (2 active); nothing "
                             "of this request was stored");
    assert_int_equal(put(s, "o", "ns", "t2", 1000, 1, msg), 0);
    assert_int_equal(put(s, "p", "ns", "t3", 1000, 1, msg), 429);
    assert_string_equal(msg, "active series limit of 3 reached (3 active, this request adds 1); "
                             "nothing of this request was stored");
    /* existing series still take samples */
    assert_int_equal(put(s, "m", "ns", "t1", 2000, 1, msg), 0);
    assert_int_equal(put(s, "m", "longlabelname", "x", 2000, 1, msg), 400);
    assert_string_equal(msg, "series 0: label name 'longlabelname...' is 13 bytes long, more "
                             "than the limit of 8");
    assert_int_equal(put(s, "m", "ns", "abcdefghijk", 2000, 1, msg), 400);
    assert_string_equal(msg, "series 0: the value of label ns is 11 bytes long, more than the "
                             "limit of 10");
    /* Prometheus 3's names: any non-empty UTF-8 (this one passes, and
     * meets the series limit). */
    assert_int_equal(put(s, "m", "a.b", "x", 2000, 1, msg), 429);
    assert_int_equal(put(s, "m", "9\xff", "x", 2000, 1, msg), 400);
    assert_string_equal(msg, "series 0: invalid label name '9\xff' (must be non-empty UTF-8)");
    assert_int_equal(put(s, "m", "ns", "\xff\xfe", 2000, 1, msg), 400);
    assert_string_equal(msg, "series 0: the value of label ns is not valid UTF-8");
    mw_label many[4] = {{"__name__", "m"}, {"a", "1"}, {"b", "1"}, {"c", "1"}};
    mw_store_sample sm[5] = {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}};
    mw_store_ts ts = {many, 4, sm, 1};
    assert_int_equal(mw_store_append(s, &ts, 1, MW_STORE_WAIT, msg, 512), 400);
    assert_string_equal(msg, "series {__name__=\"m\", a=\"1\", b=\"1\", c=\"1\"} has 4 labels, "
                             "more than the limit of 3");
    ts.nlabels = 2;
    ts.nsamples = 5;
    assert_int_equal(mw_store_append(s, &ts, 1, MW_STORE_WAIT, msg, 512), 400);
    assert_string_equal(msg, "request has 5 samples, more than the limit of 4 per request");
    mw_label dup[3] = {{"b", "1"}, {"__name__", "m"}, {"b", "2"}};
    mw_store_ts td = {dup, 3, sm, 1};
    assert_int_equal(mw_store_append(s, &td, 1, MW_STORE_WAIT, msg, 512), 400);
    assert_string_equal(msg, "series {__name__=\"m\", b=\"1\", b=\"2\"} has label b twice");
    mw_label empty[1] = {{"a", ""}};
    mw_store_ts te = {empty, 1, sm, 1};
    assert_int_equal(mw_store_append(s, &te, 1, MW_STORE_WAIT, msg, 512), 400);
    assert_string_equal(msg, "series 0 has no labels (or only empty values)");
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.series, 3);
    assert_int_equal(st.refused[MW_REFUSE_SERIES_LIMIT], 2);
    assert_int_equal(st.refused[MW_REFUSE_TENANT_LIMIT], 1);
    assert_int_equal(st.refused[MW_REFUSE_LABEL_LIMIT], 3);
    assert_int_equal(st.refused[MW_REFUSE_SAMPLES_LIMIT], 1);
    assert_int_equal(st.refused[MW_REFUSE_MALFORMED], 4);
    mw_store_close(s);
}

/* Run fn in a child that ends with _exit (no close, no snapshot): what a
 * crash leaves on disk. */
static void in_crashing_child(void (*fn)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void write_1000(void)
{
    mw_store *s = open_store(NULL);
    char msg[512];
    for (int i = 0; i < 1000; i++)
        if (put(s, "w", "k", i % 2 ? "odd" : "even", 1000 + i, i, msg) != 0) _exit(1);
}

static void write_snapshot_then_more(void)
{
    mw_store *s = open_store(NULL);
    char msg[512];
    for (int i = 0; i < 500; i++)
        if (put(s, "w", "k", i % 3 ? "x" : "y", 1000 + i, i, msg) != 0) _exit(1);
    if (mw_store_snapshot(s) != 0) _exit(2);
    for (int i = 500; i < 1000; i++)
        if (put(s, "w", "k", i % 3 ? "x" : "y", 1000 + i, i, msg) != 0) _exit(1);
}

static void recovery_from_wal(void **state)
{
    (void)state;
    in_crashing_child(write_1000);
    mw_store *s = open_store(NULL);
    size_t nser;
    assert_int_equal(count(s, "w", &nser), 1000);
    assert_int_equal(nser, 2);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_bytes_cut, 0);
    /* and writing goes on where it stopped */
    char msg[512];
    assert_int_equal(put(s, "w", "k", "odd", 5000, 1, msg), 0);
    assert_int_equal(put(s, "w", "k", "odd", 1999, 1, msg), 400);
    mw_store_close(s);
    /* a clean close leaves a snapshot: no WAL to replay */
    s = open_store(NULL);
    assert_int_equal(count(s, "w", NULL), 1001);
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_records_replayed, 0);
    mw_store_close(s);
}

static void recovery_from_snapshot_and_wal(void **state)
{
    (void)state;
    in_crashing_child(write_snapshot_then_more);
    mw_store *s = open_store(NULL);
    mw_matcher m;
    char err[256];
    mw_matcher_init(&m, MW_MATCH_EQ, "k", "y", err, sizeof(err));
    mw_select_result r;
    assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.nseries, 1);
    assert_int_equal(r.series[0].n, 334);
    for (size_t i = 0; i < r.series[0].n; i++) {
        assert_true(r.series[0].t[i] == 1000 + (int64_t)i * 3);
        assert_true(r.series[0].v[i] == (double)(i * 3));
    }
    mw_select_result_free(&r);
    mw_matcher_free(&m);
    assert_int_equal(count(s, "w", NULL), 1000);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    /* only the records after the snapshot were replayed: 500 writes of 2 or
     * 1 records (series record for the first write of a series) */
    assert_int_equal(st.wal_records_replayed, 500);
    mw_store_close(s);
}

/* 4,000 series of long label values: a head snapshot of ~0.5 MB, written
 * in pieces of 64 KiB. */
static void write_snapshot_of_many(void)
{
    mw_store *s = open_store(NULL);
    char msg[512], v[128];
    for (int i = 0; i < 4000; i++) {
        snprintf(v, sizeof(v), "pod-%05d-a-long-value-that-makes-the-symbol-table-big", i);
        for (int j = 0; j < 3; j++)
            if (put(s, "m", "pod", v, 1000 + j, i * 10 + j, msg) != 0) _exit(1);
    }
    if (mw_store_snapshot(s) != 0) _exit(2);
}

static void recovery_from_large_snapshot(void **state)
{
    (void)state;
    in_crashing_child(write_snapshot_of_many);
    char path[400];
    snprintf(path, sizeof(path), "%s/head.snapshot", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > 8 * 65536); /* several pieces */
    mw_store *s = open_store(NULL);
    size_t nser;
    assert_int_equal(count(s, "m", &nser), 12000);
    assert_int_equal(nser, 4000);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_records_replayed, 0); /* all of it from the snapshot */
    mw_matcher m;
    char err[256];
    mw_matcher_init(&m, MW_MATCH_EQ, "pod",
                    "pod-03999-a-long-value-that-makes-the-symbol-table-big", err, sizeof(err));
    mw_select_result r;
    assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.nseries, 1);
    assert_int_equal(r.series[0].n, 3);
    for (size_t j = 0; j < 3; j++) {
        assert_true(r.series[0].t[j] == 1000 + (int64_t)j);
        assert_true(r.series[0].v[j] == 39990.0 + (double)j);
    }
    mw_select_result_free(&r);
    mw_matcher_free(&m);
    mw_store_close(s);
}

/* The newest WAL segment's path. */
static void last_segment(char *out, size_t size)
{
    char wal[300];
    snprintf(wal, sizeof(wal), "%s/wal", dir);
    DIR *d = opendir(wal);
    assert_non_null(d);
    struct dirent *e;
    char best[64] = "";
    while ((e = readdir(d)))
        if (strlen(e->d_name) == 16 && strcmp(e->d_name, best) > 0) strcpy(best, e->d_name);
    closedir(d);
    snprintf(out, size, "%s/%s", wal, best);
}

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* Three rounds of 20 samples for each of 200 series, a head snapshot after
 * the first two, WAL segments of 4 KiB (so that each snapshot deletes the
 * segments before it: the series are defined in those of the first round),
 * then a crash. */
static void write_two_snapshots(void)
{
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1, .wal_segment_bytes = 4096};
    mw_store_default_limits(&o.limits);
    char err[256], msg[512], v[32];
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    if (!s) _exit(1);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 200; i++) {
            snprintf(v, sizeof(v), "s%03d", i);
            for (int j = 0; j < 20; j++)
                if (put(s, "p", "k", v, 1000 + round * 20 + j, i + j, msg) != 0) _exit(1);
        }
        if (round < 2 && mw_store_snapshot(s) != 0) _exit(2);
    }
}

static void flip_byte(const char *path, long at)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x55;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

/* Open the store and check that all 12,000 samples of write_two_snapshots
 * are back, nothing skipped, and whether the latest snapshot was unusable. */
static mw_store *open_all_back(int restored_from_previous)
{
    mw_store *s = open_store(NULL);
    size_t nser;
    assert_int_equal(count(s, "p", &nser), 12000);
    assert_int_equal(nser, 200);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.restored_from_previous, restored_from_previous);
    assert_int_equal(st.unknown_series_samples, 0);
    return s;
}

/* Bytes of records in the WAL on disk (each segment less its 8-byte magic),
 * and its number of segments. */
static long wal_record_bytes(size_t *segments)
{
    char wal[300], path[700];
    snprintf(wal, sizeof(wal), "%s/wal", dir);
    DIR *d = opendir(wal);
    assert_non_null(d);
    long bytes = 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strlen(e->d_name) != 16) continue;
        snprintf(path, sizeof(path), "%s/%s", wal, e->d_name);
        bytes += file_size(path) - 8;
        n++;
    }
    closedir(d);
    if (segments) *segments = n;
    return bytes;
}

/* Files of the data folder whose name starts with "head.snapshot". */
static size_t snapshot_files(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, "head.snapshot", 13) == 0;
    closedir(d);
    return n;
}

/* One snapshot generation: after two snapshots the folder holds one
 * head.snapshot and no head.snapshot.prev, and the WAL holds exactly the
 * records of the round after the second one: 4,000 sample records of 21
 * bytes (series ids 0-127) or 22 bytes (128-199), 85,440 bytes. */
static void one_snapshot_and_the_wal_after_it(void **state)
{
    (void)state;
    in_crashing_child(write_two_snapshots);
    char prev[400];
    snprintf(prev, sizeof(prev), "%s/head.snapshot.prev", dir);
    assert_int_equal(file_size(prev), -1);
    assert_int_equal(snapshot_files(), 1);
    size_t segs;
    assert_int_equal(wal_record_bytes(&segs), 128 * 20 * 21 + 72 * 20 * 22);
    assert_int_equal(segs, 21); /* of 4 KiB: 85,440 bytes fill 21 */
    mw_store *s = open_all_back(0);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_records_replayed, 4000);
    mw_store_close(s);
    /* the close snapshots and deletes the WAL it covers */
    assert_int_equal(wal_record_bytes(&segs), 0);
    assert_int_equal(segs, 1);
    assert_int_equal(snapshot_files(), 1);
    s = open_all_back(0);
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_records_replayed, 0);
    mw_store_close(s);
}

/* A forced compaction leaves the samples in a block, the head in one
 * snapshot and the WAL empty: one segment of its 8-byte magic (before, the
 * open segment and the ones the second-newest snapshot needed stayed: 49 MB
 * after 28.8 M samples). Several compactions and snapshots later, still one
 * snapshot file. */
static void wal_truncated_after_compaction(void **state)
{
    (void)state;
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1, .wal_segment_bytes = 4096};
    mw_store_default_limits(&o.limits);
    char err[256], msg[512], v[32];
    for (int round = 0; round < 4; round++) {
        mw_store *s = mw_store_open(&o, err, sizeof(err));
        assert_non_null(s);
        for (int i = 0; i < 200; i++) {
            snprintf(v, sizeof(v), "s%03d", i);
            for (int j = 0; j < 20; j++)
                assert_int_equal(put(s, "p", "k", v, 1000 + round * 20 + j, i + j, msg), 0);
        }
        size_t segs;
        assert_true(wal_record_bytes(&segs) > 80000 && segs > 20);
        if (round % 2) {
            assert_int_equal(mw_store_snapshot(s), 0);
        } else {
            assert_int_equal(mw_store_compact(s, 1), 0);
            mw_store_stats st;
            mw_store_get_stats(s, &st);
            assert_int_equal(st.blocks, round / 2 + 1);
        }
        assert_int_equal(wal_record_bytes(&segs), 0);
        assert_int_equal(segs, 1);
        assert_int_equal(snapshot_files(), 1);
        assert_int_equal(count(s, "p", NULL), 4000 * (round + 1));
        mw_store_close(s);
        s = mw_store_open(&o, err, sizeof(err));
        assert_non_null(s);
        mw_store_stats st;
        mw_store_get_stats(s, &st);
        assert_int_equal(st.wal_records_replayed, 0);
        assert_int_equal(count(s, "p", NULL), 4000 * (round + 1));
        mw_store_close(s);
    }
}

/* A cut in the middle of what is buffered: the records before it end one
 * segment, those after it start the next, named by the cut's LSN, and
 * truncation then deletes the first. */
static void wal_cut_splits_the_buffer(void **state)
{
    (void)state;
    int e = 0;
    char wdir[300];
    snprintf(wdir, sizeof(wdir), "%s/wal", dir);
    mw_wal *w = mw_wal_open(wdir, 0, 0, 0, &e);
    assert_non_null(w);
    uint64_t a = mw_wal_append(w, 7, "before", 6);
    mw_wal_cut_at(w, a);
    uint64_t b = mw_wal_append(w, 7, "after", 5);
    assert_int_equal(mw_wal_flush(w), 0);
    size_t segs;
    assert_int_equal(wal_record_bytes(&segs), 9 + 6 + 9 + 5);
    assert_int_equal(segs, 2);
    char path[400];
    snprintf(path, sizeof(path), "%s/%016llx", wdir, (unsigned long long)a);
    assert_int_equal(file_size(path), 8 + 9 + 5);
    mw_wal_truncate_before(w, a);
    assert_int_equal(wal_record_bytes(&segs), 9 + 5);
    assert_int_equal(segs, 1);
    /* with nothing buffered, a flush starts the new segment at once */
    mw_wal_cut_at(w, b);
    assert_int_equal(mw_wal_flush(w), 0);
    mw_wal_truncate_before(w, b);
    assert_int_equal(wal_record_bytes(&segs), 0);
    assert_int_equal(segs, 1);
    mw_wal_close(w);
}

/* A cut whose flush fails (the file size limit: a full disk) is kept for
 * the retry: the records after it still start the next segment. */
static void wal_cut_survives_a_failed_flush(void **state)
{
    (void)state;
    int e = 0;
    char wdir[300];
    snprintf(wdir, sizeof(wdir), "%s/wal", dir);
    mw_wal *w = mw_wal_open(wdir, 0, 0, 0, &e);
    assert_non_null(w);
    uint64_t a = mw_wal_append(w, 7, "before", 6);
    mw_wal_cut_at(w, a);
    mw_wal_append(w, 7, "after", 5);
    struct rlimit old, none;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    none = (struct rlimit){0, old.rlim_max};
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &none), 0);
    int rc = mw_wal_flush(w);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, was);
    assert_int_equal(rc, -EFBIG);
    assert_int_equal(mw_wal_flush(w), 0);
    size_t segs;
    assert_int_equal(wal_record_bytes(&segs), 9 + 6 + 9 + 5);
    assert_int_equal(segs, 2);
    mw_wal_truncate_before(w, a);
    assert_int_equal(wal_record_bytes(&segs), 9 + 5);
    mw_wal_close(w);
}

/* An unreadable snapshot is set aside; with one generation kept, the WAL
 * alone cannot restore the series it defined before the snapshot (their
 * segments were deleted): those samples are counted as skipped. The next
 * snapshot is a good one. */
static void unusable_snapshot_is_set_aside(void **state)
{
    (void)state;
    in_crashing_child(write_two_snapshots);
    char snap[400], aside[400];
    snprintf(snap, sizeof(snap), "%s/head.snapshot", dir);
    snprintf(aside, sizeof(aside), "%s/head.snapshot.corrupt", dir);
    flip_byte(snap, file_size(snap) / 2);
    mw_store *s = open_store(NULL);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.restored_from_previous, 1);
    assert_int_equal(st.unknown_series_samples, 4000);
    assert_int_equal(count(s, "p", NULL), 0);
    assert_int_equal(file_size(snap), -1);
    assert_true(file_size(aside) > 0);
    mw_store_close(s);
    assert_true(file_size(snap) > 0);
    s = open_store(NULL);
    mw_store_get_stats(s, &st);
    assert_int_equal(st.restored_from_previous, 0);
    mw_store_close(s);
}

/* A data folder of an older version, which kept head.snapshot.prev and the
 * WAL back to it, left without head.snapshot (a crash between its two
 * renames): the previous snapshot and the WAL restore everything, and the
 * first snapshot written deletes it. */
static void recovery_from_an_older_versions_previous_snapshot(void **state)
{
    (void)state;
    in_crashing_child(write_two_snapshots);
    char snap[400], prev[400];
    snprintf(snap, sizeof(snap), "%s/head.snapshot", dir);
    snprintf(prev, sizeof(prev), "%s/head.snapshot.prev", dir);
    assert_int_equal(rename(snap, prev), 0);
    mw_store *s = open_all_back(0);
    mw_store_close(s);
    assert_int_equal(file_size(prev), -1);
    assert_int_equal(snapshot_files(), 1);
    mw_store_close(open_all_back(0));
}

static void torn_wal_tail(void **state)
{
    (void)state;
    in_crashing_child(write_1000);
    char seg[400];
    last_segment(seg, sizeof(seg));
    long size = file_size(seg);
    /* a torn record: a header promising more bytes than there are */
    FILE *f = fopen(seg, "ab");
    fwrite("\x40\x00\x00\x00\x12\x34\x56\x78\x02\x01\x02", 1, 11, f);
    fclose(f);
    mw_store *s = open_store(NULL);
    assert_int_equal(count(s, "w", NULL), 1000);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.wal_bytes_cut, 11);
    assert_int_equal(file_size(seg), size);
    mw_store_close(s);
}

static void corrupt_wal_record(void **state)
{
    (void)state;
    in_crashing_child(write_1000);
    char seg[400];
    last_segment(seg, sizeof(seg));
    long size = file_size(seg);
    /* flip a bit in the last record's payload (one sample: 9 + 13 bytes
     * for the samples record of the last write) */
    int fd = open(seg, O_RDWR);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, size - 3), 1);
    c ^= 0x10;
    assert_int_equal(pwrite(fd, &c, 1, size - 3), 1);
    close(fd);
    mw_store *s = open_store(NULL);
    assert_int_equal(count(s, "w", NULL), 999); /* the corrupt record, and only it */
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_true(st.wal_bytes_cut > 9 && st.wal_bytes_cut < 40);
    mw_store_close(s);
    s = open_store(NULL); /* the cut is permanent and reported once */
    assert_int_equal(count(s, "w", NULL), 999);
    mw_store_close(s);
}

/* {__name__="m", pod=..., zone=...} in every order of the matchers, from the
 * head and from a block (whose postings are handed over in pieces of 1,024
 * ids): the shortest list is read, the longer ones only searched. Series i
 * has the label i, pod p(i % 500), zone z(i % 3) and the value i. */
static void select_eq_any_order(mw_store *s, const char *pod, const char *zone, size_t want_n,
                                const double *want)
{
    char err[256];
    const char *names[3] = {"__name__", "pod", "zone"}, *values[3] = {"m", pod, zone};
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int o = 0; o < 6; o++) {
        mw_matcher m[3];
        for (int k = 0; k < 3; k++)
            assert_int_equal(mw_matcher_init(&m[k], MW_MATCH_EQ, names[orders[o][k]],
                                             values[orders[o][k]], err, sizeof(err)),
                             0);
        mw_select_result r;
        assert_int_equal(mw_store_select(s, m, 3, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)),
                         0);
        assert_int_equal(r.nseries, want_n);
        double got[8];
        for (size_t i = 0; i < r.nseries; i++) {
            assert_int_equal(r.series[i].n, 1);
            got[i] = r.series[i].v[0];
        }
        /* the series come sorted by labels: compare as a set */
        for (size_t i = 0; i < want_n; i++) {
            size_t j = 0;
            while (j < r.nseries && got[j] != want[i])
                j++;
            assert_true(j < r.nseries);
        }
        mw_select_result_free(&r);
        for (int k = 0; k < 3; k++)
            mw_matcher_free(&m[k]);
    }
}

static void equality_matchers_shortest_first(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    char msg[512];
    for (int i = 0; i < 3000; i++) {
        char id[16], pod[16], zone[16];
        snprintf(id, sizeof(id), "%d", i);
        snprintf(pod, sizeof(pod), "p%d", i % 500);
        snprintf(zone, sizeof(zone), "z%d", i % 3);
        mw_label l[4] = {{"__name__", "m"}, {"i", id}, {"pod", pod}, {"zone", zone}};
        mw_store_sample sm = {1000, i};
        mw_store_ts ts = {l, 4, &sm, 1};
        assert_int_equal(mw_store_append(s, &ts, 1, MW_STORE_WAIT, msg, sizeof(msg)), 0);
    }
    const double p5z1[] = {505, 2005}, p499z0[] = {999, 2499}, p7z0[] = {507, 2007}, none[1] = {0};
    for (int round = 0; round < 2; round++) { /* the head, then a block */
        select_eq_any_order(s, "p5", "z1", 2, p5z1);
        select_eq_any_order(s, "p499", "z0", 2, p499z0);
        select_eq_any_order(s, "p7", "z0", 2, p7z0);
        select_eq_any_order(s, "nope", "z1", 0, none);   /* a value no series has */
        select_eq_any_order(s, "p5", "zone-x", 0, none); /* likewise the long list's */
        if (round == 0) assert_int_equal(mw_store_compact(s, 1), 0);
    }
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.blocks, 1);
    mw_store_close(s);
}

static void collect_ids(void *arg, const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mw_ids_push(arg, ids[i]);
}

/* Selection over a block whose postings are not 4-byte aligned in memory, as
 * in blocks written before the series section was padded: the ids are read
 * through a copy, 1024 at a time, instead of in place. The same block,
 * opened from a buffer one byte off, selects exactly what the aligned
 * mapping does. Series i (0..2999, in label order) has i, pod p(i % 500),
 * zone z(i % 3); "m" has 3000 ids, each zone 1000: lists of several pieces. */
static void block_postings_unaligned(void **state)
{
    (void)state;
    char tmp[300], path[300], err[256];
    snprintf(tmp, sizeof(tmp), "%s/b.tmp", dir);
    snprintf(path, sizeof(path), "%s/b.block", dir);
    int werr = 0;
    mw_block_writer *w = mw_block_writer_new(tmp, &werr);
    assert_non_null(w);
    for (int i = 0; i < 3000; i++) {
        char id[16], pod[16], zone[16];
        snprintf(id, sizeof(id), "%04d", i);
        snprintf(pod, sizeof(pod), "p%d", i % 500);
        snprintf(zone, sizeof(zone), "z%d", i % 3);
        mw_label l[4] = {{"__name__", "m"}, {"i", id}, {"pod", pod}, {"zone", zone}};
        int64_t t = 1000;
        double v = i;
        assert_int_equal(mw_block_writer_add(w, l, 4, &t, &v, 1), 0);
    }
    mw_block_meta meta = {0};
    assert_int_equal(mw_block_writer_finish(w, &meta, path), 0);
    mw_block *aligned = mw_block_open(path, err, sizeof(err));
    assert_non_null(aligned);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *bytes = malloc(meta.size + 8);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes + 1, 1, meta.size, f), meta.size);
    fclose(f);
    mw_block *odd = mw_block_open_mem(bytes + 1, meta.size, err, sizeof(err));
    assert_non_null(odd);

    static const struct {
        mw_match_op type[3];
        const char *name[3], *value[3];
        size_t n, want_n;
        uint32_t want_first, want_last;
    } cases[] = {
        {{MW_MATCH_EQ}, {"__name__"}, {"m"}, 1, 3000, 0, 2999},
        {{MW_MATCH_EQ, MW_MATCH_EQ}, {"zone", "__name__"}, {"z1", "m"}, 2, 1000, 1, 2998},
        {{MW_MATCH_EQ, MW_MATCH_EQ, MW_MATCH_EQ},
         {"__name__", "pod", "zone"},
         {"m", "p5", "z1"},
         3,
         2,
         505,
         2005},
        {{MW_MATCH_EQ, MW_MATCH_EQ}, {"zone", "pod"}, {"z0", "p499"}, 2, 2, 999, 2499},
        {{MW_MATCH_RE, MW_MATCH_EQ}, {"zone", "pod"}, {"z[02]", "p7"}, 2, 4, 507, 2507},
        {{MW_MATCH_EQ, MW_MATCH_NEQ}, {"__name__", "zone"}, {"m", "z2"}, 2, 2000, 0, 2998},
        {{MW_MATCH_EQ, MW_MATCH_EQ}, {"__name__", "zone"}, {"m", "z9"}, 2, 0, 0, 0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        mw_matcher m[3];
        for (size_t k = 0; k < cases[c].n; k++)
            assert_int_equal(mw_matcher_init(&m[k], cases[c].type[k], cases[c].name[k],
                                             cases[c].value[k], err, sizeof(err)),
                             0);
        mw_ids a = {0}, b = {0};
        mw_index_select(&mw_block_index_ops, aligned, m, cases[c].n, &a);
        mw_index_select(&mw_block_index_ops, odd, m, cases[c].n, &b);
        assert_int_equal(a.n, cases[c].want_n);
        assert_int_equal(b.n, cases[c].want_n);
        if (a.n) {
            assert_int_equal(a.v[0], cases[c].want_first);
            assert_int_equal(a.v[a.n - 1], cases[c].want_last);
            assert_memory_equal(a.v, b.v, a.n * sizeof(uint32_t));
        }
        mw_ids_free(&a);
        mw_ids_free(&b);
        for (size_t k = 0; k < cases[c].n; k++)
            mw_matcher_free(&m[k]);
    }
    /* The postings of one pair, piece by piece through the lookup. */
    mw_ids a = {0}, b = {0};
    mw_block_index_ops.lookup(aligned, "__name__", "m", collect_ids, &a);
    mw_block_index_ops.lookup(odd, "__name__", "m", collect_ids, &b);
    assert_int_equal(a.n, 3000);
    assert_int_equal(b.n, 3000);
    for (uint32_t i = 0; i < 3000; i++)
        assert_int_equal(b.v[i], i);
    mw_ids_free(&a);
    mw_ids_free(&b);
    mw_block_unref(odd);
    mw_block_unref(aligned);
    free(bytes);
}

static void compaction_and_merge(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    char msg[512];
    int64_t t = 1000;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 400; i++, t += 15000) {
            char v[16];
            for (int k = 0; k < 20; k++) {
                snprintf(v, sizeof(v), "%d", k);
                assert_int_equal(put(s, "c", "k", v, t, sin(t * 1e-5) + k, msg), 0);
            }
        }
        assert_int_equal(mw_store_compact(s, 1), 0);
        assert_int_equal(count(s, "c", NULL), (size_t)(round + 1) * 400 * 20);
    }
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    /* five level-1 blocks; four of them merged into one */
    assert_int_equal(st.blocks, 2);
    mw_matcher m;
    char err[256];
    mw_matcher_init(&m, MW_MATCH_EQ, "k", "7", err, sizeof(err));
    mw_select_result r;
    assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.nseries, 1);
    assert_int_equal(r.series[0].n, 2000);
    for (size_t i = 0; i < 2000; i++) {
        int64_t want = 1000 + (int64_t)i * 15000;
        assert_true(r.series[0].t[i] == want);
        assert_true(r.series[0].v[i] == sin(want * 1e-5) + 7);
    }
    mw_select_result_free(&r);
    mw_store_close(s);
    s = open_store(NULL);
    assert_int_equal(count(s, "c", NULL), 5 * 400 * 20);
    assert_int_equal(
        mw_store_select(s, &m, 1, 1000 + 15000 * 10, 1000 + 15000 * 19, 0, &r, err, sizeof(err)),
        0);
    assert_int_equal(r.nsamples, 10);
    mw_select_result_free(&r);
    mw_matcher_free(&m);
    mw_store_close(s);
}

static void retention_by_time_and_size(void **state)
{
    (void)state;
    mw_store_options o = {
        .dir = dir, .background_ms = -1, .no_sync = 1, .retention_ms = 3600 * 1000};
    mw_store_default_limits(&o.limits);
    char err[256], msg[512];
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    /* two hours ago, then now */
    int64_t now = (int64_t)time(NULL) * 1000;
    for (int i = 0; i < 100; i++)
        assert_int_equal(put(s, "r", "k", "a", now - 7200000 + i, 1, msg), 0);
    assert_int_equal(mw_store_compact(s, 1), 0); /* block of old data: deleted at once */
    assert_int_equal(count(s, "r", NULL), 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(put(s, "r", "k", "a", now + i, 1, msg), 0);
    assert_int_equal(mw_store_compact(s, 1), 0);
    assert_int_equal(count(s, "r", NULL), 100);
    mw_store_close(s);
    /* size: a limit far below one block keeps only the newest block */
    o.retention_ms = 0;
    o.retention_bytes = 1;
    s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    for (int i = 0; i < 100; i++)
        assert_int_equal(put(s, "r", "k", "a", now + 1000 + i, 2, msg), 0);
    assert_int_equal(mw_store_compact(s, 1), 0);
    assert_int_equal(count(s, "r", NULL), 100);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.blocks, 1);
    mw_store_close(s);
}

static void own_snapshot_samples(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    static const mw_metric_desc D = {"mlwatch_test_value", "t", "", MW_GAUGE};
    mw_snapshot *snap = mw_snapshot_new();
    snap->timestamp_ms = 123456;
    mw_emit(snap, &D, 1.5, "b", "2", "a", "1", MW_END);
    mw_emit(snap, &D, 2.5, "a", "2", MW_END);
    mw_emit(snap, &D, 3.5, "a", "2", MW_END); /* a collector bug: same series twice */
    char msg[512];
    assert_int_equal(mw_store_append_snapshot(s, snap, msg, sizeof(msg)), 0);
    mw_snapshot_free(snap);
    size_t nser;
    assert_int_equal(count(s, "mlwatch_test_value", &nser), 2);
    assert_int_equal(nser, 2);
    mw_store_close(s);
}

static void own_snapshot_in_batches(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    static const mw_metric_desc D = {"mlwatch_test_value", "t", "", MW_GAUGE};
    /* 2,500 samples are appended in several calls; a bad series (the same
     * series twice) in the last one loses only itself. */
    mw_snapshot *snap = mw_snapshot_new();
    snap->timestamp_ms = 123456;
    char v[16];
    for (int i = 0; i < 2500; i++) {
        snprintf(v, sizeof(v), "%d", i);
        mw_emit(snap, &D, i, "i", v, MW_END);
    }
    mw_emit(snap, &D, -1, "i", "2499", MW_END);
    char msg[512];
    assert_int_equal(mw_store_append_snapshot(s, snap, msg, sizeof(msg)), 0);
    mw_snapshot_free(snap);
    size_t nser;
    assert_int_equal(count(s, "mlwatch_test_value", &nser), 2500);
    assert_int_equal(nser, 2500);
    mw_store_close(s);
}

/* Series created together and filling at the same pace (a constant value,
 * two bits a sample) have their first chunks cut at sizes spread over 1/8 to
 * all of MW_HEAD_CHUNK_BYTES, so that they are never all nearly full at once;
 * every later chunk is cut at the full size. */
static void first_chunks_cut_at_spread_sizes(void **state)
{
    (void)state;
    enum { N = 1024, ROUNDS = 1500 };
    mw_head h;
    assert_int_equal(mw_head_init(&h, dir, NULL), 0);
    assert_int_equal(mw_head_chunks_open(&h, 0, 0), 0);
    static uint32_t ids[N], first_cut[N];
    for (uint32_t i = 0; i < N; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%u", i);
        mw_label l[2] = {{"__name__", "m"}, {"i", v}};
        ids[i] = mw_head_create(&h, l, 2, mw_labels_hash(l, 2), UINT32_MAX);
        first_cut[i] = mw_head_cut_size(mw_head_series(&h, ids[i]), ids[i]);
    }
    assert_int_equal(first_cut[0], MW_HEAD_CHUNK_BYTES / 8); /* id 0: the smallest */
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t i = 0; i < N; i++) {
        lo = first_cut[i] < lo ? first_cut[i] : lo;
        hi = first_cut[i] > hi ? first_cut[i] : hi;
    }
    assert_int_equal(lo, MW_HEAD_CHUNK_BYTES / 8);
    assert_true(hi >= MW_HEAD_CHUNK_BYTES - 2 && hi < MW_HEAD_CHUNK_BYTES);
    uint64_t most = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (uint32_t i = 0; i < N; i++)
            mw_head_append(&h, ids[i], 1000000 + (int64_t)r * 1000, 1.0);
        most = h.chunk_bytes > most ? h.chunk_bytes : most;
    }
    for (uint32_t i = 0; i < N; i++) {
        /* Walk the series' chunks back to its first. */
        mw_chunk_hdr hdr;
        static uint8_t buf[MW_CHUNK_HDR_SIZE + 4 + 65536];
        uint64_t ref = mw_head_series(&h, ids[i])->last_ref;
        uint32_t later = 0;
        assert_true(ref != 0);
        for (;;) {
            assert_int_equal(mw_head_chunk_read(&h, ref, &hdr, buf, sizeof(buf)), 0);
            assert_int_equal(hdr.series, ids[i]);
            if (!hdr.prev_ref) break;
            assert_true(hdr.nbytes >= MW_HEAD_CHUNK_BYTES); /* a later chunk: full size */
            assert_true(hdr.nbytes < MW_HEAD_CHUNK_BYTES + MW_GORILLA_MAX_SAMPLE_BYTES);
            later++;
            ref = hdr.prev_ref;
        }
        assert_true(hdr.nbytes >= first_cut[i]);
        assert_true(hdr.nbytes < first_cut[i] + MW_GORILLA_MAX_SAMPLE_BYTES);
        assert_true(later >= 1);
    }
    /* Cut all at the full size, the N open chunks would all reach their
     * largest allocation (see mw_head_append) at once; spread, they never
     * held more than two thirds of that. */
    uint64_t full = (uint64_t)N * (((MW_HEAD_CHUNK_BYTES + 8 + 15) & ~15u) - 8);
    assert_true(most * 3 < full * 2);
    mw_head_free(&h);
}

static void second_process_is_refused(void **state)
{
    (void)state;
    mw_store *s = open_store(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        mw_store_options o = {.dir = dir, .background_ms = -1};
        mw_store_default_limits(&o.limits);
        char err[512];
        mw_store *t = mw_store_open(&o, err, sizeof(err));
        char want[600];
        snprintf(want, sizeof(want),
                 "data folder %s is in use by another process (lock %s/lock "
                 "held)",
                 dir, dir);
        _exit(t == NULL && strcmp(err, want) == 0 ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    mw_store_close(s);
}

static int count_hello(void *arg, uint8_t type, const uint8_t *p, size_t n)
{
    if (type == 7 && n == 5 && memcmp(p, "hello", 5) == 0) ++*(size_t *)arg;
    return 0;
}

/* A WAL write that fails with nothing buffered after it (no buffer at all
 * then: UBSan checked the copy of it, which crashed the agent when the
 * disk was full) keeps the batch, and the next flush writes it. The write
 * fails at the file size limit (EFBIG, SIGXFSZ ignored). */
static void wal_failed_flush_keeps_the_batch(void **state)
{
    (void)state;
    int err = 0;
    char wdir[300];
    snprintf(wdir, sizeof(wdir), "%s/wal", dir);
    mw_wal *w = mw_wal_open(wdir, 0, 0, 0, &err);
    assert_non_null(w);
    struct rlimit old, none;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    none = (struct rlimit){0, old.rlim_max};
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &none), 0);
    uint64_t lsn = mw_wal_append(w, 7, "hello", 5);
    int rc = mw_wal_flush(w);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, was);
    assert_int_equal(rc, -EFBIG);
    assert_int_equal(mw_wal_status_of(w).error, -EFBIG);
    assert_int_equal(mw_wal_status_of(w).buffered, 9 + 5); /* the record, kept */
    assert_int_equal(mw_wal_flush(w), 0);
    assert_int_equal(mw_wal_wait(w, lsn), 0);
    assert_int_equal(mw_wal_status_of(w).error, 0);
    mw_wal_close(w);
    size_t found = 0;
    uint64_t end = 0;
    mw_wal_replay_report rep;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(mw_wal_replay(wdir, 0, count_hello, &found, &end, &rep), 0);
    assert_int_equal(found, 1);
    assert_int_equal(end, lsn);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(append_and_select, setup, teardown),
        cmocka_unit_test_setup_teardown(wal_failed_flush_keeps_the_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(out_of_order_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(head_memory_counts_what_is_used, setup, teardown),
        cmocka_unit_test_setup_teardown(limits, setup, teardown),
        cmocka_unit_test_setup_teardown(recovery_from_wal, setup, teardown),
        cmocka_unit_test_setup_teardown(recovery_from_snapshot_and_wal, setup, teardown),
        cmocka_unit_test_setup_teardown(recovery_from_large_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(one_snapshot_and_the_wal_after_it, setup, teardown),
        cmocka_unit_test_setup_teardown(wal_truncated_after_compaction, setup, teardown),
        cmocka_unit_test_setup_teardown(wal_cut_splits_the_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(wal_cut_survives_a_failed_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(unusable_snapshot_is_set_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(recovery_from_an_older_versions_previous_snapshot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(torn_wal_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(corrupt_wal_record, setup, teardown),
        cmocka_unit_test_setup_teardown(compaction_and_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(equality_matchers_shortest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(block_postings_unaligned, setup, teardown),
        cmocka_unit_test_setup_teardown(retention_by_time_and_size, setup, teardown),
        cmocka_unit_test_setup_teardown(own_snapshot_samples, setup, teardown),
        cmocka_unit_test_setup_teardown(own_snapshot_in_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(first_chunks_cut_at_spread_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(second_process_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
