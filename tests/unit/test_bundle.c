/* test_bundle.c - container names from the runtimes' OCI bundles (bundle.h)
 * and the order the cgroup collector takes names in: the runtime's bundle,
 * then /var/log/containers links, then /var/log/pods, on copies of the
 * k8s-v2-systemd fixture with bundles written into it, with logs only, and
 * with neither. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/bundle.h"
#include "collect/procmap.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R2(x) x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x /* 32 times */
#define A1 R2("a1") /* pytorch-train-0's trainer (containerd) */
#define A0 R2("a0") /* pytorch-train-0's sandbox */
#define D1 R2("d1") /* triton-server-7d9f8's server (CRI-O) */
#define D0 R2("d0") /* triton-server-7d9f8's sandbox */

#define CONTAINERD "run/containerd/io.containerd.runtime.v2.task/k8s.io/"
#define CRIO "var/lib/containers/storage/overlay-containers/"
#define POD_LOGS "var/log/pods/ml-team_pytorch-train-0_aaaaaaaa-0000-4000-8000-000000000001"

#define END ((const char *)NULL)
#define V(name, ...) tu_value(snap, name, __VA_ARGS__, END)
#define INFO "mlwatch_container_info"

/* --- the annotations parser ------------------------------------------------ */

static void parse_containerd(void **state)
{
    (void)state;
    mw_bundle_names b;
    const char *err = NULL;
    const char *ctr = "{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"python\"]},"
                      "\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
                      "\"io.kubernetes.cri.container-name\":\"trainer\","
                      "\"io.kubernetes.cri.sandbox-name\":\"pytorch-train-0\","
                      "\"io.kubernetes.cri.sandbox-namespace\":\"ml-team\"}}";
    assert_int_equal(mw_bundle_parse(ctr, strlen(ctr), &b, &err), 1);
    assert_int_equal(b.sandbox, 0);
    assert_string_equal(b.namespace_, "ml-team");
    assert_string_equal(b.pod, "pytorch-train-0");
    assert_string_equal(b.container, "trainer");

    const char *sandbox = "{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
                          "\"io.kubernetes.cri.sandbox-name\":\"pytorch-train-0\","
                          "\"io.kubernetes.cri.sandbox-namespace\":\"ml-team\"}}";
    assert_int_equal(mw_bundle_parse(sandbox, strlen(sandbox), &b, &err), 1);
    assert_int_equal(b.sandbox, 1);
    assert_string_equal(b.pod, "pytorch-train-0");
    assert_string_equal(b.container, "");
}

static void parse_crio(void **state)
{
    (void)state;
    mw_bundle_names b;
    const char *err = NULL;
    const char *ctr = "{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"container\","
                      "\"io.kubernetes.container.name\":\"server\","
                      "\"io.kubernetes.pod.name\":\"triton-server-7d9f8\","
                      "\"io.kubernetes.pod.namespace\":\"inference\"}}";
    assert_int_equal(mw_bundle_parse(ctr, strlen(ctr), &b, &err), 1);
    assert_int_equal(b.sandbox, 0);
    assert_string_equal(b.namespace_, "inference");
    assert_string_equal(b.pod, "triton-server-7d9f8");
    assert_string_equal(b.container, "server");

    const char *sandbox = "{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"sandbox\","
                          "\"io.kubernetes.container.name\":\"POD\","
                          "\"io.kubernetes.pod.name\":\"triton-server-7d9f8\","
                          "\"io.kubernetes.pod.namespace\":\"inference\"}}";
    assert_int_equal(mw_bundle_parse(sandbox, strlen(sandbox), &b, &err), 1);
    assert_int_equal(b.sandbox, 1);
    assert_string_equal(b.container, ""); /* a sandbox has no container name */
}

static void parse_not_kubernetes_or_malformed(void **state)
{
    (void)state;
    mw_bundle_names b;
    const char *err = NULL;
    const char *none = "{\"ociVersion\":\"1.1.0\",\"annotations\":{\"org.example\":\"x\"}}";
    assert_int_equal(mw_bundle_parse(none, strlen(none), &b, &err), 0);
    assert_string_equal(b.pod, "");
    const char *bare = "{\"ociVersion\":\"1.1.0\"}";
    assert_int_equal(mw_bundle_parse(bare, strlen(bare), &b, &err), 0);

    const char *truncated = "{\"annotations\":{\"io.kubernetes.cri.container-type\":";
    assert_int_equal(mw_bundle_parse(truncated, strlen(truncated), &b, &err), -1);
    assert_string_equal(err, "not a JSON object");
    const char *array = "[1,2]";
    assert_int_equal(mw_bundle_parse(array, strlen(array), &b, &err), -1);
    const char *wrong = "{\"annotations\":[\"io.kubernetes.cri.container-type\"]}";
    assert_int_equal(mw_bundle_parse(wrong, strlen(wrong), &b, &err), -1);
    assert_string_equal(err, "annotations is not an object");
    const char *number = "{\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
                         "\"io.kubernetes.cri.sandbox-name\":7}}";
    assert_int_equal(mw_bundle_parse(number, strlen(number), &b, &err), -1);
    assert_string_equal(err, "a Kubernetes annotation is not a string");
    assert_string_equal(b.pod, "");
}

/* --- names on a node --------------------------------------------------------- */

static void write_containerd(const char *root, const char *id, const char *type, const char *ctr,
                             const char *pod, const char *ns)
{
    char rel[256], json[1024];
    snprintf(rel, sizeof(rel), CONTAINERD "%s/config.json", id);
    snprintf(json, sizeof(json),
             "{\"ociVersion\":\"1.1.0\",\"annotations\":{"
             "\"io.kubernetes.cri.container-type\":\"%s\",%s%s%s"
             "\"io.kubernetes.cri.sandbox-name\":\"%s\","
             "\"io.kubernetes.cri.sandbox-namespace\":\"%s\"}}",
             type, ctr ? "\"io.kubernetes.cri.container-name\":\"" : "", ctr ? ctr : "",
             ctr ? "\"," : "", pod, ns);
    tu_write(root, rel, json);
}

static void write_crio(const char *root, const char *id, const char *type, const char *ctr,
                       const char *pod, const char *ns)
{
    char rel[256], json[1024];
    snprintf(rel, sizeof(rel), CRIO "%s/userdata/config.json", id);
    snprintf(json, sizeof(json),
             "{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"%s\","
             "\"io.kubernetes.container.name\":\"%s\",\"io.kubernetes.pod.name\":\"%s\","
             "\"io.kubernetes.pod.namespace\":\"%s\"}}",
             type, ctr, pod, ns);
    tu_write(root, rel, json);
}

/* Bundles only (no kubelet logs at all): every name from the runtimes. */
static void names_from_bundles(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_remove(root, "var/log");
    write_containerd(root, A1, "container", "trainer", "pytorch-train-0", "ml-team");
    write_containerd(root, A0, "sandbox", NULL, "pytorch-train-0", "ml-team");
    write_crio(root, D1, "container", "server", "triton-server-7d9f8", "inference");
    write_crio(root, D0, "sandbox", "POD", "triton-server-7d9f8", "inference");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "trainer",
                  "container_id", A1) == 1);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "POD",
                  "container_id", A0) == 1);
    assert_true(V(INFO, "namespace", "inference", "pod", "triton-server-7d9f8", "container",
                  "server", "container_id", D1) == 1);
    assert_true(V(INFO, "namespace", "inference", "pod", "triton-server-7d9f8", "container", "POD",
                  "container_id", D0) == 1);
    mw_snapshot_free(snap);
    mw_container_ref ref;
    assert_int_equal(mw_procmap_lookup(tu_procmap(s), 1001, &ref), 0);
    assert_string_equal(ref.container, "trainer");
    tu_close(s);
    tu_cleanup();
}

/* The bundle wins over a log link that says otherwise. */
static void bundle_before_links(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    write_containerd(root, A1, "container", "main", "pytorch-train-0", "ml-team");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "main",
                  "container_id", A1) == 1);
    assert_false(tu_has(snap, INFO, "container", "trainer", "container_id", A1, END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

/* /var/log/pods without links: the pod's one container folder names the
 * cgroup that is not the sandbox by its bundle; without that bundle neither
 * cgroup can be told apart, and neither is called POD. */
static void names_from_pod_logs(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_remove(root, "var/log/containers");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "",
                  "container_id", A1) == 1);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "",
                  "container_id", A0) == 1);
    assert_false(tu_has(snap, INFO, "container", "POD", END));
    mw_snapshot_free(snap);
    tu_close(s);

    write_containerd(root, A0, "sandbox", NULL, "pytorch-train-0", "ml-team");
    s = tu_open(root, "cgroup");
    snap = tu_run(s);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "trainer",
                  "container_id", A1) == 1);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "POD",
                  "container_id", A0) == 1);
    mw_snapshot_free(snap);
    mw_container_ref ref;
    assert_int_equal(mw_procmap_lookup(tu_procmap(s), 1001, &ref), 0);
    assert_string_equal(ref.container, "trainer"); /* the process map in the same cycle */
    tu_close(s);
    tu_cleanup();
}

/* Neither bundles nor logs: IDs only, no name guessed. */
static void names_from_nothing(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_remove(root, "var/log");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    assert_true(V(INFO, "namespace", "", "pod", "", "container", "", "container_id", A1) == 1);
    assert_true(V(INFO, "namespace", "", "pod", "", "container", "", "container_id", A0) == 1);
    assert_false(tu_has(snap, INFO, "container", "POD", END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

/* A malformed or oversized config.json: one counted error (not one per
 * cycle), the container keeps its ID and takes its names from the logs. */
static void broken_bundles(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_write(root, CONTAINERD A1 "/config.json", "{\"annotations\":{\"io.kubernetes.cri.contai");
    size_t big = MW_BUNDLE_MAX + 1;
    char *text = malloc(big + 1);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    text[big] = '\0';
    tu_write(root, CRIO D1 "/userdata/config.json", text);
    free(text);
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 2);
    assert_true(V(INFO, "namespace", "ml-team", "pod", "pytorch-train-0", "container", "trainer",
                  "container_id", A1) == 1);
    assert_true(V(INFO, "namespace", "inference", "pod", "triton-server-7d9f8", "container",
                  "server", "container_id", D1) == 1);
    mw_snapshot_free(snap);
    for (int i = 0; i < 3; i++)
        mw_snapshot_free(tu_run(s));
    assert_int_equal(tu_errors(s, "cgroup"), 2);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_containerd),
        cmocka_unit_test(parse_crio),
        cmocka_unit_test(parse_not_kubernetes_or_malformed),
        cmocka_unit_test(names_from_bundles),
        cmocka_unit_test(bundle_before_links),
        cmocka_unit_test(names_from_pod_logs),
        cmocka_unit_test(names_from_nothing),
        cmocka_unit_test(broken_bundles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
