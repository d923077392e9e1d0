/* test_kube.c - the Kubernetes parsers on recorded JSON
 * (tests/fixtures/kube): workload and owner of each kind of pod, watch
 * events, kubeconfig files; and the notifier's message formats and state
 * file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/util.h"
#include "kube/kube.h"
#include "notify/notify_state.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", tu_fixture("kube"), name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = mw_xmalloc(1 << 20);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

typedef struct pods {
    mw_kube_pod p[16];
    int n;
} pods;

static void add(void *cls, const mw_kube_pod *p)
{
    pods *ps = cls;
    ps->p[ps->n++] = *p;
}

static void test_list_workloads(void **st)
{
    (void)st;
    size_t len;
    char *text = slurp("podlist.json", &len);
    pods ps = {0};
    char rv[32], err[256];
    assert_int_equal(mw_kube_list_parse(text, len, "annotation:notebooks.kubeflow.org/creator", add,
                                        &ps, rv, sizeof(rv), err, sizeof(err)),
                     7);
    assert_string_equal(rv, "2000");
    static const char *const want[7][5] = {
        {"ml-team", "train-0", "PyTorchJob", "bert-large", "ml-team"},
        {"ml-team", "train-1", "TrainJob", "llama-ft", "ml-team"},
        {"ml-team", "train-2", "Job", "eval-nightly-28470120", "ml-team"},
        {"ml-team", "train-3", "StatefulSet", "ray-worker", "ml-team"},
        {"shared", "notebook-a", "Notebook", "alice-nb", "alice@example.org"},
        {"shared", "notebook-b", "Deployment", "debug-shell", "shared"},
        {"shared", "notebook-c", "Pod", "notebook-c", "shared"},
    };
    for (int i = 0; i < 7; i++) {
        assert_string_equal(ps.p[i].ns, want[i][0]);
        assert_string_equal(ps.p[i].name, want[i][1]);
        assert_string_equal(ps.p[i].workload_kind, want[i][2]);
        assert_string_equal(ps.p[i].workload, want[i][3]);
        assert_string_equal(ps.p[i].owner, want[i][4]);
    }
    assert_string_equal(ps.p[4].uid, "00000009-0000-4000-8000-000000000009");
    /* Owner from a label. */
    ps.n = 0;
    assert_int_equal(
        mw_kube_list_parse(text, len, "label:team", add, &ps, rv, sizeof(rv), err, sizeof(err)), 7);
    assert_string_equal(ps.p[0].owner, "nlp");
    assert_string_equal(ps.p[1].owner, "llm");
    assert_string_equal(ps.p[2].owner, "ml-team");
    free(text);
}

static void test_events(void **st)
{
    (void)st;
    size_t len;
    char err[256];
    mw_kube_pod p;
    int code;
    char *t = slurp("event-modified.json", &len);
    assert_int_equal(mw_kube_event_parse(t, len, "namespace", &p, &code, err, sizeof(err)),
                     MW_KUBE_MODIFIED);
    assert_string_equal(p.workload_kind, "Notebook");
    assert_string_equal(p.workload, "carol-nb");
    assert_string_equal(p.rv, "2001");
    free(t);
    t = slurp("event-deleted.json", &len);
    assert_int_equal(mw_kube_event_parse(t, len, "namespace", &p, &code, err, sizeof(err)),
                     MW_KUBE_DELETED);
    assert_string_equal(p.uid, "00000004-0000-4000-8000-000000000004");
    free(t);
    t = slurp("event-bookmark.json", &len);
    assert_int_equal(mw_kube_event_parse(t, len, "namespace", &p, &code, err, sizeof(err)),
                     MW_KUBE_BOOKMARK);
    assert_string_equal(p.rv, "2003");
    free(t);
    t = slurp("event-gone.json", &len);
    assert_int_equal(mw_kube_event_parse(t, len, "namespace", &p, &code, err, sizeof(err)),
                     MW_KUBE_ERROR);
    assert_int_equal(code, 410);
    free(t);
    const char *bad = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}";
    assert_int_equal(
        mw_kube_event_parse(bad, strlen(bad), "namespace", &p, &code, err, sizeof(err)), -1);
    assert_string_equal(err, "pod metadata lacks uid, namespace or name");
    const char *trunc = "{\"type\":\"ADDED\",\"obj";
    assert_int_equal(
        mw_kube_event_parse(trunc, strlen(trunc), "namespace", &p, &code, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "invalid JSON at line 1"));
}

static void test_kubeconfig(void **st)
{
    (void)st;
    mw_kube_creds c;
    char err[512];
    const char *y = "apiVersion: v1\ncurrent-context: b\nclusters:\n"
                    "- name: one\n  cluster: {server: 'https://a:6443'}\n"
                    "- name: two\n  cluster:\n    server: https://b:6443\n"
                    "    certificate-authority: pki/ca.crt\n"
                    "contexts:\n- name: a\n  context: {cluster: one, user: u1}\n"
                    "- name: b\n  context: {cluster: two, user: u2}\n"
                    "users:\n- name: u1\n  user: {token: t1}\n"
                    "- name: u2\n  user:\n    client-certificate-data: aGVsbG8=\n"
                    "    client-key: /k/key.pem\n";
    assert_int_equal(mw_kubeconfig_parse(y, strlen(y), "/home/u/.kube", &c, err, sizeof(err)), 0);
    assert_string_equal(c.server, "https://b:6443");
    assert_string_equal(c.ca_file, "/home/u/.kube/pki/ca.crt");
    assert_string_equal(c.client_cert_data, "hello");
    assert_string_equal(c.client_key_file, "/k/key.pem");
    assert_string_equal(c.token, "");
    const char *ex = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: x, user: u}\n"
                     "clusters:\n- name: x\n  cluster: {server: https://x}\n"
                     "users:\n- name: u\n  user:\n    exec: {command: aws}\n";
    assert_int_equal(mw_kubeconfig_parse(ex, strlen(ex), ".", &c, err, sizeof(err)), -1);
    assert_string_equal(err, "kubeconfig: user 'u' uses an exec or auth-provider plugin, which "
                             "mlwatch does not run; use a token or a client certificate");
    /* A certificate without its key, or a key without its certificate. */
    const char *half =
        "current-context: c\ncontexts:\n- name: c\n  context: {cluster: x, user: u}\n"
        "clusters:\n- name: x\n  cluster: {server: https://x}\n"
        "users:\n- name: u\n  user:\n    client-certificate: /c.pem\n";
    assert_int_equal(mw_kubeconfig_parse(half, strlen(half), ".", &c, err, sizeof(err)), -1);
    assert_string_equal(err, "kubeconfig: user 'u' has a client certificate but no client-key or "
                             "client-key-data");
    const char *half2 =
        "current-context: c\ncontexts:\n- name: c\n  context: {cluster: x, user: u}\n"
        "clusters:\n- name: x\n  cluster: {server: https://x}\n"
        "users:\n- name: u\n  user:\n    client-key-data: aGVsbG8=\n";
    assert_int_equal(mw_kubeconfig_parse(half2, strlen(half2), ".", &c, err, sizeof(err)), -1);
    assert_string_equal(err, "kubeconfig: user 'u' has a client key but no client-certificate or "
                             "client-certificate-data");
    assert_string_equal(c.client_key_data, ""); /* nothing kept of a refused kubeconfig */
    const char *nf = "current-context: zz\ncontexts: []\n";
    assert_int_equal(mw_kubeconfig_parse(nf, strlen(nf), ".", &c, err, sizeof(err)), -1);
    assert_string_equal(err, "kubeconfig: no context named 'zz'");
}

static mw_notify_episode episode(void)
{
    mw_notify_episode ep = {.key = "shared/nb/main/0",
                            .ns = "shared",
                            .pod = "nb",
                            .container = "main",
                            .gpu = "0",
                            .model = "NVIDIA H100 80GB HBM3",
                            .uuid = "GPU-0",
                            .node = "n1",
                            .workload_kind = "Notebook",
                            .workload = "nb",
                            .owner = "alice",
                            .idle_since_ms = 1700000000000LL,
                            .memory_bytes = 10737418240.0,
                            .gpu_seconds = 7200,
                            .energy_joules = 720000,
                            .co2_grams = 80,
                            .threshold_ratio = 0.05};
    return ep;
}

static void test_notify_text(void **st)
{
    (void)st;
    mw_notify_episode ep = episode();
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_notify_text(&ep, MW_MSG_FIRING, 1700000000000LL + 7500000, &b);
    assert_string_equal(b.data,
                        "Idle GPU: GPU 0 (NVIDIA H100 80GB HBM3) on n1 held by pod shared/nb\n"
                        "Owner: alice\nPod: shared/nb (container main)\nWorkload: Notebook nb\n"
                        "GPU: GPU 0 (NVIDIA H100 80GB HBM3), GPU-0, node n1\n"
                        "Idle (below 5% utilization) since 2023-11-14T22:13:20Z (2h 5m)\n"
                        "GPU memory held: 10.0 GiB\n"
                        "Cost so far: 2.00 GPU-hours, 0.200 kWh, 80 g CO2\n");
    mw_buf_clear(&b);
    ep.ended_ms = 1700000000000LL + 3600000;
    mw_strlcpy(ep.end_reason, "ended", sizeof(ep.end_reason));
    ep.co2_grams = -1;
    mw_notify_chat_json(&ep, MW_MSG_RESOLVED, 1700000000000LL + 9999999, &b);
    assert_non_null(strstr(b.data, "{\"text\":\"Resolved: GPU 0 (NVIDIA H100 80GB HBM3) on n1 is "
                                   "no longer idle (session ended): pod shared/nb\\nOwner"));
    assert_non_null(strstr(b.data, "(1h 0m)"));
    assert_non_null(strstr(b.data, "CO2 unknown (no carbon intensity)"));
    mw_buf_free(&b);
}

static void test_notify_table(void **st)
{
    (void)st;
    mw_notify_table t = {0};
    mw_notify_episode ep = episode(), got;
    const int rx_webhook = mw_receiver_index("webhook"), rx_email = mw_receiver_index("email");
    assert_true(rx_webhook >= 0 && rx_email >= 0);
    mw_msg_kind kind;
    assert_int_equal(mw_notify_table_upsert(&t, &ep), 1);
    assert_int_equal(mw_notify_table_upsert(&t, &ep), 0);
    assert_int_equal(mw_notify_table_due(&t, rx_webhook, 1000, 3600000, &got, &kind), 0);
    assert_int_equal(kind, MW_MSG_FIRING);
    mw_notify_table_delivered(&t, &got, rx_webhook, kind, 1000);
    assert_int_equal(mw_notify_table_due(&t, rx_webhook, 3600999, 3600000, &got, &kind), -1);
    assert_int_equal(mw_notify_table_due(&t, rx_webhook, 3601000, 3600000, &got, &kind), 0);
    assert_int_equal(kind, MW_MSG_REPEAT);
    /* Email never got it: firing is still due there. */
    assert_int_equal(mw_notify_table_due(&t, rx_email, 1000, 3600000, &got, &kind), 0);
    assert_int_equal(kind, MW_MSG_FIRING);

    /* Round trip through the state file. */
    char dir[] = "/tmp/mlwatch-notify-XXXXXX", path[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/s.json", dir);
    assert_int_equal(mw_notify_table_save(&t, path, err, sizeof(err)), 0);
    mw_notify_table u = {0};
    assert_int_equal(mw_notify_table_load(&u, path, err, sizeof(err)), 0);
    assert_int_equal(u.n, 1);
    assert_int_equal(u.e[0].fired, 1u << rx_webhook);
    assert_int_equal(u.e[0].last_sent_ms[rx_webhook], 1000);
    assert_string_equal(u.e[0].ep.owner, "alice");
    assert_true(u.e[0].ep.gpu_seconds == 7200);

    /* Resolved, delivered to the one receiver: dropped. */
    ep.ended_ms = 5000;
    mw_notify_table_resolve(&u, &ep);
    assert_int_equal(mw_notify_table_due(&u, rx_webhook, 6000, 3600000, &got, &kind), 0);
    assert_int_equal(kind, MW_MSG_RESOLVED);
    mw_notify_table_delivered(&u, &got, rx_webhook, kind, 6000);
    mw_notify_table_gc(&u, 1u << rx_webhook);
    assert_int_equal(u.n, 0);

    const char *bad = "{\"version\": 1, \"episodes\": [{\"key\": 3}]}";
    assert_int_equal(mw_notify_table_parse(&u, bad, strlen(bad), err, sizeof(err)), -1);
    assert_string_equal(err, "episodes[0].key: expected a string without NUL, shorter than the "
                             "limit");
    unlink(path);
    rmdir(dir);
    mw_notify_table_free(&t);
    mw_notify_table_free(&u);
}

static void test_secret(void **st)
{
    (void)st;
    char out[64], err[256];
    setenv("MLWATCH_TEST_SECRET", "s3cr3t", 1);
    assert_int_equal(
        mw_secret_resolve("env:MLWATCH_TEST_SECRET", out, sizeof(out), err, sizeof(err)), 0);
    assert_string_equal(out, "s3cr3t");
    assert_int_equal(mw_secret_resolve("env:MLWATCH_NOT_SET_X", out, sizeof(out), err, sizeof(err)),
                     -1);
    assert_string_equal(err, "environment variable MLWATCH_NOT_SET_X is not set");
    assert_int_equal(mw_secret_resolve("file:/nonexistent/x", out, sizeof(out), err, sizeof(err)),
                     -1);
    assert_string_equal(err, "/nonexistent/x: No such file or directory");
    assert_int_equal(mw_secret_resolve("https://h/x", out, sizeof(out), err, sizeof(err)), 0);
    assert_string_equal(out, "https://h/x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_workloads), cmocka_unit_test(test_events),
        cmocka_unit_test(test_kubeconfig),     cmocka_unit_test(test_notify_text),
        cmocka_unit_test(test_notify_table),   cmocka_unit_test(test_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
