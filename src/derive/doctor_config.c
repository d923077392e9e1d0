/* doctor_config.c - the `doctor:` section of the config file: how far back
 * the agent's findings look and the thresholds of each rule.
 *
 *   doctor:
 *     history: 5m
 *     throttled_ratio: 0.05
 *     input_gpu_utilization: 0.4
 *
 * A key left out keeps its default (mw_doctor_thresholds_defaults). The
 * meaning of each key is in docs/doctor.md. Errors name the file, line and
 * column; a file with an error changes nothing (config.c works on a copy). */
#include "../core/config.h"
#include "../core/units.h"
#include "../core/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

void mw_doctor_thresholds_defaults(struct mw_doctor_thresholds *t)
{
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

static int fail(char *err, size_t errsize, const char *file, const yaml_node_t *n, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

static int fail(char *err, size_t errsize, const char *file, const yaml_node_t *n, const char *fmt,
                ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(err, errsize, "%s:%zu:%zu: doctor: %s", file, n->start_mark.line + 1,
             n->start_mark.column + 1, msg);
    return -1;
}

/* The scalar's text, or NULL for a non-scalar or one holding a NUL. */
static const char *text_of(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE) return NULL;
    const char *t = (const char *)n->data.scalar.value;
    return strlen(t) == n->data.scalar.length ? t : NULL;
}

int mw_doctor_config_section(mw_config *c, const char *file, void *docp, void *nodep, char *err,
                             size_t errsize)
{
    yaml_document_t *doc = docp;
    yaml_node_t *node = nodep;
    if (node->type != YAML_MAPPING_NODE)
        return fail(err, errsize, file, node, "expected a mapping (history: 5m, ...)");
    struct mw_doctor_thresholds t = c->doctor;
    unsigned char seen[MW_ARRAY_LEN(ratio_keys) + 1] = {0};
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        const char *key = text_of(k);
        if (!key || !v) return fail(err, errsize, file, k ? k : node, "keys must be plain names");
        const char *val = text_of(v);
        if (!val) return fail(err, errsize, file, v, "%s: expected a single value", key);
        if (strcmp(key, "history") == 0) {
            if (seen[MW_ARRAY_LEN(ratio_keys)]++)
                return fail(err, errsize, file, k, "duplicate key 'history'");
            int64_t ms;
            if (mw_parse_duration_ms(val, &ms) < 0 || ms <= 0 || ms > 24LL * 3600 * 1000)
                return fail(err, errsize, file, v,
                            "history: invalid duration '%s' (from 1s to 1d, e.g. 5m)", val);
            t.history_ms = ms;
            continue;
        }
        size_t i = 0;
        while (i < MW_ARRAY_LEN(ratio_keys) && strcmp(ratio_keys[i].name, key) != 0)
            i++;
        if (i == MW_ARRAY_LEN(ratio_keys))
            return fail(err, errsize, file, k, "unknown key '%s' (see docs/doctor.md)", key);
        if (seen[i]++) return fail(err, errsize, file, k, "duplicate key '%s'", key);
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (!*val || *end || errno || !(d >= 0 && d <= ratio_keys[i].max))
            return fail(err, errsize, file, v, "%s: must be a number from 0 to %g, got '%s'", key,
                        ratio_keys[i].max, val);
        *(double *)(void *)((char *)&t + ratio_keys[i].offset) = d;
    }
    if (t.throttled_critical_ratio < t.throttled_ratio)
        return fail(err, errsize, file, node,
                    "throttled_critical_ratio (%g) is below throttled_ratio (%g)",
                    t.throttled_critical_ratio, t.throttled_ratio);
    if (t.memory_working_set_critical < t.memory_working_set_ratio)
        return fail(err, errsize, file, node,
                    "memory_working_set_critical (%g) is below memory_working_set_ratio (%g)",
                    t.memory_working_set_critical, t.memory_working_set_ratio);
    c->doctor = t;
    return 0;
}
