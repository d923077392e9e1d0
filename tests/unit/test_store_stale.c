/* test_store_stale.c - the agent's own series that a collection snapshot no
 * longer has get a staleness marker at that snapshot's time (as a scrape
 * gives a series that left the target), once, and only own series: a
 * remote-written series that is not sent again is left alone; an empty
 * snapshot ends nothing. (The memory behind it: test_series_memory.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "core/snapshot.h"
#include "store/store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-stale-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[100];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static const mw_metric_desc D = {"mlwatch_test_health", "t", "", MW_GAUGE};

/* One snapshot at t with the reasons given (one series each). */
static void own(mw_store *s, int64_t t, const char *r1, const char *r2)
{
    mw_snapshot *snap = mw_snapshot_new();
    snap->timestamp_ms = t;
    if (r1) mw_emit(snap, &D, 1, "reason", r1, MW_END);
    if (r2) mw_emit(snap, &D, 0, "reason", r2, MW_END);
    char msg[512];
    assert_int_equal(mw_store_append_snapshot(s, snap, msg, sizeof(msg)), 0);
    mw_snapshot_free(snap);
}

/* "t:value t:value ..." of the series NAME{reason=R}; stale as "S". */
static void samples(mw_store *s, const char *name, const char *r, char *out, size_t size)
{
    mw_matcher m[2];
    char err[256];
    assert_int_equal(mw_matcher_init(&m[0], MW_MATCH_EQ, "__name__", name, err, sizeof(err)), 0);
    assert_int_equal(mw_matcher_init(&m[1], MW_MATCH_EQ, "reason", r, err, sizeof(err)), 0);
    mw_select_result sel;
    assert_int_equal(mw_store_select(s, m, 2, INT64_MIN, INT64_MAX, 0, &sel, err, sizeof(err)), 0);
    out[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < sel.nseries; i++)
        for (size_t j = 0; j < sel.series[i].n; j++) {
            uint64_t bits;
            memcpy(&bits, &sel.series[i].v[j], sizeof(bits));
            char v[32];
            if (bits == 0x7ff0000000000002ULL)
                snprintf(v, sizeof(v), "S");
            else
                snprintf(v, sizeof(v), "%g", sel.series[i].v[j]);
            len += (size_t)snprintf(out + len, size - len, "%s%lld:%s", len ? " " : "",
                                    (long long)sel.series[i].t[j], v);
        }
    mw_select_result_free(&sel);
    mw_matcher_free(&m[0]);
    mw_matcher_free(&m[1]);
}

static mw_store *open_store(void)
{
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    char err[256] = "";
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    return s;
}

static void vanished_series_marked_stale_once(void **state)
{
    (void)state;
    mw_store *s = open_store();
    own(s, 1000, "row_remap_failure", "x");
    own(s, 2000, "row_remap_failure", "x");
    own(s, 3000, "none", "x"); /* the reason changed: another series */
    own(s, 4000, "none", "x");
    own(s, 5000, "row_remap_failure", "x"); /* back */
    char got[256];
    samples(s, "mlwatch_test_health", "row_remap_failure", got, sizeof(got));
    assert_string_equal(got, "1000:1 2000:1 3000:S 5000:1");
    samples(s, "mlwatch_test_health", "none", got, sizeof(got));
    assert_string_equal(got, "3000:1 4000:1 5000:S");
    samples(s, "mlwatch_test_health", "x", got, sizeof(got));
    assert_string_equal(got, "1000:0 2000:0 3000:0 4000:0 5000:0");
    mw_store_close(s);
}

/* An empty snapshot is a round that collected nothing: it ends no series
 * (the next one that lacks a series does). */
static void an_empty_round_ends_nothing(void **state)
{
    (void)state;
    mw_store *s = open_store();
    own(s, 1000, "a", "x");
    own(s, 2000, NULL, NULL);
    own(s, 3000, "a", NULL);
    char got[256];
    samples(s, "mlwatch_test_health", "a", got, sizeof(got));
    assert_string_equal(got, "1000:1 3000:1");
    samples(s, "mlwatch_test_health", "x", got, sizeof(got));
    assert_string_equal(got, "1000:0 3000:S");
    mw_store_close(s);
}

static void remote_written_series_left_alone(void **state)
{
    (void)state;
    mw_store *s = open_store();
    mw_label l[2] = {{"__name__", "remote_m"}, {"reason", "r"}};
    mw_store_sample sm = {1500, 7};
    mw_store_ts ts = {l, 2, &sm, 1};
    char msg[512];
    assert_int_equal(mw_store_append(s, &ts, 1, 0, msg, sizeof(msg)), 0);
    own(s, 1000, "a", NULL);
    own(s, 2000, "b", NULL);
    own(s, 3000, "b", NULL);
    char got[256];
    samples(s, "remote_m", "r", got, sizeof(got));
    assert_string_equal(got, "1500:7");
    samples(s, "mlwatch_test_health", "a", got, sizeof(got));
    assert_string_equal(got, "1000:1 2000:S");
    mw_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(vanished_series_marked_stale_once, setup, teardown),
        cmocka_unit_test_setup_teardown(an_empty_round_ends_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_written_series_left_alone, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
