/* test_cgroup_path.c - classification of cgroup paths (every form in
 * cgroup_path.h) and the /proc/<pid>/cgroup parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/cgroup_path.h"

#include <stdio.h>
#include <string.h>

#define UID "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
#define UIDU "0b1c2d3e_4f50_4a6b_8c7d_9e0f1a2b3c4d"
#define ID "4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f"

typedef struct row {
    const char *path;
    mw_cg_kind kind;
    mw_cg_qos qos;
    mw_cg_runtime runtime;
    const char *uid; /* expected pod UID ("" none) */
    const char *id;  /* expected container ID ("" none) */
} row;

static const row ROWS[] = {
    /* systemd driver (v1 and v2), containerd */
    {"/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-" ID ".scope", MW_CG_K8S_CONTAINER,
     MW_QOS_GUARANTEED, MW_RT_CONTAINERD, UID, ID},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
     ".slice/cri-containerd-" ID ".scope",
     MW_CG_K8S_CONTAINER, MW_QOS_BURSTABLE, MW_RT_CONTAINERD, UID, ID},
    {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
     ".slice/cri-containerd-" ID ".scope",
     MW_CG_K8S_CONTAINER, MW_QOS_BESTEFFORT, MW_RT_CONTAINERD, UID, ID},
    /* CRI-O and Docker (cri-dockerd) with the systemd driver */
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice/crio-" ID
     ".scope",
     MW_CG_K8S_CONTAINER, MW_QOS_BURSTABLE, MW_RT_CRIO, UID, ID},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice/crio-conmon-" ID
     ".scope",
     MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods.slice/kubepods-pod" UIDU ".slice/docker-" ID ".scope", MW_CG_K8S_CONTAINER,
     MW_QOS_GUARANTEED, MW_RT_DOCKER, UID, ID},
    /* cgroupfs driver */
    {"/kubepods/burstable/pod" UID "/" ID, MW_CG_K8S_CONTAINER, MW_QOS_BURSTABLE, MW_RT_NONE, UID,
     ID},
    {"/kubepods/pod" UID "/" ID, MW_CG_K8S_CONTAINER, MW_QOS_GUARANTEED, MW_RT_NONE, UID, ID},
    {"/kubepods/besteffort/pod" UID "/crio-" ID, MW_CG_K8S_CONTAINER, MW_QOS_BESTEFFORT, MW_RT_CRIO,
     UID, ID},
    {"/kubepods/besteffort/pod" UID "/crio-conmon-" ID, MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "",
     ""},
    /* static (mirror) pods: the UID is a 32-hex hash */
    {"/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod0123456789abcdef0123456789abcdef.slice/cri-containerd-" ID ".scope",
     MW_CG_K8S_CONTAINER, MW_QOS_BURSTABLE, MW_RT_CONTAINERD, "0123456789abcdef0123456789abcdef",
     ID},
    /* kubepods nested under another parent (kind, kubelet in a slice) */
    {"/kubelet.slice/kubelet-kubepods.slice/kubepods.slice/kubepods-pod" UIDU
     ".slice/cri-containerd-" ID ".scope",
     MW_CG_K8S_CONTAINER, MW_QOS_GUARANTEED, MW_RT_CONTAINERD, UID, ID},
    {"/kubelet/kubepods/burstable/pod" UID "/" ID, MW_CG_K8S_CONTAINER, MW_QOS_BURSTABLE,
     MW_RT_NONE, UID, ID},
    /* intermediate levels */
    {"/", MW_CG_GROUP, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods.slice", MW_CG_KUBEPODS, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods", MW_CG_KUBEPODS, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods.slice/kubepods-burstable.slice", MW_CG_K8S_QOS, MW_QOS_BURSTABLE, MW_RT_NONE, "",
     ""},
    {"/kubepods/besteffort", MW_CG_K8S_QOS, MW_QOS_BESTEFFORT, MW_RT_NONE, "", ""},
    {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU ".slice",
     MW_CG_K8S_POD, MW_QOS_BESTEFFORT, MW_RT_NONE, UID, ""},
    {"/kubepods/pod" UID, MW_CG_K8S_POD, MW_QOS_GUARANTEED, MW_RT_NONE, UID, ""},
    {"/system.slice", MW_CG_GROUP, MW_QOS_NONE, MW_RT_NONE, "", ""},
    /* below a container: not walked */
    {"/kubepods/pod" UID "/" ID "/nested", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    /* malformed Kubernetes names */
    {"/kubepods/pod" UID "/" ID "0", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods/pod" UID "/abc", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods/podxyz/" ID, MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" UIDU ".slice", MW_CG_IGNORE,
     MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-XYZ.scope", MW_CG_IGNORE,
     MW_QOS_NONE, MW_RT_NONE, "", ""},
    /* outside Kubernetes */
    {"/system.slice/kubelet.service", MW_CG_SERVICE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/user.slice/user-1000.slice/user@1000.service", MW_CG_SERVICE, MW_QOS_NONE, MW_RT_NONE, "",
     ""},
    {"/system.slice/docker-" ID ".scope", MW_CG_DOCKER, MW_QOS_NONE, MW_RT_DOCKER, "", ID},
    {"/docker/" ID, MW_CG_DOCKER, MW_QOS_NONE, MW_RT_DOCKER, "", ID},
    {"/docker/not-an-id", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/system.slice/slurmstepd.scope/job_42", MW_CG_SLURM_JOB, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/system.slice/node7_slurmstepd.scope/job_42", MW_CG_SLURM_JOB, MW_QOS_NONE, MW_RT_NONE, "",
     ""},
    {"/system.slice/slurmstepd.scope/system", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/system.slice/slurmstepd.scope/job_42/step_0", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/slurm/uid_1000/job_7", MW_CG_SLURM_JOB, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/slurm/uid_1000", MW_CG_SLURM_UID, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/slurm/uid_x/job_7", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    /* scopes and other units are not walked or reported */
    {"/user.slice/user-1000.slice/session-3.scope", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/init.scope", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/system.slice/kubelet.service/child", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    {"/sys-fs-fuse-connections.mount", MW_CG_IGNORE, MW_QOS_NONE, MW_RT_NONE, "", ""},
    /* empty components are skipped */
    {"//system.slice//kubelet.service/", MW_CG_SERVICE, MW_QOS_NONE, MW_RT_NONE, "", ""},
};

static void path_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(ROWS) / sizeof(ROWS[0]); i++) {
        const row *r = &ROWS[i];
        mw_cg_node n;
        mw_cg_kind k = mw_cg_parse_path(r->path, &n);
        if (k != r->kind || n.kind != r->kind || n.qos != r->qos || n.runtime != r->runtime ||
            strcmp(n.pod_uid, r->uid) != 0 || strcmp(n.id, r->id) != 0)
            fail_msg("row %zu %s: kind %d qos %d runtime %d uid '%s' id '%s'", i, r->path, k, n.qos,
                     n.runtime, n.pod_uid, n.id);
    }
}

static void reported_and_walked(void **state)
{
    (void)state;
    assert_true(mw_cg_reported(MW_CG_K8S_CONTAINER));
    assert_true(mw_cg_reported(MW_CG_SERVICE));
    assert_true(mw_cg_reported(MW_CG_DOCKER));
    assert_true(mw_cg_reported(MW_CG_SLURM_JOB));
    assert_false(mw_cg_reported(MW_CG_K8S_POD));
    assert_false(mw_cg_reported(MW_CG_GROUP));
    for (int k = MW_CG_IGNORE; k <= MW_CG_SLURM_JOB; k++)
        assert_false(mw_cg_reported((mw_cg_kind)k) && mw_cg_walked((mw_cg_kind)k));
    assert_false(mw_cg_walked(MW_CG_IGNORE));
    assert_true(mw_cg_walked(MW_CG_K8S_POD));
}

static void classify_is_incremental(void **state)
{
    (void)state;
    /* The walk classifies one component at a time, with a length (the name
     * need not be NUL-terminated there). */
    mw_cg_node root, kp, qos, pod, c;
    mw_cg_root(&root);
    assert_int_equal(mw_cg_classify(&root, "kubepods.sliceXXX", 14, &kp), MW_CG_KUBEPODS);
    assert_int_equal(mw_cg_classify(&kp, "kubepods-burstable.slice", 24, &qos), MW_CG_K8S_QOS);
    const char *p = "kubepods-burstable-pod" UIDU ".slice";
    assert_int_equal(mw_cg_classify(&qos, p, strlen(p), &pod), MW_CG_K8S_POD);
    const char *s = "cri-containerd-" ID ".scope";
    assert_int_equal(mw_cg_classify(&pod, s, strlen(s), &c), MW_CG_K8S_CONTAINER);
    assert_string_equal(c.pod_uid, UID);
    assert_int_equal(c.qos, MW_QOS_BURSTABLE);
    /* In place (parent and out the same node). */
    assert_int_equal(mw_cg_classify(&pod, s, strlen(s), &pod), MW_CG_K8S_CONTAINER);
    assert_string_equal(pod.id, ID);
    /* A name holding '/' or NUL is never a component. */
    assert_int_equal(mw_cg_classify(&root, "a/b.service", 11, &c), MW_CG_IGNORE);
    assert_int_equal(mw_cg_classify(&root, "a\0b.service", 11, &c), MW_CG_IGNORE);
    assert_int_equal(mw_cg_classify(&root, "", 0, &c), MW_CG_IGNORE);
}

static void ids_and_names(void **state)
{
    (void)state;
    char id[MW_CG_ID_MAX];
    const char *forms[] = {"cri-containerd-" ID ".scope", "crio-" ID ".scope", "crio-" ID,
                           "docker-" ID ".scope", ID};
    for (size_t i = 0; i < 5; i++) {
        memset(id, 0, sizeof(id));
        assert_int_equal(mw_cg_component_id(forms[i], strlen(forms[i]), id), 0);
        assert_string_equal(id, ID);
    }
    const char *no = "crio-conmon-" ID ".scope";
    assert_int_equal(mw_cg_component_id(no, strlen(no), id), -1);
    assert_int_equal(mw_cg_component_id("kubelet.service", 15, id), -1);
    assert_string_equal(mw_cg_qos_name(MW_QOS_GUARANTEED), "guaranteed");
    assert_string_equal(mw_cg_qos_name(MW_QOS_BURSTABLE), "burstable");
    assert_string_equal(mw_cg_qos_name(MW_QOS_BESTEFFORT), "besteffort");
    assert_string_equal(mw_cg_qos_name(MW_QOS_NONE), "");
    assert_string_equal(mw_cg_runtime_name(MW_RT_CONTAINERD), "containerd");
    assert_string_equal(mw_cg_runtime_name(MW_RT_CRIO), "crio");
    assert_string_equal(mw_cg_runtime_name(MW_RT_DOCKER), "docker");
    assert_string_equal(mw_cg_runtime_name(MW_RT_NONE), "");
    assert_true(mw_cg_hash("/a") != mw_cg_hash("/b"));
    assert_true(mw_cg_hash("/kubepods.slice/x") == mw_cg_hash("/kubepods.slice/x"));
}

static void proc_cgroup(void **state)
{
    (void)state;
    char out[512];
    /* v2 */
    assert_int_equal(mw_parse_proc_cgroup("0::/kubepods.slice/a.scope\n", out, sizeof(out)), 0);
    assert_string_equal(out, "/kubepods.slice/a.scope");
    assert_int_equal(mw_parse_proc_cgroup("0::/\n", out, sizeof(out)), 0);
    assert_string_equal(out, "/");
    /* no trailing newline */
    assert_int_equal(mw_parse_proc_cgroup("0::/x", out, sizeof(out)), 0);
    assert_string_equal(out, "/x");
    /* v1: cpuacct wins over memory and the unified line of a hybrid host */
    const char *v1 = "12:pids:/p\n11:memory:/m\n5:cpu,cpuacct:/c\n1:name=systemd:/s\n0::/u\n";
    assert_int_equal(mw_parse_proc_cgroup(v1, out, sizeof(out)), 0);
    assert_string_equal(out, "/c");
    assert_int_equal(mw_parse_proc_cgroup("3:cpu:/cpu\n4:cpuacct:/acct\n", out, sizeof(out)), 0);
    assert_string_equal(out, "/acct");
    assert_int_equal(mw_parse_proc_cgroup("11:memory:/m\n0::/u\n", out, sizeof(out)), 0);
    assert_string_equal(out, "/m");
    /* a path from another cgroup namespace is kept as is */
    assert_int_equal(mw_parse_proc_cgroup("0::/../../x.scope\n", out, sizeof(out)), 0);
    assert_string_equal(out, "/../../x.scope");
    /* malformed or unusable */
    assert_int_equal(mw_parse_proc_cgroup("", out, sizeof(out)), -1);
    assert_int_equal(mw_parse_proc_cgroup("garbage\n", out, sizeof(out)), -1);
    assert_int_equal(mw_parse_proc_cgroup("0:/x\n", out, sizeof(out)), -1);
    assert_int_equal(mw_parse_proc_cgroup("x::/x\n", out, sizeof(out)), -1);
    assert_int_equal(mw_parse_proc_cgroup("0::relative\n", out, sizeof(out)), -1);
    assert_int_equal(mw_parse_proc_cgroup("1:name=systemd:/s\n", out, sizeof(out)), -1);
    assert_int_equal(mw_parse_proc_cgroup("0::/toolong\n", out, 5), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(path_table),
        cmocka_unit_test(reported_and_walked),
        cmocka_unit_test(classify_is_incremental),
        cmocka_unit_test(ids_and_names),
        cmocka_unit_test(proc_cgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
