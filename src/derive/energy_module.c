/* energy_module.c - the "energy" module: runs the attribution model every
 * cycle (energy.c), feeds it the carbon intensity (carbon.c), and keeps its
 * totals across restarts (energy_state.c). */
#include "../agent/module.h"
#include "../core/log.h"
#include "../core/util.h"
#include "carbon.h"
#include "energy.h"
#include "energy_module.h"
#include "energy_state.h"
#include "energy_workloads.h"
#include "../kube/kube_module.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The state is saved after every interval, so a kill -9 loses at most the
 * energy of the interval under way. */

typedef struct energy_mod {
    const mw_env *env;
    mw_energy *model;
    mw_workloads *workloads;
    mw_carbon *carbon;
    char identity[256];
    char dir[4096];  /* DATA_DIR/state */
    int64_t last_ms; /* the previous snapshot's time */
    int save_ok;     /* 0 after a failed save, so the log says when it works again */
    uint64_t cycles;
    mw_buf scratch;
    mw_podres_table alloc; /* the kubelet's GPU allocations, latest copy */
    uint64_t alloc_gen;
} energy_mod;

/* The CPU weight kubelet gave the container's cgroup (from its CPU request),
 * as cgroup v1 shares (1024 per requested CPU): v2 cpu.weight, else v1
 * cpu.shares. */
int mw_energy_cgroup_weight(const mw_hostfs *host, mw_buf *scratch, const char *cgroup,
                            double *shares)
{
    static const char *const v1[] = {"sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpu"};
    char path[1024];
    if (strstr(cgroup, "..")) return -1;
    snprintf(path, sizeof(path), "sys/fs/cgroup%s/cpu.weight", cgroup);
    if (mw_hostfs_read(host, path, scratch, 64) == 0) {
        long w = strtol(scratch->data, NULL, 10);
        if (w < 1 || w > 10000) return -1;
        *shares = 2.0 + (double)(w - 1) * 262142.0 / 9999.0;
        return 0;
    }
    for (size_t i = 0; i < MW_ARRAY_LEN(v1); i++) {
        snprintf(path, sizeof(path), "%s%s/cpu.shares", v1[i], cgroup);
        if (mw_hostfs_read(host, path, scratch, 64) == 0) {
            long s = strtol(scratch->data, NULL, 10);
            if (s < 2 || s > 262144) return -1;
            *shares = (double)s;
            return 0;
        }
    }
    return -1;
}

/* A pod's workload from the pod watch (--kubernetes). */
static int lookup_cb(void *ctx, const char *uid, const char *ns, const char *pod, char kind[32],
                     char name[254])
{
    energy_mod *m = ctx;
    mw_kube *pods = m->env->kube ? m->env->kube->pods : NULL;
    mw_kube_pod p;
    if (!pods || !mw_kube_lookup(pods, uid, ns, pod, &p) || !p.workload_kind[0]) return 0;
    mw_strlcpy(kind, p.workload_kind, 32);
    mw_strlcpy(name, p.workload, 254);
    return 1;
}

static int weight_cb(void *ctx, const char *cgroup, double *w)
{
    energy_mod *m = ctx;
    return mw_energy_cgroup_weight(m->env->host, &m->scratch, cgroup, w);
}

/* The containers the kubelet allocated this GPU to (whole GPUs: MIG
 * devices have their own UUIDs and are not reservations here yet). */
static size_t holders_cb(void *ctx, const char *uuid, mw_energy_holder *out, size_t cap)
{
    energy_mod *m = ctx;
    size_t n = 0;
    for (size_t i = 0; i < m->alloc.n; i++) {
        const mw_podres_row *a = &m->alloc.rows[i];
        if (strcmp(a->device, uuid) != 0) continue;
        if (n < cap) {
            mw_strlcpy(out[n].ns, a->ns, sizeof(out[n].ns));
            mw_strlcpy(out[n].pod, a->pod, sizeof(out[n].pod));
            mw_strlcpy(out[n].container, a->container, sizeof(out[n].container));
        }
        n++;
    }
    return n < cap ? n : cap;
}

void mw_energy_identity(const mw_hostfs *host, char *out, size_t size)
{
    mw_buf b;
    mw_buf_init(&b, 4096);
    mw_strlcpy(out, "unknown", size);
    if (mw_hostfs_read(host, "etc/machine-id", &b, 4096) == 0 ||
        mw_hostfs_read(host, "proc/sys/kernel/hostname", &b, 4096) == 0) {
        size_t n = strcspn(b.data, "\r\n");
        if (n) snprintf(out, size, "%.*s", (int)n, b.data);
    }
    mw_buf_free(&b);
}

static int check_idle_policy(const char *v, char *why, size_t n)
{
    if (strcmp(v, "none") == 0 || strcmp(v, "requests") == 0 || strcmp(v, "cpu") == 0) return 0;
    snprintf(why, n, "must be none, requests or cpu");
    return -1;
}

/* COMPONENT=WATTS of --energy-idle-watts. */
static int parse_idle_watts(const char *v, int *component, double *watts)
{
    const char *eq = strchr(v, '=');
    if (!eq) return -1;
    char name[16];
    if ((size_t)(eq - v) >= sizeof(name)) return -1;
    memcpy(name, v, (size_t)(eq - v));
    name[eq - v] = '\0';
    *component = mw_energy_name_index(mw_energy_component_names, MW_EC_N, name);
    char *end;
    *watts = strtod(eq + 1, &end);
    if (*component < 0 || end == eq + 1 || *end || !(*watts >= 0) || *watts > 1e6) return -1;
    return 0;
}

static int check_idle_watts(const char *v, char *why, size_t n)
{
    int c;
    double w;
    if (parse_idle_watts(v, &c, &w) == 0) return 0;
    snprintf(why, n,
             "'%s' must be COMPONENT=WATTS with COMPONENT cpu, dram, gpu or other and "
             "WATTS from 0 to 1e6",
             v);
    return -1;
}

static int carbon_section(void *settings, const char *file, void *doc, void *node, char *err,
                          size_t errsize)
{
    return mw_carbon_config_section(&((mw_energy_settings *)settings)->carbon, file, doc, node, err,
                                    errsize);
}

static void energy_defaults(void *settings)
{
    mw_carbon_settings_defaults(&((mw_energy_settings *)settings)->carbon);
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_energy_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option energy_rows[] = {
    OPT("carbon-intensity", MW_OPT_STRING, carbon.intensity, "", NULL, "Grid carbon intensity for CO2: a number (gCO2eq/kWh), a schedule CSV file (TIME,GRAMS) or an http(s) URL of a JSON API (see the carbon: section, docs/energy.md)"),
    MW_OPT_SECTION_OF("carbon", "none", carbon_section, "Carbon intensity API: carbon: {url: URL, json_path: data[0].intensity.actual, auth_header: auth-token, auth_file: PATH, refresh: 5m, timeout: 10s, max_body: 1MiB}"),
    OPT("energy-idle-policy", MW_OPT_STRING, idle_policy, "requests", check_idle_policy, "Idle (static) host energy: requests (Kubernetes CPU requests over the node's CPUs, the rest to share unreserved; by CPU time where no container has a request), cpu (by CPU time) or none (all to share unreserved)"),
    MW_OPT_LIST_OF(mw_energy_settings, "energy-idle-watts", idle_watts, nidle_watts, "learnt", check_idle_watts, "Idle power of a component set by hand, COMPONENT=WATTS (cpu, dram, gpu: per GPU, other), repeatable; unset components learn theirs (docs/energy.md)"),
    OPT("energy-idle-watts-per-cpu", MW_OPT_NUMBER, idle_watts_per_cpu, "0.74", NULL, "Estimation model without RAPL: watts per CPU at 0% utilization"),
    OPT("energy-max-watts-per-cpu", MW_OPT_NUMBER, max_watts_per_cpu, "3.5", NULL, "Estimation model without RAPL: watts per CPU at 100% utilization"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_energy_options =
    MW_OPTION_GROUP("energy and carbon", "src/derive/energy_module.c", mw_energy_settings,
                    energy_rows, energy_defaults);

int mw_energy_params_from_config(const mw_config *config, mw_energy_params *p)
{
    const mw_energy_settings *cfg = mw_config_group(config, &mw_energy_options);
    mw_energy_params_init(p, MW_IDLE_POLICY_REQUESTS);
    for (size_t i = 0; i < cfg->nidle_watts; i++) {
        int c;
        double w;
        if (parse_idle_watts(cfg->idle_watts[i], &c, &w) == 0) {
            p->idle_watts[c] = w;
            p->idle_watts_set |= 1u << c;
        }
    }
    p->idle_watts_per_cpu = cfg->idle_watts_per_cpu;
    p->max_watts_per_cpu = cfg->max_watts_per_cpu;
    if (p->idle_watts_per_cpu < 0 || p->max_watts_per_cpu < p->idle_watts_per_cpu) return -1;
    p->idle_policy = strcmp(cfg->idle_policy, "requests") == 0 ? MW_IDLE_POLICY_REQUESTS
                     : strcmp(cfg->idle_policy, "cpu") == 0    ? MW_IDLE_POLICY_CPU
                                                               : MW_IDLE_POLICY_NONE;
    return 0;
}

int mw_energy_carbon_from_config(const mw_config *config, mw_carbon **out, char *err,
                                 size_t errsize)
{
    const mw_carbon_settings *cfg =
        &((const mw_energy_settings *)mw_config_group(config, &mw_energy_options))->carbon;
    mw_carbon_opts o = {
        .spec = cfg->intensity,
        .url = cfg->url,
        .json_path = cfg->json_path,
        .auth_header = cfg->auth_header,
        .auth_file = cfg->auth_file,
        .refresh_ms = cfg->refresh_ms,
        .timeout_ms = cfg->timeout_ms,
        .max_body = (size_t)cfg->max_body,
    };
    return mw_carbon_open(&o, out, err, errsize);
}

void mw_energy_state_dir(const mw_config *cfg, char *out, size_t size)
{
    mw_state_dir(cfg, out, size);
}

static void save(energy_mod *m, int64_t now)
{
    /* --data-dir may not exist yet (the store creates its own folder). */
    if (mkdir(m->env->cfg->data_dir, 0700) < 0 && errno != EEXIST) {
        mw_log_once(MW_LOG_WARN, "energy", "state-save",
                    "cannot create --data-dir %s: %s (a restart will start the energy totals "
                    "at 0)",
                    m->env->cfg->data_dir, strerror(errno));
        m->save_ok = 0;
        return;
    }
    int rc = mw_energy_state_save(m->model, m->dir, m->identity, now);
    if (rc == 0) rc = mw_workloads_save(m->workloads, m->dir, m->identity, now);
    if (rc < 0) {
        mw_log_once(MW_LOG_WARN, "energy", "state-save",
                    "cannot save energy totals under %s: %s (a restart will start them at 0)",
                    m->dir, strerror(-rc));
        m->save_ok = 0;
    } else {
        if (!m->save_ok) mw_log(MW_LOG_INFO, "energy", "energy totals saved again in %s", m->dir);
        m->save_ok = 1;
    }
}

/* Restore DATA_DIR/state/energy-state.json; where there is none, the file of
 * an older agent (in --state-dir, else in DATA_DIR itself) is read once,
 * saved in the new place and renamed to energy-state.json.migrated. */
static void restore(energy_mod *m)
{
    const mw_config *cfg = m->env->cfg;
    char err[1024];
    int rc = mw_energy_state_load(m->model, m->dir, m->identity, err, sizeof(err));
    if (rc == 0)
        mw_log(MW_LOG_INFO, "energy", "energy totals restored from %s/%s", m->dir,
               MW_ENERGY_STATE_FILE);
    else if (rc < 0)
        mw_log(MW_LOG_WARN, "energy", "energy state not trusted: %s", err);
    if (mw_workloads_load(m->workloads, m->dir, m->identity, err, sizeof(err)) < 0)
        mw_log(MW_LOG_WARN, "energy", "workload totals not trusted: %s", err);
    const char *old = mw_legacy_state_dir(cfg);
    if (rc != 1 || strcmp(old, m->dir) == 0) return;
    rc = mw_energy_state_load(m->model, old, m->identity, err, sizeof(err));
    if (rc < 0) mw_log(MW_LOG_WARN, "energy", "old energy state not trusted: %s", err);
    if (rc != 0) return;
    save(m, mw_now_ms());
    char from[4200], to[4300];
    snprintf(from, sizeof(from), "%s/%s", old, MW_ENERGY_STATE_FILE);
    snprintf(to, sizeof(to), "%s.migrated", from);
    if (m->save_ok && rename(from, to) == 0)
        mw_log(MW_LOG_INFO, "energy",
               "energy totals migrated from %s to %s/%s (the old file is "
               "now %s)",
               from, m->dir, MW_ENERGY_STATE_FILE, to);
}

static int energy_init(const mw_env *env, void **state)
{
    energy_mod *m = mw_xcalloc(1, sizeof(*m));
    m->env = env;
    mw_buf_init(&m->scratch, 4096);
    mw_energy_params p;
    if (mw_energy_params_from_config(env->cfg, &p) < 0) {
        mw_log(MW_LOG_ERROR, "energy",
               "--energy-max-watts-per-cpu must be at least --energy-idle-watts-per-cpu (and "
               "both >= 0)");
        free(m);
        return -EINVAL;
    }
    p.cpu_weight = weight_cb;
    p.cpu_weight_ctx = m;
    p.gpu_holders = holders_cb;
    p.gpu_holders_ctx = m;
    m->model = mw_energy_new(&p);
    m->workloads = mw_workloads_new(lookup_cb, m);
    char err[1024];
    if (mw_energy_carbon_from_config(env->cfg, &m->carbon, err, sizeof(err)) < 0)
        mw_log(MW_LOG_ERROR, "energy", "carbon intensity off: %s", err);
    mw_energy_identity(env->host, m->identity, sizeof(m->identity));
    mw_energy_state_dir(env->cfg, m->dir, sizeof(m->dir));
    m->save_ok = 1;
    restore(m);
    *state = m;
    return 0;
}

static void energy_derive(void *state, mw_snapshot *snap)
{
    energy_mod *m = state;
    m->cycles++;
    /* The interval's mean intensity: a schedule may change within it. */
    int64_t from = m->last_ms && m->last_ms < snap->timestamp_ms ? m->last_ms : snap->timestamp_ms;
    double intensity = mw_carbon_mean(m->carbon, from, snap->timestamp_ms);
    m->last_ms = snap->timestamp_ms;
    if (m->env->kube && m->env->kube->podres) /* GPU reservations (requests policy) */
        mw_podres_copy(m->env->kube->podres, &m->alloc_gen, &m->alloc);
    mw_energy_step(m->model, snap, intensity);
    mw_workloads_step(m->workloads, m->model, snap, (double)(snap->timestamp_ms - from) / 1000.0);
    mw_carbon_emit(m->carbon, snap, snap->timestamp_ms);
    if (m->cycles > 1) save(m, snap->timestamp_ms); /* the first cycle adds nothing */
}

static void energy_destroy(void *state)
{
    energy_mod *m = state;
    if (!m) return;
    if (m->cycles > 1) save(m, mw_now_ms()); /* `mlwatch metrics` (one cycle) changes nothing */
    mw_carbon_close(m->carbon);
    mw_energy_free(m->model);
    mw_workloads_free(m->workloads);
    mw_podres_table_free(&m->alloc);
    mw_buf_free(&m->scratch);
    free(m);
}

const mw_module mw_module_energy = {
    .agent_only = 1,
    .name = "energy",
    .options = &mw_energy_options,
    .init = energy_init,
    .derive = energy_derive,
    .destroy = energy_destroy,
};
