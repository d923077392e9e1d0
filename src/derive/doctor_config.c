/* doctor_config.c - the `doctor:` section of the config file: how far back
 * the agent's findings look and the thresholds of each rule.
 *
 *   doctor:
 *     history: 5m
 *     throttled_ratio: 0.05
 *     input_gpu_utilization: 0.4
 *
 * A key left out keeps its default (doctor_defaults). The
 * meaning of each key is in docs/doctor.md. Errors name the file, line and
 * column; a file with an error changes nothing (config.c works on a copy). */
#include "doctor.h"
#include "../core/config.h"
#include "../core/units.h"
#include "../core/util.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static void doctor_defaults(void *settings)
{
    struct mw_doctor_thresholds *t = &((mw_doctor_settings *)settings)->t;
    *t = (struct mw_doctor_thresholds){
        .history_ms = 5 * 60 * 1000,
        .busy_cpu_ratio = 0.5,
        .cpu_frequency_ratio = 0.8,
        .throttled_ratio = 0.05,
        .throttled_critical_ratio = 0.25,
        .gpu_clock_ratio = 0.9,
        .gpu_throttle_fraction = 0.2,
        .gpu_busy_ratio = 0.2,
        .input_gpu_utilization = 0.5,
        .input_cpu_saturation = 0.9,
        .input_io_pressure = 0.2,
        .memory_working_set_ratio = 0.9,
        .memory_working_set_critical = 0.97,
        .memory_pressure_ratio = 0.1,
        .gpu_corrected_errors = 100,
    };
}

/* The ratio keys: name, field, and the largest value that makes sense. */
typedef struct ratio_key {
    const char *name;
    size_t offset;
    double max;
} ratio_key;

#define RK(f, m)                                                                                   \
    {                                                                                              \
#f, offsetof(struct mw_doctor_thresholds, f), m                                            \
    }
static const ratio_key ratio_keys[] = {
    RK(busy_cpu_ratio, 1),
    RK(cpu_frequency_ratio, 1),
    RK(throttled_ratio, 1),
    RK(throttled_critical_ratio, 1),
    RK(gpu_clock_ratio, 1),
    RK(gpu_throttle_fraction, 1),
    RK(gpu_busy_ratio, 1),
    RK(input_gpu_utilization, 1),
    RK(input_cpu_saturation, 1),
    /* stall seconds per second: "some" can exceed 1 only on paper, but a
     * cgroup's counters sampled a little apart can */
    RK(input_io_pressure, 1),
    RK(memory_working_set_ratio, 1),
    RK(memory_working_set_critical, 1),
    RK(memory_pressure_ratio, 1),
    RK(gpu_corrected_errors, 1e15),
};

static int doctor_section(void *settings, const char *file, void *docp, void *nodep, char *err,
                          size_t errsize)
{
    mw_doctor_settings *c = settings;
    yaml_document_t *doc = docp;
    yaml_node_t *node = nodep;
    if (node->type != YAML_MAPPING_NODE)
        return mw_section_fail(err, errsize, file, "doctor", node,
                               "expected a mapping (history: 5m, ...)");
    struct mw_doctor_thresholds t = c->t;
    unsigned char seen[MW_ARRAY_LEN(ratio_keys) + 1] = {0};
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = mw_section_text(k);
        if (!key || !v)
            return mw_section_fail(err, errsize, file, "doctor", k ? k : node,
                                   "keys must be plain names");
        const char *val = mw_section_text(v);
        if (!val)
            return mw_section_fail(err, errsize, file, "doctor", v, "%s: expected a single value",
                                   key);
        if (strcmp(key, "history") == 0) {
            if (seen[MW_ARRAY_LEN(ratio_keys)]++)
                return mw_section_fail(err, errsize, file, "doctor", k, "duplicate key 'history'");
            int64_t ms;
            if (mw_parse_duration_ms(val, &ms) < 0 || ms <= 0 || ms > 24LL * 3600 * 1000)
                return mw_section_fail(err, errsize, file, "doctor", v,
                                       "history: invalid duration '%s' (from 1s to 1d, e.g. 5m)",
                                       val);
            t.history_ms = ms;
            continue;
        }
        size_t i = 0;
        while (i < MW_ARRAY_LEN(ratio_keys) && strcmp(ratio_keys[i].name, key) != 0)
            i++;
        if (i == MW_ARRAY_LEN(ratio_keys))
            return mw_section_fail(err, errsize, file, "doctor", k,
                                   "unknown key '%s' (see docs/doctor.md)", key);
        if (seen[i]++)
            return mw_section_fail(err, errsize, file, "doctor", k, "duplicate key '%s'", key);
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (!*val || *end || errno || !(d >= 0 && d <= ratio_keys[i].max))
            return mw_section_fail(err, errsize, file, "doctor", v,
                                   "%s: must be a number from 0 to %g, got '%s'", key,
                                   ratio_keys[i].max, val);
        *(double *)(void *)((char *)&t + ratio_keys[i].offset) = d;
    }
    if (t.throttled_critical_ratio < t.throttled_ratio)
        return mw_section_fail(err, errsize, file, "doctor", node,
                               "throttled_critical_ratio (%g) is below throttled_ratio (%g)",
                               t.throttled_critical_ratio, t.throttled_ratio);
    if (t.memory_working_set_critical < t.memory_working_set_ratio)
        return mw_section_fail(
            err, errsize, file, "doctor", node,
            "memory_working_set_critical (%g) is below memory_working_set_ratio (%g)",
            t.memory_working_set_critical, t.memory_working_set_ratio);
    c->t = t;
    return 0;
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

#define OPT(n, t, f, d, v, h) MW_OPT(mw_doctor_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option doctor_rows[] = {
    OPT("namespace", MW_OPT_STRING, ns, "", NULL, "`mlwatch doctor`: only findings of this Kubernetes namespace (and the node's own)"),
    OPT("pod", MW_OPT_STRING, pod, "", NULL, "`mlwatch doctor`: only findings of this pod (and the node's own)"),
    OPT("pid", MW_OPT_STRING, pid, "", check_pid, "`mlwatch doctor`: only findings of the container this process runs in"),
    MW_OPT_SHOWN(mw_doctor_settings, "window", MW_OPT_DURATION, window_ms, "", "auto", NULL, "`mlwatch doctor`: how far back to look (auto: the agent's whole history, or 10s of sampling when no agent answers on --listen)"),
    MW_OPT_SECTION_OF("doctor", "see docs/doctor.md", doctor_section, "Thresholds of the doctor's findings and the agent's history: doctor: {history: 5m, throttled_ratio: 0.05, ...}"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_doctor_options = MW_OPTION_GROUP(
    "doctor", "src/derive/doctor_config.c", mw_doctor_settings, doctor_rows, doctor_defaults);
