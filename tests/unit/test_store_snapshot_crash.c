/* test_store_snapshot_crash.c - a power loss at every system call of a head
 * snapshot and of a forced compaction (which snapshots, truncates the WAL
 * and writes a block) loses no acknowledged sample (src/store/snapshot.c,
 * wal.c; tests/faultfs).
 *
 * One snapshot generation is kept and the WAL before it is deleted, so the
 * order of the steps is what keeps the data: the new snapshot is written
 * and fsynced beside the old one, renamed over it, the folder fsynced, and
 * only then are the WAL segments it covers deleted. A child process ingests
 * 60 acknowledged batches of 20 series (a snapshot after 30, WAL segments of
 * 4 KiB), then arms faultfs to lose power at the N-th watched call (open,
 * write, fsync, fdatasync, ftruncate, rename, unlink) of the operation; the
 * parent recovers the store and requires all 1,200 samples bit for bit, and
 * no more. N runs from 1 until the operation completes, each N twice: as a
 * kill -9 (the process ends there, the kernel keeps everything it was
 * given) and as a power loss (every write, create, rename and unlink that
 * no completed sync covers is undone; odd N keep some of the unsynced
 * writes and tear one, faultfs_crash_loss). Once the operation completes
 * (and the file system has committed its name changes), a power loss still
 * loses nothing, and the folder holds one snapshot file and a WAL of one
 * empty segment. A third test checks from faultfs' event log the one order
 * its power loss cannot show (it commits name changes in order): the data
 * folder's fsync completes between the snapshot's rename and the first
 * unlink of a WAL segment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "faultfs.h"
#include "store/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SERIES 20
#define BATCHES 60
#define MAX_CALLS 2000 /* an operation that gets this far without completing fails */

enum { OP_SNAPSHOT, OP_COMPACT };

static char top[256], dir[300], stash[300];

static mw_store *open_store(void)
{
    mw_store_options o = {
        .dir = dir, .background_ms = -1, .snapshot_wal_bytes = 1u << 30, .wal_segment_bytes = 4096};
    mw_store_default_limits(&o.limits);
    char err[256];
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    if (!s) fprintf(stderr, "open: %s\n", err);
    return s;
}

static double value_of(int batch, int k)
{
    return k % 2 ? 1e12 + batch * 7.0 : batch * 1000.0 + k + 0.25;
}

static int64_t time_of(int batch)
{
    return 1700000000000LL + (int64_t)batch * 15000;
}

static void ingest(mw_store *s, int from, int to)
{
    mw_label lab[SERIES][2];
    char names[SERIES][16];
    mw_store_sample sm[SERIES];
    mw_store_ts ts[SERIES];
    for (int b = from; b < to; b++) {
        for (int k = 0; k < SERIES; k++) {
            snprintf(names[k], sizeof(names[k]), "s%02d", k);
            lab[k][0] = (mw_label){"__name__", "snapcrash"};
            lab[k][1] = (mw_label){"k", names[k]};
            sm[k] = (mw_store_sample){time_of(b), value_of(b, k)};
            ts[k] = (mw_store_ts){lab[k], 2, &sm[k], 1};
        }
        /* Every tenth batch and the last wait for their fsync, which makes
         * the batches before them durable too (group commit). */
        int wait = b % 10 == 9 || b == to - 1 ? MW_STORE_WAIT : 0;
        char msg[512];
        if (mw_store_append(s, ts, SERIES, wait, msg, sizeof(msg)) != 0) {
            fprintf(stderr, "append: %s\n", msg);
            _exit(4);
        }
    }
}

/* Ingest, then lose power at the crash_at-th watched call of the operation
 * (exit FAULTFS_CRASH_EXIT), or complete it (exit 0). */
static void child(int op, uint64_t crash_at, int power_loss)
{
    faultfs_watch(dir);
    if (power_loss) { /* else the crash is an _exit: what kill -9 leaves */
        faultfs_crash_init(stash);
        faultfs_crash_loss(crash_at % 2 ? FAULTFS_KEEP_SOME_TORN : FAULTFS_LOSE_ALL,
                           (unsigned)crash_at);
    }
    mw_store *s = open_store();
    if (!s) _exit(3);
    ingest(s, 0, BATCHES / 2);
    if (mw_store_snapshot(s) != 0) _exit(5);
    ingest(s, BATCHES / 2, BATCHES);
    faultfs_crash_arm(crash_at);
    int rc = op == OP_SNAPSHOT ? mw_store_snapshot(s) : mw_store_compact(s, 1);
    faultfs_crash_arm(0);
    if (rc != 0) _exit(7);
    if (power_loss) {
        /* Completed: once the file system has committed every name change
         * (the WAL segments' unlinks too), a power loss still loses
         * nothing; it would if the snapshot's bytes were not synced. */
        char wal[400];
        snprintf(wal, sizeof(wal), "%s/wal", dir);
        const char *dirs[2] = {dir, wal};
        for (int i = 0; i < 2; i++) {
            int fd = open(dirs[i], O_RDONLY | O_DIRECTORY);
            if (fd < 0 || fsync(fd) < 0) _exit(8);
            close(fd);
        }
        faultfs_crash_loss(FAULTFS_LOSE_ALL, 0);
        faultfs_crash_now(0);
    }
    _exit(0);
}

static int has_sample(const mw_series_data *d, int64_t t, double v)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->t[i] == t) return memcmp(&d->v[i], &v, sizeof(v)) == 0;
    return 0;
}

static const char *what(int op, int power_loss)
{
    return op == OP_SNAPSHOT ? (power_loss ? "snapshot, power lost" : "snapshot, killed")
                             : (power_loss ? "compaction, power lost" : "compaction, killed");
}

/* Every one of the 1,200 acknowledged samples, exactly, and nothing else. */
static void check_all_back(int op, uint64_t crash_at, int power_loss)
{
    mw_store *s = open_store();
    assert_non_null(s);
    mw_matcher m;
    char err[256];
    mw_matcher_init(&m, MW_MATCH_EQ, "__name__", "snapcrash", err, sizeof(err));
    mw_select_result r;
    assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)), 0);
    mw_matcher_free(&m);
    size_t missing = 0;
    for (size_t i = 0; i < r.nseries; i++) {
        int k = atoi(r.series[i].labels[1].value + 1);
        for (int b = 0; b < BATCHES; b++)
            if (!has_sample(&r.series[i], time_of(b), value_of(b, k)) && missing++ < 5)
                fprintf(stderr, "%s at watched call %llu: series %d batch %d missing\n",
                        what(op, power_loss), (unsigned long long)crash_at, k, b);
    }
    if (r.nseries != SERIES || r.nsamples != SERIES * BATCHES || missing)
        fail_msg("%s at watched call %llu: %zu series, %zu samples, %zu missing",
                 what(op, power_loss), (unsigned long long)crash_at, r.nseries, r.nsamples,
                 missing);
    mw_select_result_free(&r);
    mw_store_close(s);
}

static size_t entries(const char *path, const char *starting, long *bytes)
{
    DIR *d = opendir(path);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, starting, strlen(starting)) != 0) continue;
        n++;
        char p[700];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        if (bytes && stat(p, &st) == 0) *bytes += (long)st.st_size;
    }
    closedir(d);
    return n;
}

static void run(int op)
{
    snprintf(top, sizeof(top), "/tmp/mlwatch-test-snapcrash-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(dir, sizeof(dir), "%s/store", top);
    snprintf(stash, sizeof(stash), "%s/stash", top);
    char cmd[700];
    uint64_t n;
    int done = 0;
    for (n = 1; n < MAX_CALLS && !done; n++) {
        for (int power_loss = 0; power_loss < 2; power_loss++) {
            snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, stash);
            assert_int_equal(system(cmd), 0);
            pid_t pid = fork();
            assert_true(pid >= 0);
            if (pid == 0) child(op, n, power_loss);
            int st;
            assert_int_equal(waitpid(pid, &st, 0), pid);
            assert_true(WIFEXITED(st));
            if (WEXITSTATUS(st) == 0) /* completed in fewer than n calls */
                done = power_loss;
            else if (WEXITSTATUS(st) != FAULTFS_CRASH_EXIT)
                fail_msg("%s at call %llu: the child ended with status %d", what(op, power_loss),
                         (unsigned long long)n, WEXITSTATUS(st));
            check_all_back(op, n, power_loss);
        }
    }
    n--; /* the call count at which it completed */
    assert_true(n < MAX_CALLS);
    fprintf(stderr,
            "%s: a kill -9 and a power loss at each of its %llu watched calls lost nothing\n",
            op == OP_SNAPSHOT ? "snapshot" : "forced compaction", (unsigned long long)(n - 1));
    /* The operation completed: one snapshot, one WAL segment holding only
     * its 8-byte magic; everything is back. */
    char wal[400];
    snprintf(wal, sizeof(wal), "%s/wal", dir);
    long wal_bytes = 0;
    assert_int_equal(entries(dir, "head.snapshot", NULL), 1);
    assert_int_equal(entries(wal, "", &wal_bytes), 1);
    assert_int_equal(wal_bytes, 8);
    check_all_back(op, 0, 0);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    assert_int_equal(system(cmd), 0);
}

/* The order a power loss cannot show where the file system commits name
 * changes in order (as faultfs does): the rename of the new snapshot is made
 * durable by a completed fsync of the data folder before the first WAL
 * segment it covers is unlinked. */
static void snapshot_syncs_its_folder_before_deleting_the_wal(void **state)
{
    (void)state;
    snprintf(top, sizeof(top), "/tmp/mlwatch-test-snapcrash-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(dir, sizeof(dir), "%s/store", top);
    faultfs_watch(dir);
    mw_store *s = open_store();
    assert_non_null(s);
    ingest(s, 0, BATCHES / 2);
    assert_int_equal(mw_store_snapshot(s), 0);
    ingest(s, BATCHES / 2, BATCHES);
    faultfs_record(1);
    assert_int_equal(mw_store_snapshot(s), 0);
    size_t n;
    const faultfs_event *ev = faultfs_events(&n);
    uint64_t renamed = 0, synced = 0, unlinked = 0, began = 0;
    char snap[400];
    snprintf(snap, sizeof(snap), "%s/head.snapshot", dir);
    for (size_t i = 0; i < n; i++) {
        const char *path = faultfs_file_path(ev[i].file);
        if (ev[i].kind == FAULTFS_EV_RENAME && strcmp(path, snap) == 0) renamed = ev[i].seq;
        if (renamed && ev[i].kind == FAULTFS_EV_SYNC_BEGIN && strcmp(path, dir) == 0)
            began = ev[i].seq;
        if (began && !synced && ev[i].kind == FAULTFS_EV_SYNC_END && strcmp(path, dir) == 0 &&
            ev[i].len == 0)
            synced = ev[i].seq;
        if (!unlinked && ev[i].kind == FAULTFS_EV_UNLINK && strstr(path, "/wal/"))
            unlinked = ev[i].seq;
    }
    faultfs_record(0);
    faultfs_watch(NULL);
    mw_store_close(s);
    assert_true(renamed > 0 && unlinked > 0);
    assert_true(began > renamed && synced > began && synced < unlinked);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    assert_int_equal(system(cmd), 0);
}

/* The same order for a block: compaction renames the block it wrote into
 * blocks/ and then deletes what the block replaces (the head's chunk files,
 * or merged blocks); the blocks folder's fsync must complete in between, or a
 * power loss on a file system that reorders name changes keeps the deletes
 * and loses the block (src/store/block.c, mw_block_writer_finish). */
static void compaction_syncs_the_block_folder_before_deleting_what_it_replaces(void **state)
{
    (void)state;
    snprintf(top, sizeof(top), "/tmp/mlwatch-test-snapcrash-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(dir, sizeof(dir), "%s/store", top);
    faultfs_watch(dir);
    mw_store *s = open_store();
    assert_non_null(s);
    ingest(s, 0, BATCHES);
    faultfs_record(1);
    assert_int_equal(mw_store_compact(s, 1), 0);
    size_t n;
    const faultfs_event *ev = faultfs_events(&n);
    uint64_t renamed = 0, synced = 0, unlinked = 0;
    char blocks[400];
    snprintf(blocks, sizeof(blocks), "%s/blocks", dir);
    for (size_t i = 0; i < n; i++) {
        const char *path = faultfs_file_path(ev[i].file);
        /* The block writer writes through stdio, which faultfs does not
         * follow, so its rename names no file (""); the snapshot's does. */
        if (!renamed && ev[i].kind == FAULTFS_EV_RENAME &&
            (path[0] == 0 || strncmp(path, blocks, strlen(blocks)) == 0))
            renamed = ev[i].seq;
        if (renamed && !synced && ev[i].kind == FAULTFS_EV_SYNC_END && strcmp(path, blocks) == 0 &&
            ev[i].len == 0)
            synced = ev[i].seq;
        if (renamed && !unlinked && ev[i].kind == FAULTFS_EV_UNLINK &&
            (strstr(path, "/chunks/") || strstr(path, "/blocks/")))
            unlinked = ev[i].seq;
    }
    faultfs_record(0);
    faultfs_watch(NULL);
    mw_store_close(s);
    if (!renamed || !unlinked)
        fail_msg("the compaction renamed no block (%llu) or deleted nothing after it (%llu)",
                 (unsigned long long)renamed, (unsigned long long)unlinked);
    if (!synced || synced > unlinked)
        fail_msg("blocks/ was not synced between the block's rename (event %llu) and the first "
                 "delete (event %llu): synced at %llu",
                 (unsigned long long)renamed, (unsigned long long)unlinked,
                 (unsigned long long)synced);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    assert_int_equal(system(cmd), 0);
}

static void crash_during_a_snapshot(void **state)
{
    (void)state;
    run(OP_SNAPSHOT);
}

static void crash_during_a_forced_compaction(void **state)
{
    (void)state;
    run(OP_COMPACT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(snapshot_syncs_its_folder_before_deleting_the_wal),
        cmocka_unit_test(compaction_syncs_the_block_folder_before_deleting_what_it_replaces),
        cmocka_unit_test(crash_during_a_snapshot),
        cmocka_unit_test(crash_during_a_forced_compaction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
