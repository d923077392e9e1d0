/* test_procmap.c - the process-to-container map: walks, the fallback through
 * /proc/<pid>/cgroup, bounds and concurrent lookups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/procmap.h"
#include "core/util.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define CID "4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f"
#define CG_A                                                                                       \
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice/cri-containerd-" CID   \
    ".scope"
#define CG_B "/system.slice/kubelet.service"

static mw_container_ref ref_a, ref_b;

static int setup(void **state)
{
    (void)state;
    memset(&ref_a, 0, sizeof(ref_a));
    mw_strlcpy(ref_a.id, CID, sizeof(ref_a.id));
    mw_strlcpy(ref_a.pod_uid, "aaaaaaaa-0000-4000-8000-000000000001", sizeof(ref_a.pod_uid));
    mw_strlcpy(ref_a.namespace_, "ml", sizeof(ref_a.namespace_));
    mw_strlcpy(ref_a.pod, "train-0", sizeof(ref_a.pod));
    mw_strlcpy(ref_a.container, "trainer", sizeof(ref_a.container));
    mw_strlcpy(ref_a.cgroup, CG_A, sizeof(ref_a.cgroup));
    memset(&ref_b, 0, sizeof(ref_b));
    mw_strlcpy(ref_b.cgroup, CG_B, sizeof(ref_b.cgroup));
    return 0;
}

static void proc_cgroup(const char *root, int pid, const char *text)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "proc/%d/cgroup", pid);
    tu_write(root, rel, text);
}

static void walk_and_lookup(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, tu_fixture("bare-vm")), 0);
    mw_procmap *m = mw_procmap_new(&h);
    mw_container_ref out;
    assert_int_equal(mw_procmap_size(m), 0);
    assert_int_equal(mw_procmap_lookup(m, 10, &out), -1);

    mw_procmap_begin(m);
    mw_procmap_set(m, 0, &ref_a);
    mw_procmap_set(m, 10, &ref_a);
    mw_procmap_set(m, 11, &ref_a);
    mw_procmap_set(m, 20, &ref_b);
    mw_procmap_set(m, 11, &ref_a); /* a PID set twice counts once */
    /* Until end(), lookups see the previous (empty) walk. */
    assert_int_equal(mw_procmap_lookup(m, 10, &out), -1);
    mw_procmap_end(m);
    assert_int_equal(mw_procmap_size(m), 3);
    assert_int_equal(mw_procmap_lookup(m, 10, &out), 0);
    assert_string_equal(out.container, "trainer");
    assert_string_equal(out.id, CID);
    assert_string_equal(out.cgroup, CG_A);
    assert_int_equal(mw_procmap_lookup(m, 20, &out), 0);
    assert_string_equal(out.cgroup, CG_B);
    assert_string_equal(out.container, "");

    /* The next walk replaces the map. */
    mw_procmap_begin(m);
    mw_procmap_set(m, 20, &ref_a);
    mw_procmap_end(m);
    assert_int_equal(mw_procmap_size(m), 1);
    assert_int_equal(mw_procmap_lookup(m, 10, &out), -1); /* no proc/10 in bare-vm */
    assert_int_equal(mw_procmap_lookup(m, 20, &out), 0);
    assert_string_equal(out.container, "trainer");
    mw_procmap_free(m);
    mw_hostfs_close(&h);
}

/* Records are stored at their strings' length: every field comes back as
 * given, at its longest too, across walks that grow the table's string
 * buffer (500 records of ~1.1 KB). */
static void records_keep_every_field(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, tu_fixture("bare-vm")), 0);
    mw_procmap *m = mw_procmap_new(&h);
    static mw_container_ref r, out;
    for (int walk = 0; walk < 3; walk++) {
        mw_procmap_begin(m);
        for (int i = 0; i < 500; i++) {
            memset(&r, 'a' + i % 26, sizeof(r));
            r.id[sizeof(r.id) - 1] = '\0';
            r.pod_uid[sizeof(r.pod_uid) - 1] = '\0';
            snprintf(r.namespace_, sizeof(r.namespace_), "ns-%d-%d", walk, i);
            r.pod[sizeof(r.pod) - 1] = '\0';
            snprintf(r.container, sizeof(r.container), "c%d", i);
            /* cgroup: its longest, distinct in its first bytes */
            memset(r.cgroup, 'x', sizeof(r.cgroup));
            snprintf(r.cgroup, 32, "/kubepods/%d/", i);
            r.cgroup[strlen(r.cgroup)] = 'x';
            r.cgroup[sizeof(r.cgroup) - 1] = '\0';
            mw_procmap_set(m, 1000 + i, &r);
        }
        mw_procmap_end(m);
        assert_int_equal(mw_procmap_size(m), 500);
        for (int i = 0; i < 500; i += 37) {
            memset(&out, 0x55, sizeof(out));
            assert_int_equal(mw_procmap_lookup(m, 1000 + i, &out), 0);
            char want[sizeof(r.pod)];
            memset(want, 'a' + i % 26, sizeof(want));
            want[sizeof(r.id) - 1] = '\0';
            assert_string_equal(out.id, want);
            memset(want, 'a' + i % 26, sizeof(want));
            want[sizeof(r.pod_uid) - 1] = '\0';
            assert_string_equal(out.pod_uid, want);
            memset(want, 'a' + i % 26, sizeof(want));
            want[sizeof(r.pod) - 1] = '\0';
            assert_string_equal(out.pod, want);
            snprintf(want, sizeof(want), "ns-%d-%d", walk, i);
            assert_string_equal(out.namespace_, want);
            snprintf(want, sizeof(want), "c%d", i);
            assert_string_equal(out.container, want);
            assert_int_equal(strlen(out.cgroup), sizeof(out.cgroup) - 1);
            snprintf(want, sizeof(want), "/kubepods/%d/x", i);
            assert_memory_equal(out.cgroup, want, strlen(want));
        }
    }
    mw_procmap_free(m);
    mw_hostfs_close(&h);
}

static void fallback(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    mw_procmap *m = mw_procmap_new(&h);
    mw_procmap_begin(m);
    mw_procmap_set(m, 0, &ref_a); /* known, no process seen */
    mw_procmap_set(m, 20, &ref_b);
    mw_procmap_end(m);

    mw_container_ref out;
    proc_cgroup(root, 100, "0::" CG_A "\n");
    proc_cgroup(root, 101, "0::" CG_A "/sub/deeper\n");
    proc_cgroup(root, 102,
                "0::/../../kubepods-burstable.slice/kubepods-burstable-podx.slice/"
                "cri-containerd-" CID ".scope\n");
    proc_cgroup(root, 103, "0::/user.slice/user-1000.slice/session-1.scope\n");
    proc_cgroup(root, 104, "11:memory:/x\n5:cpu,cpuacct:" CG_B "\n0::/\n");
    proc_cgroup(root, 105, "not a cgroup file");
    proc_cgroup(root, 106, "0::/kubepods.slice\n"); /* a parent of a container: no */
    proc_cgroup(root, 107, "0::/../../unknown.scope\n");
    assert_int_equal(mw_procmap_lookup(m, 100, &out), 0);
    assert_string_equal(out.container, "trainer");
    assert_int_equal(mw_procmap_lookup(m, 101, &out), 0);
    assert_string_equal(out.cgroup, CG_A);
    assert_int_equal(mw_procmap_lookup(m, 102, &out), 0);
    assert_string_equal(out.pod, "train-0");
    assert_int_equal(mw_procmap_lookup(m, 103, &out), -1);
    assert_int_equal(mw_procmap_lookup(m, 104, &out), 0);
    assert_string_equal(out.cgroup, CG_B);
    assert_int_equal(mw_procmap_lookup(m, 105, &out), -1);
    assert_int_equal(mw_procmap_lookup(m, 106, &out), -1);
    assert_int_equal(mw_procmap_lookup(m, 107, &out), -1);
    assert_int_equal(mw_procmap_lookup(m, 999, &out), -1); /* no such process */
    /* The fallback does not add to the walk's map. */
    assert_int_equal(mw_procmap_size(m), 1);

    /* Results are cached until the next walk ends... */
    proc_cgroup(root, 103, "0::" CG_B "\n");
    assert_int_equal(mw_procmap_lookup(m, 103, &out), -1);
    tu_remove(root, "proc/100");
    assert_int_equal(mw_procmap_lookup(m, 100, &out), 0);
    /* ...but a PID that did not exist is not: it may start any time. */
    proc_cgroup(root, 999, "0::" CG_A "\n");
    assert_int_equal(mw_procmap_lookup(m, 999, &out), 0);

    mw_procmap_begin(m);
    mw_procmap_set(m, 0, &ref_a);
    mw_procmap_set(m, 0, &ref_b);
    mw_procmap_end(m);
    assert_int_equal(mw_procmap_lookup(m, 103, &out), 0);
    assert_string_equal(out.cgroup, CG_B);
    assert_int_equal(mw_procmap_lookup(m, 100, &out), -1); /* exited */
    mw_procmap_free(m);
    mw_hostfs_close(&h);
    tu_cleanup();
}

static void bounds(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, tu_fixture("bare-vm")), 0);
    mw_procmap *m = mw_procmap_new(&h);
    /* At most 2^20 processes per walk; the rest is dropped. */
    const int max = 1 << 20;
    mw_procmap_begin(m);
    for (int pid = 1; pid <= max + 1000; pid++)
        mw_procmap_set(m, pid, pid % 2 ? &ref_a : &ref_b);
    mw_procmap_end(m);
    assert_int_equal(mw_procmap_size(m), max);
    mw_container_ref out;
    assert_int_equal(mw_procmap_lookup(m, max, &out), 0);
    assert_string_equal(out.cgroup, CG_B);
    assert_int_equal(mw_procmap_lookup(m, max + 1, &out), -1);
    /* At most 2^16 distinct cgroups. */
    mw_procmap_begin(m);
    mw_container_ref r = ref_a;
    for (int i = 0; i < 70000; i++) {
        snprintf(r.cgroup, sizeof(r.cgroup), "/system.slice/s%d.service", i);
        mw_procmap_set(m, i + 1, &r);
    }
    mw_procmap_end(m);
    assert_int_equal(mw_procmap_size(m), 65536);
    assert_int_equal(mw_procmap_lookup(m, 65536, &out), 0);
    assert_string_equal(out.cgroup, "/system.slice/s65535.service");
    /* Small walks after big ones: the table shrinks back. */
    for (int i = 0; i < 3; i++) {
        mw_procmap_begin(m);
        mw_procmap_set(m, 7, &ref_a);
        mw_procmap_end(m);
    }
    assert_int_equal(mw_procmap_size(m), 1);
    mw_procmap_free(m);
    mw_hostfs_close(&h);
}

typedef struct reader {
    mw_procmap *m;
    volatile int stop;
    atomic_long hits;
    long inconsistent;
} reader;

static void *read_loop(void *arg)
{
    reader *r = arg;
    mw_container_ref out;
    while (!r->stop) {
        for (int pid = 1; pid <= 64; pid++) {
            if (mw_procmap_lookup(r->m, pid, &out) != 0) continue;
            atomic_fetch_add(&r->hits, 1);
            /* Always a whole record of one walk, never a mix. */
            int a = strcmp(out.cgroup, CG_A) == 0 && strcmp(out.container, "trainer") == 0;
            int b = strcmp(out.cgroup, CG_B) == 0 && out.container[0] == '\0';
            if (!a && !b) r->inconsistent++;
        }
    }
    return NULL;
}

static void concurrent_lookups(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, tu_fixture("bare-vm")), 0);
    mw_procmap *m = mw_procmap_new(&h);
    reader r = {m, 0, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_loop, &r), 0);
    /* 2000 walks, and more until the reader has run at all: on a loaded
     * machine it may not have been scheduled before the 2000 were done. */
    for (int walk = 0; walk < 2000 || (atomic_load(&r.hits) == 0 && walk < 2000000); walk++) {
        mw_procmap_begin(m);
        for (int pid = 1; pid <= 64; pid++)
            mw_procmap_set(m, pid, (pid + walk) % 2 ? &ref_a : &ref_b);
        mw_procmap_end(m);
    }
    r.stop = 1;
    pthread_join(t, NULL);
    assert_int_equal(r.inconsistent, 0);
    assert_true(atomic_load(&r.hits) > 0);
    mw_procmap_free(m);
    mw_hostfs_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(walk_and_lookup, setup),
        cmocka_unit_test_setup(records_keep_every_field, setup),
        cmocka_unit_test_setup(fallback, setup),
        cmocka_unit_test_setup(bounds, setup),
        cmocka_unit_test_setup(concurrent_lookups, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
