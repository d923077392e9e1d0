/* test_pods.c - the /var/log/pods and /var/log/containers names index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/pods.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ID64 "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1"

static void pod_dir_names(void **state)
{
    (void)state;
    mw_pod_info p;
    assert_int_equal(
        mw_parse_pod_log_dir("ml-team_pytorch-train-0_aaaaaaaa-0000-4000-8000-000000000001", &p),
        0);
    assert_string_equal(p.namespace_, "ml-team");
    assert_string_equal(p.name, "pytorch-train-0");
    assert_string_equal(p.uid, "aaaaaaaa-0000-4000-8000-000000000001");
    /* Pod names are DNS subdomains (dots allowed); static pod UIDs are hashes. */
    assert_int_equal(mw_parse_pod_log_dir(
                         "kube-system_etcd-node1.example.com_0123456789abcdef0123456789abcdef", &p),
                     0);
    assert_string_equal(p.name, "etcd-node1.example.com");
    assert_string_equal(p.uid, "0123456789abcdef0123456789abcdef");

    const char *bad[] = {
        "",
        "nounderscore",
        "ns_pod",
        "ns_pod_uid_extra-0000",
        "_pod_aaaaaaaa-0000",
        "ns__aaaaaaaa-0000",
        "ns_pod_",
        "NS_pod_aaaaaaaa-0000",                                  /* upper case */
        "ns_pod_AAAAAAAA-0000",                                  /* upper-case UID */
        "n.s_pod_aaaaaaaa-0000",                                 /* a namespace has no dots */
        "ns_pod_aaaa",                                           /* UID too short */
        "ns_pod_aaaaaaaa-0000-4000-8000-000000000001-0000-0000", /* too long */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (mw_parse_pod_log_dir(bad[i], &p) == 0) fail_msg("accepted '%s'", bad[i]);
}

static void container_link_names(void **state)
{
    (void)state;
    mw_ctr_info c;
    assert_int_equal(
        mw_parse_container_log_name("jupyter-alice_research_git-sync-" ID64 ".log", &c), 0);
    assert_string_equal(c.pod, "jupyter-alice");
    assert_string_equal(c.namespace_, "research");
    assert_string_equal(c.name, "git-sync"); /* a name with '-': split at the last one */
    assert_string_equal(c.id, ID64);
    assert_int_equal(
        mw_parse_container_log_name("etcd-n1.example.com_kube-system_etcd-" ID64 ".log", &c), 0);
    assert_string_equal(c.pod, "etcd-n1.example.com");

    const char *bad[] = {
        "",
        ".log",
        "pod_ns_c-" ID64,          /* no .log */
        "pod_ns_c-" ID64 ".log.1", /* rotated */
        "pod_ns_c" ID64 ".log",    /* no '-' before the ID */
        "pod_ns_c-xyz.log",        /* not hex */
        "pod_ns_c-abc.log",        /* ID too short */
        "pod_ns_c_d-" ID64 ".log", /* '_' in the container name */
        "pod_ns-" ID64 ".log",     /* two fields */
        "pod_ns_-" ID64 ".log",    /* empty container name */
        "pod_NS_c-" ID64 ".log",   /* upper case */
        "pod_ns_c-" ID64 "00.log", /* ID longer than 64 */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (mw_parse_container_log_name(bad[i], &c) == 0) fail_msg("accepted '%s'", bad[i]);
}

static void scan_fixture(void **state)
{
    (void)state;
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, tu_fixture("k8s-v2-systemd")), 0);
    mw_pods *p = mw_pods_new();
    assert_null(mw_pods_find_pod(p, "aaaaaaaa-0000-4000-8000-000000000001")); /* not scanned */
    assert_int_equal(mw_pods_generation(p), 0);
    mw_pods_error err;
    assert_int_equal(mw_pods_scan(p, &h, &err), 0);
    assert_int_equal(mw_pods_generation(p), 1);
    assert_int_equal(mw_pods_npods(p), 4);
    assert_int_equal(mw_pods_ncontainers(p), 6); /* five running and one exited notebook */

    const mw_pod_info *pod = mw_pods_find_pod(p, "aaaaaaaa-0000-4000-8000-000000000002");
    assert_non_null(pod);
    assert_string_equal(pod->namespace_, "research");
    assert_string_equal(pod->name, "jupyter-alice");
    assert_null(mw_pods_find_pod(p, "aaaaaaaa-0000-4000-8000-000000000005"));

    const mw_ctr_info *c = mw_pods_find_container(p, ID64);
    assert_non_null(c);
    assert_string_equal(c->name, "notebook");
    assert_string_equal(c->pod, "jupyter-alice");
    assert_string_equal(c->namespace_, "research");
    assert_null(mw_pods_find_container(p, "a0a0a0a0"));

    /* Rescans rebuild (no duplicates) and bump the generation. */
    assert_int_equal(mw_pods_scan(p, &h, NULL), 0);
    assert_int_equal(mw_pods_generation(p), 2);
    assert_int_equal(mw_pods_npods(p), 4);
    mw_pods_free(p);
    mw_hostfs_close(&h);
}

static void scan_changes_and_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    mw_pods *p = mw_pods_new();

    /* No kubelet: empty, not an error. */
    assert_int_equal(mw_pods_scan(p, &h, NULL), 0);
    assert_int_equal(mw_pods_npods(p) + mw_pods_ncontainers(p), 0);

    /* Stray entries are skipped; links are never followed (this one points
     * at a file of the machine running the test). */
    tu_write(root, "var/log/pods/ns_pod-a_aaaaaaaa-0000-4000-8000-00000000000a/c/0.log", "");
    tu_write(root, "var/log/pods/README", "not a pod\n");
    tu_write(root, "var/log/pods/not_a_pod_dir/x", "");
    tu_write(root, "var/log/containers/notes.txt", "");
    char link[2048];
    snprintf(link, sizeof(link), "%s/var/log/containers/pod-a_ns_c-" ID64 ".log", root);
    assert_int_equal(symlink("/etc/hostname", link), 0);
    snprintf(link, sizeof(link), "%s/var/log/containers/pod-b_ns_c-dangling-" ID64 ".log", root);
    assert_int_equal(symlink("/nonexistent/0.log", link), 0);
    assert_int_equal(mw_pods_scan(p, &h, NULL), 0);
    assert_int_equal(mw_pods_npods(p), 1);
    assert_int_equal(mw_pods_ncontainers(p), 2);
    assert_string_equal(mw_pods_find_container(p, ID64)->name, "c");

    /* A pod goes away. */
    tu_remove(root, "var/log/pods/ns_pod-a_aaaaaaaa-0000-4000-8000-00000000000a");
    assert_int_equal(mw_pods_scan(p, &h, NULL), 0);
    assert_null(mw_pods_find_pod(p, "aaaaaaaa-0000-4000-8000-00000000000a"));

    /* Unreadable: var/log/pods is a file. Reported, the rest still indexed. */
    tu_remove(root, "var/log/pods");
    tu_write(root, "var/log/pods", "");
    mw_pods_error err;
    assert_int_equal(mw_pods_scan(p, &h, &err), -1);
    assert_string_equal(err.path, "var/log/pods");
    assert_true(err.err < 0);
    assert_int_equal(mw_pods_ncontainers(p), 2);

    mw_pods_free(p);
    mw_hostfs_close(&h);
    tu_cleanup();
}

static void many_entries(void **state)
{
    (void)state;
    /* Growth of the tables past their first sizes. */
    const char *root = tu_fixture_copy("bare-vm");
    char path[4096];
    const char *dirs[] = {"var", "var/log", "var/log/pods", "var/log/containers"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
        assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
    }
    for (int i = 1000; i < 3000; i++) {
        snprintf(path, sizeof(path), "%s/var/log/pods/ns_p%d_aaaaaaaa-0000-4000-8000-00000000%d",
                 root, i, i);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/var/log/containers/p%d_ns_c-%064x.log", root, i, i);
        assert_int_equal(symlink("/x", path), 0);
    }
    mw_hostfs h;
    assert_int_equal(mw_hostfs_open(&h, root), 0);
    mw_pods *p = mw_pods_new();
    assert_int_equal(mw_pods_scan(p, &h, NULL), 0);
    assert_int_equal(mw_pods_npods(p), 2000);
    assert_int_equal(mw_pods_ncontainers(p), 2000);
    const mw_pod_info *pod = mw_pods_find_pod(p, "aaaaaaaa-0000-4000-8000-000000002345");
    assert_non_null(pod);
    assert_string_equal(pod->name, "p2345");
    char id[65];
    snprintf(id, sizeof(id), "%064x", 1999);
    assert_string_equal(mw_pods_find_container(p, id)->pod, "p1999");
    mw_pods_free(p);
    mw_hostfs_close(&h);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pod_dir_names), cmocka_unit_test(container_link_names),
        cmocka_unit_test(scan_fixture),  cmocka_unit_test(scan_changes_and_errors),
        cmocka_unit_test(many_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
