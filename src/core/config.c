/* config.c - settings from flags and YAML, driven by one options table. */
#include "config.h"
#include "log.h"
#include "units.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

int (*mw_config_collector_exists)(const char *name);

typedef enum {
    OPT_STRING,
    OPT_PATH,
    OPT_DURATION, /* int64_t milliseconds, > 0 */
    OPT_LIST,     /* char[N][32] with a size_t count */
    OPT_BOOL,     /* int 0/1; a flag without "=VALUE" means true */
    OPT_NUMBER,   /* double */
    OPT_SIZE,     /* uint64_t bytes ("512MiB") */
    OPT_SECTION,  /* YAML-only nested settings, parsed by the option's section() */
} opt_type;

typedef struct option {
    const char *name; /* flag "--name"; YAML key is name with '-' as '_' */
    opt_type type;
    size_t offset, size; /* field in mw_config; for OPT_LIST the count field */
    size_t count_offset;
    const char *def; /* default, as text (documentation) */
    const char *help;
    /* Extra validation; writes the reason into why. */
    int (*validate)(const char *value, char *why, size_t whysize);
    /* OPT_SECTION: parse the YAML node (a yaml_node_t * of document doc) into
     * c; on error write "FILE:LINE:COL: problem" into err and return -1. */
    int (*section)(mw_config *c, const char *file, void *doc, void *node, char *err,
                   size_t errsize);
} option;

static int check_listen(const char *v, char *why, size_t n)
{
    char host[256];
    uint16_t port;
    if (mw_parse_listen(v, host, sizeof(host), &port) == 0) return 0;
    snprintf(why, n, "must be ADDR:PORT with a port from 0 to 65535, like :%d or 127.0.0.1:%d",
             MW_DEFAULT_PORT, MW_DEFAULT_PORT);
    return -1;
}

static int check_log_level(const char *v, char *why, size_t n)
{
    mw_log_level l;
    if (mw_log_level_parse(v, &l) == 0) return 0;
    snprintf(why, n, "must be one of debug, info, warn, error");
    return -1;
}

/* Store limits: a whole number of series, bytes or samples (0: no limit). */
static int check_store_count(const char *v, char *why, size_t n)
{
    char *end;
    double d = strtod(v, &end);
    if (*v && !*end && d >= 0 && d <= 1e15 && d == (double)(long long)d) return 0;
    snprintf(why, n, "must be a whole number from 0 to 1e15, got '%s'", v);
    return -1;
}

static int check_format(const char *v, char *why, size_t n)
{
    if (strcmp(v, "text") == 0 || strcmp(v, "openmetrics") == 0) return 0;
    snprintf(why, n, "must be text or openmetrics");
    return -1;
}

static int check_percent(const char *v, char *why, size_t n)
{
    char *end;
    double d = strtod(v, &end);
    if (*v && !*end && d >= 0 && d <= 100) return 0;
    snprintf(why, n, "must be a percentage from 0 to 100, got '%s'", v);
    return -1;
}

static int check_owner_from(const char *v, char *why, size_t n)
{
    if (strcmp(v, "namespace") == 0 || (strncmp(v, "label:", 6) == 0 && v[6]) ||
        (strncmp(v, "annotation:", 11) == 0 && v[11]))
        return 0;
    snprintf(why, n, "must be namespace, label:KEY or annotation:KEY");
    return -1;
}

static int check_pid(const char *v, char *why, size_t n)
{
    char *end;
    errno = 0;
    long pid = strtol(v, &end, 10);
    if (*v >= '1' && *v <= '9' && !*end && !errno && pid > 0 && pid <= 4194304) return 0;
    snprintf(why, n, "must be a process ID from 1 to 4194304, got '%s'", v);
    return -1;
}

static int check_idle_policy(const char *v, char *why, size_t n)
{
    if (strcmp(v, "none") == 0 || strcmp(v, "requests") == 0 || strcmp(v, "cpu") == 0) return 0;
    snprintf(why, n, "must be none, requests or cpu");
    return -1;
}

static int check_collector(const char *v, char *why, size_t n)
{
    if (!mw_config_collector_exists || mw_config_collector_exists(v)) return 0;
    snprintf(why, n, "no collector named '%s' (see `mlwatch help`)", v);
    return -1;
}

/* One row per setting. Scalars: OPT(flag, type, field, default, help, validate).
 * Lists: OPT_LIST_OF(flag, field, count field, default, help, validate).
 * Config-file sections: SECTION(key, default, help, parser). */
#define OPT(n, t, f, d, h, v)                                                                      \
    {                                                                                              \
        .name = n, .type = t, .offset = offsetof(mw_config, f),                                    \
        .size = sizeof(((mw_config *)0)->f), .def = d, .help = h, .validate = v                    \
    }
#define OPT_LIST_OF(n, f, cnt, d, h, v)                                                            \
    {                                                                                              \
        .name = n, .type = OPT_LIST, .offset = offsetof(mw_config, f),                             \
        .size = sizeof(((mw_config *)0)->f), .count_offset = offsetof(mw_config, cnt), .def = d,   \
        .help = h, .validate = v                                                                   \
    }
#define SECTION(n, d, h, fn)                                                                       \
    {                                                                                              \
        .name = n, .type = OPT_SECTION, .def = d, .help = h, .section = fn                         \
    }

static const option options[] = {
    OPT("root", OPT_PATH, root, "/",
        "Host prefix under which /proc, /sys, /var/log/pods and /var/lib/kubelet are read", NULL),
    OPT("listen", OPT_STRING, listen, ":10230",
        "ADDR:PORT for /metrics and the API (empty ADDR = all interfaces)", check_listen),
    OPT("interval", OPT_DURATION, interval_ms, "1s", "Collection interval", NULL),
    OPT("config", OPT_PATH, config_path, "", "YAML configuration file", NULL),
    OPT("log-level", OPT_STRING, log_level, "info", "debug, info, warn or error", check_log_level),
    OPT("format", OPT_STRING, format, "text",
        "`mlwatch metrics` output: text (Prometheus 0.0.4) or openmetrics", check_format),
    OPT_LIST_OF("collectors", collectors, ncollectors, "all", "Comma-separated collectors to run",
                check_collector),
    OPT_LIST_OF("disable-collectors", disable_collectors, ndisable_collectors, "none",
                "Comma-separated collectors to switch off", check_collector),
    OPT("nvml-library", OPT_PATH, nvml_library, "libnvidia-ml.so.1",
        "NVIDIA NVML library to load for GPU metrics (none: no NVIDIA GPUs)", NULL),
    OPT("rocm-library", OPT_PATH, rocm_library, "auto",
        "AMD ROCm SMI library for GPU metrics; auto tries librocm_smi64.so.7, .6, .5, .1 when the "
        "amdgpu driver is loaded (none: no AMD GPUs)",
        NULL),
    OPT("gpu-process-interval", OPT_DURATION, gpu_process_interval_ms, "5s",
        "Interval of slow GPU calls: process lists, MIG, ECC, NVLink, PCIe", NULL),
    OPT("idle-threshold", OPT_NUMBER, idle_threshold, "5",
        "GPU utilization (percent) below which a held GPU counts as idle", check_percent),
    OPT("idle-window", OPT_DURATION, idle_window_ms, "30m",
        "How long a held GPU must stay below --idle-threshold before it is an idle session", NULL),
    OPT("idle-busy-period", OPT_DURATION, idle_busy_period_ms, "1m",
        "How long an idle session must stay above the threshold to end (hysteresis)", NULL),
    SECTION("idle", "none",
            "Per-namespace idle overrides: idle: {namespaces: {NS: {threshold: 2, window: 2h, "
            "busy_period: 5m}}}",
            mw_idle_config_section),
    OPT("kubernetes", OPT_BOOL, kubernetes, "false",
        "Watch this node's pods through the API server (in-cluster service account, or "
        "--kubeconfig) for workload and owner labels",
        NULL),
    OPT("kubeconfig", OPT_PATH, kubeconfig, "",
        "kubeconfig file for --kubernetes (default: the in-cluster service account)", NULL),
    OPT("kubelet-pod-resources", OPT_BOOL, kubelet_pod_resources, "true",
        "Learn GPUs allocated to pods from the kubelet's pod-resources socket (off when absent)",
        NULL),
    OPT("node-name", OPT_STRING, node_name, "",
        "This node's name for --kubernetes (default: $NODE_NAME, else the host name)", NULL),
    OPT("owner-from", OPT_STRING, owner_from, "namespace",
        "Owner of a pod: namespace, label:KEY or annotation:KEY", check_owner_from),
    OPT("notify-webhook", OPT_STRING, notify_webhook, "",
        "Mattermost or Slack incoming webhook URL for idle GPU sessions: URL, file:PATH or "
        "env:NAME",
        NULL),
    OPT("notify-alertmanager-webhook", OPT_STRING, notify_alertmanager_webhook, "",
        "Webhook receiving Alertmanager's webhook payload (version 4): URL, file:PATH or env:NAME",
        NULL),
    OPT("notify-smtp-server", OPT_STRING, notify_smtp_server, "",
        "SMTP server for idle GPU e-mail, smtp://HOST:PORT (STARTTLS required) or "
        "smtps://HOST:PORT",
        NULL),
    OPT("notify-smtp-from", OPT_STRING, notify_smtp_from, "", "Sender address of e-mail", NULL),
    OPT("notify-smtp-to", OPT_STRING, notify_smtp_to, "", "Comma-separated recipients of e-mail",
        NULL),
    OPT("notify-smtp-username", OPT_STRING, notify_smtp_username, "", "SMTP user name", NULL),
    OPT("notify-smtp-password", OPT_STRING, notify_smtp_password, "",
        "SMTP password: file:PATH or env:NAME (a literal works but shows in the process list)",
        NULL),
    OPT("notify-smtp-ca-file", OPT_PATH, notify_smtp_ca_file, "",
        "CA bundle to verify the SMTP server with (default: the system's)", NULL),
    OPT("notify-repeat-interval", OPT_DURATION, notify_repeat_interval_ms, "4h",
        "Repeat a notification for a session still idle after this long", NULL),
    OPT("state-dir", OPT_PATH, state_dir, "/var/lib/mlwatch",
        "Folder for state kept across restarts (notifications sent)", NULL),
    OPT("namespace", OPT_STRING, doctor_namespace, "",
        "`mlwatch doctor`: only findings of this Kubernetes namespace (and the node's own)", NULL),
    OPT("pod", OPT_STRING, doctor_pod, "",
        "`mlwatch doctor`: only findings of this pod (and the node's own)", NULL),
    OPT("pid", OPT_STRING, doctor_pid, "",
        "`mlwatch doctor`: only findings of the container this process runs in", check_pid),
    OPT("json", OPT_BOOL, doctor_json, "false",
        "`mlwatch doctor`, `mlwatch run`, `mlwatch query`: print JSON", NULL),
    OPT("window", OPT_DURATION, doctor_window_ms, "auto",
        "`mlwatch doctor`: how far back to look (auto: the agent's whole history, or 10s of "
        "sampling when no agent answers on --listen)",
        NULL),
    SECTION("doctor", "see docs/doctor.md",
            "Thresholds of the doctor's findings and the agent's history: doctor: {history: 5m, "
            "throttled_ratio: 0.05, ...}",
            mw_doctor_config_section),
    OPT("data-dir", OPT_PATH, data_dir, "/var/lib/mlwatch",
        "Folder for data kept across restarts (the store; remote-write queues under "
        "remote-write/ENDPOINT/)",
        NULL),
    /* A flag and a scalar key for one URL; a list in the file is parsed by
     * the section function (see load_document). */
    {.name = "remote-write",
     .type = OPT_STRING,
     .offset = offsetof(mw_config, remote_write_url),
     .size = sizeof(((mw_config *)0)->remote_write_url),
     .def = "",
     .help = "Prometheus remote-write URL to ship every sample to; in the config file also a "
             "list of endpoints with auth, TLS, queue and write_relabel_configs "
             "(docs/remote-write.md)",
     .validate = NULL,
     .section = mw_rw_config_section},
    SECTION("external-labels", "none",
            "Labels added to every series shipped by remote write: external_labels: {node: n1}",
            mw_rw_external_labels_section),
    OPT("carbon-intensity", OPT_STRING, carbon_intensity, "",
        "Grid carbon intensity for CO2: a number (gCO2eq/kWh), a schedule CSV file (TIME,GRAMS) "
        "or an http(s) URL of a JSON API (see the carbon: section, docs/energy.md)",
        NULL),
    SECTION("carbon", "none",
            "Carbon intensity API: carbon: {url: URL, json_path: data[0].intensity.actual, "
            "auth_header: auth-token, auth_file: PATH, refresh: 5m, timeout: 10s, max_body: 1MiB}",
            mw_carbon_config_section),
    OPT("energy-idle-policy", OPT_STRING, energy_idle_policy, "none",
        "Idle (static) host energy: none (unattributed), requests (shared by the containers' CPU "
        "requests) or cpu (shared by CPU time)",
        check_idle_policy),
    OPT("energy-idle-watts-per-cpu", OPT_NUMBER, energy_idle_watts_per_cpu, "0.74",
        "Estimation model without RAPL: watts per CPU at 0% utilization", NULL),
    OPT("energy-max-watts-per-cpu", OPT_NUMBER, energy_max_watts_per_cpu, "3.5",
        "Estimation model without RAPL: watts per CPU at 100% utilization", NULL),
    OPT("freeipmi-library", OPT_PATH, freeipmi_library, "libfreeipmi.so.17",
        "FreeIPMI library for node power (IPMI DCMI, in-band /dev/ipmi0); none: off", NULL),
    OPT("work", OPT_NUMBER, run_work, "0",
        "`mlwatch run`: units of work the command does, for joules per unit", NULL),
    OPT("unit", OPT_STRING, run_unit, "unit", "`mlwatch run`: name of a unit of --work", NULL),
    OPT("store", OPT_BOOL, store, "true",
        "Keep samples in the embedded store in DATA-DIR/data (the agent's own every interval, "
        "and remote writes to /api/v1/write); false: neither",
        NULL),
    OPT("retention", OPT_DURATION, retention_ms, "15d", "How long the store keeps samples", NULL),
    OPT("retention-size", OPT_SIZE, retention_size, "0",
        "Most bytes the store may use on disk, oldest blocks deleted first (0: no limit)", NULL),
    OPT("store-max-series", OPT_NUMBER, store_max_series, "10000000",
        "Most active series in the store; writes that would add more get 429 (0: no limit)",
        check_store_count),
    OPT("store-max-series-per-tenant", OPT_NUMBER, store_max_series_per_tenant, "0",
        "Most active series per value of --store-tenant-label; beyond it 429 (0: no limit)",
        check_store_count),
    OPT("store-tenant-label", OPT_STRING, store_tenant_label, "",
        "Label whose values are tenants for --store-max-series-per-tenant (e.g. namespace)", NULL),
    OPT("store-max-label-name-length", OPT_NUMBER, store_max_label_name_length, "256",
        "Longest label name the store accepts, bytes; beyond it 400 (0: no limit)",
        check_store_count),
    OPT("store-max-label-value-length", OPT_NUMBER, store_max_label_value_length, "4096",
        "Longest label value the store accepts, bytes; beyond it 400 (0: no limit)",
        check_store_count),
    OPT("store-max-labels", OPT_NUMBER, store_max_labels, "64",
        "Most labels per series (at most 255); beyond it 400", check_store_count),
    OPT("store-max-samples-per-request", OPT_NUMBER, store_max_samples_per_request, "1000000",
        "Most samples in one remote-write request; beyond it 400 (0: no limit)", check_store_count),
    OPT("time", OPT_STRING, query_time, "",
        "`mlwatch query`: evaluation time, RFC 3339 or unix seconds (default: now)",
        mw_query_check_time),
    OPT("start", OPT_STRING, query_start, "",
        "`mlwatch query`: range query start, RFC 3339 or unix seconds", mw_query_check_time),
    OPT("end", OPT_STRING, query_end, "",
        "`mlwatch query`: range query end, RFC 3339 or unix seconds", mw_query_check_time),
    OPT("step", OPT_STRING, query_step, "",
        "`mlwatch query`: range query step, a duration (15s) or float seconds",
        mw_query_check_step),
    OPT("url", OPT_STRING, query_url, "",
        "`mlwatch query`, `mlwatch doctor`: base URL of the agent to ask (query: or of any "
        "Prometheus-compatible server; default: the agent on --listen)",
        NULL),
    OPT("query-url", OPT_STRING, ui_query_url, "",
        "Web UI: send its PromQL queries to this Prometheus-compatible base URL (Prometheus, "
        "Thanos, Mimir, VictoriaMetrics) instead of the embedded store",
        mw_ui_check_query_url),
    OPT("query-timeout", OPT_DURATION, query_timeout_ms, "2m",
        "Longest one PromQL query may take, evaluated from the store or forwarded to --query-url "
        "(an HTTP thread is busy meanwhile); beyond it errorType timeout (503, or 504 from "
        "--query-url)",
        NULL),
    OPT("query-max-samples", OPT_NUMBER, query_max_samples, "20000000",
        "Most samples one PromQL query may hold in memory at once (loaded and computed); "
        "beyond it 422 (0: no limit)",
        check_store_count),
    OPT("query-lookback-delta", OPT_DURATION, query_lookback_ms, "5m",
        "How far back an instant selector looks for a series' latest sample, as Prometheus's "
        "--query.lookback-delta",
        NULL),
};

void mw_config_defaults(mw_config *c)
{
    /* Not memset: main()'s configuration is a static whose untouched pages
     * stay off the resident set (mw_assign_sparse). */
    mw_assign_sparse(c, NULL, sizeof(*c));
    mw_strlcpy(c->root, "/", sizeof(c->root));
    snprintf(c->listen, sizeof(c->listen), ":%d", MW_DEFAULT_PORT);
    c->interval_ms = 1000;
    mw_strlcpy(c->log_level, "info", sizeof(c->log_level));
    mw_strlcpy(c->format, "text", sizeof(c->format));
    mw_strlcpy(c->nvml_library, "libnvidia-ml.so.1", sizeof(c->nvml_library));
    mw_strlcpy(c->rocm_library, "auto", sizeof(c->rocm_library));
    c->gpu_process_interval_ms = 5000;
    c->idle_threshold = 5;
    c->idle_window_ms = 30 * 60 * 1000;
    c->idle_busy_period_ms = 60 * 1000;
    mw_strlcpy(c->owner_from, "namespace", sizeof(c->owner_from));
    c->notify_repeat_interval_ms = 4 * 3600 * 1000;
    mw_strlcpy(c->state_dir, "/var/lib/mlwatch", sizeof(c->state_dir));
    mw_doctor_thresholds_defaults(&c->doctor);
    mw_strlcpy(c->data_dir, "/var/lib/mlwatch", sizeof(c->data_dir));
    c->carbon_refresh_ms = 5 * 60 * 1000;
    c->carbon_timeout_ms = 10 * 1000;
    c->carbon_max_body = 1 << 20;
    mw_strlcpy(c->carbon_json_path, "carbonIntensity", sizeof(c->carbon_json_path));
    mw_strlcpy(c->carbon_auth_header, "auth-token", sizeof(c->carbon_auth_header));
    mw_strlcpy(c->energy_idle_policy, "none", sizeof(c->energy_idle_policy));
    c->energy_idle_watts_per_cpu = 0.74;
    c->energy_max_watts_per_cpu = 3.5;
    mw_strlcpy(c->freeipmi_library, "libfreeipmi.so.17", sizeof(c->freeipmi_library));
    mw_strlcpy(c->run_unit, "unit", sizeof(c->run_unit));
    c->store = 1;
    c->retention_ms = 15LL * 24 * 3600 * 1000;
    c->store_max_series = 10000000;
    c->store_max_label_name_length = 256;
    c->store_max_label_value_length = 4096;
    c->store_max_labels = 64;
    c->store_max_samples_per_request = 1000000;
    c->kubelet_pod_resources = 1;
    c->query_timeout_ms = 2 * 60 * 1000;
    c->query_max_samples = 20000000;
    c->query_lookback_ms = 5 * 60 * 1000;
}

int mw_parse_listen(const char *s, char *host, size_t hostsize, uint16_t *port)
{
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':') return -1;
        size_t n = (size_t)(close - s - 1);
        if (n == 0 || n >= hostsize) return -1;
        memcpy(host, s + 1, n);
        host[n] = '\0';
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) return -1;
        size_t n = (size_t)(colon - s);
        if (n >= hostsize || memchr(s, ':', n)) return -1;
        memcpy(host, s, n);
        host[n] = '\0';
    }
    const char *p = colon + 1;
    char *end;
    if (*p < '0' || *p > '9') return -1;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (*end || errno || v < 0 || v > 65535) return -1; /* 0: the kernel picks */
    *port = (uint16_t)v;
    return 0;
}

static void yaml_key_of(const option *o, char *out, size_t n)
{
    mw_strlcpy(out, o->name, n);
    for (char *p = out; *p; p++)
        if (*p == '-') *p = '_';
}

static const option *find_option(const char *name, int yaml)
{
    for (size_t i = 0; i < MW_ARRAY_LEN(options); i++) {
        char key[64];
        if (yaml)
            yaml_key_of(&options[i], key, sizeof(key));
        else
            mw_strlcpy(key, options[i].name, sizeof(key));
        if (strcmp(key, name) == 0) return &options[i];
    }
    return NULL;
}

/* Set one scalar value (or one list element when append is set). */
static int set_value(mw_config *c, const option *o, const char *v, int append, char *why,
                     size_t whysize)
{
    char *field = (char *)c + o->offset;
    if (o->validate && o->type != OPT_LIST && o->validate(v, why, whysize) < 0) return -1;
    switch (o->type) {
    case OPT_STRING:
    case OPT_PATH:
        if (strlen(v) >= o->size) {
            snprintf(why, whysize, "value is longer than %zu characters", o->size - 1);
            return -1;
        }
        mw_strlcpy(field, v, o->size);
        return 0;
    case OPT_DURATION: {
        int64_t ms;
        if (mw_parse_duration_ms(v, &ms) < 0 || ms <= 0) {
            snprintf(why, whysize, "invalid duration '%s' (examples: 1s, 500ms, 1m30s)", v);
            return -1;
        }
        *(int64_t *)(void *)field = ms;
        return 0;
    }
    case OPT_BOOL:
        if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
            *(int *)(void *)field = 1;
        else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
            *(int *)(void *)field = 0;
        else {
            snprintf(why, whysize, "must be true or false, got '%s'", v);
            return -1;
        }
        return 0;
    case OPT_NUMBER: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (!*v || *end || errno || d != d) {
            snprintf(why, whysize, "must be a number, got '%s'", v);
            return -1;
        }
        *(double *)(void *)field = d;
        return 0;
    }
    case OPT_SIZE: {
        uint64_t bytes;
        if (mw_parse_size(v, &bytes) < 0) {
            snprintf(why, whysize, "invalid size '%s' (examples: 512MiB, 1GB, 4096)", v);
            return -1;
        }
        *(uint64_t *)(void *)field = bytes;
        return 0;
    }
    case OPT_SECTION:
        snprintf(why, whysize, "can only be set in the config file");
        return -1;
    case OPT_LIST: {
        size_t *count = (size_t *)(void *)((char *)c + o->count_offset);
        size_t elem = 32, cap = o->size / elem;
        if (!append) *count = 0;
        /* A flag value is comma-separated; a YAML sequence gives one item at a
         * time. An empty value (not an empty sequence item) means the default. */
        const char *p = v;
        if (!*p && !append) return 0;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char item[64];
            if (n == 0 || n >= elem) {
                snprintf(why, whysize, "invalid list item '%.*s'", (int)(n < 60 ? n : 60), p);
                return -1;
            }
            memcpy(item, p, n);
            item[n] = '\0';
            if (o->validate && o->validate(item, why, whysize) < 0) return -1;
            if (*count >= cap) {
                snprintf(why, whysize, "more than %zu items", cap);
                return -1;
            }
            mw_strlcpy(field + *count * elem, item, elem);
            (*count)++;
            p += n;
            if (*p != ',') return 0;
            p++; /* a trailing comma leaves an empty item: refused above */
        }
    }
    }
    return -1;
}

/* Errors are one line: a key, a value or an argument with a newline or other
 * control character in it must not break the message (or forge a log line). */
static int one_line(char *err)
{
    for (unsigned char *p = (unsigned char *)err; *p; p++)
        if (*p < 0x20 || *p == 0x7f) *p = '?';
    return -1;
}

/* ---- YAML ---- */

static int yaml_fail(char *err, size_t errsize, const char *name, const yaml_mark_t *m,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int yaml_fail(char *err, size_t errsize, const char *name, const yaml_mark_t *m,
                     const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(err, errsize, "%s:%zu:%zu: %s", name, m->line + 1, m->column + 1, msg);
    return -1;
}

/* The scalar's text, or NULL when it holds a NUL ("\0" escape), which C
 * strings would silently cut. */
static const char *scalar_text(const yaml_node_t *n)
{
    const char *t = (const char *)n->data.scalar.value;
    return strlen(t) == n->data.scalar.length ? t : NULL;
}

static int is_empty_document(yaml_document_t *doc)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    return !root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0);
}

static int load_document(mw_config *c, const char *name, yaml_document_t *doc, char *err,
                         size_t errsize)
{
    size_t seen_line[MW_ARRAY_LEN(options)] = {0}; /* 1-based line of each key, 0 = unseen */
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (is_empty_document(doc)) return 0; /* empty file: all defaults */
    if (root->type != YAML_MAPPING_NODE)
        return yaml_fail(err, errsize, name, &root->start_mark,
                         "the top level must be a mapping of settings (key: value)");
    for (yaml_node_pair_t *pair = root->data.mapping.pairs.start;
         pair < root->data.mapping.pairs.top; pair++) {
        yaml_node_t *k = yaml_document_get_node(doc, pair->key);
        yaml_node_t *v = yaml_document_get_node(doc, pair->value);
        if (!k || !v) continue;
        if (k->type != YAML_SCALAR_NODE)
            return yaml_fail(err, errsize, name, &k->start_mark, "keys must be plain names");
        const char *key = scalar_text(k);
        if (!key) return yaml_fail(err, errsize, name, &k->start_mark, "keys must be plain names");
        const option *o = find_option(key, 1);
        if (!o || strcmp(o->name, "config") == 0)
            return yaml_fail(err, errsize, name, &k->start_mark, "unknown key '%s'", key);
        size_t idx = (size_t)(o - options);
        if (seen_line[idx])
            return yaml_fail(err, errsize, name, &k->start_mark,
                             "duplicate key '%s' (first set on line %zu)", key, seen_line[idx]);
        seen_line[idx] = k->start_mark.line + 1;
        char why[256];
        if (o->type == OPT_SECTION || (o->section && v->type != YAML_SCALAR_NODE)) {
            if (o->section(c, name, doc, v, err, errsize) < 0) return -1;
            continue;
        }
        if (o->type == OPT_LIST) {
            size_t *count = (size_t *)(void *)((char *)c + o->count_offset);
            *count = 0;
            if (v->type == YAML_SCALAR_NODE) {
                if (!scalar_text(v))
                    return yaml_fail(err, errsize, name, &v->start_mark,
                                     "%s: value contains a NUL character", key);
                if (set_value(c, o, scalar_text(v), 0, why, sizeof(why)) < 0)
                    return yaml_fail(err, errsize, name, &v->start_mark, "%s: %s", key, why);
            } else if (v->type == YAML_SEQUENCE_NODE) {
                for (yaml_node_item_t *it = v->data.sequence.items.start;
                     it < v->data.sequence.items.top; it++) {
                    yaml_node_t *item = yaml_document_get_node(doc, *it);
                    if (!item || item->type != YAML_SCALAR_NODE)
                        return yaml_fail(err, errsize, name,
                                         item ? &item->start_mark : &v->start_mark,
                                         "%s: list items must be names", key);
                    if (!scalar_text(item))
                        return yaml_fail(err, errsize, name, &item->start_mark,
                                         "%s: value contains a NUL character", key);
                    if (set_value(c, o, scalar_text(item), 1, why, sizeof(why)) < 0)
                        return yaml_fail(err, errsize, name, &item->start_mark, "%s: %s", key, why);
                }
            } else {
                return yaml_fail(err, errsize, name, &v->start_mark, "%s: expected a list of names",
                                 key);
            }
            continue;
        }
        if (v->type != YAML_SCALAR_NODE)
            return yaml_fail(err, errsize, name, &v->start_mark,
                             "%s: expected a single value, got a %s", key,
                             v->type == YAML_MAPPING_NODE ? "mapping" : "list");
        if (!scalar_text(v))
            return yaml_fail(err, errsize, name, &v->start_mark,
                             "%s: value contains a NUL character", key);
        if (set_value(c, o, scalar_text(v), 0, why, sizeof(why)) < 0)
            return yaml_fail(err, errsize, name, &v->start_mark, "%s: %s", key, why);
    }
    return 0;
}

static int syntax_error(yaml_parser_t *parser, const char *name, char *err, size_t errsize)
{
    snprintf(err, errsize, "%s:%zu:%zu: YAML syntax error: %s", name, parser->problem_mark.line + 1,
             parser->problem_mark.column + 1, parser->problem ? parser->problem : "unknown");
    return -1;
}

int mw_config_load_string(mw_config *c, const char *name, const char *text, size_t len, char *err,
                          size_t errsize)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errsize, "%s: cannot initialise the YAML parser", name);
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        syntax_error(&parser, name, err, errsize);
        yaml_parser_delete(&parser);
        return one_line(err);
    }
    /* Settings land in a copy: a file with an error changes nothing. */
    mw_config *tmp = mw_xmalloc(sizeof(*tmp));
    *tmp = *c;
    int rc = load_document(tmp, name, &doc, err, errsize);
    int had_root = yaml_document_get_root_node(&doc) != NULL;
    yaml_document_delete(&doc);
    /* One document per file: a second one ("---") would otherwise be ignored
     * without a word, syntax errors and all. */
    if (rc == 0 && had_root) {
        if (!yaml_parser_load(&parser, &doc)) {
            rc = syntax_error(&parser, name, err, errsize);
        } else {
            if (!is_empty_document(&doc))
                rc = yaml_fail(err, errsize, name, &yaml_document_get_root_node(&doc)->start_mark,
                               "a second YAML document; the file must hold one mapping");
            yaml_document_delete(&doc);
        }
    }
    if (rc == 0) mw_assign_sparse(c, tmp, sizeof(*c));
    free(tmp);
    yaml_parser_delete(&parser);
    return rc == 0 ? 0 : one_line(err);
}

int mw_config_load_file(mw_config *c, const char *path, char *err, size_t errsize)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsize, "%s: cannot open config file: %s", path, strerror(errno));
        return one_line(err);
    }
    /* A configuration file is small; refuse anything absurd rather than read it. */
    char *text = mw_xmalloc(1 << 20);
    size_t len = fread(text, 1, 1 << 20, f);
    int toolong = len == (1 << 20);
    int rerr = ferror(f);
    fclose(f);
    if (rerr || toolong) {
        snprintf(err, errsize, "%s: %s", path,
                 rerr ? "cannot read config file" : "config file is larger than 1 MiB");
        free(text);
        return one_line(err);
    }
    int rc = mw_config_load_string(c, path, text, len, err, errsize);
    free(text);
    return rc;
}

/* ---- flags ---- */

static int from_args(mw_config *c, int argc, char **argv, int first, char **rest, size_t *nrest,
                     size_t rest_cap, char *err, size_t errsize)
{
    if (nrest) *nrest = 0;
    /* Pass 1: find --config so that the file is applied before other flags. */
    const char *config = NULL;
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        const char *a = argv[i];
        if (strncmp(a, "--config=", 9) == 0 || strcmp(a, "--config") == 0) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[i + 1] : NULL);
            if (!v || !*v) {
                snprintf(err, errsize, "--config: missing value");
                return -1;
            }
            /* Loading both would merge them silently; keeping one would drop
             * the other silently. Neither is what the user can expect. */
            if (config) {
                snprintf(err, errsize, "--config: given more than once");
                return -1;
            }
            config = v;
            if (a[8] != '=') i++; /* the value is not a flag */
        }
    }
    if (config) {
        if (mw_config_load_file(c, config, err, errsize) < 0) return -1;
        mw_strlcpy(c->config_path, config, sizeof(c->config_path));
    }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            for (i++; i < argc; i++) {
                if (!rest || *nrest >= rest_cap) {
                    snprintf(err, errsize, "unexpected argument '%s'", argv[i]);
                    return -1;
                }
                rest[(*nrest)++] = argv[i];
            }
            break;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (!rest || *nrest >= rest_cap) {
                snprintf(err, errsize, "unexpected argument '%s'", a);
                return -1;
            }
            rest[(*nrest)++] = argv[i];
            continue;
        }
        char name[64];
        const char *eq = strchr(a + 2, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof(name)) n = sizeof(name) - 1;
        memcpy(name, a + 2, n);
        name[n] = '\0';
        const option *o = find_option(name, 0);
        if (!o || o->type == OPT_SECTION) {
            snprintf(err, errsize, "unknown flag '--%s' (see `mlwatch help`)", name);
            return -1;
        }
        const char *v;
        if (eq)
            v = eq + 1;
        else if (o->type == OPT_BOOL)
            v = "true"; /* a bare boolean flag switches it on */
        else if (i + 1 < argc)
            v = argv[++i];
        else {
            snprintf(err, errsize, "--%s: missing value", name);
            return -1;
        }
        if (strcmp(o->name, "config") == 0) continue; /* handled in pass 1 */
        char why[256];
        if (set_value(c, o, v, 0, why, sizeof(why)) < 0) {
            snprintf(err, errsize, "--%s: %s", name, why);
            return -1;
        }
    }
    return 0;
}

int mw_config_from_args(mw_config *c, int argc, char **argv, int first, char **rest, size_t *nrest,
                        size_t rest_cap, char *err, size_t errsize)
{
    if (from_args(c, argc, argv, first, rest, nrest, rest_cap, err, errsize) < 0)
        return one_line(err);
    return 0;
}

/* An option whose help names commands ("`mlwatch doctor`: ...") is theirs;
 * any other applies to every command. */
static int option_applies(const option *o, const char *command)
{
    if (!command || strncmp(o->help, "`mlwatch ", 9) != 0) return 1;
    char tag[64];
    snprintf(tag, sizeof(tag), "`mlwatch %s`", command);
    const char *colon = strchr(o->help, ':');
    const char *at = strstr(o->help, tag);
    return at && (!colon || at < colon);
}

void mw_config_print_help(FILE *out)
{
    mw_config_print_help_for(out, NULL);
}

void mw_config_print_help_for(FILE *out, const char *command)
{
    for (size_t i = 0; i < MW_ARRAY_LEN(options); i++) {
        const option *o = &options[i];
        if (o->type == OPT_SECTION) continue; /* config-file only: see docs/configuration.md */
        if (!option_applies(o, command)) continue;
        char flag[80];
        snprintf(flag, sizeof(flag), "--%s %s", o->name,
                 o->type == OPT_DURATION ? "DURATION"
                 : o->type == OPT_LIST   ? "LIST"
                 : o->type == OPT_PATH   ? "PATH"
                 : o->type == OPT_BOOL   ? "[=BOOL]"
                 : o->type == OPT_NUMBER ? "NUMBER"
                 : o->type == OPT_SIZE   ? "SIZE"
                                         : "VALUE");
        fprintf(out, "  %-30s %s (default: %s)\n", flag, o->help, o->def[0] ? o->def : "none");
    }
}

void mw_config_print_markdown(FILE *out)
{
    fprintf(out, "| flag | YAML key | default | meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; i < MW_ARRAY_LEN(options); i++) {
        char key[64];
        yaml_key_of(&options[i], key, sizeof(key));
        char keycell[80], defcell[80];
        if (strcmp(options[i].name, "config") == 0)
            mw_strlcpy(keycell, "(flag only)", sizeof(keycell));
        else
            snprintf(keycell, sizeof(keycell), "`%s`", key);
        /* An empty code span (``) would show as two backticks. */
        if (options[i].def[0])
            snprintf(defcell, sizeof(defcell), "`%s`", options[i].def);
        else
            mw_strlcpy(defcell, "none", sizeof(defcell));
        char flagcell[80];
        if (options[i].type == OPT_SECTION)
            mw_strlcpy(flagcell, "(config file only)", sizeof(flagcell));
        else
            snprintf(flagcell, sizeof(flagcell), "`--%s`", options[i].name);
        fprintf(out, "| %s | %s | %s | %s |\n", flagcell, keycell, defcell, options[i].help);
    }
}
