/* test_rwqueue.c - the remote-write disk queue (src/ship/queue.c) and the
 * retry policy (src/ship/sender.c): order, batching, wrap-around of
 * segments, full queue, torn and corrupt tails, restart, backoff. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ship/queue.h"
#include "ship/sender.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-rwq-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static mw_rwq *open_q(uint64_t cap, uint64_t seg)
{
    mw_rwq *q;
    char err[256];
    if (mw_rwq_open(dir, cap, seg, &q, err, sizeof(err)) < 0) fail_msg("open: %s", err);
    return q;
}

/* Record i: 100 bytes of the letter 'a' + i % 26, with i samples... */
static void put(mw_rwq *q, int i)
{
    char p[100], err[256];
    memset(p, 'a' + i % 26, sizeof(p));
    snprintf(p, 8, "r%05d", i);
    assert_int_equal(mw_rwq_append(q, p, sizeof(p), 10, 1000 + i, err, sizeof(err)), 0);
}

/* ...read back: the index of each record in the batch. */
static int take(mw_rwq *q, uint64_t max_samples, int *ids, mw_rwq_batch *b)
{
    mw_buf out;
    mw_buf_init(&out, 0);
    size_t n = mw_rwq_peek(q, max_samples, 1 << 20, &out, b);
    assert_int_equal(out.len, n * 100);
    for (size_t i = 0; i < n; i++)
        ids[i] = atoi(out.data + i * 100 + 1);
    mw_buf_free(&out);
    return (int)n;
}

static uint64_t pending(mw_rwq *q)
{
    mw_rwq_stats st;
    mw_rwq_get_stats(q, &st);
    return st.pending_samples;
}

static void order_and_batches(void **state)
{
    (void)state;
    mw_rwq *q = open_q(1 << 20, 0);
    for (int i = 0; i < 5; i++)
        put(q, i);
    assert_int_equal(pending(q), 50);
    int ids[16];
    mw_rwq_batch b;
    assert_int_equal(take(q, 30, ids, &b), 3); /* 3 x 10 samples fit in 30 */
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[2], 2);
    assert_int_equal(b.samples, 30);
    assert_int_equal(b.max_ts, 1002);
    assert_int_equal(b.full, 1); /* the 4th record would exceed 30 */
    /* Not acknowledged: the same batch again. */
    assert_int_equal(take(q, 30, ids, &b), 3);
    assert_int_equal(ids[0], 0);
    mw_rwq_ack(q, &b);
    assert_int_equal(pending(q), 20);
    assert_int_equal(take(q, 5, ids, &b), 1); /* at least one record, even over the limit */
    assert_int_equal(ids[0], 3);
    mw_rwq_ack(q, &b);
    assert_int_equal(take(q, 100, ids, &b), 1);
    assert_int_equal(ids[0], 4);
    assert_int_equal(b.full, 0);
    mw_rwq_ack(q, &b);
    assert_int_equal(take(q, 100, ids, &b), 0);
    assert_int_equal(pending(q), 0);
    mw_rwq_close(q);
}

static void wrap_segments_and_restart(void **state)
{
    (void)state;
    /* 1 KiB segments hold 8 records of 120 bytes: 40 records span 5+. */
    mw_rwq *q = open_q(1 << 20, 1024);
    for (int i = 0; i < 40; i++)
        put(q, i);
    mw_rwq_stats st;
    mw_rwq_get_stats(q, &st);
    assert_int_equal(st.segments, 5);
    int ids[64], next = 0;
    mw_rwq_batch b;
    for (int k = 0; k < 3; k++) { /* 3 batches of 7 records cross segment ends */
        int n = take(q, 70, ids, &b);
        assert_int_equal(n, 7);
        for (int i = 0; i < n; i++)
            assert_int_equal(ids[i], next++);
        mw_rwq_ack(q, &b);
    }
    mw_rwq_get_stats(q, &st);
    assert_int_equal(st.segments, 3); /* fully sent segments are gone */
    assert_int_equal(st.pending_samples, 190);
    mw_rwq_close(q);
    /* Restart: resumes at record 21, nothing lost or repeated. */
    q = open_q(1 << 20, 1024);
    assert_int_equal(pending(q), 190);
    put(q, 40);
    while (next <= 40) {
        int n = take(q, 1000, ids, &b);
        assert_true(n > 0);
        for (int i = 0; i < n; i++)
            assert_int_equal(ids[i], next++);
        mw_rwq_ack(q, &b);
    }
    assert_int_equal(pending(q), 0);
    mw_rwq_close(q);
}

static void full_drops_oldest(void **state)
{
    (void)state;
    /* Capacity 4 KiB with 1 KiB segments: about 32 records fit. */
    mw_rwq *q = open_q(4096, 1024);
    for (int i = 0; i < 100; i++)
        put(q, i);
    mw_rwq_stats st;
    mw_rwq_get_stats(q, &st);
    assert_true(st.bytes <= 4096);
    /* Whole segments of 8 records went, oldest first; what is left is the
     * newest data, in order, and everything is accounted for. */
    assert_int_equal(st.dropped_full + st.pending_samples, 1000);
    assert_int_equal(st.dropped_full % 80, 0);
    int ids[128];
    mw_rwq_batch b;
    int n = take(q, 100000, ids, &b);
    assert_int_equal(n * 10, (int)st.pending_samples);
    assert_int_equal(ids[0], (int)(st.dropped_full / 10));
    assert_int_equal(ids[n - 1], 99);
    mw_rwq_close(q);
}

static void torn_and_corrupt_tail(void **state)
{
    (void)state;
    mw_rwq *q = open_q(1 << 20, 0);
    for (int i = 0; i < 3; i++)
        put(q, i);
    mw_rwq_close(q);
    char path[400];
    snprintf(path, sizeof(path), "%s/%020d.seg", dir, 1);
    struct stat st0;
    assert_int_equal(stat(path, &st0), 0);
    assert_int_equal(st0.st_size, 8 + 3 * 120);
    /* A torn write: half a record at the end. */
    int fd = open(path, O_WRONLY | O_APPEND);
    char junk[60];
    memset(junk, 7, sizeof(junk));
    junk[0] = 100; /* claims a 100-byte payload */
    assert_int_equal(write(fd, junk, sizeof(junk)), 60);
    close(fd);
    q = open_q(1 << 20, 0);
    mw_rwq_stats st;
    mw_rwq_get_stats(q, &st);
    assert_int_equal(st.corrupt_bytes, 60);
    assert_int_equal(st.pending_samples, 30);
    put(q, 3); /* appends after the cut, readable */
    mw_rwq_close(q);
    /* Flip a byte in record 2's payload: it and what follows are cut. */
    fd = open(path, O_WRONLY);
    assert_int_equal(pwrite(fd, "X", 1, 8 + 2 * 120 + 50), 1);
    close(fd);
    q = open_q(1 << 20, 0);
    mw_rwq_get_stats(q, &st);
    assert_int_equal(st.corrupt_bytes, 240);
    int ids[8];
    mw_rwq_batch b;
    assert_int_equal(take(q, 1000, ids, &b), 2);
    assert_int_equal(ids[1], 1);
    mw_rwq_close(q);
}

static void record_parser(void **state)
{
    (void)state;
    unsigned char buf[64] = {0};
    uint32_t ns, len;
    int64_t ts;
    const unsigned char *p;
    assert_int_equal(mw_rwq_parse_record(buf, 19, &ns, &ts, &p, &len), 0);
    assert_int_equal(mw_rwq_parse_record(buf, 20, &ns, &ts, &p, &len), 0); /* CRC of zeros != 0 */
    buf[0] = 0xff;
    buf[1] = 0xff;
    buf[2] = 0xff;
    buf[3] = 0xff; /* 4 GiB length */
    assert_int_equal(mw_rwq_parse_record(buf, 64, &ns, &ts, &p, &len), 0);
}

static void backoff(void **state)
{
    (void)state;
    assert_int_equal(mw_rw_backoff_ms(0, 30, 5000, -1, 0.0), 15);
    assert_int_equal(mw_rw_backoff_ms(0, 30, 5000, -1, 0.999999), 29);
    assert_int_equal(mw_rw_backoff_ms(3, 30, 5000, -1, 0.0), 120);   /* 240 / 2 */
    assert_int_equal(mw_rw_backoff_ms(20, 30, 5000, -1, 0.0), 2500); /* capped at 5 s */
    assert_int_equal(mw_rw_backoff_ms(20, 30, 5000, -1, 0.5), 3750);
    assert_int_equal(mw_rw_backoff_ms(2, 30, 5000, 7000, 0.3), 7000); /* Retry-After wins */
    assert_int_equal(mw_rw_backoff_ms(2, 30, 5000, 3600000, 0.3), 300000);
    assert_int_equal(mw_rw_parse_retry_after(" 12\r\n", 0), 12000);
    assert_int_equal(mw_rw_parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", 1445412480), 10000);
    assert_int_equal(mw_rw_parse_retry_after("soon", 0), -1);
    assert_int_equal(mw_rw_classify(204), MW_RW_OK);
    assert_int_equal(mw_rw_classify(429), MW_RW_RETRY);
    assert_int_equal(mw_rw_classify(503), MW_RW_RETRY);
    assert_int_equal(mw_rw_classify(400), MW_RW_REJECTED);
    assert_int_equal(mw_rw_classify(404), MW_RW_REJECTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(order_and_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(wrap_segments_and_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(full_drops_oldest, setup, teardown),
        cmocka_unit_test_setup_teardown(torn_and_corrupt_tail, setup, teardown),
        cmocka_unit_test(record_parser),
        cmocka_unit_test(backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
