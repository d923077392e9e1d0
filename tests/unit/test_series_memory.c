/* test_series_memory.c - the memory of the last round behind staleness
 * markers (src/core/series_memory.c): exactly the series missing from a
 * round are reported, once, in any order of rounds; keys round-trip; the
 * marker has exactly the bits 0x7ff0000000000002 (Prometheus's StaleNaN).
 * The store's own series with it: test_store_stale.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/hash.h"
#include "core/series_memory.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ended_log {
    char keys[64][64];
    size_t n;
} ended_log;

static void record(void *arg, const char *key, size_t len)
{
    ended_log *e = arg;
    assert_true(len < sizeof(e->keys[0]));
    assert_true(e->n < 64);
    memcpy(e->keys[e->n], key, len);
    e->keys[e->n][len] = '\0';
    e->n++;
}

/* What an owner does: mark by hash; keep the key of a new series. */
static int mark(mw_series_memory *m, const char *key)
{
    int fresh = mw_series_memory_mark(m, mw_fnv1a64_str(MW_FNV1A64_BASIS, key));
    if (fresh) mw_series_memory_keep_key(m, key, strlen(key));
    return fresh;
}

static void ended_once_and_only_ended(void **state)
{
    (void)state;
    mw_series_memory m;
    mw_series_memory_init(&m);
    ended_log e = {0};
    assert_int_equal(mark(&m, "a"), 1);
    assert_int_equal(mark(&m, "b"), 1);
    assert_int_equal(mark(&m, "c"), 1);
    assert_int_equal(mw_series_memory_sweep(&m, record, &e), 0); /* the first round */
    assert_int_equal(mark(&m, "a"), 0);                          /* known: no key built */
    assert_int_equal(mark(&m, "c"), 0);
    assert_int_equal(mark(&m, "c"), 0); /* twice in a round: one series */
    assert_int_equal(mark(&m, "d"), 1);
    assert_int_equal(mw_series_memory_sweep(&m, record, &e), 1);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.keys[0], "b");
    /* b is forgotten: its absence is not reported again */
    mark(&m, "a");
    mark(&m, "d");
    e.n = 0;
    assert_int_equal(mw_series_memory_sweep(&m, record, &e), 1);
    assert_string_equal(e.keys[0], "c");
    /* a series that comes back is a new series, and can end again */
    assert_int_equal(mark(&m, "b"), 1);
    e.n = 0;
    assert_int_equal(mw_series_memory_sweep(&m, record, &e), 2);
    assert_int_equal(e.n, 2);
    assert_true((strcmp(e.keys[0], "a") == 0 && strcmp(e.keys[1], "d") == 0) ||
                (strcmp(e.keys[0], "d") == 0 && strcmp(e.keys[1], "a") == 0));
    e.n = 0;
    assert_int_equal(mw_series_memory_sweep(&m, record, &e), 1);
    assert_string_equal(e.keys[0], "b");
    assert_int_equal(m.n, 0);
    /* a series whose key was never kept ends without a callback */
    assert_int_equal(mw_series_memory_mark(&m, 42), 1);
    assert_int_equal(mw_series_memory_sweep(&m, record, &e), 0);
    e.n = 0;
    assert_int_equal(mw_series_memory_sweep(&m, record, &e), 1);
    assert_int_equal(e.n, 0);
    mw_series_memory_destroy(&m);
    /* a zeroed memory (calloc'd by its owner) works like an initialised one */
    mw_series_memory z = {0};
    assert_int_equal(mark(&z, "x"), 1);
    assert_int_equal(mw_series_memory_sweep(&z, record, &e), 0);
    assert_int_equal(mw_series_memory_sweep(&z, record, &e), 1);
    assert_string_equal(e.keys[0], "x");
    mw_series_memory_destroy(&z);
}

/* Thousands of series: the table grows; when most end, each is reported
 * once, the rest still match (probe chains rebuilt), and the table shrinks. */
static void many_series_grow_and_shrink(void **state)
{
    (void)state;
    enum { N = 5000 };
    mw_series_memory m;
    mw_series_memory_init(&m);
    char k[32];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            snprintf(k, sizeof(k), "series-%d", i);
            mark(&m, k);
        }
        assert_int_equal(mw_series_memory_sweep(&m, NULL, NULL), 0);
    }
    assert_int_equal(m.n, N);
    size_t big = m.tslots;
    assert_true(big >= 2 * N);
    for (int i = 0; i < N; i += 100) { /* 50 stay */
        snprintf(k, sizeof(k), "series-%d", i);
        mark(&m, k);
    }
    assert_int_equal(mw_series_memory_sweep(&m, NULL, NULL), N - 50);
    assert_int_equal(m.n, 50);
    assert_true(m.tslots < big / 8);
    for (int i = 0; i < N; i += 100) {
        snprintf(k, sizeof(k), "series-%d", i);
        mark(&m, k);
    }
    assert_int_equal(m.n, 50); /* found, not added again */
    assert_int_equal(mw_series_memory_sweep(&m, NULL, NULL), 0);
    mw_series_memory_destroy(&m);
}

/* Rounds in another order than the last (a collector's series reordered,
 * some inserted in the middle, some gone): each series is still found,
 * exactly the missing ones end, and a series twice in a round is one. */
static void any_order_and_insertions(void **state)
{
    (void)state;
    enum { N = 300 };
    mw_series_memory m;
    mw_series_memory_init(&m);
    char k[32];
    unsigned seed = 7;
    int present[N] = {0}, perm[N];
    for (int round = 0; round < 40; round++) {
        int want[N], nwant = 0;
        for (int i = 0; i < N; i++) {
            seed = seed * 1103515245u + 12345u;
            want[i] = (seed >> 16) % 4 != 0; /* three in four present */
            perm[i] = i;
        }
        for (int i = N - 1; i > 0 && round % 3; i--) { /* two rounds in three shuffled */
            seed = seed * 1103515245u + 12345u;
            int j = (int)((seed >> 16) % (unsigned)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int fresh = 0, expect_fresh = 0, expect_gone = 0;
        for (int i = 0; i < N; i++) {
            int s = perm[i];
            if (!want[s]) continue;
            nwant++;
            snprintf(k, sizeof(k), "s%d", s);
            fresh += mark(&m, k);
            if (i % 50 == 0) fresh += mark(&m, k); /* a collector bug: twice */
            expect_fresh += !present[s];
        }
        for (int s = 0; s < N; s++)
            expect_gone += present[s] && !want[s];
        assert_int_equal(fresh, expect_fresh);
        ended_log e = {0};
        size_t gone = mw_series_memory_sweep(&m, NULL, &e);
        assert_int_equal(gone, expect_gone);
        assert_int_equal(m.n, nwant);
        for (int s = 0; s < N; s++)
            present[s] = want[s];
    }
    mw_series_memory_destroy(&m);
}

static void keys_are_label_lists(void **state)
{
    (void)state;
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_series_key_add(&b, "__name__", "up");
    mw_series_key_add(&b, "job", "");
    mw_series_key_add(&b, "node", "n-1");
    assert_int_equal(b.len, 9 + 3 + 4 + 1 + 5 + 4);
    mw_label l[4];
    assert_int_equal(mw_series_key_labels(b.data, b.len, l, 4), 3);
    assert_string_equal(l[0].name, "__name__");
    assert_string_equal(l[0].value, "up");
    assert_string_equal(l[1].name, "job");
    assert_string_equal(l[1].value, "");
    assert_string_equal(l[2].name, "node");
    assert_string_equal(l[2].value, "n-1");
    assert_int_equal(mw_series_key_labels(b.data, b.len, l, 2), 2); /* at most max */
    assert_int_equal(mw_series_key_labels(b.data, 5, l, 4), 0);     /* a name cut short */
    mw_buf_free(&b);
    uint64_t bits;
    double v = mw_stale_nan();
    memcpy(&bits, &v, sizeof(bits));
    assert_true(bits == 0x7ff0000000000002ULL);
    assert_true(mw_is_stale_nan(v));
    assert_false(mw_is_stale_nan(__builtin_nan("")));
    assert_false(mw_is_stale_nan(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ended_once_and_only_ended),
        cmocka_unit_test(many_series_grow_and_shrink),
        cmocka_unit_test(any_order_and_insertions),
        cmocka_unit_test(keys_are_label_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
