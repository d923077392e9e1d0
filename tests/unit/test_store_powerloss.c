/* test_store_powerloss.c - power loss at random points during ingest, then
 * find every acknowledged sample with its exact value (src/store/), in the
 * manner of SQLite's crash-test VFS (tests/faultfs).
 *
 * A kill -9 keeps the page cache, so a store that never fsyncs survives
 * test_store_crash; a power loss does not. Here a child process ingests
 * under faultfs with MW_STORE_WAIT, its maintenance thread snapshotting and
 * compacting every few milliseconds, and reports each acknowledged batch on
 * a pipe. At a random watched system call faultfs "loses power": every
 * write that no completed sync of its file covers is undone (in odd rounds
 * some of them are kept, in order, and the next one torn), and so is every
 * create, rename and unlink that no completed directory sync covers; the
 * child ends there. The parent then opens the store as it was left
 * (recovery), and requires every acknowledged sample of every round so far,
 * bit for bit, and at most the one batch in flight more.
 *
 * MW_POWERLOSS_ROUNDS sets the number of rounds (default 8;
 * bench/store_powerloss.sh runs hundreds), MW_POWERLOSS_SEED the seed (the
 * test prints the one it used). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "faultfs.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SERIES 50
#define MAX_ROUNDS 10000
#define MAX_BATCHES 20000 /* a child that gets this far without a crash fails */

static char top[256], dir[300], stash[300];

static mw_store *open_store(int background)
{
    mw_store_options o = {.dir = dir,
                          .background_ms = background ? 3 : -1,
                          .snapshot_wal_bytes = 64 * 1024,
                          .wal_segment_bytes = 32 * 1024};
    mw_store_default_limits(&o.limits);
    char err[256];
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    if (!s) fprintf(stderr, "open: %s\n", err);
    return s;
}

static double value_of(int round, int batch, int k)
{
    /* Large values with small steps too: the Gorilla paths that need the
     * full leading-zero window. */
    return k % 2 ? 1e12 + round * 100000.0 + batch : round * 1e6 + batch * 1000.0 + k + 0.25;
}

static int64_t time_of(int round, int batch)
{
    return 1700000000000LL + (int64_t)round * 100000000 + (int64_t)batch * 1000;
}

static void child(int round, int fd, uint64_t crash_after, unsigned loss_seed)
{
    faultfs_watch(dir);
    faultfs_crash_init(stash);
    /* Every other round the disk keeps some of what no sync covered, and
     * tears a write: torn WAL records, half-written chunks and snapshots. */
    faultfs_crash_loss(round % 2 ? FAULTFS_KEEP_SOME_TORN : FAULTFS_LOSE_ALL, loss_seed);
    faultfs_crash_arm(crash_after);
    mw_store *s = open_store(1);
    if (!s) _exit(3);
    mw_label lab[SERIES][3];
    char names[SERIES][16];
    mw_store_sample sm[SERIES];
    mw_store_ts ts[SERIES];
    for (int k = 0; k < SERIES; k++)
        snprintf(names[k], sizeof(names[k]), "s%03d", k);
    for (int b = 0; b < MAX_BATCHES; b++) {
        for (int k = 0; k < SERIES; k++) {
            lab[k][0] = (mw_label){"__name__", "powerloss"};
            lab[k][1] = (mw_label){"k", names[k]};
            lab[k][2] = (mw_label){"r", k < SERIES / 2 ? "fixed" : "new"};
            sm[k] = (mw_store_sample){time_of(round, b), value_of(round, b, k)};
            ts[k] = (mw_store_ts){lab[k], 3, &sm[k], 1};
        }
        char msg[512];
        if (mw_store_append(s, ts, SERIES, MW_STORE_WAIT, msg, sizeof(msg)) != 0) {
            fprintf(stderr, "append: %s\n", msg);
            _exit(4);
        }
        if (write(fd, &b, sizeof(b)) != sizeof(b)) _exit(5);
        if (b % 37 == 36) mw_store_compact(s, 1);
    }
    _exit(6);
}

static int has_sample(const mw_series_data *d, int64_t t, double v)
{
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->t[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->n && d->t[lo] == t && memcmp(&d->v[lo], &v, sizeof(v)) == 0;
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static void power_loss_loses_no_acknowledged_sample(void **state)
{
    (void)state;
    int rounds = env_int("MW_POWERLOSS_ROUNDS", 8);
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    unsigned seed = (unsigned)env_int("MW_POWERLOSS_SEED", (int)(time(NULL) ^ getpid()));
    fprintf(stderr, "MW_POWERLOSS_SEED=%u MW_POWERLOSS_ROUNDS=%d\n", seed, rounds);
    srand(seed);
    snprintf(top, sizeof(top), "/tmp/mlwatch-test-powerloss-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(dir, sizeof(dir), "%s/store", top);
    snprintf(stash, sizeof(stash), "%s/stash", top);
    static int present[MAX_ROUNDS]; /* batches of each round in the store */
    size_t total = 0, acked_total = 0, extra_total = 0;
    for (int round = 0; round < rounds; round++) {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", stash);
        assert_int_equal(system(cmd), 0);
        /* A crash anywhere from the store's opening to a few hundred
         * batches in: in appends, rotations, snapshots and compactions. */
        uint64_t crash_after = 1 + (uint64_t)rand() % 1500;
        unsigned loss_seed = (unsigned)rand();
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child(round, p[1], crash_after, loss_seed);
        }
        close(p[1]);
        int acked = -1, b;
        while (read(p[0], &b, sizeof(b)) == sizeof(b))
            acked = b;
        close(p[0]);
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != FAULTFS_CRASH_EXIT)
            fail_msg("round %d: the child ended with status 0x%x, not by the crash", round, st);

        mw_store *s = open_store(0);
        assert_non_null(s);
        mw_matcher m;
        char err[256];
        mw_matcher_init(&m, MW_MATCH_EQ, "__name__", "powerloss", err, sizeof(err));
        mw_select_result r;
        assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)),
                         0);
        mw_matcher_free(&m);
        size_t missing = 0;
        int this_round = -1; /* batches of this round found in every series */
        for (size_t i = 0; i < r.nseries; i++) {
            const mw_series_data *sd = &r.series[i];
            int k = atoi(sd->labels[1].value + 1);
            for (int rr = 0; rr < round; rr++)
                for (int bb = 0; bb < present[rr]; bb++)
                    if (!has_sample(sd, time_of(rr, bb), value_of(rr, bb, k))) {
                        if (missing++ < 5)
                            fprintf(stderr, "missing: round %d batch %d series %d\n", rr, bb, k);
                    }
            int n = 0;
            while (has_sample(sd, time_of(round, n), value_of(round, n, k)))
                n++;
            if (n <= acked && missing++ < 5)
                fprintf(stderr,
                        "round %d (crash at watched call %llu): series %d has %d batches, %d "
                        "were acknowledged\n",
                        round, (unsigned long long)crash_after, k, n, acked + 1);
            if (this_round < 0 || n < this_round) this_round = n;
        }
        if (this_round < 0) this_round = 0;
        /* Every acknowledged batch, and at most the one in flight more. */
        if (acked >= 0 && r.nseries != SERIES)
            fail_msg("round %d: %zu series, not %d", round, r.nseries, SERIES);
        present[round] = this_round;
        total += (size_t)this_round * SERIES;
        assert_int_equal(missing, 0);
        assert_true(this_round == acked + 1 || this_round == acked + 2);
        assert_int_equal(r.nsamples, total);
        mw_select_result_free(&r);
        mw_store_close(s);
        acked_total += (size_t)(acked + 1);
        extra_total += (size_t)(this_round - (acked + 1));
    }
    fprintf(stderr,
            "%d power losses: %zu batches acknowledged, all found; %zu unacknowledged batches "
            "in flight survived\n",
            rounds, acked_total, extra_total);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(power_loss_loses_no_acknowledged_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
