/* store_module.c - the store as an agent module: the agent's own samples
 * go straight into it every interval (consume), remote writes arrive on
 * /api/v1/write, and its self-metrics (mlwatch_store_*) join each cycle.
 *
 * The store opens when the agent registers its routes, so one-shot commands
 * (`mlwatch metrics`) never touch the data folder, and the agent reports
 * ready only once recovery is done. The PromQL API over it is the agent's
 * wiring (agent/store_query.c): the store knows nothing of queries. A store
 * that cannot open (a full disk, an I/O error, a folder another process
 * holds) is retried every second by a thread of its own until it opens;
 * meanwhile writes, queries and /-/ready answer 503 with the reason and
 * mlwatch_store_up is 0. */
#include "store_module.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"
#include "../serve/http.h"
#include "histogram.h"

#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds between attempts to open a store that could not open. */
#define REOPEN_EVERY_S 1

typedef struct store_module {
    const mw_config *cfg;
    mw_store *_Atomic store; /* NULL while disabled; set once, by the opener */
    mw_worker reopener;      /* its mutex guards open_error */
    char open_error[512];
    int opened; /* routes() ran: an agent, not a one-shot `mlwatch metrics` */
    char dir[PATH_MAX + 8];
    mw_store_options opts;
    mw_store_metadata_fn on_metadata; /* remote-write metadata, for the layers above */
    void *on_metadata_ctx;
    mw_store_open_fn on_open; /* a store that could not open did */
    void *on_open_ctx;
} store_module;

/* clang-format off */
MW_METRIC(ACTIVE, MW_GAUGE, "mlwatch_store_active_series", "", "Series in the store's in-memory head.");
MW_METRIC(CREATED, MW_COUNTER, "mlwatch_store_series_created_total", "", "Series created in the store since start.");
MW_METRIC(APPENDED, MW_COUNTER, "mlwatch_store_samples_appended_total", "", "Samples appended to the store since start (the WAL replay included).");
MW_METRIC(DUPLICATE, MW_COUNTER, "mlwatch_store_samples_duplicate_total", "", "Samples skipped as exact duplicates of stored ones.");
MW_METRIC(FSYNCS, MW_COUNTER, "mlwatch_store_wal_fsyncs_total", "", "WAL fsyncs (each makes a group of writes durable).");
MW_METRIC(WAL_ERRORS, MW_COUNTER, "mlwatch_store_wal_write_errors_total", "", "WAL writes or fsyncs that failed (disk full, I/O).");
MW_METRIC(DISK, MW_GAUGE, "mlwatch_store_disk_usage_bytes", "bytes", "Bytes the store uses on disk (WAL, chunks, blocks, snapshot).");
MW_METRIC(MEMORY, MW_GAUGE, "mlwatch_store_head_memory_bytes", "bytes", "Bytes the store's head holds in memory (estimate).");
MW_METRIC(BLOCKS, MW_GAUGE, "mlwatch_store_blocks", "", "Block files in the store.");
MW_METRIC(REFUSED, MW_COUNTER, "mlwatch_store_refused_requests_total", "", "Writes the store refused, by reason.");
MW_METRIC(DISK_FULL, MW_GAUGE, "mlwatch_store_disk_full", "", "1 while the WAL cannot be written (ingest gets 503).");
MW_METRIC(UP, MW_GAUGE, "mlwatch_store_up", "", "1 while the store accepts writes; 0 while it is disabled (its folder cannot be opened) or its WAL cannot be written.");
MW_METRIC(TORN, MW_GAUGE, "mlwatch_store_wal_torn_bytes", "bytes", "Bytes of WAL not replayed at the last start: torn or corrupt tails cut off, damaged records skipped.");
/* clang-format on */

static int check_downsample(const char *v, char *why, size_t n)
{
    mw_store_resolution r[MW_STORE_MAX_RESOLUTIONS];
    size_t nr;
    return mw_store_parse_downsample(v, r, &nr, why, n);
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_store_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option store_rows[] = {
    OPT("store", MW_OPT_BOOL, store, "true", NULL, "Keep samples in the embedded store in DATA-DIR/data (the agent's own every interval, and remote writes to /api/v1/write); false: neither"),
    OPT("retention", MW_OPT_DURATION, retention_ms, "15d", NULL, "How long the store keeps samples"),
    OPT("retention-size", MW_OPT_SIZE, retention_size, "0", NULL, "Most bytes the store may use on disk, oldest blocks deleted first (0: no limit)"),
    OPT("store-max-series", MW_OPT_NUMBER, max_series, "10000000", mw_check_count, "Most active series in the store; writes that would add more get 429 (0: no limit)"),
    OPT("store-max-series-per-tenant", MW_OPT_NUMBER, max_series_per_tenant, "0", mw_check_count, "Most active series per value of --store-tenant-label; beyond it 429 (0: no limit)"),
    OPT("store-tenant-label", MW_OPT_STRING, tenant_label, "", NULL, "Label whose values are tenants for --store-max-series-per-tenant (e.g. namespace)"),
    OPT("store-max-label-name-length", MW_OPT_NUMBER, max_label_name_length, "256", mw_check_count, "Longest label name the store accepts, bytes; beyond it 400 (0: no limit)"),
    OPT("store-max-label-value-length", MW_OPT_NUMBER, max_label_value_length, "4096", mw_check_count, "Longest label value the store accepts, bytes; beyond it 400 (0: no limit)"),
    OPT("store-max-labels", MW_OPT_NUMBER, max_labels, "64", mw_check_count, "Most labels per series (at most 255); beyond it 400"),
    OPT("store-max-samples-per-request", MW_OPT_NUMBER, max_samples_per_request, "1000000", mw_check_count, "Most samples in one remote-write request; beyond it 400 (0: no limit)"),
    /* Prometheus' own TSDB refuses samples more than 10 minutes ahead of
     * its clock; 5 leaves room for a writer whose clock runs a little fast. */
    OPT("store-max-future", MW_OPT_DURATION, max_future_ms, "5m", NULL, "Samples further ahead of the agent's clock are refused with 400 naming the series, so that no writer can block a series for good"),
    OPT("downsample", MW_OPT_STRING, downsample, "", check_downsample, "Downsampling for long retention, RES:KEEP,...: samples older than --retention are kept as per-window aggregates at each resolution RES until KEEP old (e.g. 5m:30d,1h:1y; docs/store.md)"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_store_module_options = MW_OPTION_GROUP(
    "embedded store", "src/store/store_module.c", mw_store_settings, store_rows, NULL);

static int module_init(const mw_env *env, void **state)
{
    if (!((const mw_store_settings *)mw_config_group(env->cfg, &mw_store_module_options))->store)
        return MW_COLLECTOR_ABSENT;
    store_module *m = mw_xcalloc(1, sizeof(*m));
    m->cfg = env->cfg;
    mw_worker_init(&m->reopener);
    *state = m;
    return 0;
}

/* The store, or NULL with why it is unavailable in why. */
static mw_store *store_or_why(store_module *m, char *why, size_t size)
{
    mw_store *st = atomic_load(&m->store);
    if (st) return st;
    pthread_mutex_lock(&m->reopener.mu);
    snprintf(why, size, "%s", m->open_error);
    pthread_mutex_unlock(&m->reopener.mu);
    return NULL;
}

/* The store; else answers 503 with why it is unavailable, and NULL. */
static mw_store *store_ready(store_module *m, mw_http_response *resp)
{
    char why[512];
    mw_store *st = store_or_why(m, why, sizeof(why));
    if (!st) mw_http_text(resp, 503, "store unavailable: %s\n", why);
    return st;
}

static int module_ready(void *state, char *why, size_t size)
{
    store_module *m = state;
    char reason[512];
    mw_store *st = store_or_why(m, reason, sizeof(reason));
    if (!st) {
        snprintf(why, size, "store unavailable: %s", reason);
        return -1;
    }
    if (mw_store_writable(st, reason, sizeof(reason)) == 0) return 0;
    snprintf(why, size, "store unavailable: %s", reason);
    return -1;
}

static void write_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    store_module *m = cls;
    mw_store *st = store_ready(m, resp);
    if (!st) return;
    const char *enc = mw_http_header(req, "Content-Encoding");
    if (enc && strcasecmp(enc, "snappy") != 0) {
        mw_store_count_refusal(st, MW_REFUSE_MALFORMED);
        mw_http_text(resp, 415,
                     "unsupported Content-Encoding '%.64s': remote write 1.0 bodies are snappy "
                     "blocks\n",
                     enc);
        return;
    }
    const char *ct = mw_http_header(req, "Content-Type");
    if (ct && strstr(ct, "io.prometheus.write.v2")) {
        mw_store_count_refusal(st, MW_REFUSE_MALFORMED);
        mw_http_text(resp, 415,
                     "remote write 2.0 is not supported; send protocol 1.0 "
                     "(prometheus.WriteRequest)\n");
        return;
    }
    mw_rw_request r;
    char err[512];
    int drc = mw_rw_decode((const uint8_t *)req->body, req->body_len, &r, err, sizeof(err));
    if (drc < 0) {
        mw_rw_request_free(&r);
        int too_large = drc == MW_RW_OVER_BUDGET;
        mw_store_count_refusal(st, too_large ? MW_REFUSE_TOO_LARGE : MW_REFUSE_MALFORMED);
        mw_http_text(resp, 400, "%s remote-write body: %s; nothing was stored\n",
                     too_large ? "oversized" : "malformed", err);
        return;
    }
    int rc = mw_rw_store_histograms(st, &r, 1, err, sizeof(err)) < 0
                 ? 503
                 : mw_store_append(st, r.ts, r.n, MW_STORE_WAIT, err, sizeof(err));
    for (size_t i = 0; rc == 0 && m->on_metadata && i < r.nmeta; i++)
        m->on_metadata(m->on_metadata_ctx, &r.meta[i]);
    mw_rw_request_free(&r);
    if (rc == 0) {
        mw_http_text(resp, 204, "%s", "");
        return;
    }
    mw_http_text(resp, rc, "%s\n", err);
}

static int64_t arg_ms(const mw_http_request *req, const char *name, int64_t def)
{
    const char *v = mw_http_arg(req, name);
    if (!v || !*v) return def;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? def : (int64_t)x;
}

static void export_buckets(mw_buf *b, const int32_t *idx, const double *c, size_t n)
{
    mw_buf_putc(b, '|');
    for (size_t i = 0; i < n; i++)
        mw_buf_printf(b, "%s%d:%.17g", i ? "," : "", idx[i], c[i]);
}

/* A histogram sample's line ends with the histogram itself (the value is
 * only the NaN that refers to it): H|schema|hint|zero_threshold|
 * zero_count|count|sum|POS|NEG|CUSTOM, POS and NEG `index:count,...`
 * (absolute counts, as the store keeps them), CUSTOM `bound,...`; a
 * reference whose record cannot be read (a torn tail) says
 * H|missing. */
static void export_histogram(mw_buf *b, mw_store *st, double ref)
{
    mw_histogram h;
    if (mw_store_get_histogram(st, ref, &h) < 0) {
        mw_buf_printf(b, " H|missing");
        return;
    }
    mw_buf_printf(b, " H|%d|%d|%.17g|%.17g|%.17g|%.17g", (int)h.schema, h.hint, h.zero_threshold,
                  h.zero_count, h.count, h.sum);
    export_buckets(b, h.pos_idx, h.pos, h.npos);
    export_buckets(b, h.neg_idx, h.neg, h.nneg);
    mw_buf_putc(b, '|');
    for (size_t i = 0; i < h.ncustom; i++)
        mw_buf_printf(b, "%s%.17g", i ? "," : "", h.custom[i]);
    mw_hist_free(&h);
}

/* GET /api/v1/store/export?match=NAME&start=MS&end=MS (text, one sample a
 * line, a histogram's with the histogram: export_histogram) and /api/v1/store/count (totals): a
 * window into the store for tests and benchmarks until the query API arrives. */
static void read_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    store_module *m = cls;
    mw_store *st = store_ready(m, resp);
    if (!st) return;
    const char *name = mw_http_arg(req, "match");
    mw_matcher mt;
    char err[256];
    size_t nm = 0;
    if (name && *name) {
        if (mw_matcher_init(&mt, MW_MATCH_EQ, "__name__", name, err, sizeof(err)) < 0) {
            mw_http_text(resp, 400, "%s\n", err);
            return;
        }
        nm = 1;
    }
    /* A namespace-scoped reader's selection is narrowed as its queries are. */
    mw_matcher scope;
    const mw_http_scope *sc = req->scope;
    int scoped = sc && sc->scoped;
    if (scoped && mw_matcher_init_set(&scope, "namespace", sc->namespaces, sc->n, sc->node_series,
                                      err, sizeof(err)) < 0) {
        if (nm) mw_matcher_free(&mt);
        mw_http_text(resp, 500, "the namespace scope of this reader: %s\n", err);
        return;
    }
    mw_select_result res;
    int rc = mw_store_select_scoped(st, scoped ? &scope : NULL, nm ? &mt : NULL, nm,
                                    arg_ms(req, "start", INT64_MIN), arg_ms(req, "end", INT64_MAX),
                                    50000000, &res, err, sizeof(err));
    if (nm) mw_matcher_free(&mt);
    if (scoped) mw_matcher_free(&scope);
    if (rc < 0) {
        mw_http_text(resp, 422, "%s\n", err);
        return;
    }
    mw_buf b;
    mw_buf_init(&b, 0);
    if (strcmp(req->path, "/api/v1/store/count") == 0) {
        mw_buf_printf(&b, "series %zu\nsamples %zu\n", res.nseries, res.nsamples);
    } else {
        for (size_t i = 0; i < res.nseries; i++) {
            const mw_series_data *d = &res.series[i];
            for (size_t k = 0; k < d->n; k++) {
                mw_buf_putc(&b, '{');
                for (size_t j = 0; j < d->nlabels; j++)
                    mw_buf_printf(&b, "%s%s=\"%s\"", j ? "," : "", d->labels[j].name,
                                  d->labels[j].value);
                uint64_t bits;
                memcpy(&bits, &d->v[k], sizeof(bits));
                mw_buf_printf(&b, "} %lld %.17g 0x%016llx", (long long)d->t[k], d->v[k],
                              (unsigned long long)bits);
                if ((bits & MW_HIST_TAG_MASK) == MW_HIST_REF_TAG) export_histogram(&b, st, d->v[k]);
                mw_buf_putc(&b, '\n');
            }
        }
    }
    mw_select_result_free(&res);
    resp->status = 200;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = mw_buf_steal(&b, &resp->len);
}

/* POST /api/v1/store/compact and /api/v1/store/snapshot: run maintenance
 * now (the benchmark measures disk use after compaction). */
static void admin_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    store_module *m = cls;
    mw_store *st = store_ready(m, resp);
    if (!st) return;
    int rc = strcmp(req->path, "/api/v1/store/compact") == 0 ? mw_store_compact(st, 1)
                                                             : mw_store_snapshot(st);
    if (rc < 0)
        mw_http_text(resp, 503, "failed: %s\n", strerror(-rc));
    else
        mw_http_text(resp, 200, "done\n");
}

/* Try to open the store every REOPEN_EVERY_S seconds until it opens (the
 * disk has room again, the I/O error has cleared, the other process let
 * go) or the module is destroyed. */
static void *reopen_main(void *arg)
{
    store_module *m = arg;
    for (unsigned attempt = 1; mw_worker_sleep(&m->reopener, REOPEN_EVERY_S * 1000); attempt++) {
        char err[512];
        mw_store *st = mw_store_open(&m->opts, err, sizeof(err));
        if (st) {
            atomic_store(&m->store, st);
            if (m->on_open) m->on_open(m->on_open_ctx, st);
            mw_log(MW_LOG_INFO, "store", "store enabled after %u attempts: %s is usable again",
                   attempt, m->dir);
            return NULL;
        }
        pthread_mutex_lock(&m->reopener.mu);
        snprintf(m->open_error, sizeof(m->open_error), "%s", err);
        pthread_mutex_unlock(&m->reopener.mu);
        mw_log_once(MW_LOG_ERROR, "store", "reopen", "store still disabled: %s", err);
    }
    return NULL;
}

static void limits_of(const mw_store_settings *cfg, mw_store_limits *l)
{
    memset(l, 0, sizeof(*l));
    l->max_series = (uint64_t)cfg->max_series;
    l->max_series_per_tenant = (uint64_t)cfg->max_series_per_tenant;
    mw_strlcpy(l->tenant_label, cfg->tenant_label, sizeof(l->tenant_label));
    l->max_label_name_len = (uint32_t)cfg->max_label_name_length;
    l->max_label_value_len = (uint32_t)cfg->max_label_value_length;
    l->max_labels = (uint32_t)cfg->max_labels;
    l->max_samples_per_request = (uint64_t)cfg->max_samples_per_request;
    l->max_future_ms = cfg->max_future_ms;
}

/* The limits of the options' defaults: each default is written once, in
 * its row above. */
void mw_store_default_limits(mw_store_limits *l)
{
    mw_config *c = mw_xcalloc(1, sizeof(*c));
    mw_config_register_group(&mw_store_module_options);
    mw_config_defaults(c);
    limits_of(mw_config_group(c, &mw_store_module_options), l);
    free(c);
}

static void module_routes(void *state, mw_http_server *http)
{
    store_module *m = state;
    const mw_store_settings *cfg = mw_config_group(m->cfg, &mw_store_module_options);
    snprintf(m->dir, sizeof(m->dir), "%s/data", m->cfg->data_dir);
    mw_store_options o = {
        .dir = m->dir, .retention_ms = cfg->retention_ms, .retention_bytes = cfg->retention_size};
    limits_of(cfg, &o.limits);
    char why[256];
    if (mw_store_parse_downsample(cfg->downsample, o.downsample, &o.ndownsample, why, sizeof(why)) <
        0) /* checked when parsed: cannot happen */
        o.ndownsample = 0;
    o.no_sync = getenv("MLWATCH_STORE_NO_FSYNC") != NULL; /* benchmarks of CPU cost only */
    /* Millions of small, long-lived chunk buffers share the heap with each
     * request's short-lived decoding arena (megabytes). Large blocks go to
     * mmap (a fixed threshold, not glibc's sliding one) and one malloc
     * arena serves all threads, so that freed request memory goes back to
     * the kernel instead of staying resident between the chunk buffers. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_ARENA_MAX, 1);
    m->opts = o;
    m->opened = 1;
    mw_store *st = mw_store_open(&m->opts, m->open_error, sizeof(m->open_error));
    atomic_store(&m->store, st);
    if (!st) {
        mw_log(MW_LOG_ERROR, "store", "store disabled: %s; retrying every %d s", m->open_error,
               REOPEN_EVERY_S);
        if (mw_worker_start(&m->reopener, reopen_main, m) < 0)
            mw_log(MW_LOG_ERROR, "store", "cannot start the thread to reopen it");
    } else if (m->on_open) {
        m->on_open(m->on_open_ctx, st);
    }
    mw_http_route(http, MW_ROLE_WRITE, "POST", "/api/v1/write", 0, write_handler, m);
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/store/export", 0, read_handler, m);
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/store/count", 0, read_handler, m);
    mw_http_route(http, MW_ROLE_ADMIN, "POST", "/api/v1/store/compact", 0, admin_handler, m);
    mw_http_route(http, MW_ROLE_ADMIN, "POST", "/api/v1/store/snapshot", 0, admin_handler, m);
}

mw_store *mw_store_module_store(void *state)
{
    return atomic_load(&((store_module *)state)->store);
}

void mw_store_module_on_metadata(void *state, mw_store_metadata_fn fn, void *ctx)
{
    store_module *m = state;
    m->on_metadata = fn;
    m->on_metadata_ctx = ctx;
}

void mw_store_module_on_open(void *state, mw_store_open_fn fn, void *ctx)
{
    store_module *m = state;
    m->on_open = fn;
    m->on_open_ctx = ctx;
}

static void module_derive(void *state, mw_snapshot *snap)
{
    store_module *m = state;
    if (!m->opened) return;
    mw_store *store = atomic_load(&m->store);
    char why[512];
    mw_emit(snap, &UP, store && mw_store_writable(store, why, sizeof(why)) == 0 ? 1.0 : 0.0,
            MW_END);
    if (!store) return;
    mw_store_stats st;
    mw_store_get_stats(store, &st);
    mw_emit(snap, &ACTIVE, (double)st.series, MW_END);
    mw_emit(snap, &CREATED, (double)st.series_created, MW_END);
    mw_emit(snap, &APPENDED, (double)st.samples_appended, MW_END);
    mw_emit(snap, &DUPLICATE, (double)st.samples_duplicate, MW_END);
    mw_emit(snap, &FSYNCS, (double)st.wal_fsyncs, MW_END);
    mw_emit(snap, &WAL_ERRORS, (double)st.wal_write_errors, MW_END);
    mw_emit(snap, &DISK, (double)st.bytes_on_disk, MW_END);
    mw_emit(snap, &MEMORY, (double)st.head_memory_bytes, MW_END);
    mw_emit(snap, &BLOCKS, (double)st.blocks, MW_END);
    for (int i = 0; i < MW_REFUSE_COUNT; i++)
        mw_emit(snap, &REFUSED, (double)st.refused[i], "reason", mw_store_refusal_names[i], MW_END);
    mw_emit(snap, &DISK_FULL, st.disk_full ? 1.0 : 0.0, MW_END);
    mw_emit(snap, &TORN, (double)st.wal_bytes_cut, MW_END);
}

static void module_consume(void *state, const mw_snapshot *snap)
{
    store_module *m = state;
    mw_store *store = atomic_load(&m->store);
    if (!store) return;
    char msg[512];
    int rc = mw_store_append_snapshot(store, snap, msg, sizeof(msg));
    if (rc) mw_log_once(MW_LOG_WARN, "store", "own-samples", "own samples not stored: %s", msg);
}

static void module_destroy(void *state)
{
    store_module *m = state;
    if (!m) return;
    mw_worker_stop(&m->reopener); /* joins the reopen thread, if it was started */
    mw_store_close(atomic_load(&m->store));
    mw_worker_destroy(&m->reopener);
    free(m);
}

const mw_module mw_module_store = {
    .name = "store",
    .options = &mw_store_module_options,
    .init = module_init,
    .routes = module_routes,
    .derive = module_derive,
    .consume = module_consume,
    .destroy = module_destroy,
    .ready = module_ready,
};
