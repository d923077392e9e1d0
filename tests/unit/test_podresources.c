/* test_podresources.c - GPU allocations beyond the device plugin: the
 * kubelet pod-resources decoders on bodies written by the fake kubelet
 * (tests/fakeapi/fake_podresources.py, field numbers of kubelet's
 * api.proto: fuzz/corpus/podresources/dra_and_replicas and
 * allocatable_replicas), the ResourceSlice and ResourceClaim parsers on
 * tests/fixtures/kube-dra, KAI's annotations, and the GPUHealthy Node
 * condition's body and timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/util.h"
#include "kube/dra.h"
#include "kube/kube.h"
#include "kube/node_condition.h"
#include "kube/podresources.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *rel, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", tu_fixture(""), rel);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = mw_xmalloc(1u << 20);
    *len = fread(buf, 1, (1u << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static void test_decode_dra_and_replicas(void **st)
{
    (void)st;
    size_t len;
    char *body = slurp("../../fuzz/corpus/podresources/dra_and_replicas", &len);
    mw_podres_table t = {0};
    char err[256];
    assert_int_equal(mw_podres_decode((const uint8_t *)body, len, &t, err, sizeof(err)), 5);
    /* Device plugin: replicas of GPU-aaaa (nvidia.com/gpu and the renamed
     * nvidia.com/gpu.shared); the cpu resource is not a GPU. */
    assert_string_equal(t.rows[0].pod, "nb-a");
    assert_string_equal(t.rows[0].device, "GPU-aaaa");
    assert_int_equal(t.rows[0].replica, 0);
    assert_int_equal(t.rows[0].source, MW_PODRES_DEVICE_PLUGIN);
    assert_string_equal(t.rows[1].pod, "nb-b");
    assert_int_equal(t.rows[1].replica, 1);
    assert_int_equal(t.rows[2].replica, 2);
    /* DRA: two devices of one claim, unresolved (no device UUID yet). */
    for (int i = 3; i < 5; i++) {
        assert_string_equal(t.rows[i].ns, "ml");
        assert_string_equal(t.rows[i].pod, "train");
        assert_string_equal(t.rows[i].container, "main");
        assert_int_equal(t.rows[i].source, MW_PODRES_DRA);
        assert_int_equal(t.rows[i].replica, -1);
        assert_string_equal(t.rows[i].driver, "gpu.nvidia.com");
        assert_string_equal(t.rows[i].pool, "node-1");
        assert_string_equal(t.rows[i].claim, "ml/gpu-claim");
        assert_string_equal(t.rows[i].device, "");
    }
    assert_string_equal(t.rows[3].dra_device, "gpu-1");
    assert_string_equal(t.rows[4].dra_device, "gpu-2");
    free(body);

    /* GetAllocatableResources: GPU-aaaa::0..3 and a whole GPU-bbbb. */
    body = slurp("../../fuzz/corpus/podresources/allocatable_replicas", &len);
    assert_int_equal(mw_podres_decode_allocatable((const uint8_t *)body, len, &t, err, sizeof(err)),
                     4);
    assert_int_equal(t.rows[0].replicas, 4);
    assert_int_equal(t.rows[1].replicas, 4);
    assert_int_equal(t.rows[2].replicas, 4);
    assert_int_equal(t.rows[3].replicas, 0); /* not a replica */
    free(body);

    /* Resolution through a resolver's table. */
    static const mw_dra_device devs[] = {
        {"gpu.nvidia.com", "node-1", "gpu-1", "GPU-1111"},
        {"gpu.nvidia.com", "node-2", "gpu-2", "GPU-other-node"},
    };
    char uuid[96];
    assert_int_equal(mw_dra_uuid_in(devs, 2, "gpu.nvidia.com", "node-1", "gpu-1", uuid, 96), 1);
    assert_string_equal(uuid, "GPU-1111");
    assert_int_equal(mw_dra_uuid_in(devs, 2, "gpu.nvidia.com", "node-1", "gpu-2", uuid, 96), 0);
    mw_podres_table_free(&t);

    const uint8_t bad[] = {1, 0, 0, 0, 0};
    assert_int_equal(mw_podres_decode_allocatable(bad, sizeof(bad), &t, err, sizeof(err)), -1);
    assert_string_equal(err, "gRPC frame: compressed flag 1 (no compression was offered)");
}

static void test_split_replica(void **st)
{
    (void)st;
    char u[96];
    assert_int_equal(mw_podres_split_replica("GPU-x::3", u, sizeof(u)), 3);
    assert_string_equal(u, "GPU-x");
    assert_int_equal(mw_podres_split_replica("GPU-x", u, sizeof(u)), -1);
    assert_string_equal(u, "GPU-x");
    assert_int_equal(mw_podres_split_replica("GPU-x::", u, sizeof(u)), -1);
    assert_int_equal(mw_podres_split_replica("GPU-x::1a", u, sizeof(u)), -1);
}

static void on_device(void *cls, const mw_dra_device *d)
{
    mw_dra_device *out = cls;
    while (out->driver[0])
        out++;
    *out = *d;
}

static void on_claim(void *cls, const mw_dra_claim *c)
{
    mw_dra_claim *out = cls;
    while (out->claim[0])
        out++;
    *out = *c;
}

static void test_slices_and_claims(void **st)
{
    (void)st;
    size_t len;
    char err[256];
    char *text = slurp("kube-dra/resourceslices.json", &len);
    mw_dra_device d[8];
    memset(d, 0, sizeof(d));
    /* Four GPUs with a uuid; the NVLink channel and the NIC have none. */
    assert_int_equal(mw_dra_slices_parse(text, len, on_device, d, err, sizeof(err)), 4);
    assert_string_equal(d[2].driver, "gpu.nvidia.com");
    assert_string_equal(d[2].pool, "gpu-node-1");
    assert_string_equal(d[2].device, "gpu-2");
    assert_string_equal(d[2].uuid, "GPU-00000002-0000-4000-8000-000000000000");
    free(text);

    text = slurp("kube-dra/resourceclaims.json", &len);
    mw_dra_claim c[8];
    memset(c, 0, sizeof(c));
    /* Three reserved claims (one for a pod elsewhere: filtered later by the
     * pod table); the pending one is reserved for nobody. */
    assert_int_equal(mw_dra_claims_parse(text, len, on_claim, c, err, sizeof(err)), 3);
    assert_string_equal(c[1].claim_ns, "ml-team");
    assert_string_equal(c[1].claim, "train-3-gpu-q9z4m");
    assert_string_equal(c[1].pod, "train-3");
    assert_string_equal(c[1].pod_uid, "00000004-0000-4000-8000-000000000004");
    assert_string_equal(c[1].device, "gpu-3");
    free(text);

    const char *qualified = "{\"items\":[{\"spec\":{\"driver\":\"gpu.example.com\",\"pool\":"
                            "{\"name\":\"p\"},\"devices\":[{\"name\":\"g0\",\"attributes\":"
                            "{\"gpu.example.com/uuid\":{\"string\":\"GPU-q\"}}}]}}]}";
    memset(d, 0, sizeof(d));
    assert_int_equal(mw_dra_slices_parse(qualified, strlen(qualified), on_device, d, err, 256), 1);
    assert_string_equal(d[0].uuid, "GPU-q");
    assert_int_equal(mw_dra_slices_parse("{\"items\":3}", 11, on_device, d, err, sizeof(err)), -1);
    assert_string_equal(err, "not a list: no items");
    assert_int_equal(mw_dra_claims_parse("[", 1, on_claim, c, err, sizeof(err)), -1);
}

static void count_pod(void *cls, const mw_kube_pod *p)
{
    mw_kube_pod *out = cls;
    while (out->uid[0])
        out++;
    *out = *p;
}

static void test_kai_annotations(void **st)
{
    (void)st;
    size_t len;
    char *text = slurp("kube-dra/podlist.json", &len);
    mw_kube_pod p[16];
    memset(p, 0, sizeof(p));
    char rv[32], err[256];
    assert_int_equal(
        mw_kube_list_parse(text, len, "namespace", count_pod, p, rv, sizeof(rv), err, sizeof(err)),
        12);
    assert_true(p[0].gpu_fraction == 0.5 && p[0].gpu_memory_mib == 0);
    assert_true(p[1].gpu_fraction == 0.5);
    assert_true(p[2].gpu_fraction == 0 && p[2].gpu_memory_mib == 20480);
    assert_true(p[3].gpu_fraction == 0 && p[3].gpu_memory_mib == 0);
    /* KAI's group label, the reservation pod's GPU, the first container. */
    assert_string_equal(p[0].gpu_group, "");
    assert_string_equal(p[7].gpu_group, "5f0c6a3e-0000-4000-8000-000000000005");
    assert_string_equal(p[8].first_container, "lab");
    assert_string_equal(p[10].name, "gpu-reservation-gpu-node-1-q7x2m");
    assert_string_equal(p[10].reserved_gpu, "GPU-00000005-0000-4000-8000-000000000000");
    assert_string_equal(p[10].gpu_group, "5f0c6a3e-0000-4000-8000-000000000005");
    assert_string_equal(p[11].reserved_gpu, "");
    /* Reservation pods: by the annotation, or by namespace and group. */
    assert_int_equal(p[10].kai_reservation, 1);
    assert_int_equal(p[11].kai_reservation, 1);
    assert_int_equal(p[7].kai_reservation, 0);
    assert_int_equal(p[3].kai_reservation, 0);
    /* notebook-d and -e resolve to GPU 5 through their reservation pod;
     * notebook-f's has not said its GPU yet; a-c have no group. */
    mw_kube_kai k[16];
    assert_int_equal(mw_kube_kai_resolve(p, 12, k, 16), 2);
    assert_string_equal(k[0].name, "notebook-d");
    assert_string_equal(k[0].ns, "shared");
    assert_string_equal(k[0].container, "main");
    assert_string_equal(k[0].gpu_uuid, "GPU-00000005-0000-4000-8000-000000000000");
    assert_true(k[0].gpu_fraction == 0.25 && k[0].gpu_memory_mib == 0);
    assert_string_equal(k[1].name, "notebook-e");
    assert_string_equal(k[1].container, "lab");
    assert_true(k[1].gpu_fraction == 0 && k[1].gpu_memory_mib == 8192);
    assert_int_equal(mw_kube_kai_resolve(p, 12, k, 1), 1); /* bounded */
    /* DRA: the generated claim of the template, on the container using it. */
    assert_string_equal(p[6].claim_containers, "train-3-gpu-q9z4m=main;");
    char ctr[64];
    assert_int_equal(mw_kube_claim_container(&p[6], "train-3-gpu-q9z4m", ctr, sizeof(ctr)), 1);
    assert_string_equal(ctr, "main");
    assert_int_equal(mw_kube_claim_container(&p[6], "train-3-gpu", ctr, sizeof(ctr)), 0);
    assert_int_equal(mw_kube_claim_container(&p[5], "train-3-gpu-q9z4m", ctr, sizeof(ctr)), 0);
    assert_int_equal(mw_kube_claim_container(&p[0], "x", ctr, sizeof(ctr)), 0);
    free(text);
    /* A claim by name, a template not generated yet, one no container
     * uses, two containers: each claim on the first container naming it. */
    const char *pod =
        "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\"},"
        "\"spec\":{\"containers\":[{\"name\":\"side\"},"
        "{\"name\":\"a\",\"resources\":{\"claims\":[{\"name\":\"g1\"},{\"name\":\"g2\"}]}},"
        "{\"name\":\"b\",\"resources\":{\"claims\":[{\"name\":\"g1\"},{\"name\":\"g3\"}]}}],"
        "\"resourceClaims\":[{\"name\":\"g1\",\"resourceClaimName\":\"shared-gpu\"},"
        "{\"name\":\"g2\",\"resourceClaimTemplateName\":\"t\"},"
        "{\"name\":\"g3\",\"resourceClaimTemplateName\":\"t\"},"
        "{\"name\":\"g4\",\"resourceClaimName\":\"unused\"}]},"
        "\"status\":{\"resourceClaimStatuses\":[{\"name\":\"g3\",\"resourceClaimName\":\"p-g3-"
        "abcde\"}]}}";
    mw_kube_pod q;
    assert_int_equal(mw_kube_pod_parse(pod, strlen(pod), "namespace", &q, err, 256), 0);
    assert_string_equal(q.claim_containers, "shared-gpu=a;p-g3-abcde=b;");
    assert_string_equal(q.first_container, "side");
    assert_int_equal(mw_kube_claim_container(&q, "p-g3-abcde", ctr, sizeof(ctr)), 1);
    assert_string_equal(ctr, "b");
    assert_int_equal(mw_kube_claim_container(&q, "shared-gpu", ctr, 1), 0); /* no room */
    /* Malformed parts: skipped, the pod still parses. */
    const char *odd = "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\"},"
                      "\"spec\":{\"containers\":7,\"resourceClaims\":[3,{\"name\":1},"
                      "{\"name\":\"g\",\"resourceClaimName\":\"c\"}]},\"status\":[]}";
    assert_int_equal(mw_kube_pod_parse(odd, strlen(odd), "namespace", &q, err, 256), 0);
    assert_string_equal(q.claim_containers, "");
    assert_string_equal(q.first_container, "");
    /* Not numbers, or out of range: no fraction. */
    const char *bad[] = {"\"1.5\"", "\"0\"", "\"half\"", "\"0.5x\"", "\"nan\"", "0.5"};
    for (size_t i = 0; i < MW_ARRAY_LEN(bad); i++) {
        char json[512];
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\","
                 "\"annotations\":{\"gpu-fraction\":%s,\"gpu-memory\":%s}}}",
                 bad[i], bad[i]);
        assert_int_equal(mw_kube_pod_parse(json, strlen(json), "namespace", &q, err, 256), 0);
        assert_true(q.gpu_fraction == 0);
        assert_true(q.gpu_memory_mib == (i == 0 ? 1.5 : 0)); /* 1.5 MiB is a size */
    }
}

static void test_node_condition(void **st)
{
    (void)st;
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_node_condition_body(MW_NODE_GPU_UNHEALTHY, "GPUUnhealthy", "GPU 3: XID 79 \"fallen\"",
                           1764684000000LL, 1764683000000LL, &b);
    assert_string_equal(
        b.data, "{\"status\":{\"conditions\":[{\"type\":\"GPUHealthy\",\"status\":\"False\","
                "\"reason\":\"GPUUnhealthy\",\"message\":\"GPU 3: XID 79 \\\"fallen\\\"\","
                "\"lastHeartbeatTime\":\"2025-12-02T14:00:00Z\","
                "\"lastTransitionTime\":\"2025-12-02T13:43:20Z\"}]}}");
    mw_buf_free(&b);
    assert_string_equal(mw_node_condition_status(MW_NODE_GPU_HEALTHY), "True");
    assert_string_equal(mw_node_condition_status(MW_NODE_GPU_DEGRADED), "True");
    assert_string_equal(mw_node_condition_status(MW_NODE_GPU_UNKNOWN), "Unknown");

    mw_node_condition_sent last = {0};
    const int64_t hb = 300000;
    /* Never sent, no verdict yet: 30 s after the start, then Unknown. */
    assert_int_equal(
        mw_node_condition_due(&last, 30999, 0, 1000, MW_NODE_GPU_UNKNOWN, "R", "M", hb), 0);
    assert_int_equal(
        mw_node_condition_due(&last, 31000, 0, 1000, MW_NODE_GPU_UNKNOWN, "R", "M", hb), 1);
    /* A verdict: at once. */
    assert_int_equal(mw_node_condition_due(&last, 1001, 1, 1000, MW_NODE_GPU_HEALTHY, "R", "M", hb),
                     1);
    assert_int_equal(mw_node_condition_due(&last, 5000, 1, 0, MW_NODE_GPU_HEALTHY, "R", "M", hb),
                     1);
    last = (mw_node_condition_sent){.ok = 1, .sent_ms = 5000, .state = MW_NODE_GPU_HEALTHY};
    mw_strlcpy(last.reason, "R", sizeof(last.reason));
    mw_strlcpy(last.message, "M", sizeof(last.message));
    /* Nothing changed: only at the heartbeat. */
    assert_int_equal(mw_node_condition_due(&last, 304999, 1, 0, MW_NODE_GPU_HEALTHY, "R", "M", hb),
                     0);
    assert_int_equal(mw_node_condition_due(&last, 305000, 1, 0, MW_NODE_GPU_HEALTHY, "R", "M", hb),
                     1);
    /* A change of state, reason or message: at once. */
    assert_int_equal(mw_node_condition_due(&last, 6000, 1, 0, MW_NODE_GPU_UNHEALTHY, "R", "M", hb),
                     1);
    assert_int_equal(mw_node_condition_due(&last, 6000, 1, 0, MW_NODE_GPU_HEALTHY, "R2", "M", hb),
                     1);
    assert_int_equal(mw_node_condition_due(&last, 6000, 1, 0, MW_NODE_GPU_HEALTHY, "R", "M2", hb),
                     1);
    /* A failed PATCH: again after the retry delay, not before. */
    last.ok = 0;
    assert_int_equal(mw_node_condition_due(&last, 14999, 1, 0, MW_NODE_GPU_HEALTHY, "R", "M", hb),
                     0);
    assert_int_equal(mw_node_condition_due(&last, 15000, 1, 0, MW_NODE_GPU_HEALTHY, "R", "M", hb),
                     1);

    mw_node_health h;
    mw_node_health_init(&h);
    mw_node_gpu_state s;
    char reason[64], msg[512];
    mw_node_health_get(&h, &s, reason, sizeof(reason), msg, sizeof(msg));
    assert_int_equal(s, MW_NODE_GPU_UNKNOWN);
    assert_string_equal(reason, "NoHealthSource");
    assert_int_equal(mw_node_health_judged(&h), 0);
    mw_node_health_publish(&h, MW_NODE_GPU_DEGRADED, "RowRemapPending", "GPU 1: reset it");
    mw_node_health_get(&h, &s, reason, sizeof(reason), msg, sizeof(msg));
    assert_int_equal(s, MW_NODE_GPU_DEGRADED);
    assert_string_equal(msg, "GPU 1: reset it");
    assert_string_equal(mw_node_gpu_state_name(s), "degraded");
    assert_int_equal(mw_node_health_judged(&h), 1);
    mw_node_health_destroy(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_dra_and_replicas), cmocka_unit_test(test_split_replica),
        cmocka_unit_test(test_slices_and_claims),       cmocka_unit_test(test_kai_annotations),
        cmocka_unit_test(test_node_condition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
