/* doctor.c - "why is my training slow?": the doctor module of the agent and
 * the `mlwatch doctor` command.
 *
 * The module turns every snapshot into a frame of its history ring
 * (history.c), runs the rules (findings.c) over the history, exports each
 * finding as mlwatch_finding{kind,severity,namespace,pod,container,gpu} 1 and
 * serves them as JSON at /api/v1/findings?namespace=&pod=&window=.
 *
 * The command asks the agent at --listen for its findings (its history:
 * until the store lands, the module's ring is that history); when no agent
 * answers it runs the collectors and the same module in-process for --window
 * and reports what it saw. Exit status: 0 nothing found, 1 findings, 3 error
 * (2, a usage error, comes from main). */
#include "doctor.h"
#include "../collect/collector.h"
#include "../collect/procmap.h"
#include "../core/log.h"
#include "../core/units.h"
#include "../core/util.h"
#include "../serve/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const mw_metric_desc FINDING = {
    "mlwatch_finding",
    "A finding of the doctor (docs/doctor.md): 1 while the rule of its kind holds over the "
    "doctor's history.",
    "", MW_GAUGE};

typedef struct doctor_state {
    const mw_env *env;
    struct mw_doctor_thresholds t;
    pthread_mutex_t mu; /* the ring: derive writes, HTTP threads read */
    dr_history hist;
} doctor_state;

static int doctor_init(const mw_env *env, void **state)
{
    doctor_state *s = mw_xcalloc(1, sizeof(*s));
    s->env = env;
    s->t = env->cfg->doctor;
    pthread_mutex_init(&s->mu, NULL);
    dr_history_init(&s->hist, s->t.history_ms, env->cfg->interval_ms);
    *state = s;
    return 0;
}

void mw_doctor_findings(void *state, int64_t window_ms, dr_list *out)
{
    doctor_state *s = state;
    pthread_mutex_lock(&s->mu);
    dr_evaluate(&s->hist, window_ms, &s->t, out);
    pthread_mutex_unlock(&s->mu);
    dr_list_rank(out);
}

static int same_labels(const dr_finding *a, const dr_finding *b)
{
    return a->kind == b->kind && strcmp(a->namespace_, b->namespace_) == 0 &&
           strcmp(a->pod, b->pod) == 0 && strcmp(a->container, b->container) == 0 &&
           strcmp(a->gpu, b->gpu) == 0;
}

static void doctor_derive(void *state, mw_snapshot *snap)
{
    doctor_state *s = state;
    /* Built outside the lock (it reads cpuset files); the pool is only ever
     * changed on this thread, by building and by dropping frames. */
    dr_frame *f = dr_frame_from(snap, s->env->host, &s->hist.pool);
    pthread_mutex_lock(&s->mu);
    dr_history_push(&s->hist, f);
    pthread_mutex_unlock(&s->mu);
    dr_list l;
    dr_list_init(&l);
    mw_doctor_findings(s, 0, &l);
    for (size_t i = 0; i < l.n; i++) {
        const dr_finding *x = &l.items[i];
        /* Two containers of one name (a restart) would give two samples with
         * the same labels: the worse one (ranked first) stands for both. */
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++)
            dup = same_labels(&l.items[j], x);
        if (dup) continue;
        mw_emit(snap, &FINDING, 1, "kind", dr_kind_name(x->kind), "severity",
                dr_severity_name(x->severity), "namespace", x->namespace_, "pod", x->pod,
                "container", x->container, "gpu", x->gpu, MW_END);
    }
    dr_list_free(&l);
}

static void findings_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    doctor_state *s = cls;
    int64_t window_ms = 0;
    const char *w = mw_http_arg(req, "window");
    if (w && *w && (mw_parse_duration_ms(w, &window_ms) < 0 || window_ms <= 0)) {
        mw_http_text(resp, 400, "window: invalid duration '%.64s' (examples: 30s, 5m)\n", w);
        return;
    }
    if (window_ms > s->t.history_ms) window_ms = s->t.history_ms;
    dr_list l;
    dr_list_init(&l);
    mw_doctor_findings(s, window_ms, &l);
    dr_list_filter(&l, mw_http_arg(req, "namespace"), mw_http_arg(req, "pod"),
                   mw_http_arg(req, "container"));
    char *json = dr_list_to_json(&l, mw_now_ms(), "agent",
                                 (double)(window_ms ? window_ms : s->t.history_ms) / 1000);
    dr_list_free(&l);
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = json;
    resp->len = strlen(json);
}

static void doctor_routes(void *state, mw_http_server *http)
{
    mw_http_route(http, "GET", "/api/v1/findings", 0, findings_handler, state);
}

static void doctor_destroy(void *state)
{
    doctor_state *s = state;
    dr_history_free(&s->hist);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const mw_module mw_doctor_module = {
    .name = "doctor",
    .init = doctor_init,
    .routes = doctor_routes,
    .derive = doctor_derive,
    .destroy = doctor_destroy,
};

/* ---- `mlwatch doctor` ---- */

typedef struct filter {
    const char *ns, *pod, *container;
    char ns_buf[128], pod_buf[256], ctr_buf[512];
} filter;

/* --pid: one walk of the cgroup collector fills the process map. */
static int resolve_pid(const mw_config *cfg, filter *fl)
{
    static mw_config c; /* large: not on the stack */
    c = *cfg;
    mw_strlcpy(c.collectors[0], "cgroup", sizeof(c.collectors[0]));
    c.ncollectors = 1;
    c.ndisable_collectors = 0;
    mw_hostfs host;
    int rc = mw_hostfs_open(&host, c.root);
    if (rc < 0) {
        fprintf(stderr, "mlwatch doctor: --root %s: %s\n", c.root, strerror(-rc));
        return -1;
    }
    mw_procmap *pm = mw_procmap_new(&host);
    mw_env env = {&c, &host, pm, NULL};
    mw_collector_set *set = mw_collector_set_new(&env);
    mw_snapshot *snap = mw_snapshot_new();
    mw_collector_set_run(set, snap);
    mw_container_ref ref;
    int pid = atoi(cfg->doctor_pid);
    rc = mw_procmap_lookup(pm, pid, &ref);
    mw_snapshot_free(snap);
    mw_collector_set_free(set);
    mw_procmap_free(pm);
    mw_hostfs_close(&host);
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

static size_t on_body(char *p, size_t size, size_t n, void *cls)
{
    mw_buf *b = cls;
    return mw_buf_append(b, p, size * n) == 0 ? size * n : 0;
}

/* 1: the agent answered with findings (in out); 0: no agent (sample
 * instead); -1: an agent answered, but not with findings. */
static int ask_agent(const mw_config *cfg, int64_t window_ms, dr_list *out, char *url,
                     size_t urlsize)
{
    char host[256];
    uint16_t port;
    if (mw_parse_listen(cfg->listen, host, sizeof(host), &port) < 0 || port == 0) return 0;
    const char *h = host;
    if (!*h || strcmp(h, "0.0.0.0") == 0) h = "127.0.0.1";
    if (strcmp(h, "::") == 0) h = "::1";
    int v6 = strchr(h, ':') != NULL;
    char window[64] = "";
    if (window_ms > 0) snprintf(window, sizeof(window), "?window=%lldms", (long long)window_ms);
    snprintf(url, urlsize, "http://%s%s%s:%u/api/v1/findings%s", v6 ? "[" : "", h, v6 ? "]" : "",
             port, window);
    CURL *c = curl_easy_init();
    if (!c) return 0;
    mw_buf body;
    mw_buf_init(&body, 64u << 20);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    int result;
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT) {
        result = 0;
    } else if (rc != CURLE_OK) {
        fprintf(stderr, "mlwatch doctor: %s: %s\n", url, curl_easy_strerror(rc));
        result = -1;
    } else if (status == 404) {
        /* An agent without the doctor module: sample instead. */
        mw_log(MW_LOG_WARN, "doctor", "%s: the agent has no findings endpoint; sampling instead",
               url);
        result = 0;
    } else if (status != 200) {
        fprintf(stderr, "mlwatch doctor: %s: HTTP %ld: %.200s\n", url, status,
                body.data ? body.data : "");
        result = -1;
    } else {
        char err[256];
        if (dr_list_from_json(body.data ? body.data : "", body.len, out, err, sizeof(err)) < 0) {
            fprintf(stderr, "mlwatch doctor: %s: %s\n", url, err);
            result = -1;
        } else {
            result = 1;
        }
    }
    mw_buf_free(&body);
    return result;
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

/* Run the collectors and the doctor every interval for the window. */
static int sample(const mw_config *cfg, int64_t window_ms, dr_list *out)
{
    static mw_config c;
    c = *cfg;
    c.doctor.history_ms = window_ms + cfg->interval_ms;
    mw_hostfs host;
    int rc = mw_hostfs_open(&host, c.root);
    if (rc < 0) {
        fprintf(stderr, "mlwatch doctor: --root %s: %s\n", c.root, strerror(-rc));
        return -1;
    }
    mw_procmap *pm = mw_procmap_new(&host);
    mw_env env = {&c, &host, pm, NULL};
    mw_collector_set *set = mw_collector_set_new(&env);
    void *state;
    doctor_init(&env, &state);
    int64_t cycles = window_ms / c.interval_ms + 1;
    if (cycles < 2) cycles = 2; /* rates need two frames */
    char w[32];
    mw_format_duration((cycles - 1) * c.interval_ms, w, sizeof(w));
    mw_log(MW_LOG_INFO, "doctor", "no agent answers on %s: sampling for %s", c.listen, w);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int64_t i = 0; i < cycles; i++) {
        if (i) sleep_until(&next, c.interval_ms);
        mw_snapshot *snap = mw_snapshot_new();
        mw_collector_set_run(set, snap);
        doctor_derive(state, snap);
        mw_snapshot_free(snap);
    }
    mw_doctor_findings(state, 0, out);
    doctor_destroy(state);
    mw_collector_set_free(set);
    mw_procmap_free(pm);
    mw_hostfs_close(&host);
    return 0;
}

int mw_doctor_run(const mw_config *cfg)
{
    filter fl = {cfg->doctor_namespace, cfg->doctor_pod, NULL, "", "", ""};
    if (cfg->doctor_pid[0] && resolve_pid(cfg, &fl) < 0) return 3;
    dr_list l;
    dr_list_init(&l);
    char url[512];
    char source[600];
    double window_s;
    int agent = ask_agent(cfg, cfg->doctor_window_ms, &l, url, sizeof(url));
    if (agent < 0) {
        dr_list_free(&l);
        return 3;
    }
    if (agent) {
        snprintf(source, sizeof(source), "the agent's history, %s", url);
        window_s =
            (double)(cfg->doctor_window_ms ? cfg->doctor_window_ms : cfg->doctor.history_ms) / 1000;
    } else {
        int64_t w = cfg->doctor_window_ms ? cfg->doctor_window_ms : 10000;
        if (sample(cfg, w, &l) < 0) {
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
    if (cfg->doctor_json) {
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
