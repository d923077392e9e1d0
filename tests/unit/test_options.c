/* test_options.c - options declared by their owners (src/core/options.h):
 * one default per row, every owner's settings from a config file written
 * for today's build, a group of the test's own through the generic
 * machinery, and the registry's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/util.h"
#include "derive/carbon.h"
#include "derive/doctor.h"
#include "derive/energy_module.h"
#include "derive/idle_config.h"
#include "ship/relabel.h"
#include "ship/rw_config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct expect {
    const char *name, *value;
} expect;

static void check_values(const mw_config *c, const expect *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char got[2048];
        if (mw_config_format_value(c, e[i].name, got, sizeof(got)) < 0)
            fail_msg("--%s: no such option", e[i].name);
        if (strcmp(got, e[i].value) != 0)
            fail_msg("--%s: got '%s', want '%s'", e[i].name, got, e[i].value);
    }
}

/* The defaults of today's build, each made from its row's text. */
static void defaults_of_every_owner(void **state)
{
    (void)state;
    static mw_config c;
    memset(&c, 0x5a, sizeof(c));
    mw_config_defaults(&c);
    static const expect want[] = {
        {"root", "/"},
        {"listen", "127.0.0.1:10230"},
        {"interval", "1000"},
        {"config", ""},
        {"log-level", "info"},
        {"data-dir", "/var/lib/mlwatch"},
        {"state-dir", ""},
        {"node-name", ""},
        {"json", "false"},
        {"collectors", ""},
        {"disable-collectors", ""},
        {"format", "text"},
        {"nvml-library", "libnvidia-ml.so.1"},
        {"rocm-library", "auto"},
        {"gpu-process-interval", "5000"},
        {"freeipmi-library", "libfreeipmi.so.17"},
        {"carbon-intensity", ""},
        {"energy-idle-policy", "requests"},
        {"energy-idle-watts-per-cpu", "0.73999999999999999"},
        {"energy-max-watts-per-cpu", "3.5"},
        {"idle-threshold", "5"},
        {"idle-window", "1800000"},
        {"idle-busy-period", "60000"},
        {"namespace", ""},
        {"pod", ""},
        {"pid", ""},
        {"window", "0"},
        {"store", "true"},
        {"retention", "1296000000"},
        {"retention-size", "0"},
        {"store-max-series", "10000000"},
        {"store-max-series-per-tenant", "0"},
        {"store-tenant-label", ""},
        {"store-max-label-name-length", "256"},
        {"store-max-label-value-length", "4096"},
        {"store-max-labels", "64"},
        {"store-max-samples-per-request", "1000000"},
        {"remote-write", ""},
        {"query-url", ""},
        {"kubernetes", "false"},
        {"kubeconfig", ""},
        {"owner-from", "namespace"},
        {"kubelet-pod-resources", "true"},
        {"notify-repeat-interval", "14400000"},
        {"notify-webhook", ""},
        {"notify-alertmanager-webhook", ""},
        {"notify-smtp-server", ""},
        {"notify-smtp-from", ""},
        {"notify-smtp-to", ""},
        {"notify-smtp-username", ""},
        {"notify-smtp-password", ""},
        {"notify-smtp-ca-file", ""},
        {"query-timeout", "120000"},
        {"query-max-samples", "20000000"},
        {"query-lookback-delta", "300000"},
        {"time", ""},
        {"start", ""},
        {"end", ""},
        {"step", ""},
        {"url", ""},
        {"work", "0"},
        {"unit", "unit"},
    };
    check_values(&c, want, MW_ARRAY_LEN(want));
    /* Sections' inner keys: the owners' defaults hooks. */
    const mw_energy_settings *e = mw_config_group(&c, &mw_energy_options);
    assert_string_equal(e->carbon.url, "");
    assert_string_equal(e->carbon.json_path, "carbonIntensity");
    assert_string_equal(e->carbon.auth_header, "auth-token");
    assert_string_equal(e->carbon.auth_file, "");
    assert_true(e->carbon.refresh_ms == 300000 && e->carbon.timeout_ms == 10000);
    assert_true(e->carbon.max_body == 1048576);
    const mw_doctor_settings *d = mw_config_group(&c, &mw_doctor_options);
    assert_true(d->t.history_ms == 300000);
    assert_true(d->t.busy_cpu_ratio == 0.5 && d->t.cpu_frequency_ratio == 0.8);
    assert_true(d->t.throttled_ratio == 0.05 && d->t.throttled_critical_ratio == 0.25);
    assert_true(d->t.gpu_clock_ratio == 0.9 && d->t.gpu_throttle_fraction == 0.2);
    assert_true(d->t.gpu_busy_ratio == 0.2 && d->t.input_gpu_utilization == 0.5);
    assert_true(d->t.input_cpu_saturation == 0.9 && d->t.input_io_pressure == 0.2);
    assert_true(d->t.memory_working_set_ratio == 0.9);
    assert_true(d->t.memory_working_set_critical == 0.97 && d->t.memory_pressure_ratio == 0.1);
    assert_true(d->t.gpu_corrected_errors == 100);
    const mw_idle_settings *is = mw_config_group(&c, &mw_idle_options);
    assert_int_equal(is->noverrides, 0);
    const mw_rw_settings *rw = mw_config_group(&c, &mw_rw_options);
    assert_null(rw->list);
    assert_int_equal(rw->external.n, 0);
}

/* Every key and section of a config file written for today's build. */
static const char FULL_FILE[] = "root: /host\n"
                                "listen: 127.0.0.1:9999\n"
                                "interval: 2s\n"
                                "log_level: debug\n"
                                "data_dir: /data\n"
                                "state_dir: /state\n"
                                "node_name: gpu-01\n"
                                "json: true\n"
                                "collectors: [cpu, memory, gpu]\n"
                                "disable_collectors: netdev\n"
                                "format: openmetrics\n"
                                "nvml_library: /opt/libnvidia-ml.so.1\n"
                                "rocm_library: none\n"
                                "gpu_process_interval: 7s\n"
                                "freeipmi_library: none\n"
                                "carbon_intensity: \"250\"\n"
                                "carbon:\n"
                                "  url: https://ci.example/v1\n"
                                "  json_path: data[0].intensity.actual\n"
                                "  auth_header: x-token\n"
                                "  auth_file: /etc/ci-token\n"
                                "  refresh: 10m\n"
                                "  timeout: 3s\n"
                                "  max_body: 2MiB\n"
                                "energy_idle_policy: cpu\n"
                                "energy_idle_watts_per_cpu: 1.25\n"
                                "energy_max_watts_per_cpu: 4\n"
                                "idle_threshold: 7.5\n"
                                "idle_window: 45m\n"
                                "idle_busy_period: 2m\n"
                                "idle:\n"
                                "  namespaces:\n"
                                "    research: {threshold: 2, window: 2h, busy_period: 5m}\n"
                                "    notebooks: {window: 15m}\n"
                                "namespace: ml\n"
                                "pod: train-0\n"
                                "pid: \"4242\"\n"
                                "window: 90s\n"
                                "doctor:\n"
                                "  history: 2m\n"
                                "  throttled_ratio: 0.1\n"
                                "  gpu_corrected_errors: 5\n"
                                "store: false\n"
                                "retention: 2d\n"
                                "retention_size: 1GiB\n"
                                "store_max_series: 5000\n"
                                "store_max_series_per_tenant: 100\n"
                                "store_tenant_label: namespace\n"
                                "store_max_label_name_length: 128\n"
                                "store_max_label_value_length: 2048\n"
                                "store_max_labels: 32\n"
                                "store_max_samples_per_request: 5000\n"
                                "remote_write:\n"
                                "  - url: http://127.0.0.1:9/api/v1/push\n"
                                "    name: local\n"
                                "    external_labels: {cluster: a}\n"
                                "external_labels: {node: n1}\n"
                                "query_url: http://prom.example:9090\n"
                                "kubernetes: true\n"
                                "kubeconfig: /etc/kube.conf\n"
                                "owner_from: label:team\n"
                                "kubelet_pod_resources: false\n"
                                "notify_repeat_interval: 1h\n"
                                "notify_webhook: file:/etc/hook\n"
                                "notify_alertmanager_webhook: env:AM_HOOK\n"
                                "notify_smtp_server: smtps://mail.example:465\n"
                                "notify_smtp_from: mlwatch <m@example>\n"
                                "notify_smtp_to: a@example, b@example\n"
                                "notify_smtp_username: mailer\n"
                                "notify_smtp_password: file:/etc/smtp-pw\n"
                                "notify_smtp_ca_file: /etc/ca.pem\n"
                                "query_timeout: 30s\n"
                                "query_max_samples: 1000\n"
                                "query_lookback_delta: 10m\n"
                                "time: \"1767366245.5\"\n"
                                "start: 2026-01-02T15:04:05Z\n"
                                "end: 2026-01-02T16:04:05Z\n"
                                "step: 15s\n"
                                "url: http://other.example:9090\n"
                                "work: 12.5\n"
                                "unit: images\n";

static void full_file_loads(void **state)
{
    (void)state;
    static mw_config c;
    mw_config_defaults(&c);
    char err[512];
    if (mw_config_load_string(&c, "full.yaml", FULL_FILE, strlen(FULL_FILE), err, sizeof(err)) < 0)
        fail_msg("%s", err);
    static const expect want[] = {
        {"root", "/host"},
        {"listen", "127.0.0.1:9999"},
        {"interval", "2000"},
        {"log-level", "debug"},
        {"data-dir", "/data"},
        {"state-dir", "/state"},
        {"node-name", "gpu-01"},
        {"json", "true"},
        {"collectors", "cpu,memory,gpu"},
        {"disable-collectors", "netdev"},
        {"format", "openmetrics"},
        {"nvml-library", "/opt/libnvidia-ml.so.1"},
        {"rocm-library", "none"},
        {"gpu-process-interval", "7000"},
        {"freeipmi-library", "none"},
        {"carbon-intensity", "250"},
        {"energy-idle-policy", "cpu"},
        {"energy-idle-watts-per-cpu", "1.25"},
        {"energy-max-watts-per-cpu", "4"},
        {"idle-threshold", "7.5"},
        {"idle-window", "2700000"},
        {"idle-busy-period", "120000"},
        {"namespace", "ml"},
        {"pod", "train-0"},
        {"pid", "4242"},
        {"window", "90000"},
        {"store", "false"},
        {"retention", "172800000"},
        {"retention-size", "1073741824"},
        {"store-max-series", "5000"},
        {"store-max-series-per-tenant", "100"},
        {"store-tenant-label", "namespace"},
        {"store-max-label-name-length", "128"},
        {"store-max-label-value-length", "2048"},
        {"store-max-labels", "32"},
        {"store-max-samples-per-request", "5000"},
        {"remote-write", ""},
        {"query-url", "http://prom.example:9090"},
        {"kubernetes", "true"},
        {"kubeconfig", "/etc/kube.conf"},
        {"owner-from", "label:team"},
        {"kubelet-pod-resources", "false"},
        {"notify-repeat-interval", "3600000"},
        {"notify-webhook", "file:/etc/hook"},
        {"notify-alertmanager-webhook", "env:AM_HOOK"},
        {"notify-smtp-server", "smtps://mail.example:465"},
        {"notify-smtp-from", "mlwatch <m@example>"},
        {"notify-smtp-to", "a@example, b@example"},
        {"notify-smtp-username", "mailer"},
        {"notify-smtp-password", "file:/etc/smtp-pw"},
        {"notify-smtp-ca-file", "/etc/ca.pem"},
        {"query-timeout", "30000"},
        {"query-max-samples", "1000"},
        {"query-lookback-delta", "600000"},
        {"time", "1767366245.5"},
        {"start", "2026-01-02T15:04:05Z"},
        {"end", "2026-01-02T16:04:05Z"},
        {"step", "15s"},
        {"url", "http://other.example:9090"},
        {"work", "12.5"},
        {"unit", "images"},
    };
    check_values(&c, want, MW_ARRAY_LEN(want));

    const mw_carbon_settings *cb =
        &((const mw_energy_settings *)mw_config_group(&c, &mw_energy_options))->carbon;
    assert_string_equal(cb->url, "https://ci.example/v1");
    assert_string_equal(cb->json_path, "data[0].intensity.actual");
    assert_string_equal(cb->auth_header, "x-token");
    assert_string_equal(cb->auth_file, "/etc/ci-token");
    assert_true(cb->refresh_ms == 600000 && cb->timeout_ms == 3000);
    assert_true(cb->max_body == 2097152);

    const mw_idle_settings *is = mw_config_group(&c, &mw_idle_options);
    assert_int_equal(is->noverrides, 2);
    assert_string_equal(is->overrides[0].ns, "research");
    assert_true(is->overrides[0].threshold == 2);
    assert_true(is->overrides[0].window_ms == 7200000 && is->overrides[0].busy_period_ms == 300000);
    assert_string_equal(is->overrides[1].ns, "notebooks");
    assert_true(is->overrides[1].threshold < 0);
    assert_true(is->overrides[1].window_ms == 900000 && is->overrides[1].busy_period_ms == 0);

    const mw_doctor_settings *d = mw_config_group(&c, &mw_doctor_options);
    assert_true(d->t.history_ms == 120000);
    assert_true(d->t.throttled_ratio == 0.1 && d->t.gpu_corrected_errors == 5);
    assert_true(d->t.busy_cpu_ratio == 0.5); /* not in the file: its default */

    mw_rw_config rc;
    assert_int_equal(mw_rw_config_build(&c, &rc, err, sizeof(err)), 0);
    assert_int_equal(rc.n, 1);
    assert_string_equal(rc.ep[0].url, "http://127.0.0.1:9/api/v1/push");
    assert_string_equal(rc.ep[0].name, "local");
    assert_int_equal(rc.ep[0].next, 2);
    assert_string_equal(rc.ep[0].ext_names[0], "cluster");
    assert_string_equal(rc.ep[0].ext_values[0], "a");
    assert_string_equal(rc.ep[0].ext_names[1], "node");
    assert_string_equal(rc.ep[0].ext_values[1], "n1");
    mw_rw_config_free(&rc);

    /* A copy is an assignment: the same settings, independent. */
    static mw_config copy;
    copy = c;
    check_values(&copy, want, MW_ARRAY_LEN(want));
    ((mw_idle_settings *)mw_config_group_mut(&copy, &mw_idle_options))->noverrides = 0;
    assert_int_equal(is->noverrides, 2);
}

/* The remote_write list is parsed once, into endpoints, when the file is
 * loaded: no size limit of its own (it was 32 KiB as JSON), each build an
 * independent copy with its own compiled rules, --remote-write first and
 * the global labels under each endpoint's own. */
static void remote_write_list_typed(void **state)
{
    (void)state;
    static mw_config c;
    mw_config_defaults(&c);
    char err[1024];
    size_t cap = 200000, len = 0;
    char *y = malloc(cap);
    len += (size_t)snprintf(y + len, cap - len,
                            "external_labels: {node: n1, cluster: g}\n"
                            "remote_write:\n");
    for (int e = 0; e < 7; e++) {
        len += (size_t)snprintf(y + len, cap - len,
                                "  - url: http://127.0.0.1:9/push%d\n"
                                "    external_labels: {cluster: e%d}\n"
                                "    write_relabel_configs:\n",
                                e, e);
        for (int r = 0; r < 60; r++)
            len += (size_t)snprintf(y + len, cap - len,
                                    "      - {source_labels: [__name__], regex: 'metric_%d_%d_"
                                    "with_a_rather_long_name_.*', action: drop}\n",
                                    e, r);
    }
    assert_true(len > 40000); /* 32 KiB was the limit */
    assert_int_equal(mw_config_load_string(&c, "rw.yaml", y, len, err, sizeof(err)), 0);
    free(y);
    mw_rw_settings *rw = mw_config_group_mut(&c, &mw_rw_options);
    assert_non_null(rw->list);
    assert_int_equal(rw->list->n, 7);
    assert_int_equal(rw->external.n, 2);
    mw_strlcpy(rw->url, "http://127.0.0.1:9/flag", sizeof(rw->url));

    mw_rw_config a, b;
    assert_int_equal(mw_rw_config_build(&c, &a, err, sizeof(err)), 0);
    assert_int_equal(mw_rw_config_build(&c, &b, err, sizeof(err)), 0);
    assert_int_equal(a.n, 8);
    assert_string_equal(a.ep[0].url, "http://127.0.0.1:9/flag");
    assert_int_equal(a.ep[0].next, 2);
    assert_string_equal(a.ep[0].ext_names[0], "node");
    assert_string_equal(a.ep[0].ext_values[1], "g");
    assert_string_equal(a.ep[7].url, "http://127.0.0.1:9/push6");
    assert_int_equal(a.ep[7].next, 2);
    assert_string_equal(a.ep[7].ext_names[0], "cluster");
    assert_string_equal(a.ep[7].ext_values[0], "e6"); /* its own wins */
    assert_string_equal(a.ep[7].ext_names[1], "node");
    assert_int_equal(a.ep[7].relabel.n, 60);
    assert_ptr_not_equal(a.ep[7].relabel.rules, b.ep[7].relabel.rules);
    assert_ptr_not_equal(a.ep[7].relabel.rules[0].re, b.ep[7].relabel.rules[0].re);
    mw_rw_config_free(&a);
    /* b works on after a is gone: its rules are its own. */
    mw_arena ar;
    mw_arena_init(&ar, 0);
    mw_rl_labels ls = {.n = 0};
    mw_rl_set(&ls, "__name__", "metric_6_3_with_a_rather_long_name_x");
    assert_int_equal(mw_relabel_apply(&b.ep[7].relabel, &ls, &ar), 0);
    mw_rl_set(&ls, "__name__", "other");
    assert_int_equal(mw_relabel_apply(&b.ep[7].relabel, &ls, &ar), 1);
    mw_arena_free(&ar);
    mw_rw_config_free(&b);

    /* The flag's endpoint counts: 8 from the file are one too many. */
    char more[2048];
    len = (size_t)snprintf(more, sizeof(more), "remote_write:\n");
    for (int e = 0; e < 8; e++)
        len += (size_t)snprintf(more + len, sizeof(more) - len, "  - url: http://127.0.0.1:9/p%d\n",
                                e);
    mw_config_defaults(&c);
    assert_int_equal(mw_config_load_string(&c, "rw.yaml", more, len, err, sizeof(err)), 0);
    rw = mw_config_group_mut(&c, &mw_rw_options);
    mw_strlcpy(rw->url, "http://127.0.0.1:9/flag", sizeof(rw->url));
    assert_int_equal(mw_rw_config_build(&c, &a, err, sizeof(err)), -1);
    assert_string_equal(err, "remote_write[7]: more than 8 endpoints");
    assert_int_equal(a.n, 0);
}

/* ---- a group of the test's own: what a new owner gets ---- */

typedef struct probe_settings {
    char name[16];
    int64_t every_ms;
    char items[4][32];
    size_t nitems;
    int on;
    double ratio;
    uint64_t bytes;
    int sections_seen;
} probe_settings;

static int probe_section(void *settings, const char *file, void *doc, void *node, char *err,
                         size_t errsize)
{
    (void)file;
    (void)doc;
    (void)node;
    (void)err;
    (void)errsize;
    ((probe_settings *)settings)->sections_seen++;
    return 0;
}

#define OPT(n, t, f, d, v, h) MW_OPT(probe_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option probe_rows[] = {
    OPT("probe-name", MW_OPT_STRING, name, "p1", NULL,
        "Probe name"),
    OPT("probe-every", MW_OPT_DURATION, every_ms, "1m30s", NULL,
        "Probe interval"),
    MW_OPT_LIST_OF(probe_settings, "probe-items", items, nitems, "none", NULL,
                   "Probe items"),
    OPT("probe-on", MW_OPT_BOOL, on, "true", NULL,
        "Probe switch"),
    OPT("probe-ratio", MW_OPT_NUMBER, ratio, "0.25", NULL,
        "Probe ratio"),
    OPT("probe-bytes", MW_OPT_SIZE, bytes, "2KiB", NULL,
        "Probe bytes"),
    MW_OPT_SECTION_OF("probe", "none", probe_section,
                      "Probe section"),
};
/* clang-format on */
#undef OPT
static const mw_option_group probe_options =
    MW_OPTION_GROUP("test probe", "tests/unit/test_options.c", probe_settings, probe_rows, NULL);

static void group_of_its_own(void **state)
{
    (void)state;
    mw_config_register_group(&probe_options);
    mw_config_register_group(&probe_options); /* twice: once */
    static mw_config c;
    mw_config_defaults(&c);
    const probe_settings *p = mw_config_group(&c, &probe_options);
    assert_string_equal(p->name, "p1");
    assert_true(p->every_ms == 90000);
    assert_int_equal(p->nitems, 0);
    assert_int_equal(p->on, 1);
    assert_true(p->ratio == 0.25);
    assert_true(p->bytes == 2048);
    assert_int_equal(p->sections_seen, 0);

    char err[512];
    const char *y = "probe_name: p2\nprobe_items: [a, b]\nprobe:\n  anything: 1\n";
    assert_int_equal(mw_config_load_string(&c, "p.yaml", y, strlen(y), err, sizeof(err)), 0);
    char *argv[] = {"mlwatch", "agent", "--probe-on=false", "--probe-every", "5s"};
    assert_int_equal(
        mw_config_from_args(&c, MW_ARRAY_LEN(argv), argv, 2, NULL, NULL, 0, err, sizeof(err)), 0);
    assert_string_equal(p->name, "p2");
    assert_int_equal(p->nitems, 2);
    assert_string_equal(p->items[1], "b");
    assert_int_equal(p->on, 0);
    assert_true(p->every_ms == 5000);
    assert_int_equal(p->sections_seen, 1);
    /* Errors read as every other option's. */
    char *bad[] = {"mlwatch", "agent", "--probe-name", "a-name-longer-than-15"};
    assert_int_equal(
        mw_config_from_args(&c, MW_ARRAY_LEN(bad), bad, 2, NULL, NULL, 0, err, sizeof(err)), -1);
    assert_string_equal(err, "--probe-name: value is longer than 15 characters");
    assert_int_equal(
        mw_config_load_string(&c, "p.yaml", "probe: 1\nprobe: 2\n", 18, err, sizeof(err)), -1);
    assert_string_equal(err, "p.yaml:2:1: duplicate key 'probe' (first set on line 1)");

    char *help = NULL, *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&help, &len);
    mw_config_print_help(f);
    fclose(f);
    f = open_memstream(&md, &len);
    mw_config_print_markdown(f);
    fclose(f);
    assert_non_null(strstr(help,
                           "\n  test probe (tests/unit/test_options.c):\n"
                           "  --probe-name VALUE             Probe name (default: p1)\n"
                           "  --probe-every DURATION         Probe interval (default: 1m30s)\n"
                           "  --probe-items LIST             Probe items (default: none)\n"));
    assert_non_null(strstr(md, "\n| `--probe-bytes` | `probe_bytes` | `2KiB` | Probe bytes |\n"
                               "| (config file only) | `probe` | `none` | Probe section |\n"));
    free(help);
    free(md);
}

/* A name another owner has, or a group never registered: mistakes in the
 * code, which stop the program with a line saying which. */
static void registry_refusals(void **state)
{
    (void)state;
    static const mw_option dup_rows[] = {
        MW_OPT(probe_settings, "interval", MW_OPT_DURATION, every_ms, "1s", NULL, "Clash"),
    };
    static const mw_option_group dup =
        MW_OPTION_GROUP("test clash", "tests/unit/test_options.c", probe_settings, dup_rows, NULL);
    static const mw_option_group never =
        MW_OPTION_GROUP("test never", "tests/unit/test_options.c", probe_settings, dup_rows, NULL);
    const struct {
        int which;
        const char *line;
    } cases[] = {
        {0, "mlwatch: option --interval of test clash is also an option of global\n"},
        {1, "mlwatch: the options of test never were never registered\n"},
    };
    for (size_t i = 0; i < MW_ARRAY_LEN(cases); i++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            dup2(fds[1], 2);
            static mw_config c;
            if (cases[i].which == 0)
                mw_config_register_group(&dup);
            else
                (void)mw_config_group(&c, &never);
            _exit(0);
        }
        close(fds[1]);
        char buf[512] = "";
        ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
        close(fds[0]);
        buf[n > 0 ? n : 0] = '\0';
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
        assert_string_equal(buf, cases[i].line);
    }
}

static int setup(void **state)
{
    (void)state;
    mw_options_register_all();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_of_every_owner), cmocka_unit_test(full_file_loads),
        cmocka_unit_test(remote_write_list_typed), cmocka_unit_test(group_of_its_own),
        cmocka_unit_test(registry_refusals),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
