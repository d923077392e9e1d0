/* doctor.c - "why is my training slow?": the doctor module of the agent.
 *
 * The module turns every snapshot into a frame of its history ring
 * (history.c), runs the rules (findings.c) over the history, exports each
 * finding as mlwatch_finding{kind,severity,namespace,pod,container,gpu} 1 and
 * serves them as JSON at /api/v1/findings?namespace=&pod=&window=. The
 * `mlwatch doctor` command, which asks it or runs it in-process, is
 * src/agent/doctor_cmd.c. */
#include "doctor.h"
#include "../core/units.h"
#include "../core/util.h"
#include "../serve/http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
MW_METRIC(FINDING, MW_GAUGE, "mlwatch_finding", "", "A finding of the doctor (docs/doctor.md): 1 while the rule of its kind holds over the doctor's history.");
/* clang-format on */

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
    s->t = ((const mw_doctor_settings *)mw_config_group(env->cfg, &mw_doctor_options))->t;
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
    l.root = dr_list_str(&l, s->env->cfg->root, DR_ROOT_MAX);
    dr_list_filter(&l, mw_http_arg(req, "namespace"), mw_http_arg(req, "pod"),
                   mw_http_arg(req, "container"));
    /* A namespace-scoped reader sees the findings of its namespaces only,
     * and the node's own when its policy shows node-level series. */
    size_t keep = 0;
    for (size_t i = 0; i < l.n; i++)
        if (mw_http_scope_allows(req->scope, l.items[i].namespace_)) l.items[keep++] = l.items[i];
    l.n = keep;
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
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/findings", 0, findings_handler, state);
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
    .options = &mw_doctor_options,
    .init = doctor_init,
    .routes = doctor_routes,
    .derive = doctor_derive,
    .destroy = doctor_destroy,
};
