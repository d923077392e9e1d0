/* kube.c - the pod watcher: list this node's pods, then watch them, on a
 * thread of its own (see kube.h for the contract).
 *
 * The watch is a long HTTP response of one JSON event per line; events are
 * applied as their lines complete. A line longer than 4 MiB, an HTTP error
 * or a dropped connection ends the watch and it starts again from the last
 * resourceVersion seen after a backoff (1 s doubling to 30 s, reset by a
 * watch that delivered events); 410 Gone, as an HTTP status or as an ERROR
 * event, means that resourceVersion is too old: list again. */
#include "kube.h"
#include "../core/buf.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_LIST_BYTES (64u << 20)
#define MAX_LINE_BYTES (4u << 20)
#define BACKOFF_MAX_MS 30000

struct mw_kube {
    mw_worker w; /* its mutex also guards the pod table */
    mw_kube_creds creds;
    char node[254];
    char owner_from[256];
    mw_kube_pod *pods; /* MW_KUBE_MAX_PODS slots */
    size_t npods;
    char rv[32];
    int listed; /* a list succeeded (guarded by w.mu) */
    /* watch in progress */
    mw_buf line;
    int gone, events;
};

static void table_put(mw_kube *k, const mw_kube_pod *p)
{
    for (size_t i = 0; i < k->npods; i++)
        if (strcmp(k->pods[i].uid, p->uid) == 0) {
            k->pods[i] = *p;
            return;
        }
    if (k->npods >= MW_KUBE_MAX_PODS) {
        mw_log_once(MW_LOG_WARN, "kube", "full", "more than %d pods on this node: ignoring more",
                    MW_KUBE_MAX_PODS);
        return;
    }
    k->pods[k->npods++] = *p;
}

static void table_del(mw_kube *k, const char *uid)
{
    for (size_t i = 0; i < k->npods; i++)
        if (strcmp(k->pods[i].uid, uid) == 0) {
            k->pods[i] = k->pods[--k->npods];
            return;
        }
}

static int stopping(mw_kube *k)
{
    return mw_worker_stopping(&k->w);
}

static int should_abort(void *cls)
{
    return stopping(cls);
}

static void apply_line(mw_kube *k, const char *line, size_t len)
{
    mw_kube_pod p;
    int code;
    char err[256];
    int t = mw_kube_event_parse(line, len, k->owner_from, &p, &code, err, sizeof(err));
    if (t < 0) {
        mw_log_once(MW_LOG_WARN, "kube", "event", "ignoring a watch event: %s", err);
        return;
    }
    k->events++;
    if (t == MW_KUBE_ERROR) {
        if (code == 410) k->gone = 1;
        mw_log(MW_LOG_INFO, "kube", "watch ended by the API server (code %d)%s", code,
               code == 410 ? ": listing again" : "");
        return;
    }
    pthread_mutex_lock(&k->w.mu);
    if (t == MW_KUBE_DELETED)
        table_del(k, p.uid);
    else if (t != MW_KUBE_BOOKMARK)
        table_put(k, &p);
    if (p.rv[0]) mw_strlcpy(k->rv, p.rv, sizeof(k->rv));
    pthread_mutex_unlock(&k->w.mu);
}

static int on_watch(const char *d, size_t len, void *cls)
{
    mw_kube *k = cls;
    for (size_t i = 0; i < len; i++) {
        if (d[i] != '\n') {
            if (mw_buf_putc(&k->line, d[i]) < 0) {
                mw_log_once(MW_LOG_WARN, "kube", "line", "watch event longer than %u bytes",
                            MAX_LINE_BYTES);
                return -1;
            }
            continue;
        }
        if (k->line.len) apply_line(k, k->line.data, k->line.len);
        mw_buf_clear(&k->line);
        if (k->gone) return -1; /* abort: list again */
    }
    return 0;
}

/* A call to the API server with the credentials: token (room for the
 * bearer token, which must outlive the call) is filled here. */
static void request(mw_kube *k, mw_http_call *call, const char *url, char *token, size_t size)
{
    const mw_kube_creds *cr = &k->creds;
    token[0] = '\0';
    if (cr->token[0]) {
        mw_strlcpy(token, cr->token, size);
    } else if (cr->token_file[0]) {
        /* Re-read each time: projected service-account tokens rotate. */
        FILE *f = fopen(cr->token_file, "r");
        if (f) {
            size_t m = fread(token, 1, size - 1, f);
            token[m] = '\0';
            token[strcspn(token, "\r\n")] = '\0';
            fclose(f);
        }
    }
    *call = (mw_http_call){
        .url = url,
        .headers = {"Accept: application/json"},
        .bearer_token = token,
        .connect_timeout_ms = 5000,
        .user_agent = "mlwatch",
        .should_abort = should_abort,
        .cls = k,
        .tls = {.ca_file = cr->ca_file,
                .ca_pem = cr->ca_data,
                .cert_file = cr->client_cert_file,
                .key_file = cr->client_key_file,
                .cert_pem = cr->client_cert_data,
                .key_pem = cr->client_key_data,
                .insecure_skip_verify = cr->insecure},
    };
}

static void collect(void *cls, const mw_kube_pod *p)
{
    mw_kube *k = cls;
    if (k->npods < MW_KUBE_MAX_PODS) k->pods[k->npods++] = *p;
}

/* What failed, as precisely as libcurl and the TLS library say it, with a
 * hint for the usual client-certificate mistakes. */
static void failure(const mw_kube *k, const mw_http_call *call, char *out, size_t size)
{
    const mw_kube_creds *cr = &k->creds;
    int has_cert = cr->client_cert_file[0] || cr->client_cert_data[0];
    const char *hint = "", *detail = call->detail;
    if (strstr(detail, "certificate required") && !has_cert)
        hint = " (the API server wants a client certificate: set client-certificate and "
               "client-key, or their -data forms, in the kubeconfig)";
    else if (has_cert && (strstr(detail, "unknown ca") || strstr(detail, "bad certificate") ||
                          (call->status == 0 && call->failure == MW_HTTP_SEND_RECV)))
        /* With TLS 1.3 the server judges the client's certificate after the
         * client's handshake is done: its alert, or only its closing the
         * connection, shows up on the first send or receive (before any
         * HTTP status; a watch dropped later is no such thing). */
        hint = " (the API server closed the connection after the TLS handshake: it did not "
               "accept the kubeconfig's client certificate; is it signed by the server's client "
               "CA?)";
    else if (call->failure == MW_HTTP_TLS_CLIENT)
        hint = " (the kubeconfig's client-certificate or client-key cannot be used)";
    snprintf(out, size, "%s%s%s%s", call->reason, detail[0] ? ": " : "", detail, hint);
}

/* List the node's pods into a fresh table. Returns 0 or -1. */
static int list(mw_kube *k)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", k->creds.server,
             k->node);
    char bearer[4200];
    mw_http_call call;
    request(k, &call, url, bearer, sizeof(bearer));
    call.max_body = MAX_LIST_BYTES;
    call.timeout_ms = 60000;
    int rc = mw_http_perform(NULL, &call);
    memset(bearer, 0, sizeof(bearer));
    long status = call.status;
    const mw_buf body = call.answer;
    int ret = -1;
    if (rc < 0) {
        char why[MW_HTTP_DETAIL_SIZE + 256];
        failure(k, &call, why, sizeof(why));
        mw_log_once(MW_LOG_WARN, "kube", "list", "listing pods: %s", why);
    } else if (status == 401) {
        const mw_kube_creds *cr = &k->creds;
        int cert = cr->client_cert_file[0] || cr->client_cert_data[0];
        int token = cr->token[0] || cr->token_file[0];
        mw_log_once(MW_LOG_WARN, "kube", "list",
                    "listing pods: HTTP 401 Unauthorized: the API server accepted none of the "
                    "credentials (%s)",
                    cert && token ? "a client certificate and a token"
                    : cert        ? "a client certificate"
                    : token       ? "a token"
                                  : "none: the kubeconfig's user has no token and no client "
                                    "certificate");
    } else if (status != 200) {
        mw_log_once(MW_LOG_WARN, "kube", "list", "listing pods: HTTP %ld", status);
    } else {
        mw_kube tmp = {0};
        tmp.pods = mw_xcalloc(MW_KUBE_MAX_PODS, sizeof(mw_kube_pod));
        char rv[32], err[256];
        int n = mw_kube_list_parse(body.data ? body.data : "", body.len, k->owner_from, collect,
                                   &tmp, rv, sizeof(rv), err, sizeof(err));
        if (n < 0) {
            mw_log_once(MW_LOG_WARN, "kube", "list", "listing pods: %s", err);
            free(tmp.pods);
        } else {
            pthread_mutex_lock(&k->w.mu);
            free(k->pods);
            k->pods = tmp.pods;
            k->npods = tmp.npods;
            mw_strlcpy(k->rv, rv, sizeof(k->rv));
            k->listed = 1;
            pthread_mutex_unlock(&k->w.mu);
            mw_log(MW_LOG_DEBUG, "kube", "listed %d pods of node %s", n, k->node);
            ret = 0;
        }
    }
    mw_http_call_free(&call);
    return ret;
}

/* Watch from k->rv until the server ends it, it fails, or 410. Returns 0
 * when it ended cleanly, 1 for 410 Gone, -1 on error. */
static int watch(mw_kube *k)
{
    char url[1200], rv[32];
    pthread_mutex_lock(&k->w.mu);
    mw_strlcpy(rv, k->rv, sizeof(rv));
    pthread_mutex_unlock(&k->w.mu);
    snprintf(url, sizeof(url),
             "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&watch=1&resourceVersion=%s"
             "&allowWatchBookmarks=true&timeoutSeconds=300",
             k->creds.server, k->node, rv);
    char token[4200];
    mw_http_call call;
    request(k, &call, url, token, sizeof(token));
    mw_buf_clear(&k->line);
    k->gone = 0;
    k->events = 0;
    call.on_data = on_watch;
    /* A watch that hears nothing for 10 minutes is dead (the server ends
     * each one after timeoutSeconds and sends bookmarks). */
    call.low_speed_time_s = 600;
    mw_http_perform(NULL, &call);
    memset(token, 0, sizeof(token));
    mw_http_call_free(&call);
    long status = call.status;
    if (call.failure == MW_HTTP_UNAVAILABLE) return -1;
    if (k->gone || status == 410) return 1;
    if (status != 200) {
        mw_log_once(MW_LOG_WARN, "kube", "watch", "watching pods: HTTP %ld", status);
        return -1;
    }
    if (call.failure != MW_HTTP_OK && call.failure != MW_HTTP_ABORTED) {
        char why[MW_HTTP_DETAIL_SIZE + 256];
        failure(k, &call, why, sizeof(why));
        mw_log_once(MW_LOG_WARN, "kube", "watch", "watch dropped: %s", why);
        return k->events ? 0 : -1;
    }
    return 0;
}

static void *run(void *arg)
{
    mw_kube *k = arg;
    int64_t backoff = 0;
    int need_list = 1;
    while (!stopping(k)) {
        int rc;
        if (need_list) {
            rc = list(k) == 0 ? 0 : -1;
            if (rc == 0) need_list = 0;
        } else {
            rc = watch(k);
            if (rc == 1) {
                need_list = 1;
                rc = 0;
            }
        }
        if (stopping(k)) break;
        if (rc < 0) {
            backoff = backoff ? backoff * 2 : 1000;
            if (backoff > BACKOFF_MAX_MS) backoff = BACKOFF_MAX_MS;
            mw_worker_sleep(&k->w, backoff);
        } else {
            backoff = 0;
        }
    }
    return NULL;
}

static int read_small(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t m = fread(out, 1, n - 1, f);
    int toolong = m == n - 1 && fgetc(f) != EOF;
    fclose(f);
    out[m] = '\0';
    return toolong ? -1 : (int)m;
}

static int check_owner_from(const char *v, char *why, size_t n)
{
    if (strcmp(v, "namespace") == 0 || (strncmp(v, "label:", 6) == 0 && v[6]) ||
        (strncmp(v, "annotation:", 11) == 0 && v[11]))
        return 0;
    snprintf(why, n, "must be namespace, label:KEY or annotation:KEY");
    return -1;
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_kube_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option kube_rows[] = {
    OPT("kubernetes", MW_OPT_BOOL, kubernetes, "false", NULL, "Watch this node's pods through the API server (in-cluster service account, or --kubeconfig) for workload and owner labels"),
    OPT("kubeconfig", MW_OPT_PATH, kubeconfig, "", NULL, "kubeconfig file for --kubernetes (default: the in-cluster service account)"),
    OPT("owner-from", MW_OPT_STRING, owner_from, "namespace", check_owner_from, "Owner of a pod: namespace, label:KEY or annotation:KEY"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_kube_options =
    MW_OPTION_GROUP("Kubernetes pod watch", "src/kube/kube.c", mw_kube_settings, kube_rows, NULL);

static int credentials(const mw_kube_settings *cfg, mw_kube_creds *c, char *err, size_t errsize)
{
    if (cfg->kubeconfig[0]) {
        char *text = mw_xmalloc(1u << 20);
        int n = read_small(cfg->kubeconfig, text, 1u << 20);
        if (n < 0) {
            snprintf(err, errsize, "--kubeconfig %s: cannot read (or larger than 1 MiB): %s",
                     cfg->kubeconfig, strerror(errno));
            free(text);
            return -1;
        }
        char base[PATH_MAX];
        mw_strlcpy(base, cfg->kubeconfig, sizeof(base));
        char *slash = strrchr(base, '/');
        if (slash)
            *slash = '\0';
        else
            mw_strlcpy(base, ".", sizeof(base));
        char why[512];
        int rc = mw_kubeconfig_parse(text, (size_t)n, base, c, why, sizeof(why));
        free(text);
        if (rc < 0) {
            snprintf(err, errsize, "--kubeconfig %s: %s", cfg->kubeconfig, why);
            return -1;
        }
        return 0;
    }
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host) {
        snprintf(err, errsize,
                 "not in a cluster (KUBERNETES_SERVICE_HOST is not set) and no "
                 "--kubeconfig");
        return -1;
    }
    memset(c, 0, sizeof(*c));
    int v6 = strchr(host, ':') != NULL;
    snprintf(c->server, sizeof(c->server), "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
             port && *port ? port : "443");
    mw_strlcpy(c->token_file, SA_DIR "/token", sizeof(c->token_file));
    mw_strlcpy(c->ca_file, SA_DIR "/ca.crt", sizeof(c->ca_file));
    if (access(c->token_file, R_OK) != 0) {
        snprintf(err, errsize, "%s: %s (is a service account mounted?)", c->token_file,
                 strerror(errno));
        return -1;
    }
    return 0;
}

int mw_kube_start(const mw_config *config, mw_kube **out, char *err, size_t errsize)
{
    *out = NULL;
    const mw_kube_settings *cfg = mw_config_group(config, &mw_kube_options);
    if (!cfg->kubernetes) return 1;
    mw_kube *k = mw_xcalloc(1, sizeof(*k));
    if (credentials(cfg, &k->creds, err, errsize) < 0) {
        free(k);
        return -1;
    }
    /* The server URL must not end in '/': paths are appended. */
    size_t sl = strlen(k->creds.server);
    while (sl && k->creds.server[sl - 1] == '/')
        k->creds.server[--sl] = '\0';
    const char *node = config->node_name[0] ? config->node_name : getenv("NODE_NAME");
    if (node && *node)
        mw_strlcpy(k->node, node, sizeof(k->node));
    else if (gethostname(k->node, sizeof(k->node)) != 0) {
        snprintf(err, errsize, "no --node-name, no $NODE_NAME and no host name");
        free(k);
        return -1;
    }
    /* The node name goes into a URL: allow what a DNS-1123 name allows. */
    for (const char *p = k->node; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.')) {
            snprintf(err, errsize, "node name '%.100s' is not a valid Kubernetes node name",
                     k->node);
            free(k);
            return -1;
        }
    mw_strlcpy(k->owner_from, cfg->owner_from, sizeof(k->owner_from));
    k->pods = mw_xcalloc(MW_KUBE_MAX_PODS, sizeof(mw_kube_pod));
    mw_buf_init(&k->line, MAX_LINE_BYTES);
    mw_worker_init(&k->w);
    if (mw_worker_start(&k->w, run, k) < 0) {
        mw_worker_destroy(&k->w);
        snprintf(err, errsize, "cannot start the pod watcher thread");
        free(k->pods);
        mw_buf_free(&k->line);
        free(k);
        return -1;
    }
    mw_log(MW_LOG_INFO, "kube", "watching the pods of node %s", k->node);
    *out = k;
    return 0;
}

long mw_kube_call(mw_kube *k, const char *method, const char *path, const char *content_type,
                  const char *body, size_t max, mw_buf *out, char *err, size_t errsize)
{
    char url[2048], ctype[128];
    snprintf(url, sizeof(url), "%s%s", k->creds.server, path);
    char bearer[4200];
    mw_http_call call;
    request(k, &call, url, bearer, sizeof(bearer));
    call.max_body = max;
    call.timeout_ms = 30000;
    if (body) {
        call.post = 1;
        call.method = method;
        call.body = body;
        call.body_len = strlen(body);
        snprintf(ctype, sizeof(ctype), "Content-Type: %s", content_type);
        call.headers[1] = ctype;
    }
    int rc = mw_http_perform(NULL, &call);
    memset(bearer, 0, sizeof(bearer));
    long status = call.status;
    if (rc < 0) {
        char why[MW_HTTP_DETAIL_SIZE + 256];
        failure(k, &call, why, sizeof(why));
        snprintf(err, errsize, "%s %s: %s", method, path, why);
        status = -1;
    } else if (out) {
        mw_buf_clear(out);
        if (call.answer.len && mw_buf_append(out, call.answer.data, call.answer.len) < 0) {
            snprintf(err, errsize, "%s %s: answer too large", method, path);
            status = -1;
        }
    }
    mw_http_call_free(&call);
    return status;
}

int mw_kube_listed(mw_kube *k)
{
    pthread_mutex_lock(&k->w.mu);
    int listed = k->listed;
    pthread_mutex_unlock(&k->w.mu);
    return listed;
}

const char *mw_kube_node(const mw_kube *k)
{
    return k->node;
}

int mw_kube_lookup(mw_kube *k, const char *uid, const char *ns, const char *name, mw_kube_pod *out)
{
    int found = 0;
    pthread_mutex_lock(&k->w.mu);
    for (size_t i = 0; i < k->npods && !found; i++)
        if (uid && *uid && strcmp(k->pods[i].uid, uid) == 0) {
            *out = k->pods[i];
            found = 1;
        }
    for (size_t i = 0; i < k->npods && !found; i++)
        if (strcmp(k->pods[i].ns, ns) == 0 && strcmp(k->pods[i].name, name) == 0) {
            *out = k->pods[i];
            found = 1;
        }
    pthread_mutex_unlock(&k->w.mu);
    return found;
}

int mw_kube_is_kai_reservation(mw_kube *k, const char *ns, const char *name)
{
    mw_kube_pod p;
    if (mw_kube_lookup(k, NULL, ns, name, &p)) return p.kai_reservation;
    /* Not listed or watched yet: the kubelet's pod-resources can name a pod
     * before the watch does. A pod in KAI's reservation namespaces is taken
     * for a reservation until its labels say otherwise, so it never becomes
     * a session or an allocation for the interval in between. */
    return !strcmp(ns, "kai-resource-reservation") || !strcmp(ns, "runai-reservation");
}

size_t mw_kube_kai_list(mw_kube *k, mw_kube_kai *out, size_t max)
{
    pthread_mutex_lock(&k->w.mu);
    size_t n = mw_kube_kai_resolve(k->pods, k->npods, out, max);
    pthread_mutex_unlock(&k->w.mu);
    return n;
}

void mw_kube_stop(mw_kube *k)
{
    if (!k) return;
    mw_worker_stop(&k->w);
    mw_worker_destroy(&k->w);
    mw_buf_free(&k->line);
    free(k->pods);
    memset(&k->creds, 0, sizeof(k->creds));
    free(k);
}
