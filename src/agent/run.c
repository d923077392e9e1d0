/* run.c - `mlwatch run [--json] [--interval D] [--work N --unit NAME] -- CMD...`
 *
 * Runs the command in a cgroup of its own where one can be had: a systemd
 * transient scope where systemd runs the machine (run_systemd.c; the child
 * waits before exec until systemd has put it there), else a child of our
 * own cgroup in the v2 hierarchy, else in the v1 cpuacct one (v2, v1 and
 * hybrid hosts, run_cgroup.c; the child moves itself in before exec), so
 * no process of the command escapes, daemons included; else follows its
 * process tree through /proc and says so (the report's tracking). Every interval it collects the
 * node's power sources (cpu, rapl, hwmon, gpu, ipmi), adds the command's CPU time as one container
 * ("mlwatch-run") and runs the same attribution model as the agent (src/derive/energy.c), so the
 * command's energy is its share of the node's, measured where the node measures and estimated where
 * it does not. GPU processes of the tree are mapped to that container, so the GPU collector
 * attributes their GPU share. The report goes to stderr (the command owns stdout), as text or
 * --json. Signals are forwarded; the exit status is the command's. */
#include "run.h"
#include "run_cgroup.h"
#include "run_systemd.h"
#include "../collect/collector.h"
#include "../collect/gpu/gpu.h"
#include "../collect/procmap.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../derive/energy.h"
#include "../derive/energy_module.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_CONTAINER "mlwatch-run"
#define MAX_PROCS 65536

/* clang-format off */
MW_METRIC(RUN_CPU, MW_COUNTER, "mlwatch_container_cpu_seconds_total", "seconds", "CPU time of the command's tree.");
/* clang-format on */

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0) kill((pid_t)child_pid, sig);
}

typedef struct tracker {
    mw_run_cgroup cg; /* version 0: the process tree */
    pid_t root;
    int *pids;
    size_t npids;
    double cpu, user, sys; /* seconds, highest seen */
} tracker;

static void sample_cgroup(tracker *t)
{
    double cpu, user, sys;
    if (mw_run_cgroup_cpu(&t->cg, &cpu, &user, &sys) == 0 && cpu > t->cpu) {
        t->cpu = cpu;
        t->user = user;
        t->sys = sys;
    }
    t->npids = mw_run_cgroup_pids(&t->cg, t->pids, MAX_PROCS);
}

typedef struct pstat {
    int pid, ppid;
    double cpu, user, sys;
} pstat;

/* Every process's parent and CPU time (own plus waited-for children). */
static size_t scan_proc(pstat *out, size_t cap)
{
    DIR *d = opendir("/proc");
    if (!d) return 0;
    size_t n = 0;
    long hz = sysconf(_SC_CLK_TCK);
    struct dirent *de;
    while (n < cap && (de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
        char path[300], buf[1024];
        snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
        if (mw_read_small_file(path, buf, sizeof(buf)) < 0) continue;
        char *close = strrchr(buf, ')'); /* the name may hold spaces and ')' */
        if (!close) continue;
        int ppid;
        unsigned long long ut, st;
        long long cut, cst;
        if (sscanf(close + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
                   &ppid, &ut, &st, &cut, &cst) != 5)
            continue;
        out[n].pid = atoi(de->d_name);
        out[n].ppid = ppid;
        out[n].user = (double)(ut + (unsigned long long)(cut > 0 ? cut : 0)) / (double)hz;
        out[n].sys = (double)(st + (unsigned long long)(cst > 0 ? cst : 0)) / (double)hz;
        out[n].cpu = out[n].user + out[n].sys;
        n++;
    }
    closedir(d);
    return n;
}

static void sample_tree(tracker *t, pstat *ps)
{
    size_t n = scan_proc(ps, MAX_PROCS);
    t->npids = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].pid == t->root) t->pids[t->npids++] = ps[i].pid;
    /* Descendants: passes until nothing is added (trees are shallow). */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            int in = 0, parent_in = 0;
            for (size_t k = 0; k < t->npids && !(in && parent_in); k++) {
                in |= t->pids[k] == ps[i].pid;
                parent_in |= t->pids[k] == ps[i].ppid;
            }
            if (!in && parent_in && t->npids < MAX_PROCS) {
                t->pids[t->npids++] = ps[i].pid;
                changed = 1;
            }
        }
    }
    double cpu = 0, user = 0, sys = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < t->npids; k++)
            if (t->pids[k] == ps[i].pid) {
                cpu += ps[i].cpu;
                user += ps[i].user;
                sys += ps[i].sys;
            }
    if (cpu > t->cpu) { /* exited, unreaped descendants would make it dip */
        t->cpu = cpu;
        t->user = user;
        t->sys = sys;
    }
}

typedef struct run_acc {
    double gpu_util_sum;
    int gpu_samples;
    double gpu_seconds; /* each interval times the GPUs the command had processes on */
    int64_t last_ms;
    char models[8][96]; /* the models of those GPUs */
    size_t nmodels;
} run_acc;

static const char *label_of(const mw_sample *s, const char *name)
{
    for (uint32_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0) return s->labels[i].value;
    return "";
}

/* GPU time of the command in the interval ending with snap: the distinct
 * GPUs its processes use (utilization or memory), and their models. */
static void gpu_time(run_acc *acc, const mw_snapshot *snap)
{
    static const char *const fams[] = {"mlwatch_container_gpu_utilization_ratio",
                                       "mlwatch_container_gpu_memory_used_bytes"};
    char gpus[64][16];
    size_t n = 0;
    for (size_t f = 0; f < MW_ARRAY_LEN(fams); f++) {
        const mw_family *fam = mw_snapshot_find(snap, fams[f]);
        for (const mw_sample *s = fam ? fam->first : NULL; s; s = s->next) {
            if (!(s->value > 0) || strcmp(label_of(s, "container"), RUN_CONTAINER) != 0) continue;
            const char *g = label_of(s, "gpu");
            int dup = 0;
            for (size_t i = 0; i < n && !dup; i++)
                dup = !strcmp(gpus[i], g);
            if (dup || n >= MW_ARRAY_LEN(gpus)) continue;
            mw_strlcpy(gpus[n++], g, sizeof(gpus[0]));
            const mw_family *info = mw_snapshot_find(snap, "mlwatch_gpu_info");
            for (const mw_sample *x = info ? info->first : NULL; x; x = x->next) {
                if (strcmp(label_of(x, "gpu"), g) != 0) continue;
                const char *model = label_of(x, "model");
                int known = 0;
                for (size_t i = 0; i < acc->nmodels && !known; i++)
                    known = !strcmp(acc->models[i], model);
                if (!known && acc->nmodels < MW_ARRAY_LEN(acc->models))
                    mw_strlcpy(acc->models[acc->nmodels++], model, sizeof(acc->models[0]));
            }
        }
    }
    if (acc->last_ms && snap->timestamp_ms > acc->last_ms)
        acc->gpu_seconds += (double)n * (double)(snap->timestamp_ms - acc->last_ms) / 1000.0;
    acc->last_ms = snap->timestamp_ms;
}

static void cycle(tracker *t, pstat *ps, mw_collector_set *set, mw_procmap *pm, mw_energy *e,
                  mw_carbon *carbon, run_acc *acc)
{
    if (t->cg.version)
        sample_cgroup(t);
    else
        sample_tree(t, ps);
    mw_container_ref ref;
    memset(&ref, 0, sizeof(ref));
    mw_strlcpy(ref.id, RUN_CONTAINER, sizeof(ref.id));
    mw_strlcpy(ref.container, RUN_CONTAINER, sizeof(ref.container));
    mw_procmap_begin(pm);
    for (size_t i = 0; i < t->npids; i++)
        mw_procmap_set(pm, t->pids[i], &ref);
    mw_procmap_end(pm);
    mw_snapshot *snap = mw_snapshot_new();
    mw_collector_set_run(set, snap);
    mw_emit(snap, &RUN_CPU, t->cpu, "namespace", "", "pod", "", "container", RUN_CONTAINER, MW_END);
    double util = 0;
    const mw_family *f = mw_snapshot_find(snap, "mlwatch_container_gpu_utilization_ratio");
    int any = 0;
    for (const mw_sample *s = f ? f->first : NULL; s; s = s->next)
        for (uint32_t i = 0; i < s->nlabels; i++)
            if (strcmp(s->labels[i].name, "container") == 0 &&
                strcmp(s->labels[i].value, RUN_CONTAINER) == 0) {
                util += s->value;
                any = 1;
            }
    if (mw_snapshot_find(snap, "mlwatch_gpu_utilization_ratio")) {
        acc->gpu_util_sum += util;
        acc->gpu_samples += 1;
    }
    (void)any;
    gpu_time(acc, snap);
    mw_energy_step(e, snap, mw_carbon_now(carbon, snap->timestamp_ms, NULL));
    mw_snapshot_free(snap);
}

static const char *const cg_modes[] = {"auto", "v2", "v1", "none", "systemd"}; /* mw_run_cg_mode */

static int check_run_cgroup(const char *v, char *why, size_t n)
{
    for (size_t i = 0; i < MW_ARRAY_LEN(cg_modes); i++)
        if (strcmp(v, cg_modes[i]) == 0) return 0;
    snprintf(why, n, "must be one of auto, systemd, v2, v1, none");
    return -1;
}

static mw_run_cg_mode run_cg_mode(const char *v)
{
    for (size_t i = 0; i < MW_ARRAY_LEN(cg_modes); i++)
        if (strcmp(v, cg_modes[i]) == 0) return (mw_run_cg_mode)i;
    return MW_RUN_CG_AUTO;
}

/* clang-format off */
static const mw_option run_rows[] = {
    MW_OPT(mw_run_settings, "work", MW_OPT_NUMBER, work, "0", NULL, "`mlwatch run`: units of work the command does, for joules per unit"),
    MW_OPT(mw_run_settings, "unit", MW_OPT_STRING, unit, "unit", NULL, "`mlwatch run`: name of a unit of --work"),
    MW_OPT(mw_run_settings, "compare", MW_OPT_BOOL, compare, "false", NULL, "`mlwatch run --compare FILE...`: one table of the --json reports FILE... (energy per unit of work and per GPU-hour, by GPU model)"),
    MW_OPT(mw_run_settings, "run-cgroup", MW_OPT_STRING, cgroup, "auto", check_run_cgroup, "`mlwatch run`: the cgroup the command gets of its own, so that its daemons count: auto (a systemd transient scope where systemd runs the machine, else a child cgroup in v2, else in v1 cpuacct), systemd (a scope, else as auto), v2, v1, or none (follow the process tree)"),
};
/* clang-format on */
const mw_option_group mw_run_options =
    MW_OPTION_GROUP("mlwatch run", "src/agent/run.c", mw_run_settings, run_rows, NULL);

static void report(const mw_config *cfg, char **argv, size_t argc, const tracker *t,
                   const mw_energy *e, const run_acc *acc, double wall, int status,
                   double intensity)
{
    const mw_run_settings *rs = mw_config_group(cfg, &mw_run_options);
    const mw_energy_settings *es = mw_config_group(cfg, &mw_energy_options);
    double j[MW_EC_N][MW_EK_N] = {{0}}, co2 = 0;
    mw_energy_container(e, "", "", RUN_CONTAINER, j, &co2);
    double total = 0;
    for (int k = 0; k < MW_EC_N; k++)
        total += j[k][0] + j[k][1];
    int estimated = mw_energy_last(e)->estimated_cpu;
    double gpu = acc->gpu_samples ? acc->gpu_util_sum / acc->gpu_samples : -1;
    double kwh = total / 3.6e6, gpu_hours = acc->gpu_seconds / 3600;
    char tracking[PATH_MAX + 2048];
    mw_run_cgroup_describe(&t->cg, tracking, sizeof(tracking));
    if (cfg->json) {
        json_t *cmd = json_array();
        for (size_t i = 0; i < argc; i++)
            json_array_append_new(cmd, json_string(argv[i]));
        json_t *comp = json_object();
        for (int k = 0; k < MW_EC_N; k++)
            json_object_set_new(comp, mw_energy_component_names[k],
                                json_pack("{s:f,s:f,s:f,s:f}", "joules", j[k][0] + j[k][1],
                                          "dynamic_joules", j[k][0], "idle_joules", j[k][1], "wh",
                                          (j[k][0] + j[k][1]) / 3600));
        json_t *o = json_pack("{s:o,s:i,s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:o,s:f,s:s,s:s}",
                              "command", cmd, "exit_status", status, "tracking",
                              t->cg.version ? (t->cg.scope[0] ? "systemd_scope" : "cgroup")
                                            : "process_tree",
                              "tracking_detail", tracking, "wall_seconds", wall, "cpu_seconds",
                              t->cpu, "cpu_user_seconds", t->user, "cpu_system_seconds", t->sys,
                              "energy_joules", total, "energy_wh", total / 3600, "components", comp,
                              "average_power_watts", wall > 0 ? total / wall : 0, "cpu_method",
                              estimated ? "estimated" : "measured", "idle_policy", es->idle_policy);
        json_object_set_new(o, "co2_grams", intensity >= 0 ? json_real(co2) : json_null());
        json_object_set_new(o, "carbon_intensity_grams_per_kwh",
                            intensity >= 0 ? json_real(intensity) : json_null());
        json_object_set_new(o, "gpu_utilization_ratio", gpu >= 0 ? json_real(gpu) : json_null());
        json_t *models = json_array();
        for (size_t i = 0; i < acc->nmodels; i++)
            json_array_append_new(models, json_string(acc->models[i]));
        json_object_set_new(o, "gpu_models", models);
        json_object_set_new(o, "gpu_hours", json_real(gpu_hours));
        json_object_set_new(o, "joules_per_gpu_hour",
                            gpu_hours > 0 ? json_real(total / gpu_hours) : json_null());
        if (rs->work > 0) {
            json_t *w = json_pack("{s:f,s:s,s:f,s:f}", "units", rs->work, "unit", rs->unit,
                                  "joules_per_unit", total / rs->work, "units_per_kwh",
                                  kwh > 0 ? rs->work / kwh : 0);
            json_object_set_new(w, "units_per_gpu_hour",
                                gpu_hours > 0 ? json_real(rs->work / gpu_hours) : json_null());
            json_object_set_new(o, "work", w);
        }
        char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        fprintf(stderr, "%s\n", text);
        free(text);
        json_decref(o);
        return;
    }
    fprintf(stderr, "\nmlwatch run: %s (exit status %d)\n", argv[0], status);
    fprintf(stderr, "  wall time        %.3f s\n", wall);
    fprintf(stderr, "  CPU time         %.3f s (user %.3f s, system %.3f s)\n", t->cpu, t->user,
            t->sys);
    fprintf(stderr, "  tracking         %s%s\n", tracking,
            t->cg.version ? "" : " (a process that leaves the tree, a daemon, is not counted)");
    fprintf(stderr, "  energy           %.3f J = %.6f Wh (CPU %s, idle policy %s)\n", total,
            total / 3600, estimated ? "estimated" : "measured", es->idle_policy);
    for (int k = 0; k < MW_EC_N; k++)
        fprintf(stderr, "    %-6s         %.3f J = %.6f Wh (dynamic %.3f J, idle %.3f J)\n",
                mw_energy_component_names[k], j[k][0] + j[k][1], (j[k][0] + j[k][1]) / 3600,
                j[k][0], j[k][1]);
    fprintf(stderr, "  average power    %.3f W\n", wall > 0 ? total / wall : 0);
    if (intensity >= 0)
        fprintf(stderr, "  CO2              %.6f g (last intensity %.1f gCO2eq/kWh)\n", co2,
                intensity);
    else
        fprintf(stderr, "  CO2              unknown (no --carbon-intensity)\n");
    if (gpu >= 0)
        fprintf(stderr, "  GPU utilization  %.1f %% (mean)\n", gpu * 100);
    else
        fprintf(stderr, "  GPU utilization  no GPU\n");
    if (gpu_hours > 0)
        fprintf(stderr, "  GPU time         %.6f GPU-hours (%s), %.6g J per GPU-hour\n", gpu_hours,
                acc->nmodels ? acc->models[0] : "unknown model", total / gpu_hours);
    if (rs->work > 0)
        fprintf(stderr, "  efficiency       %.6g J/%s, %.6g %s/kWh\n", total / rs->work, rs->unit,
                kwh > 0 ? rs->work / kwh : 0, rs->unit);
}

static double mono_s(void)
{
    return (double)mw_mono_ns() / 1e9;
}

/* One row of the --compare table from a --json report. */
typedef struct cmp_row {
    const char *file;
    char command[64], model[96], unit[64], method[16];
    double joules, gpu_hours, units;
    int have_work;
} cmp_row;

static int compare_row(const char *file, cmp_row *r, char *err, size_t errsize)
{
    json_error_t je;
    json_t *o = json_load_file(file, 0, &je);
    if (!o) {
        snprintf(err, errsize, "%s: not a `mlwatch run --json` report (%s)", file, je.text);
        return -1;
    }
    memset(r, 0, sizeof(*r));
    r->file = file;
    const json_t *cmd = json_array_get(json_object_get(o, "command"), 0);
    const json_t *j = json_object_get(o, "energy_joules"), *gh = json_object_get(o, "gpu_hours");
    if (!json_is_number(j)) {
        snprintf(err, errsize, "%s: no energy_joules: not a `mlwatch run --json` report", file);
        json_decref(o);
        return -1;
    }
    r->joules = json_number_value(j);
    r->gpu_hours = json_is_number(gh) ? json_number_value(gh) : 0;
    mw_strlcpy(r->command, json_is_string(cmd) ? json_string_value(cmd) : "?", sizeof(r->command));
    const json_t *m = json_array_get(json_object_get(o, "gpu_models"), 0);
    mw_strlcpy(r->model, json_is_string(m) ? json_string_value(m) : "-", sizeof(r->model));
    const json_t *cm = json_object_get(o, "cpu_method");
    mw_strlcpy(r->method, json_is_string(cm) ? json_string_value(cm) : "?", sizeof(r->method));
    const json_t *w = json_object_get(o, "work");
    if (json_is_number(json_object_get(w, "units"))) {
        r->have_work = 1;
        r->units = json_number_value(json_object_get(w, "units"));
        const json_t *u = json_object_get(w, "unit");
        mw_strlcpy(r->unit, json_is_string(u) ? json_string_value(u) : "unit", sizeof(r->unit));
    }
    json_decref(o);
    return 0;
}

/* `mlwatch run --compare FILE...`: runs on different accelerators side by
 * side (stdout; --json: a list). */
static int compare_reports(const mw_config *cfg, char **files, size_t n)
{
    if (n == 0) {
        fprintf(stderr, "mlwatch run --compare: no report files (mlwatch run --json ... 2>FILE)\n");
        return 2;
    }
    json_t *out = json_array();
    if (!cfg->json)
        printf("%-24s %-16s %-24s %12s %10s %14s %14s %14s %s\n", "report", "command", "GPU model",
               "energy J", "GPU-hours", "J/GPU-hour", "J/unit", "units/kWh", "CPU");
    for (size_t i = 0; i < n; i++) {
        cmp_row r;
        char err[512];
        if (compare_row(files[i], &r, err, sizeof(err)) < 0) {
            fprintf(stderr, "mlwatch run --compare: %s\n", err);
            json_decref(out);
            return 2;
        }
        double jpg = r.gpu_hours > 0 ? r.joules / r.gpu_hours : -1;
        double jpu = r.have_work && r.units > 0 ? r.joules / r.units : -1;
        double upk = r.have_work && r.joules > 0 ? r.units / (r.joules / 3.6e6) : -1;
        if (cfg->json) {
            json_t *row = json_pack("{s:s,s:s,s:s,s:f,s:f,s:s}", "report", r.file, "command",
                                    r.command, "gpu_model", r.model, "energy_joules", r.joules,
                                    "gpu_hours", r.gpu_hours, "cpu_method", r.method);
            json_object_set_new(row, "joules_per_gpu_hour",
                                jpg >= 0 ? json_real(jpg) : json_null());
            json_object_set_new(row, "joules_per_unit", jpu >= 0 ? json_real(jpu) : json_null());
            json_object_set_new(row, "units_per_kwh", upk >= 0 ? json_real(upk) : json_null());
            json_object_set_new(row, "unit", r.have_work ? json_string(r.unit) : json_null());
            json_array_append_new(out, row);
            continue;
        }
        char a[32] = "-", b[128] = "-", c[32] = "-";
        if (jpg >= 0) snprintf(a, sizeof(a), "%.6g", jpg);
        if (jpu >= 0) snprintf(b, sizeof(b), "%.6g/%s", jpu, r.unit);
        if (upk >= 0) snprintf(c, sizeof(c), "%.6g", upk);
        printf("%-24s %-16s %-24s %12.3f %10.6f %14s %14s %14s %s\n", r.file, r.command, r.model,
               r.joules, r.gpu_hours, a, b, c, r.method);
    }
    if (cfg->json) {
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        printf("%s\n", text);
        free(text);
    }
    json_decref(out);
    return 0;
}

/* Whether to ask systemd for a scope: --run-cgroup systemd, or auto where
 * systemd runs the machine. */
static int want_scope(const mw_config *cfg)
{
    mw_run_cg_mode mode =
        run_cg_mode(((const mw_run_settings *)mw_config_group(cfg, &mw_run_options))->cgroup);
    return mode == MW_RUN_CG_SYSTEMD ||
           (mode == MW_RUN_CG_AUTO && mw_run_systemd_booted("/run/systemd/system"));
}

/* A process that keeps the scope populated until the command's last
 * sample: systemd removes a scope's cgroup, and its CPU time, as soon as
 * its last process ends. Reads *HOLD (its pipe) until we close the other
 * end; inherits no other descriptor (it must not keep ERRFD's pipe open).
 * Its pid, or -1. */
static pid_t fork_holder(int *hold)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -1;
    pid_t h = fork();
    if (h == 0) {
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
        for (size_t i = 0; i < MW_ARRAY_LEN(sigs); i++)
            signal(sigs[i], SIG_IGN);
        for (int fd = 3; fd < 1024; fd++)
            if (fd != p[0]) close(fd);
        char b;
        for (;;) {
            ssize_t r = read(p[0], &b, 1);
            if (!(r < 0 && errno == EINTR)) break;
        }
        _exit(0);
    }
    close(p[0]);
    if (h < 0) {
        close(p[1]);
        return -1;
    }
    *hold = p[1];
    return h;
}

/* Ask systemd for the scope mlwatch-run-PID.scope holding the command's
 * process (still waiting to exec) and the holder; on success the cgroup
 * made for the fallback goes and CG becomes the scope's. The holder's pid,
 * or -1 (CG as it was, with why systemd_why). */
static pid_t systemd_scope(mw_run_cgroup *cg, pid_t pid, const char *cmd, int *hold)
{
    char unit[128], desc[300];
    snprintf(unit, sizeof(unit), "%s-%d.scope", RUN_CONTAINER, (int)getpid());
    snprintf(desc, sizeof(desc), "mlwatch run %.200s", cmd);
    pid_t holder = fork_holder(hold);
    pid_t pids[2] = {pid, holder};
    char why[512] = "";
    if (mw_run_systemd_scope(NULL, unit, desc, pids, holder > 0 ? 2 : 1, 10000, why, sizeof(why)) ==
        0) {
        mw_run_cgroup fallback = *cg;
        if (mw_run_cgroup_remove(&fallback) < 0)
            fprintf(stderr, "mlwatch run: cannot remove %s: %s\n", fallback.dir, strerror(errno));
        char why2[512] = "";
        if (mw_run_cgroup_adopt(cg, (int)pid, unit, why2, sizeof(why2)) == 0) return holder;
        /* In a scope we cannot read: the process tree, saying why. */
        cg->version = 0;
        snprintf(cg->why, sizeof(cg->why), "in systemd scope %s, but %s", unit, why2);
        return holder;
    }
    mw_strlcpy(cg->systemd_why, why, sizeof(cg->systemd_why));
    if (holder > 0) {
        close(*hold);
        waitpid(holder, NULL, 0);
    }
    return -1;
}

int mw_run_command(const mw_config *cfg, char **argv, size_t argc)
{
    if (((const mw_run_settings *)mw_config_group(cfg, &mw_run_options))->compare)
        return compare_reports(cfg, argv, argc);
    if (argc == 0) {
        fprintf(stderr, "mlwatch run: no command (usage: mlwatch run [FLAGS] -- COMMAND [ARGS])\n");
        return 2;
    }
    if (((const mw_run_settings *)mw_config_group(cfg, &mw_run_options))->work < 0) {
        fprintf(stderr, "mlwatch run: --work must be a positive number of units\n");
        return 2;
    }
    /* Collectors' "not on this host" lines are noise around a command's
     * output; --log-level debug shows them. */
    if (strcmp(cfg->log_level, "info") == 0) mw_log_set_level(MW_LOG_WARN);
    char **args = mw_xcalloc(argc + 1, sizeof(char *)); /* execvp needs the NULL */
    memcpy(args, argv, argc * sizeof(char *));
    argv = args;
    static mw_config c;
    c = *cfg;
    static const char *const names[] = {"cpu", "rapl", "hwmon", "gpu", "ipmi"};
    mw_collector_set_settings *cs = mw_config_group_mut(&c, &mw_collector_set_options);
    cs->ncollectors = 0;
    for (size_t i = 0; i < MW_ARRAY_LEN(names); i++)
        mw_strlcpy(cs->collectors[cs->ncollectors++], names[i], sizeof(cs->collectors[0]));
    ((mw_gpu_settings *)mw_config_group_mut(&c, &mw_gpu_options))->gpu_process_interval_ms =
        c.interval_ms;
    mw_energy_params p;
    if (mw_energy_params_from_config(&c, &p) < 0) {
        fprintf(stderr, "mlwatch run: --energy-max-watts-per-cpu must be at least "
                        "--energy-idle-watts-per-cpu\n");
        free(args);
        return 2;
    }
    if (p.idle_policy == MW_IDLE_POLICY_REQUESTS)
        p.idle_policy = MW_IDLE_POLICY_CPU; /* no requests here */
    char err[1024];
    mw_carbon *carbon = NULL;
    if (mw_energy_carbon_from_config(&c, &carbon, err, sizeof(err)) < 0) {
        fprintf(stderr, "mlwatch run: %s\n", err);
        free(args);
        return 2;
    }
    mw_hostfs host;
    int rc = mw_hostfs_open(&host, c.root);
    if (rc < 0) {
        fprintf(stderr, "mlwatch run: --root %s: %s\n", c.root, strerror(-rc));
        mw_carbon_close(carbon);
        free(args);
        return 2;
    }
    mw_procmap *pm = mw_procmap_new(&host);
    mw_env env = {&c, &host, pm, NULL, NULL, 0};
    mw_collector_set *set = mw_collector_set_new(&env);
    mw_energy *e = mw_energy_new(&p);
    tracker t;
    memset(&t, 0, sizeof(t));
    t.pids = mw_xcalloc(MAX_PROCS, sizeof(int));
    pstat *ps = mw_xcalloc(MAX_PROCS, sizeof(pstat));
    run_acc acc;
    memset(&acc, 0, sizeof(acc));
    {
        char name[64];
        snprintf(name, sizeof(name), "%s-%d", RUN_CONTAINER, (int)getpid());
        mw_run_cgroup_create(
            &t.cg,
            run_cg_mode(((const mw_run_settings *)mw_config_group(&c, &mw_run_options))->cgroup),
            name);
    }

    /* Baseline before the command starts. */
    cycle(&t, ps, set, pm, e, carbon, &acc);
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0) errpipe[0] = errpipe[1] = -1;
    /* Forwarding is in place before the child exists (exec resets caught
     * signals to their defaults in the child). */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < MW_ARRAY_LEN(sigs); i++)
        sigaction(sigs[i], &sa, NULL);
    /* The child waits for a byte before exec: 'c' to enter the cgroup made
     * above, 's' when systemd has put it in a scope, meanwhile. */
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0) go[0] = go[1] = -1;
    double start = mono_s();
    pid_t pid = fork();
    if (pid == 0) {
        char how = 'c';
        if (go[0] >= 0 && read(go[0], &how, 1) != 1) how = 'c';
        /* Failing, it stays in our cgroup; the parent sees that below. */
        if (how == 'c') (void)mw_run_cgroup_enter(&t.cg);
        execvp(argv[0], argv);
        int en = errno;
        if (errpipe[1] >= 0 && write(errpipe[1], &en, sizeof(en)) < 0) {
        }
        _exit(127);
    }
    if (pid > 0) child_pid = pid;
    if (errpipe[1] >= 0) close(errpipe[1]);
    pid_t holder = -1;
    int hold = -1;
    if (pid > 0 && want_scope(&c)) holder = systemd_scope(&t.cg, pid, argv[0], &hold);
    if (go[1] >= 0) {
        char how = t.cg.scope[0] ? 's' : 'c';
        if (write(go[1], &how, 1) != 1) {
        }
        close(go[1]);
        close(go[0]);
    }
    int status = 0, exit_status = 127;
    if (pid < 0) {
        fprintf(stderr, "mlwatch run: cannot start %s: %s\n", argv[0], strerror(errno));
        goto out;
    }
    child_pid = pid;
    t.root = pid;
    int en = 0;
    if (errpipe[0] >= 0 && read(errpipe[0], &en, sizeof(en)) == (ssize_t)sizeof(en)) {
        waitpid(pid, &status, 0);
        fprintf(stderr, "mlwatch run: cannot run %s: %s\n", argv[0], strerror(en));
        goto out;
    }
    if (t.cg.version) { /* did the child get in? If not, follow the tree instead */
        char path[64], line[PATH_MAX];
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        const char *name = strrchr(t.cg.dir, '/');
        if (mw_read_small_file(path, line, sizeof(line)) < 0 || !strstr(line, name)) {
            snprintf(t.cg.why, sizeof(t.cg.why), "the command could not enter %.900s", t.cg.dir);
            mw_run_cgroup_remove(&t.cg);
            t.cg.version = 0;
        }
    }
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    double next = start + (double)c.interval_ms / 1000.0;
    for (;;) {
        pid_t w = wait4(pid, &status, WNOHANG, &ru);
        if (w == pid) break;
        double now = mono_s();
        if (now >= next) {
            cycle(&t, ps, set, pm, e, carbon, &acc);
            next += (double)c.interval_ms / 1000.0;
            if (next < now) next = now + (double)c.interval_ms / 1000.0;
        }
        /* Short naps: the command's end is seen within 20 ms. */
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
    }
    double wall = mono_s() - start;
    /* The tail interval, with the command's final CPU time. */
    if (!t.cg.version) {
        double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
        if (cpu > t.cpu) {
            t.cpu = cpu;
            t.user = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
            t.sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
        }
        t.root = -1; /* gone: the tree sample must not lower the total */
    }
    cycle(&t, ps, set, pm, e, carbon, &acc);
    if (holder > 0) { /* sampled: the scope may go now */
        close(hold);
        waitpid(holder, NULL, 0);
        holder = -1;
    }
    exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    report(&c, argv, argc, &t, e, &acc, wall, exit_status,
           mw_carbon_now(carbon, mw_now_ms(), NULL));
out:
    if (holder > 0) {
        close(hold);
        waitpid(holder, NULL, 0);
    }
    if (errpipe[0] >= 0) close(errpipe[0]);
    /* A daemon that the command waited for may still be exiting: 200 ms
     * for the cgroup to empty before it is left behind. */
    for (int i = 0; i < 20 && t.cg.version && mw_run_cgroup_pids(&t.cg, t.pids, 1) > 0; i++) {
        struct timespec nap = {0, 10000000};
        nanosleep(&nap, NULL);
    }
    if (t.cg.version && mw_run_cgroup_remove(&t.cg) < 0)
        fprintf(stderr,
                "mlwatch run: %zu processes of the command still run in %s (counted until "
                "now); the %s stays\n",
                mw_run_cgroup_pids(&t.cg, t.pids, MAX_PROCS), t.cg.dir,
                t.cg.scope[0] ? "scope" : "cgroup");
    child_pid = 0;
    free(t.pids);
    free(ps);
    mw_energy_free(e);
    mw_collector_set_free(set);
    mw_procmap_free(pm);
    mw_hostfs_close(&host);
    mw_carbon_close(carbon);
    free(args);
    return exit_status;
}
