/* config.h - the agent's settings, from flags and a YAML file.
 *
 * One table (config.c: options[]) names every setting once: its flag, its
 * YAML key, its type, its default and its help text. Flags and the file are
 * parsed from that table, `mlwatch help` prints it, and docs/configuration.md
 * documents it, so a flag can never lack a config key. Flags override the
 * file. Every error is one line naming the problem and where it is. */
#ifndef MW_CONFIG_H
#define MW_CONFIG_H

#include <limits.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#define MW_DEFAULT_PORT 10230
#define MW_MAX_LIST 64

typedef struct mw_config {
    char root[PATH_MAX];
    char listen[256];
    int64_t interval_ms;
    char config_path[PATH_MAX];
    char log_level[16];
    char format[32]; /* `mlwatch metrics`: text or openmetrics */
    /* Enabled collectors; empty = all. */
    char collectors[MW_MAX_LIST][32];
    size_t ncollectors;
    /* Collectors switched off; applied after `collectors`. */
    char disable_collectors[MW_MAX_LIST][32];
    size_t ndisable_collectors;
    /* GPU libraries (dlopen'ed; "none" switches one off) and the interval of
     * slow GPU calls (process lists, MIG, ECC, NVLink). */
    char nvml_library[PATH_MAX];
    char rocm_library[PATH_MAX];
    int64_t gpu_process_interval_ms;
    /* Idle GPU sessions (src/derive/idle.c) and their notifications
     * (src/notify/). Secrets (webhook URLs, SMTP password) are kept as given:
     * a literal, "file:PATH" or "env:NAME", resolved when used. */
    double idle_threshold; /* percent */
    int64_t idle_window_ms;
    int64_t idle_busy_period_ms;
    struct mw_idle_override {
        char ns[64];
        double threshold;                  /* < 0: inherit */
        int64_t window_ms, busy_period_ms; /* 0: inherit */
    } idle_overrides[MW_MAX_LIST];
    size_t nidle_overrides;
    int kubernetes;
    char kubeconfig[PATH_MAX];
    char node_name[256];
    char owner_from[256]; /* "namespace", "label:KEY" or "annotation:KEY" */
    char notify_webhook[1024];
    char notify_alertmanager_webhook[1024];
    char notify_smtp_server[512];
    char notify_smtp_from[256];
    char notify_smtp_to[1024]; /* comma-separated addresses */
    char notify_smtp_username[256];
    char notify_smtp_password[1024];
    char notify_smtp_ca_file[PATH_MAX];
    int64_t notify_repeat_interval_ms;
    char state_dir[PATH_MAX];
    /* `mlwatch doctor` (src/derive/doctor.c): which workload to look at, and
     * the rules' thresholds (`doctor:` section, docs/doctor.md). */
    char doctor_namespace[128];
    char doctor_pod[256];
    char doctor_pid[24];
    int doctor_json;
    int64_t doctor_window_ms; /* 0: the agent's whole history, or 10s when sampling */
    struct mw_doctor_thresholds {
        int64_t history_ms; /* how far back the agent's findings look */
        double busy_cpu_ratio, cpu_frequency_ratio;
        double throttled_ratio, throttled_critical_ratio;
        double gpu_clock_ratio, gpu_throttle_fraction, gpu_busy_ratio;
        double input_gpu_utilization, input_cpu_saturation, input_io_pressure;
        double memory_working_set_ratio, memory_working_set_critical, memory_pressure_ratio;
        double gpu_corrected_errors;
    } doctor;
    /* Data kept across restarts: the store, the remote-write queues. */
    char data_dir[PATH_MAX];
    /* Remote write (src/ship/): --remote-write URL, the remote_write list and
     * the global external_labels, both kept as canonical JSON (validated at
     * load, parsed again by the shipper) so that mw_config stays one flat,
     * copyable value. */
    char remote_write_url[1024];
    char remote_write_json[32768];
    char external_labels_json[4096];
    /* Energy attribution and carbon (src/derive/energy*.c, carbon*.c,
     * docs/energy.md); `mlwatch run` (src/agent/run.c). */
    char carbon_intensity[PATH_MAX]; /* NUMBER, schedule FILE or URL; "" = none */
    char carbon_url[2048];           /* carbon: section */
    char carbon_json_path[256];
    char carbon_auth_header[128];
    char carbon_auth_file[PATH_MAX];
    int64_t carbon_refresh_ms, carbon_timeout_ms;
    uint64_t carbon_max_body;
    char energy_idle_policy[16]; /* none, requests, cpu */
    double energy_idle_watts_per_cpu, energy_max_watts_per_cpu;
    char freeipmi_library[PATH_MAX];
    double run_work; /* `mlwatch run --work N --unit NAME` */
    char run_unit[64];
    /* Embedded store (src/store/, docs/store.md), in data_dir/data. */
    int store; /* 0: no store and no /api/v1/write */
    int64_t retention_ms;
    uint64_t retention_size; /* bytes; 0 = no limit */
    double store_max_series, store_max_series_per_tenant;
    char store_tenant_label[128];
    double store_max_label_name_length, store_max_label_value_length, store_max_labels;
    double store_max_samples_per_request;
    /* `mlwatch query` (src/query/query_cmd.c); "" = not given. */
    char query_time[64], query_start[64], query_end[64], query_step[64];
    char query_url[1024];
    /* GPUs allocated to pods, from the kubelet (src/kube/podresources.c). */
    int kubelet_pod_resources;
    /* The web UI (src/serve/ui.c, docs/ui.md): where its queries go ("" =
     * the embedded store). */
    char ui_query_url[1024];
    /* PromQL limits (src/query/): the longest a query may take, whether
     * the embedded engine evaluates it or --query-url answers it; the most
     * samples in memory at once (0: no limit); the lookback delta. */
    int64_t query_timeout_ms;
    double query_max_samples;
    int64_t query_lookback_ms;
} mw_config;

void mw_config_defaults(mw_config *c);

/* Parse argv[first..argc) as flags. Non-flag arguments are collected into
 * rest (argv pointers) when rest is given, else they are errors; "--" ends
 * the flags and everything after it goes to rest. A --config flag is loaded
 * before the other flags are applied, so flags win. On error writes one line
 * to err and returns -1. */
int mw_config_from_args(mw_config *c, int argc, char **argv, int first, char **rest, size_t *nrest,
                        size_t rest_cap, char *err, size_t errsize);

/* Load a YAML file into c. Returns 0, or -1 with "FILE:LINE:COL: problem". */
int mw_config_load_file(mw_config *c, const char *path, char *err, size_t errsize);
/* Same, from a string (the name is used in messages); for tests and fuzzing. */
int mw_config_load_string(mw_config *c, const char *name, const char *yaml, size_t len, char *err,
                          size_t errsize);

/* Split "ADDR:PORT" ("[::1]:10230", ":10230", "0.0.0.0:1"); host may be
 * empty (all interfaces). Returns 0 or -1. */
int mw_parse_listen(const char *s, char *host, size_t hostsize, uint16_t *port);

/* Print the options table (for `mlwatch help`). */
void mw_config_print_help(FILE *out);
/* The flags that apply to one command: its own (their help names it) and
 * those of no command in particular. */
void mw_config_print_help_for(FILE *out, const char *command);
/* Print the options table as a Markdown table (docs/configuration.md). */
void mw_config_print_markdown(FILE *out);

/* The `idle:` section of the config file (src/derive/idle_config.c). */
int mw_idle_config_section(mw_config *c, const char *file, void *doc, void *node, char *err,
                           size_t errsize);

/* The `doctor:` section of the config file and its defaults
 * (src/derive/doctor_config.c). */
int mw_doctor_config_section(mw_config *c, const char *file, void *doc, void *node, char *err,
                             size_t errsize);
void mw_doctor_thresholds_defaults(struct mw_doctor_thresholds *t);

/* The `remote_write:` list and `external_labels:` mapping of the config
 * file (src/ship/rw_config.c). */
int mw_rw_config_section(mw_config *c, const char *file, void *doc, void *node, char *err,
                         size_t errsize);
int mw_rw_external_labels_section(mw_config *c, const char *file, void *doc, void *node, char *err,
                                  size_t errsize);

/* The `carbon:` section of the config file (src/derive/carbon_config.c). */
int mw_carbon_config_section(mw_config *c, const char *file, void *doc, void *node, char *err,
                             size_t errsize);

/* Hook for validating collector names, set by the collector registry. */
extern int (*mw_config_collector_exists)(const char *name);

/* Validators of `mlwatch query`'s --time/--start/--end (RFC 3339 or unix
 * seconds) and --step (positive duration or float seconds), in
 * src/query/query_cmd.c. */
int mw_query_check_time(const char *v, char *why, size_t whysize);
int mw_query_check_step(const char *v, char *why, size_t whysize);
/* Validator of --query-url (an http(s) base URL), in src/serve/ui_proxy.c. */
int mw_ui_check_query_url(const char *v, char *why, size_t whysize);

#endif
