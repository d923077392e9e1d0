/* test_hostinfo.c - conntrack, filefd, cpuinfo and osinfo: parsers and
 * collectors on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/cpuinfo.h"
#include "collect/filefd.h"
#include "collect/osinfo.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static void parses_file_nr(void **state)
{
    (void)state;
    uint64_t a, m;
    assert_int_equal(mw_parse_file_nr("1024\t0\t9223372036854775807\n", &a, &m), 0);
    assert_int_equal(a, 1024);
    assert_int_equal(m, 9223372036854775807ULL);
    assert_int_equal(mw_parse_file_nr("1 0 2", &a, &m), 0);
    assert_int_equal(m, 2);
    assert_int_equal(mw_parse_file_nr("1 0\n", &a, &m), -1);
    assert_int_equal(mw_parse_file_nr("1 0 2 3\n", &a, &m), -1);
    assert_int_equal(mw_parse_file_nr("1 -0 2\n", &a, &m), -1);
    assert_int_equal(mw_parse_file_nr("", &a, &m), -1);
}

static void parses_cpuinfo(void **state)
{
    (void)state;
    static const char x86[] = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n"
                              "model\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8468\n"
                              "stepping\t: 8\nmicrocode\t: 0x2b0004b1\nphysical id\t: 1\n"
                              "core id\t\t: 7\npower management:\n\n"
                              "processor\t: 1\nphysical id\t: 1\ncore id\t\t: 7\n\n"
                              "processor\t: 2\nphysical id\t: 0\ncore id\t\t: 7\n";
    mw_cpuinfo_cpu cpus[4];
    size_t n, pk, cores;
    assert_int_equal(mw_parse_cpuinfo(x86, cpus, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(cpus[0].vendor, "GenuineIntel");
    assert_string_equal(cpus[0].model_name, "Intel(R) Xeon(R) Platinum 8468");
    assert_string_equal(cpus[0].family, "6");
    assert_string_equal(cpus[0].model, "143");
    assert_string_equal(cpus[0].stepping, "8");
    assert_string_equal(cpus[0].microcode, "0x2b0004b1");
    assert_string_equal(cpus[0].package, "1");
    assert_string_equal(cpus[0].core, "7");
    assert_string_equal(cpus[1].vendor, "");
    mw_cpuinfo_topology(cpus, n, &pk, &cores);
    assert_int_equal(pk, 2);
    assert_int_equal(cores, 2); /* 1/7 twice (hyperthreads), 0/7 */

    /* arm64: a header line, no topology keys. */
    static const char arm[] = "Processor\t: AArch64 Processor rev 1 (aarch64)\n"
                              "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
                              "CPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
                              "processor\t: 1\nCPU implementer\t: 0x41\n\nHardware\t: x\n";
    assert_int_equal(mw_parse_cpuinfo(arm, cpus, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(cpus[0].vendor, "0x41");
    assert_string_equal(cpus[0].family, "8");
    assert_string_equal(cpus[0].model, "0xd0c");
    assert_string_equal(cpus[0].stepping, "1");
    assert_string_equal(cpus[0].package, "");
    mw_cpuinfo_topology(cpus, n, &pk, &cores);
    assert_int_equal(pk, 1);
    assert_int_equal(cores, 2);

    /* Malformed: no colon, a non-numeric or repeated processor, too many. */
    assert_int_equal(mw_parse_cpuinfo("processor: 0\nprocessor: 0\nprocessor: x\nbad line\n"
                                      "processor: 1\nprocessor: 2\nprocessor: 3\n",
                                      cpus, 2, &n),
                     4);
    assert_int_equal(n, 2);
    assert_string_equal(cpus[1].cpu, "1");
}

static void parses_os_release(void **state)
{
    (void)state;
    mw_os_release os;
    assert_int_equal(mw_parse_os_release("# comment\n\nNAME=\"Ubuntu\"\nID=ubuntu\n"
                                         "VERSION_ID='22.04'\n"
                                         "PRETTY_NAME=\"Say \\\"hi\\\" \\\\ \\$x\"\n",
                                         &os),
                     0);
    assert_string_equal(os.name, "Ubuntu");
    assert_string_equal(os.id, "ubuntu");
    assert_string_equal(os.version_id, "22.04");
    assert_string_equal(os.pretty_name, "Say \"hi\" \\ $x");
    assert_int_equal(
        mw_parse_os_release("NAME=\"open\nID=x y\"\nnot a pair\n=v\nVERSION_ID=1\n", &os),
        3); /* a bare value is taken as it is, blanks included */
    assert_string_equal(os.name, "");
    assert_string_equal(os.id, "x y\"");
    assert_string_equal(os.version_id, "1");
}

static void collects_fixtures(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "conntrack,filefd,cpuinfo,osinfo");
    mw_snapshot *snap = tu_run(s);
    assert_value(tu_value(snap, "mlwatch_conntrack_entries", MW_END), 117964);
    assert_value(tu_value(snap, "mlwatch_conntrack_entries_limit", MW_END), 131072);
    assert_value(tu_value(snap, "mlwatch_filefd_allocated", MW_END), 7616);
    assert_value(tu_value(snap, "mlwatch_filefd_maximum", MW_END), 1605398);
    assert_value(tu_value(snap, "mlwatch_cpu_info", "cpu", "3", "vendor", "GenuineIntel",
                          "model_name", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", "family",
                          "6", "model", "85", "stepping", "7", "microcode", "0x5003604", "package",
                          "0", "core", "1", MW_END),
                 1);
    assert_value(tu_value(snap, "mlwatch_cpu_threads", MW_END), 4);
    assert_value(tu_value(snap, "mlwatch_cpu_cores", MW_END), 2);
    assert_value(tu_value(snap, "mlwatch_cpu_physical_packages", MW_END), 1);
    assert_value(tu_value(snap, "mlwatch_os_info", "name", "CentOS Linux", "id", "centos",
                          "version_id", "7", "pretty_name", "CentOS Linux 7 (Core)", MW_END),
                 1);
    /* uname is the test host's own kernel, whatever the root. */
    struct utsname u;
    assert_int_equal(uname(&u), 0);
    const mw_family *f = mw_snapshot_find(snap, "mlwatch_uname_info");
    assert_non_null(f);
    assert_int_equal(f->nsamples, 1);
    int found = 0;
    for (uint32_t i = 0; i < f->first->nlabels; i++)
        if (strcmp(f->first->labels[i].name, "machine") == 0) {
            assert_string_equal(f->first->labels[i].value, u.machine);
            found = 1;
        }
    assert_true(found);
    assert_int_equal(tu_errors(s, "conntrack") + tu_errors(s, "filefd") + tu_errors(s, "cpuinfo") +
                         tu_errors(s, "osinfo"),
                     0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* No netfilter on rapl-cpufreq: conntrack is off, not failing. The
     * 192-CPU gpu-node: 2 packages, 96 cores; k8s-v2 has only usr/lib/os-release. */
    s = tu_open(tu_fixture("rapl-cpufreq"), "conntrack");
    snap = tu_run(s);
    assert_null(mw_snapshot_find(snap, "mlwatch_conntrack_entries"));
    assert_int_equal(tu_errors(s, "conntrack"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
    s = tu_open(tu_fixture("gpu-node"), "cpuinfo");
    snap = tu_run(s);
    assert_value(tu_value(snap, "mlwatch_cpu_threads", MW_END), 192);
    assert_value(tu_value(snap, "mlwatch_cpu_cores", MW_END), 96);
    assert_value(tu_value(snap, "mlwatch_cpu_physical_packages", MW_END), 2);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_info"), 192);
    assert_value(tu_value(snap, "mlwatch_cpu_info", "cpu", "144", "vendor", "GenuineIntel",
                          "model_name", "Intel(R) Xeon(R) Platinum 8468", "family", "6", "model",
                          "143", "stepping", "8", "microcode", "0x2b0004b1", "package", "1", "core",
                          "0", MW_END),
                 1);
    mw_snapshot_free(snap);
    tu_close(s);
    s = tu_open(tu_fixture("k8s-v2-systemd"), "osinfo");
    snap = tu_run(s);
    assert_value(tu_value(snap, "mlwatch_os_info", "name", "Ubuntu", "id", "ubuntu", "version_id",
                          "22.04", "pretty_name", "Ubuntu 22.04.4 LTS", MW_END),
                 1);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void bad_input_is_counted(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_write(root, "proc/sys/net/netfilter/nf_conntrack_max", "lots\n");
    tu_write(root, "proc/sys/fs/file-nr", "12 0\n");
    tu_write(root, "etc/os-release", "ID=debian\nbroken\n");
    tu_session *s = tu_open(root, "conntrack,filefd,cpuinfo,osinfo");
    mw_snapshot *snap = tu_run(s);
    assert_value(tu_value(snap, "mlwatch_conntrack_entries", MW_END), 12);
    assert_false(tu_has(snap, "mlwatch_conntrack_entries_limit", MW_END));
    assert_int_equal(tu_errors(s, "conntrack"), 1);
    assert_int_equal(tu_errors(s, "filefd"), 1);
    assert_int_equal(tu_errors(s, "osinfo"), 1);
    assert_value(tu_value(snap, "mlwatch_os_info", "name", "", "id", "debian", "version_id", "",
                          "pretty_name", "", MW_END),
                 1);
    assert_value(tu_value(snap, "mlwatch_cpu_threads", MW_END), 2);
    mw_snapshot_free(snap);
    /* cpuinfo is cached for 60 s: a change is not seen on the next cycle. */
    tu_write(root, "proc/cpuinfo", "processor\t: 0\n");
    tu_remove(root, "proc/sys/net/netfilter/nf_conntrack_count");
    snap = tu_run(s);
    assert_value(tu_value(snap, "mlwatch_cpu_threads", MW_END), 2);
    assert_int_equal(tu_errors(s, "conntrack"), 3);
    assert_int_equal(tu_errors(s, "osinfo"), 1); /* counted once: read at init only */
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_file_nr),       cmocka_unit_test(parses_cpuinfo),
        cmocka_unit_test(parses_os_release),    cmocka_unit_test(collects_fixtures),
        cmocka_unit_test(bad_input_is_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
