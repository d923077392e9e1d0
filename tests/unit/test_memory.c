/* test_memory.c - /proc/meminfo parsing and the memory collector. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/memory.h"
#include "testutil.h"

#include <string.h>

#define KIB(n) ((double)(n)*1024.0)

static uint64_t val(const mw_meminfo *m, const char *key)
{
    int i = mw_meminfo_field(key);
    assert_true(i >= 0);
    assert_true(m->present & (1ULL << i));
    return m->value[i];
}

static int has(const mw_meminfo *m, const char *key)
{
    int i = mw_meminfo_field(key);
    return i >= 0 && (m->present & (1ULL << i)) != 0;
}

static void parses_fields(void **state)
{
    (void)state;
    mw_meminfo m;
    assert_int_equal(mw_parse_meminfo("MemTotal:       16384 kB\n"
                                      "MemFree:\t\t1024 kB\n"
                                      "Active(anon):       2 kB\n"
                                      "FutureField:     123 kB\n" /* unknown: skipped */
                                      "HugePages_Total:     512\n"
                                      "HugePages_Surp:        0\n"
                                      "Hugepagesize:       2048 kB\n"
                                      "DirectMap1G:    1048576 kB\n",
                                      &m),
                     0);
    assert_int_equal(m.malformed, 0);
    assert_int_equal(val(&m, "MemTotal"), 16384ULL * 1024);
    assert_int_equal(val(&m, "MemFree"), 1024ULL * 1024);
    assert_int_equal(val(&m, "Active(anon)"), 2048);
    assert_int_equal(val(&m, "HugePages_Total"), 512);
    assert_int_equal(val(&m, "HugePages_Surp"), 0);
    assert_int_equal(val(&m, "Hugepagesize"), 2097152);
    assert_int_equal(val(&m, "DirectMap1G"), 1ULL << 30);
    assert_false(has(&m, "MemAvailable"));
    assert_int_equal(mw_meminfo_field("FutureField"), -1);
    assert_true(mw_meminfo_field("Active") >= 0);
    assert_true(mw_meminfo_field("Active") != mw_meminfo_field("Active(anon)"));
    assert_int_equal(mw_meminfo_field("Activ"), -1);
    assert_int_equal(mw_meminfo_field("Active(anon)x"), -1);
}

static void rejects_malformed(void **state)
{
    (void)state;
    mw_meminfo m;
    assert_int_equal(mw_parse_meminfo("", &m), -1);
    assert_int_equal(mw_parse_meminfo("MemFree: 1 kB\n", &m), -1); /* no MemTotal */
    assert_int_equal(mw_parse_meminfo("MemTotal: 1 kB", &m), -1);  /* cut */
    assert_int_equal(mw_parse_meminfo("MemTotal: 1 kB\n"
                                      "MemFree: 1\n"                  /* no unit */
                                      "Buffers: x kB\n"               /* not a number */
                                      "Cached: 2 MB\n"                /* wrong unit */
                                      "MemTotal: 9 kB\n"              /* repeated */
                                      "HugePages_Free: 3 kB\n"        /* a count has no unit */
                                      "no colon here\n"               /* not a field line */
                                      "Dirty: 99999999999999999 kB\n" /* overflows in bytes */
                                      "Shmem: 5 kB extra\n"           /* trailing junk */
                                      "Mapped: 7 kB\n"                /* fine */
                                      "SwapFree:   12",               /* cut */
                                      &m),
                     0);
    assert_int_equal(m.malformed, 9);
    assert_int_equal(val(&m, "MemTotal"), 1024);
    assert_int_equal(val(&m, "Mapped"), 7 * 1024);
    assert_false(has(&m, "MemFree"));
    assert_false(has(&m, "SwapFree"));
}

static double mem(const mw_snapshot *snap, const char *name)
{
    return tu_value(snap, name, MW_END);
}

static void collects_from_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "memory");
    mw_snapshot *snap = tu_run(s);
    assert_true(mem(snap, "mlwatch_memory_total_bytes") == KIB(131825120));
    assert_true(mem(snap, "mlwatch_memory_free_bytes") == KIB(85802368));
    assert_true(mem(snap, "mlwatch_memory_available_bytes") == KIB(110234567));
    assert_true(mem(snap, "mlwatch_memory_buffers_bytes") == KIB(456789));
    assert_true(mem(snap, "mlwatch_memory_cached_bytes") == KIB(20345678));
    assert_true(mem(snap, "mlwatch_memory_swap_cached_bytes") == KIB(1234));
    assert_true(mem(snap, "mlwatch_memory_active_bytes") == KIB(15234567));
    assert_true(mem(snap, "mlwatch_memory_active_anon_bytes") == KIB(5123456));
    assert_true(mem(snap, "mlwatch_memory_inactive_file_bytes") == KIB(10000000));
    assert_true(mem(snap, "mlwatch_memory_swap_total_bytes") == KIB(8388604));
    assert_true(mem(snap, "mlwatch_memory_slab_bytes") == KIB(3456789));
    assert_true(mem(snap, "mlwatch_memory_commit_limit_bytes") == KIB(73252588));
    assert_true(mem(snap, "mlwatch_memory_committed_as_bytes") == KIB(23456789));
    assert_true(mem(snap, "mlwatch_memory_vmalloc_total_bytes") == KIB(34359738367));
    assert_true(mem(snap, "mlwatch_memory_anon_huge_pages_bytes") == KIB(2097152));
    assert_true(mem(snap, "mlwatch_memory_huge_pages") == 1024);
    assert_true(mem(snap, "mlwatch_memory_huge_pages_free") == 512);
    assert_true(mem(snap, "mlwatch_memory_huge_pages_reserved") == 16);
    assert_true(mem(snap, "mlwatch_memory_huge_pages_surplus") == 0);
    assert_true(mem(snap, "mlwatch_memory_huge_page_size_bytes") == 2097152);
    assert_true(mem(snap, "mlwatch_memory_hugetlb_bytes") == 2147483648.0);
    assert_true(mem(snap, "mlwatch_memory_direct_map_4k_bytes") == KIB(1234944));
    assert_true(mem(snap, "mlwatch_memory_direct_map_2m_bytes") == KIB(45613056));
    assert_true(mem(snap, "mlwatch_memory_direct_map_1g_bytes") == KIB(89128960));
    assert_true(mem(snap, "mlwatch_memory_cma_total_bytes") == 0);
    /* Every field of the file is known: 56 families, one sample each. */
    size_t n = 0;
    for (const mw_family *f = snap->first; f; f = f->next)
        if (strncmp(f->desc->name, "mlwatch_memory_", 15) == 0) {
            assert_int_equal(f->nsamples, 1);
            n++;
        }
    assert_int_equal(n, 56);
    assert_int_equal(tu_errors(s, "memory"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* An older kernel (5.4): no Zswap, SecPageTables, Hugetlb, CMA. */
    s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "memory");
    snap = tu_run(s);
    assert_true(mem(snap, "mlwatch_memory_total_bytes") == KIB(16371396));
    assert_true(mem(snap, "mlwatch_memory_free_bytes") == KIB(3456789));
    assert_true(mem(snap, "mlwatch_memory_available_bytes") == KIB(3456789 + 5234567));
    assert_false(tu_has(snap, "mlwatch_memory_zswap_bytes", MW_END));
    assert_false(tu_has(snap, "mlwatch_memory_secondary_page_tables_bytes", MW_END));
    assert_false(tu_has(snap, "mlwatch_memory_hugetlb_bytes", MW_END));
    assert_false(tu_has(snap, "mlwatch_memory_cma_free_bytes", MW_END));
    assert_int_equal(tu_errors(s, "memory"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void counts_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_session *s = tu_open(root, "memory");
    mw_snapshot *snap = tu_run(s);
    assert_true(mem(snap, "mlwatch_memory_total_bytes") == KIB(4013036));
    assert_true(mem(snap, "mlwatch_memory_swap_total_bytes") == 0);
    assert_int_equal(tu_errors(s, "memory"), 0);
    mw_snapshot_free(snap);

    /* Fields the table does not know: skipped without error. */
    tu_write(root, "proc/meminfo",
             "MemTotal:        4013036 kB\nMemFree:         2123456 kB\n"
             "ShinyNewField:        12 kB\nDirectMap4M:        4096 kB\n");
    snap = tu_run(s);
    assert_true(mem(snap, "mlwatch_memory_free_bytes") == KIB(2123456));
    assert_int_equal(tu_errors(s, "memory"), 0);
    mw_snapshot_free(snap);

    /* Truncated: one error, the complete lines still reported. */
    tu_write(root, "proc/meminfo",
             "MemTotal:        4013036 kB\nMemFree:         2123456 kB\nMemAvailable:    32");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "memory"), 1);
    assert_true(mem(snap, "mlwatch_memory_free_bytes") == KIB(2123456));
    assert_false(tu_has(snap, "mlwatch_memory_available_bytes", MW_END));
    mw_snapshot_free(snap);

    /* A malformed line: one error, the others reported. */
    tu_write(root, "proc/meminfo",
             "MemTotal:        4013036 kB\nMemFree:         lots kB\nBuffers:   45678 kB\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "memory"), 2);
    assert_true(mem(snap, "mlwatch_memory_buffers_bytes") == KIB(45678));
    assert_false(tu_has(snap, "mlwatch_memory_free_bytes", MW_END));
    mw_snapshot_free(snap);

    /* No MemTotal: not a meminfo file, nothing reported. */
    tu_write(root, "proc/meminfo", "MemFree:         2123456 kB\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "memory"), 3);
    assert_false(tu_has(snap, "mlwatch_memory_free_bytes", MW_END));
    mw_snapshot_free(snap);

    tu_remove(root, "proc/meminfo");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "memory"), 4);
    assert_true(tu_value(snap, "mlwatch_collector_errors_total", "collector", "memory", MW_END) ==
                4);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_fields),
        cmocka_unit_test(rejects_malformed),
        cmocka_unit_test(collects_from_fixture),
        cmocka_unit_test(counts_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
