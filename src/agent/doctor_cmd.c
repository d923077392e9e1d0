/* doctor_cmd.c - `mlwatch doctor`: "why is my training slow?" from the
 * command line.
 *
 * It asks the agent at --listen, or at --url, for its findings (GET
 * /api/v1/findings, served by the doctor module, src/derive/doctor.c, from
 * its history); when no agent answers on --listen it runs the collectors and
 * the same module in-process for --window and reports what it saw. Every
 * answer says which root the agent watches ("root"): with a --root of its
 * own, the doctor samples that root when the agent on --listen watches
 * another, and fails when the agent at --url does. --pid is resolved to its container
 * by one walk of the cgroup collector. Exit status: 0 nothing found, 1
 * findings, 3 error (2, a usage error, comes from main). */
#include "doctor_cmd.h"
#include "../collect/collector.h"
#include "../collect/procmap.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/units.h"
#include "../core/util.h"
#include "../derive/doctor.h"
#include "../query/query_cmd.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --url: the agent to ask (the option `mlwatch query` declares). */
static const char *query_url(const mw_config *cfg)
{
    return ((const mw_query_cmd_settings *)mw_config_group(cfg, &mw_query_cmd_options))->url;
}

typedef struct filter {
    const char *ns, *pod, *container;
    char ns_buf[128], pod_buf[256], ctr_buf[512];
} filter;

/* The collectors of a configuration, run in this process on its --root. */
typedef struct local_collectors {
    mw_hostfs host;
    mw_procmap *pm;
    mw_env env;
    mw_collector_set *set;
} local_collectors;

static int local_open(local_collectors *lc, const mw_config *c)
{
    int rc = mw_hostfs_open(&lc->host, c->root);
    if (rc < 0) {
        fprintf(stderr, "mlwatch doctor: --root %s: %s\n", c->root, strerror(-rc));
        return -1;
    }
    lc->pm = mw_procmap_new(&lc->host);
    lc->env = (mw_env){c, &lc->host, lc->pm, NULL, NULL, 0};
    lc->set = mw_collector_set_new(&lc->env);
    return 0;
}

static void local_close(local_collectors *lc)
{
    mw_collector_set_free(lc->set);
    mw_procmap_free(lc->pm);
    mw_hostfs_close(&lc->host);
}

/* --pid: one walk of the cgroup collector fills the process map. */
static int resolve_pid(const mw_config *cfg, filter *fl)
{
    static mw_config c; /* large: not on the stack */
    c = *cfg;
    mw_collector_set_settings *cs = mw_config_group_mut(&c, &mw_collector_set_options);
    mw_strlcpy(cs->collectors[0], "cgroup", sizeof(cs->collectors[0]));
    cs->ncollectors = 1;
    cs->ndisable_collectors = 0;
    local_collectors lc;
    if (local_open(&lc, &c) < 0) return -1;
    mw_snapshot *snap = mw_snapshot_new();
    mw_collector_set_run(lc.set, snap);
    mw_container_ref ref;
    int pid = atoi(((const mw_doctor_settings *)mw_config_group(cfg, &mw_doctor_options))->pid);
    int rc = mw_procmap_lookup(lc.pm, pid, &ref);
    mw_snapshot_free(snap);
    local_close(&lc);
    if (rc < 0) {
        fprintf(stderr,
                "mlwatch doctor: --pid %d: no such process in any container or cgroup "
                "mlwatch knows\n",
                pid);
        return -1;
    }
    if (ref.namespace_[0] || ref.pod[0]) {
        mw_strlcpy(fl->ns_buf, ref.namespace_, sizeof(fl->ns_buf));
        mw_strlcpy(fl->pod_buf, ref.pod, sizeof(fl->pod_buf));
        mw_strlcpy(fl->ctr_buf, ref.container, sizeof(fl->ctr_buf));
    } else {
        mw_strlcpy(fl->ctr_buf, ref.cgroup, sizeof(fl->ctr_buf));
    }
    fl->ns = fl->ns_buf;
    fl->pod = fl->pod_buf;
    fl->container = fl->ctr_buf;
    return 0;
}

/* 1: the agent answered with findings (in out); 0: no agent (sample
 * instead); -1: an agent answered, but not with findings. */
static int ask_agent(const mw_config *cfg, int64_t window_ms, dr_list *out, char *url,
                     size_t urlsize)
{
    char window[64] = "";
    if (window_ms > 0) snprintf(window, sizeof(window), "?window=%lldms", (long long)window_ms);
    if (!query_url(cfg)[0]) {
        char host[256];
        uint16_t port;
        if (mw_parse_listen(cfg->listen, host, sizeof(host), &port) < 0 || port == 0) return 0;
    }
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/findings%s", window);
    /* The agent at --listen is on this machine: never through a proxy;
     * one at --url goes the way the environment says. */
    mw_http_call call = {.no_proxy = query_url(cfg)[0] ? NULL : "*",
                         .connect_timeout_ms = 1000,
                         .timeout_ms = 10000,
                         .max_body = 64u << 20};
    mw_query_client qc;
    char why[4200];
    if (mw_query_client_prepare(cfg, path, &qc, &call, why, sizeof(why)) < 0) {
        fprintf(stderr, "mlwatch doctor: %s\n", why);
        snprintf(url, urlsize, "%s", query_url(cfg));
        return -1;
    }
    mw_http_shown_url(qc.url, url, urlsize);
    mw_http_perform(NULL, &call);
    const mw_buf *body = &call.answer;
    long status = call.status;
    int result;
    if (call.failure == MW_HTTP_UNAVAILABLE || call.failure == MW_HTTP_CONNECT ||
        call.failure == MW_HTTP_TIMEOUT) {
        result = 0;
    } else if (call.failure != MW_HTTP_OK) {
        fprintf(stderr, "mlwatch doctor: %s: %s\n", url, call.reason);
        result = -1;
    } else if (status == 404) {
        /* An agent without the doctor module: sample instead. */
        mw_log(MW_LOG_WARN, "doctor", "%s: the agent has no findings endpoint; sampling instead",
               url);
        result = 0;
    } else if (status != 200) {
        fprintf(stderr, "mlwatch doctor: %s: HTTP %ld: %.200s\n", url, status,
                body->data ? body->data : "");
        result = -1;
    } else {
        char err[256];
        if (dr_list_from_json(body->data ? body->data : "", body->len, out, err, sizeof(err)) < 0) {
            fprintf(stderr, "mlwatch doctor: %s: %s\n", url, err);
            result = -1;
        } else {
            result = 1;
        }
    }
    mw_http_call_free(&call);
    memset(qc.token, 0, sizeof(qc.token));
    return result;
}

/* The same folder, written alike or resolving to it. */
static int same_root(const char *a, const char *b)
{
    if (strcmp(a, b) == 0) return 1;
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

static void sleep_until(struct timespec *next, int64_t add_ms)
{
    next->tv_sec += add_ms / 1000;
    next->tv_nsec += (add_ms % 1000) * 1000000;
    if (next->tv_nsec >= 1000000000) {
        next->tv_nsec -= 1000000000;
        next->tv_sec++;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL) == EINTR) {
    }
}

/* Run the collectors and the doctor every interval for the window; why
 * (no agent, another root) goes into the note on stderr. */
static int sample(const mw_config *cfg, int64_t window_ms, const char *why, dr_list *out)
{
    static mw_config c;
    c = *cfg;
    ((mw_doctor_settings *)mw_config_group_mut(&c, &mw_doctor_options))->t.history_ms =
        window_ms + cfg->interval_ms;
    local_collectors lc;
    if (local_open(&lc, &c) < 0) return -1;
    const mw_module *doctor = &mw_doctor_module;
    void *state;
    doctor->init(&lc.env, &state);
    int64_t cycles = window_ms / c.interval_ms + 1;
    if (cycles < 2) cycles = 2; /* rates need two frames */
    char w[32];
    mw_format_duration((cycles - 1) * c.interval_ms, w, sizeof(w));
    mw_log(MW_LOG_INFO, "doctor", "%s: sampling for %s", why, w);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int64_t i = 0; i < cycles; i++) {
        if (i) sleep_until(&next, c.interval_ms);
        mw_snapshot *snap = mw_snapshot_new();
        mw_collector_set_run(lc.set, snap);
        doctor->derive(state, snap);
        mw_snapshot_free(snap);
    }
    mw_doctor_findings(state, 0, out);
    doctor->destroy(state);
    local_close(&lc);
    return 0;
}

int mw_doctor_command(const mw_config *cfg, char **rest, size_t nrest)
{
    (void)rest;
    (void)nrest;
    const mw_doctor_settings *ds = mw_config_group(cfg, &mw_doctor_options);
    filter fl = {ds->ns, ds->pod, NULL, "", "", ""};
    if (ds->pid[0] && resolve_pid(cfg, &fl) < 0) return 3;
    dr_list l;
    dr_list_init(&l);
    char url[1400];
    char source[1500];
    double window_s;
    int agent = ask_agent(cfg, ds->window_ms, &l, url, sizeof(url));
    char why[PATH_MAX + 700];
    snprintf(why, sizeof(why), "no agent answers on %s", cfg->listen);
    if (agent == 0 && query_url(cfg)[0]) {
        fprintf(stderr, "mlwatch doctor: no agent answers at %s (--url)\n", url);
        agent = -1;
    }
    /* A --root of its own is judged on that root: the agent on --listen
     * may watch another (its own start's --root). */
    if (agent > 0 && strcmp(cfg->root, "/") != 0 && !same_root(l.root, cfg->root)) {
        if (query_url(cfg)[0]) {
            fprintf(stderr,
                    "mlwatch doctor: the agent at %s watches the root '%s', not '%s' (--root); "
                    "leave out --url to sample %s\n",
                    url, l.root[0] ? l.root : "(not said)", cfg->root, cfg->root);
            agent = -1;
        } else {
            snprintf(why, sizeof(why), "the agent on %s watches the root '%s', not '%s'",
                     cfg->listen, l.root[0] ? l.root : "(not said)", cfg->root);
            dr_list_free(&l);
            agent = 0;
        }
    }
    if (agent < 0) {
        dr_list_free(&l);
        return 3;
    }
    if (agent) {
        snprintf(source, sizeof(source), "the agent's history, %s", url);
        window_s = (double)(ds->window_ms ? ds->window_ms : ds->t.history_ms) / 1000;
    } else {
        int64_t w = ds->window_ms ? ds->window_ms : 10000;
        if (sample(cfg, w, why, &l) < 0) {
            dr_list_free(&l);
            return 3;
        }
        snprintf(source, sizeof(source), "sampled in-process every %lld ms",
                 (long long)cfg->interval_ms);
        window_s = (double)w / 1000;
    }
    dr_list_filter(&l, fl.ns, fl.pod, fl.container);
    dr_list_rank(&l);
    int rc = l.n ? 1 : 0;
    if (cfg->json) {
        char *json = dr_list_to_json(&l, mw_now_ms(), agent ? "agent" : "sampled", window_s);
        if (fputs(json, stdout) < 0 || fputc('\n', stdout) < 0) rc = 3;
        free(json);
    } else {
        mw_buf b;
        mw_buf_init(&b, 0);
        dr_list_to_text(&l, source, window_s, &b);
        if (fwrite(b.data, 1, b.len, stdout) != b.len) rc = 3;
        mw_buf_free(&b);
    }
    if (fflush(stdout) != 0) rc = 3;
    dr_list_free(&l);
    return rc;
}
