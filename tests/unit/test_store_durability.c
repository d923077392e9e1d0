/* test_store_durability.c - the WAL's group commit keeps its promise under
 * concurrent writers (src/store/wal.c, store_append.c), checked on the
 * order of the system calls themselves (tests/faultfs).
 *
 * Several threads append with MW_STORE_WAIT while every fdatasync is made
 * slow, so that writers pile up behind each other's flushes. faultfs
 * numbers every write and every sync (when it began, when it returned) on
 * the store's files, and each writer adds a mark the moment its append is
 * acknowledged. Afterwards, for every acknowledged batch, the test finds
 * its bytes in the WAL segments (each batch holds one value no other batch
 * has), the write that put them there, and requires an fdatasync of that
 * segment that began after that write and returned before the
 * acknowledgement. The fsync counter must count exactly those syncs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "faultfs.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITERS 4
#define BATCHES 40
#define SERIES_PER_BATCH 8
#define SYNC_DELAY_US 3000 /* slow fdatasyncs: followers wait behind a leader */

static char dir[64];
static mw_store *store;
static uint64_t ack_seq[WRITERS][BATCHES];

/* The one value of batch b of writer w that no other batch has. */
static double marker_of(int w, int b)
{
    return 1e9 + w * 10000.0 + b + 0.125;
}

static void *writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    char names[SERIES_PER_BATCH][16], wname[8];
    snprintf(wname, sizeof(wname), "w%d", w);
    for (int k = 0; k < SERIES_PER_BATCH; k++)
        snprintf(names[k], sizeof(names[k]), "s%d", k);
    for (int b = 0; b < BATCHES; b++) {
        mw_label lab[SERIES_PER_BATCH][3];
        mw_store_sample sm[SERIES_PER_BATCH];
        mw_store_ts ts[SERIES_PER_BATCH];
        for (int k = 0; k < SERIES_PER_BATCH; k++) {
            lab[k][0] = (mw_label){"__name__", "durable"};
            lab[k][1] = (mw_label){"k", names[k]};
            lab[k][2] = (mw_label){"writer", wname};
            sm[k] = (mw_store_sample){1700000000000 + b * 1000, k ? k * 1.5 : marker_of(w, b)};
            ts[k] = (mw_store_ts){lab[k], 3, &sm[k], 1};
        }
        char msg[512] = "";
        if (mw_store_append(store, ts, SERIES_PER_BATCH, MW_STORE_WAIT, msg, sizeof(msg)) != 0) {
            fprintf(stderr, "writer %d batch %d: %s\n", w, b, msg);
            ack_seq[w][b] = 0;
            continue;
        }
        ack_seq[w][b] = faultfs_mark((uint64_t)w << 32 | (uint64_t)b);
    }
    return NULL;
}

static int is_wal_segment(const char *path)
{
    char wal[96];
    snprintf(wal, sizeof(wal), "%s/wal/", dir);
    return strncmp(path, wal, strlen(wal)) == 0;
}

/* Where in the WAL segments the 8 bytes of v are: the segment's file
 * number in faultfs and the offset; -1 when nowhere. */
static int find_in_wal(double v, uint64_t *off)
{
    size_t nev;
    const faultfs_event *ev = faultfs_events(&nev);
    int found = -1;
    for (size_t i = 0; i < nev && found < 0; i++) {
        if (ev[i].kind != FAULTFS_EV_WRITE || !is_wal_segment(faultfs_file_path(ev[i].file)))
            continue;
        /* Each segment once: the first write event naming it. */
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = ev[j].kind == FAULTFS_EV_WRITE && ev[j].file == ev[i].file;
        if (seen) continue;
        FILE *f = fopen(faultfs_file_path(ev[i].file), "rb");
        assert_non_null(f);
        static uint8_t content[1 << 20];
        size_t n = fread(content, 1, sizeof(content), f);
        fclose(f);
        for (size_t at = 0; at + sizeof(v) <= n; at++)
            if (memcmp(content + at, &v, sizeof(v)) == 0) {
                found = ev[i].file;
                *off = at;
                break;
            }
    }
    return found;
}

static void acknowledged_only_after_a_later_fdatasync(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-durability-XXXXXX");
    assert_non_null(mkdtemp(dir));
    faultfs_watch(dir);
    faultfs_record(1);
    faultfs_delay(FAULTFS_FDATASYNC, SYNC_DELAY_US);
    /* Small segments: the writers run through several rotations. */
    mw_store_options o = {.dir = dir, .background_ms = -1, .wal_segment_bytes = 4096};
    mw_store_default_limits(&o.limits);
    char err[256] = "";
    store = mw_store_open(&o, err, sizeof(err));
    assert_non_null(store);

    pthread_t th[WRITERS];
    for (int w = 0; w < WRITERS; w++)
        assert_int_equal(pthread_create(&th[w], NULL, writer, (void *)(intptr_t)w), 0);
    for (int w = 0; w < WRITERS; w++)
        pthread_join(th[w], NULL);

    size_t nev;
    const faultfs_event *ev = faultfs_events(&nev);
    uint64_t wal_data_syncs = 0, segments = 0;
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].kind == FAULTFS_EV_SYNC_END && ev[i].op == FAULTFS_FDATASYNC &&
            is_wal_segment(faultfs_file_path(ev[i].file)))
            wal_data_syncs++;
    }
    int acked = 0;
    for (int w = 0; w < WRITERS; w++) {
        for (int b = 0; b < BATCHES; b++) {
            if (!ack_seq[w][b]) fail_msg("writer %d batch %d was not acknowledged", w, b);
            acked++;
            uint64_t ack = ack_seq[w][b], off = 0;
            int file = find_in_wal(marker_of(w, b), &off);
            if (file < 0)
                fail_msg("writer %d batch %d (acknowledged at event %llu) is in no WAL segment", w,
                         b, (unsigned long long)ack);
            /* The write that put the batch's bytes there (the last one over
             * that offset), and a sync of that file after it. */
            uint64_t written = 0;
            for (size_t i = 0; i < nev; i++)
                if (ev[i].kind == FAULTFS_EV_WRITE && ev[i].file == file && ev[i].off <= off &&
                    off < ev[i].off + ev[i].len)
                    written = ev[i].seq;
            if (!written || written > ack)
                fail_msg("writer %d batch %d: acknowledged at event %llu, its bytes (%s offset "
                         "%llu) written at event %llu",
                         w, b, (unsigned long long)ack, faultfs_file_path(file),
                         (unsigned long long)off, (unsigned long long)written);
            int covered = 0;
            for (size_t i = 0; i < nev && !covered; i++) {
                if (ev[i].kind != FAULTFS_EV_SYNC_BEGIN || ev[i].op != FAULTFS_FDATASYNC ||
                    ev[i].file != file || ev[i].seq < written)
                    continue;
                for (size_t j = i + 1; j < nev; j++)
                    if (ev[j].kind == FAULTFS_EV_SYNC_END && ev[j].file == file) {
                        covered = ev[j].seq < ack && ev[j].len == 0;
                        break;
                    }
            }
            if (!covered)
                fail_msg("writer %d batch %d: acknowledged at event %llu, but no fdatasync of %s "
                         "began after its bytes were written (event %llu) and returned before",
                         w, b, (unsigned long long)ack, faultfs_file_path(file),
                         (unsigned long long)written);
        }
    }
    assert_int_equal(acked, WRITERS * BATCHES);

    /* The fsync counter counts the group commits, not the new segments'
     * headers; and writers shared them (group commit). */
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].kind != FAULTFS_EV_WRITE || !is_wal_segment(faultfs_file_path(ev[i].file)))
            continue;
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = !(ev[j].kind == FAULTFS_EV_WRITE && ev[j].file == ev[i].file);
        segments += (uint64_t)first;
    }
    mw_store_stats st;
    mw_store_get_stats(store, &st);
    assert_true(segments > 2);
    assert_int_equal(st.wal_fsyncs, wal_data_syncs - segments);
    assert_true(st.wal_fsyncs < (uint64_t)acked);
    mw_store_close(store);
    faultfs_watch(NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A failing fdatasync is never acknowledged: the writer gets 503 and the
 * sample is not counted durable. */
static void failed_fdatasync_is_refused(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-durability-XXXXXX");
    assert_non_null(mkdtemp(dir));
    faultfs_watch(dir);
    mw_store_options o = {.dir = dir, .background_ms = 10};
    mw_store_default_limits(&o.limits);
    char err[256] = "";
    store = mw_store_open(&o, err, sizeof(err));
    assert_non_null(store);
    mw_label lab[1] = {{"__name__", "durable"}};
    mw_store_sample sm = {1700000000000, 1};
    mw_store_ts ts = {lab, 1, &sm, 1};
    char msg[512] = "";
    faultfs_fail(FAULTFS_FDATASYNC, EIO, 0);
    assert_int_equal(mw_store_append(store, &ts, 1, MW_STORE_WAIT, msg, sizeof(msg)), 503);
    assert_non_null(strstr(msg, "Input/output error"));
    mw_store_stats st;
    mw_store_get_stats(store, &st);
    assert_int_equal(st.wal_write_errors, 1);
    /* The disk works again: the maintenance thread's retry makes the kept
     * bytes durable, and writes are acknowledged again. */
    faultfs_fail(FAULTFS_FDATASYNC, 0, 0);
    for (int i = 0; i < 1000 && st.disk_full; i++) {
        usleep(10000);
        mw_store_get_stats(store, &st);
    }
    assert_int_equal(st.disk_full, 0);
    sm.t += 1000;
    assert_int_equal(mw_store_append(store, &ts, 1, MW_STORE_WAIT, msg, sizeof(msg)), 0);
    mw_store_close(store);
    faultfs_watch(NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(acknowledged_only_after_a_later_fdatasync),
        cmocka_unit_test(failed_fdatasync_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
