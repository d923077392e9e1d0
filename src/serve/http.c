/* http.c - routing and bounded request handling over libmicrohttpd.
 *
 * Two lanes (docs/http.md): libmicrohttpd's threads read every request and
 * run the fast handlers (/metrics, health, readiness, remote write, the UI's
 * files) themselves; the routes registered with mw_http_route_lane (queries)
 * are suspended there and run on a small pool of lane threads with a short
 * queue, so a slow query never holds the threads a scrape needs. Every
 * connection is tracked from accept to close: a reaper thread closes those
 * that take too long to send their request line and headers or their body
 * (total deadlines, which a client dripping bytes cannot extend), and a new
 * connection beyond the total limit evicts the oldest one that has not sent
 * a request yet, so idle and slow clients can never lock the scrape out. */
#include "http.h"
#include "../core/buf.h"
#include "../core/config.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"
#include "exposition.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_ROUTES 128
#define MAX_LANE_THREADS 64
/* libmicrohttpd's own threads: they run only the fast handlers. */
#define FAST_THREADS 4
/* Connections libmicrohttpd may hold beyond --http-max-connections, while
 * the ones evicted to make room are being closed. */
#define EVICTION_SLACK 64
/* How often the reaper looks for connections past their deadline. */
#define REAP_EVERY_MS 250

typedef struct route {
    mw_http_role role;
    const char *method, *path;
    int prefix;
    mw_http_handler h;
    void *cls;
    int lane; /* runs on the lane threads (mw_http_route_lane) */
} route;

/* Where a connection is in its current request, for its deadline. */
typedef enum {
    PHASE_IDLE,    /* no request line yet (new, or kept alive after a response) */
    PHASE_HEADERS, /* request line read, headers still arriving */
    PHASE_BODY,    /* headers read, body still arriving */
    PHASE_BUSY,    /* the request is complete: being handled or queued */
    PHASE_WRITE,   /* the answer is queued: libmicrohttpd sends it as the client reads */
} conn_phase;

/* One accepted connection, from libmicrohttpd's NOTIFY_CONNECTION STARTED
 * to CLOSED (which libmicrohttpd calls before it closes the socket, so the
 * fd of a tracked connection is never another connection's). */
typedef struct conn_track {
    struct conn_track *prev, *next; /* oldest first */
    int fd;
    conn_phase phase;
    int64_t since_ns; /* the phase began (CLOCK_MONOTONIC) */
    int cut;          /* shut down by us; libmicrohttpd closes it next */
    /* The client's address (IPv4 and IPv4-mapped IPv6 alike as 4 bytes),
     * for --http-max-connections-per-ip; addr_len 0 when unknown. */
    unsigned char addr[16];
    unsigned char addr_len;
} conn_track;

/* Per-request state: the body as it arrives, then a lane job. */
typedef struct pending {
    mw_buf body;
    int too_large;
    int lane_state;      /* 0 none, 1 queued or running, 2 answered by the lane */
    mw_http_scope scope; /* set by the guard, for the handler */
    const route *r;
    const char *method, *url; /* libmicrohttpd's, valid for the request */
    struct MHD_Connection *conn;
    mw_http_response resp; /* the lane's answer */
    struct pending *next;  /* in the lane's queue */
} pending;

struct mw_http_server {
    struct MHD_Daemon *d;
    route routes[MAX_ROUTES];
    int nroutes;
    size_t max_body;
    int port;
    mw_http_guard guard;
    void *guard_ctx;
    unsigned extra_flags;
    const void *extra_items; /* struct MHD_OptionItem[], MHD_OPTION_END last */
    mw_http_settings set;
    /* Connections (conn_mu). */
    pthread_mutex_t conn_mu;
    conn_track *oldest, *newest;
    size_t live; /* tracked and not cut */
    uint64_t cut_header, cut_body, cut_idle, cut_write, evicted;
    mw_worker reaper;
    /* The lane (lane_mu). */
    pthread_mutex_t lane_mu;
    pthread_cond_t lane_cv;
    pending *queue_head, *queue_tail;
    unsigned queued, running, nworkers;
    int lane_stopping;
    atomic_int cancel; /* set when the server stops: running handlers end early */
    mw_worker workers[MAX_LANE_THREADS];
    uint64_t lane_refused;
    /* Requests answered with a refusal, by reason (mw_http_emit_metrics). */
    atomic_ullong refused[MW_HTTP_REFUSED_REASONS];
};

/* The bounded reasons of mlwatch_http_requests_refused_total. */
static const char *const refusal_names[MW_HTTP_REFUSED_REASONS] = {
    [MW_HTTP_REFUSED_UNAUTHENTICATED] = "unauthenticated",
    [MW_HTTP_REFUSED_FORBIDDEN] = "forbidden",
    [MW_HTTP_REFUSED_MEDIA_TYPE] = "unsupported_media_type",
    [MW_HTTP_REFUSED_TOO_LARGE] = "too_large",
    [MW_HTTP_REFUSED_QUERY_QUEUE_FULL] = "query_queue_full",
    [MW_HTTP_REFUSED_PER_IP_LIMIT] = "per_ip_limit",
};

static void count_refusal(mw_http_server *s, mw_http_refusal why)
{
    atomic_fetch_add(&s->refused[why], 1);
}

static int check_lane_threads(const char *v, char *why, size_t n)
{
    char what[48];
    snprintf(what, sizeof(what), "a whole number from 1 to %d", MAX_LANE_THREADS);
    return mw_check_range(v, 1, MAX_LANE_THREADS, 1, what, why, n);
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_http_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option http_rows[] = {
    OPT("http-max-connections", MW_OPT_NUMBER, max_connections, "512", mw_check_count, "Most connections the HTTP server holds; a new one beyond it closes the oldest that has not sent a request yet, so idle clients never lock out a scrape (docs/http.md)"),
    OPT("http-max-connections-per-ip", MW_OPT_NUMBER, max_connections_per_ip, "64", mw_check_count, "Most connections from one client address; beyond it a new one is closed at once (0: no limit)"),
    OPT("http-idle-timeout", MW_OPT_DURATION, idle_timeout_ms, "30s", NULL, "Longest a connection may stay without sending a request line, counted from its start or its previous answer (bytes that never finish the line do not extend it)"),
    OPT("http-header-timeout", MW_OPT_DURATION, header_timeout_ms, "10s", NULL, "Longest a request's headers may take to arrive, from its request line; beyond it the connection is closed"),
    OPT("http-body-timeout", MW_OPT_DURATION, body_timeout_ms, "1m", NULL, "Longest a request's body may take to arrive, from the end of its headers; beyond it the connection is closed"),
    OPT("http-write-timeout", MW_OPT_DURATION, write_timeout_ms, "5m", NULL, "Longest an answer may take to be sent, from the end of its evaluation: a client that stops reading (or reads a byte at a time) is closed past it"),
    OPT("query-max-concurrency", MW_OPT_NUMBER, lane_threads, "2", check_lane_threads, "Queries (and UI proxy and store export requests) evaluated at once, on threads of their own that never serve /metrics, health, readiness or remote write (1 to 64)"),
    OPT("query-max-queued", MW_OPT_NUMBER, lane_queue, "16", mw_check_count, "Queries that may wait for a free query thread; one more is answered 503 with Retry-After"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_http_options =
    MW_OPTION_GROUP("HTTP server", "src/serve/http.c", mw_http_settings, http_rows, NULL);

int mw_http_scope_allows(const mw_http_scope *scope, const char *ns)
{
    if (!scope || !scope->scoped) return 1;
    if (!ns || !*ns) return scope->node_series;
    for (size_t i = 0; i < scope->n; i++)
        if (strcmp(scope->namespaces[i], ns) == 0) return 1;
    return 0;
}

void mw_http_scope_clear(mw_http_scope *scope)
{
    for (size_t i = 0; i < scope->n; i++)
        free(scope->namespaces[i]);
    free(scope->namespaces);
    memset(scope, 0, sizeof(*scope));
}

mw_http_server *mw_http_new(size_t max_body)
{
    mw_http_server *s = mw_xcalloc(1, sizeof(*s));
    s->max_body = max_body ? max_body : (16u << 20);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_mutex_init(&s->lane_mu, NULL);
    pthread_cond_init(&s->lane_cv, NULL);
    mw_worker_init(&s->reaper);
    for (int i = 0; i < MAX_LANE_THREADS; i++)
        mw_worker_init(&s->workers[i]);
    return s;
}

void mw_http_configure(mw_http_server *s, const mw_http_settings *set)
{
    s->set = *set;
}

static void add_route(mw_http_server *s, mw_http_role role, const char *method, const char *path,
                      int prefix, mw_http_handler h, void *cls, int lane)
{
    if (s->nroutes >= MAX_ROUTES) abort(); /* programming error */
    s->routes[s->nroutes++] = (route){role, method, path, prefix, h, cls, lane};
}

void mw_http_route(mw_http_server *s, mw_http_role role, const char *method, const char *path,
                   int prefix, mw_http_handler h, void *cls)
{
    add_route(s, role, method, path, prefix, h, cls, 0);
}

void mw_http_route_lane(mw_http_server *s, mw_http_role role, const char *method, const char *path,
                        int prefix, mw_http_handler h, void *cls)
{
    add_route(s, role, method, path, prefix, h, cls, 1);
}

void mw_http_set_guard(mw_http_server *s, mw_http_guard g, void *ctx)
{
    s->guard = g;
    s->guard_ctx = ctx;
}

void mw_http_set_daemon_extra(mw_http_server *s, unsigned flags, const void *items)
{
    s->extra_flags = flags;
    s->extra_items = items;
}

/* ---- Connections: tracking, deadlines, eviction ---- */

static void track_unlink(mw_http_server *s, conn_track *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        s->oldest = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        s->newest = t->prev;
    t->prev = t->next = NULL;
}

/* With conn_mu held: end t's connection. shutdown() rather than close():
 * libmicrohttpd owns the descriptor, sees end of file on its next read and
 * closes the connection itself. */
static void track_cut(mw_http_server *s, conn_track *t)
{
    if (t->cut) return;
    t->cut = 1;
    s->live--;
    shutdown(t->fd, SHUT_RDWR);
}

static void set_phase(mw_http_server *s, struct MHD_Connection *conn, conn_phase phase)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_track *t = ci ? ci->socket_context : NULL;
    if (!t) return;
    pthread_mutex_lock(&s->conn_mu);
    t->phase = phase;
    t->since_ns = mw_mono_ns();
    pthread_mutex_unlock(&s->conn_mu);
}

/* The client's address of conn, normalised so that one IPv4 client counts
 * as one whether the socket is IPv4 or dual-stack IPv6 (v4-mapped). */
static void client_address(struct MHD_Connection *conn, conn_track *t)
{
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    t->addr_len = 0;
    if (sa && sa->sa_family == AF_INET) {
        memcpy(t->addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        t->addr_len = 4;
    } else if (sa && sa->sa_family == AF_INET6) {
        const unsigned char *a6 =
            ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        if (memcmp(a6, v4mapped, sizeof(v4mapped)) == 0) {
            memcpy(t->addr, a6 + 12, 4);
            t->addr_len = 4;
        } else {
            memcpy(t->addr, a6, 16);
            t->addr_len = 16;
        }
    }
}

/* With conn_mu held: 1 when t's address already holds
 * --http-max-connections-per-ip other connections that are not cut. */
static int over_per_ip_limit(const mw_http_server *s, const conn_track *t)
{
    size_t max = (size_t)s->set.max_connections_per_ip, n = 0;
    if (!max || !t->addr_len) return 0;
    for (const conn_track *o = s->oldest; o; o = o->next)
        if (o != t && !o->cut && o->addr_len == t->addr_len &&
            memcmp(o->addr, t->addr, t->addr_len) == 0 && ++n >= max)
            return 1;
    return 0;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    mw_http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_track *t = mw_xcalloc(1, sizeof(*t));
        t->fd = ci ? ci->connect_fd : -1;
        t->phase = PHASE_IDLE;
        t->since_ns = mw_mono_ns();
        client_address(conn, t);
        pthread_mutex_lock(&s->conn_mu);
        t->prev = s->newest;
        if (s->newest)
            s->newest->next = t;
        else
            s->oldest = t;
        s->newest = t;
        s->live++;
        /* The per-address limit is ours, not libmicrohttpd's (which would
         * close the connection before any callback could count it): an
         * address at the limit has this connection closed at once, and it
         * makes no room by evicting anyone. */
        int refused = over_per_ip_limit(s, t);
        if (refused) track_cut(s, t);
        /* Over the limit: make room by closing the oldest connections that
         * have not sent a whole request (idle or still sending headers);
         * those with a request under way are left alone. */
        size_t max = (size_t)s->set.max_connections;
        for (conn_track *o = s->oldest; !refused && max && s->live > max && o && o != t;
             o = o->next) {
            if (o->cut || (o->phase != PHASE_IDLE && o->phase != PHASE_HEADERS)) continue;
            track_cut(s, o);
            s->evicted++;
        }
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = t;
        if (refused) {
            count_refusal(s, MW_HTTP_REFUSED_PER_IP_LIMIT);
            mw_log_once(MW_LOG_WARN, "http", "per-ip-limit",
                        "closed a new connection from an address that already holds "
                        "--http-max-connections-per-ip %u",
                        (unsigned)s->set.max_connections_per_ip);
        }
        return;
    }
    conn_track *t = *socket_context;
    if (!t) return;
    pthread_mutex_lock(&s->conn_mu);
    track_unlink(s, t);
    if (!t->cut) s->live--;
    pthread_mutex_unlock(&s->conn_mu);
    free(t);
    *socket_context = NULL;
}

/* Called once a request line has arrived, before its headers. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)uri;
    set_phase(cls, conn, PHASE_HEADERS);
    return NULL;
}

static void *reaper_main(void *arg)
{
    mw_http_server *s = arg;
    while (mw_worker_sleep(&s->reaper, REAP_EVERY_MS)) {
        int64_t now = mw_mono_ns();
        uint64_t header = 0, body = 0, idle = 0, write = 0;
        pthread_mutex_lock(&s->conn_mu);
        for (conn_track *t = s->oldest; t; t = t->next) {
            int64_t limit_ms = t->phase == PHASE_IDLE      ? s->set.idle_timeout_ms
                               : t->phase == PHASE_HEADERS ? s->set.header_timeout_ms
                               : t->phase == PHASE_BODY    ? s->set.body_timeout_ms
                               : t->phase == PHASE_WRITE   ? s->set.write_timeout_ms
                                                           : 0;
            if (t->cut || limit_ms <= 0 || now - t->since_ns <= limit_ms * 1000000) continue;
            track_cut(s, t);
            if (t->phase == PHASE_IDLE)
                idle++;
            else if (t->phase == PHASE_HEADERS)
                header++;
            else if (t->phase == PHASE_BODY)
                body++;
            else
                write++;
        }
        s->cut_idle += idle;
        s->cut_header += header;
        s->cut_body += body;
        s->cut_write += write;
        pthread_mutex_unlock(&s->conn_mu);
        if (write)
            mw_log_once(MW_LOG_WARN, "http", "slow-readers",
                        "closed %llu connections whose answer took longer than "
                        "--http-write-timeout to be read",
                        (unsigned long long)write);
        if (header || body)
            mw_log_once(MW_LOG_WARN, "http", "slow-clients",
                        "closed %llu connections whose headers took longer than "
                        "--http-header-timeout and %llu whose body took longer than "
                        "--http-body-timeout",
                        (unsigned long long)header, (unsigned long long)body);
    }
    return NULL;
}

void mw_http_stats(mw_http_server *s, mw_http_stats_t *out)
{
    pthread_mutex_lock(&s->conn_mu);
    out->connections = s->live;
    out->cut_idle = s->cut_idle;
    out->cut_header = s->cut_header;
    out->cut_body = s->cut_body;
    out->cut_write = s->cut_write;
    out->evicted = s->evicted;
    pthread_mutex_unlock(&s->conn_mu);
    pthread_mutex_lock(&s->lane_mu);
    out->lane_running = s->running;
    out->lane_queued = s->queued;
    out->lane_refused = s->lane_refused;
    pthread_mutex_unlock(&s->lane_mu);
    for (int i = 0; i < MW_HTTP_REFUSED_REASONS; i++)
        out->refused[i] = atomic_load(&s->refused[i]);
}

/* clang-format off */
MW_METRIC(REFUSED, MW_COUNTER, "mlwatch_http_requests_refused_total", "", "Requests the HTTP server refused, by reason: unauthenticated (401), forbidden (403), unsupported_media_type (415), too_large (413), query_queue_full (503), per_ip_limit (a connection closed on accept past --http-max-connections-per-ip), deadline (closed past --http-header-timeout, --http-body-timeout or --http-write-timeout), connection_limit (closed to make room past --http-max-connections).");
MW_METRIC(CONNECTIONS, MW_GAUGE, "mlwatch_http_connections", "", "Connections the HTTP server holds open.");
MW_METRIC(CLOSED, MW_COUNTER, "mlwatch_http_connections_closed_total", "", "Connections the HTTP server closed itself, by reason: idle_timeout (no request line within --http-idle-timeout), header_timeout, body_timeout, write_timeout, evicted.");
MW_METRIC(LANE_RUNNING, MW_GAUGE, "mlwatch_http_query_lane_running", "", "Queries being evaluated on the query lane's threads now.");
MW_METRIC(LANE_QUEUED, MW_GAUGE, "mlwatch_http_query_lane_queued", "", "Queries waiting for a free query lane thread now.");
/* clang-format on */

void mw_http_emit_metrics(mw_http_server *s, mw_snapshot *snap)
{
    mw_http_stats_t st;
    mw_http_stats(s, &st);
    for (int i = 0; i < MW_HTTP_REFUSED_REASONS; i++)
        mw_emit(snap, &REFUSED, (double)st.refused[i], "reason", refusal_names[i], MW_END);
    mw_emit(snap, &REFUSED, (double)(st.cut_header + st.cut_body + st.cut_write), "reason",
            "deadline", MW_END);
    mw_emit(snap, &REFUSED, (double)st.evicted, "reason", "connection_limit", MW_END);
    mw_emit(snap, &CONNECTIONS, (double)st.connections, MW_END);
    mw_emit(snap, &CLOSED, (double)st.cut_idle, "reason", "idle_timeout", MW_END);
    mw_emit(snap, &CLOSED, (double)st.cut_header, "reason", "header_timeout", MW_END);
    mw_emit(snap, &CLOSED, (double)st.cut_body, "reason", "body_timeout", MW_END);
    mw_emit(snap, &CLOSED, (double)st.cut_write, "reason", "write_timeout", MW_END);
    mw_emit(snap, &CLOSED, (double)st.evicted, "reason", "evicted", MW_END);
    mw_emit(snap, &LANE_RUNNING, (double)st.lane_running, MW_END);
    mw_emit(snap, &LANE_QUEUED, (double)st.lane_queued, MW_END);
}

const char *mw_http_header(const mw_http_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *mw_http_arg(const mw_http_request *r, const char *name)
{
    const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
    if (!v) v = MHD_lookup_connection_value(r->conn, MHD_POSTDATA_KIND, name);
    return v;
}

void mw_http_add_header(mw_http_response *resp, const char *name, const char *value)
{
    if (resp->nheaders >= MW_HTTP_MAX_HEADERS) return;
    resp->header_names[resp->nheaders] = name;
    resp->header_values[resp->nheaders] = value;
    resp->nheaders++;
}

void mw_http_text(mw_http_response *resp, int status, const char *fmt, ...)
{
    mw_buf b;
    mw_buf_init(&b, 0);
    va_list ap;
    va_start(ap, fmt);
    mw_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = mw_buf_steal(&b, &resp->len);
    resp->free_fn = NULL;
    resp->body_static = 0;
}

void mw_http_json_error(mw_http_response *resp, int status, const char *type, const char *msg)
{
    if (!resp->body_static && !resp->free_fn) free(resp->body);
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_buf_printf(&b, "{\"status\":\"error\",\"errorType\":\"%s\",\"error\":\"", type);
    for (const char *p = msg; *p; p++) {
        if (*p == '"' || *p == '\\')
            mw_buf_printf(&b, "\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            mw_buf_printf(&b, "\\u%04x", (unsigned char)*p);
        else
            mw_buf_putc(&b, *p);
    }
    mw_buf_puts(&b, "\"}");
    resp->status = status;
    resp->body = mw_buf_steal(&b, &resp->len);
    resp->content_type = "application/json";
    resp->free_fn = NULL;
    resp->body_static = 0;
    resp->stream = NULL;
}

int mw_http_accepts_gzip(const mw_http_request *r)
{
    return mw_accepts_gzip(mw_http_header(r, "Accept-Encoding"));
}

static int path_matches(const route *r, const char *path)
{
    return r->prefix ? strncmp(path, r->path, strlen(r->path)) == 0 : strcmp(path, r->path) == 0;
}

/* HEAD is served by GET routes (libmicrohttpd leaves the body out). */
static int method_matches(const route *r, const char *method)
{
    return !r->method || strcmp(r->method, method) == 0 ||
           (strcmp(r->method, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

static const route *find_route(const mw_http_server *s, const char *method, const char *path,
                               int *method_mismatch)
{
    *method_mismatch = 0;
    for (int i = 0; i < s->nroutes; i++) {
        const route *r = &s->routes[i];
        if (!path_matches(r, path)) continue;
        if (!method_matches(r, method)) {
            *method_mismatch = 1;
            continue;
        }
        return r;
    }
    return NULL;
}

/* The Allow header of a 405: the methods of every route for path. */
static void allowed_methods(const mw_http_server *s, const char *path, char *out, size_t size)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < s->nroutes && off < size; i++) {
        const route *r = &s->routes[i];
        if (!path_matches(r, path) || !r->method) continue;
        int w = snprintf(out + off, size - off, "%s%s%s", off ? ", " : "", r->method,
                         strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
        if (w < 0) break;
        off += (size_t)w;
    }
}

static void free_body_cb(void *cls)
{
    free(cls);
}

/* A streamed body (mw_http_response.stream) for libmicrohttpd. */
typedef struct stream_body {
    long (*next)(void *cls, char *buf, size_t max);
    void (*free_fn)(void *cls);
    void *cls;
} stream_body;

static ssize_t stream_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_body *sb = cls;
    long n = sb->next(sb->cls, buf, max);
    if (n == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : (ssize_t)n;
}

static void stream_free_cb(void *cls)
{
    stream_body *sb = cls;
    if (sb->free_fn) sb->free_fn(sb->cls);
    free(sb);
}

static enum MHD_Result send_response(struct MHD_Connection *conn, mw_http_response *resp)
{
    struct MHD_Response *r;
    stream_body *sb = NULL;
    if (resp->stream) {
        sb = mw_xmalloc(sizeof(*sb));
        *sb = (stream_body){resp->stream, resp->free_fn, resp->free_cls};
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, stream_read_cb, sb,
                                              stream_free_cb);
    } else if (resp->body_static)
        r = MHD_create_response_from_buffer(resp->len, resp->body, MHD_RESPMEM_PERSISTENT);
    else if (resp->free_fn)
        r = MHD_create_response_from_buffer_with_free_callback_cls(resp->len, resp->body,
                                                                   resp->free_fn, resp->free_cls);
    else
        r = MHD_create_response_from_buffer_with_free_callback_cls(resp->len, resp->body,
                                                                   free_body_cb, resp->body);
    if (!r) {
        /* libmicrohttpd took nothing: release the body (and any reference
         * it holds) here, or it leaks. */
        free(sb);
        if (!resp->body_static) {
            if (resp->free_fn)
                resp->free_fn(resp->free_cls);
            else
                free(resp->body);
        }
        return MHD_NO;
    }
    if (resp->content_type) MHD_add_response_header(r, "Content-Type", resp->content_type);
    for (int i = 0; i < resp->nheaders; i++)
        MHD_add_response_header(r, resp->header_names[i], resp->header_values[i]);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Queue the answer; from here its sending has --http-write-timeout. */
static enum MHD_Result answer(mw_http_server *s, struct MHD_Connection *conn,
                              mw_http_response *resp)
{
    set_phase(s, conn, PHASE_WRITE);
    return send_response(conn, resp);
}

/* ---- The lane: queries on threads of their own ---- */

static void *lane_main(void *arg);

/* Queue p's request for the lane: 0, or -1 when every lane thread is busy
 * and the queue is full. */
static int lane_enqueue(mw_http_server *s, pending *p)
{
    pthread_mutex_lock(&s->lane_mu);
    if (s->lane_stopping || s->queued + s->running >= s->nworkers + (unsigned)s->set.lane_queue) {
        s->lane_refused++;
        pthread_mutex_unlock(&s->lane_mu);
        return -1;
    }
    p->lane_state = 1;
    p->next = NULL;
    if (s->queue_tail)
        s->queue_tail->next = p;
    else
        s->queue_head = p;
    s->queue_tail = p;
    s->queued++;
    /* Suspended before a lane thread can resume it: libmicrohttpd requires
     * the suspend to come first, and a worker takes p only after this lock
     * is released. */
    MHD_suspend_connection(p->conn);
    pthread_cond_signal(&s->lane_cv);
    pthread_mutex_unlock(&s->lane_mu);
    return 0;
}

/* How much lower than the rest of the agent the query lane's threads run:
 * nice +10. On a node with a core or two to spare, four heavy queries at
 * the agent's own priority took the CPU from libmicrohttpd's threads and
 * delayed a scrape by 40 s (issue 24); a scheduler that weighs nice 10 at
 * about a tenth of nice 0 gives a scrape its CPU at once, and an idle node
 * still gives the queries all of it. The helper threads a query starts
 * inherit it. */
#define LANE_NICE_OFFSET 10

/* Lower the calling thread's priority (Linux: a thread's nice is its own,
 * set through its tid). Relative to the agent's, capped at 19; raising it
 * back would need CAP_SYS_NICE, lowering never does. */
static void lane_lower_priority(void)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    if (nice == -1 && errno) nice = 0;
    int target = nice + LANE_NICE_OFFSET > 19 ? 19 : nice + LANE_NICE_OFFSET;
    if (setpriority(PRIO_PROCESS, (id_t)tid, target) < 0)
        mw_log_once(MW_LOG_WARN, "http", "lane-nice",
                    "cannot lower the query threads' priority to nice %d (%s): heavy queries "
                    "compete with scrapes for the CPU",
                    target, strerror(errno));
}

static void *lane_main(void *arg)
{
    mw_http_server *s = arg;
    lane_lower_priority();
    /* Named, so that top -H and /proc/PID/task/TID/comm tell them apart;
     * after the nice, so that a thread with the name has its priority. */
    pthread_setname_np(pthread_self(), "mlwatch-query");
    pthread_mutex_lock(&s->lane_mu);
    for (;;) {
        while (!s->queue_head && !s->lane_stopping)
            pthread_cond_wait(&s->lane_cv, &s->lane_mu);
        if (!s->queue_head) break; /* stopping, and nothing left to answer */
        pending *p = s->queue_head;
        s->queue_head = p->next;
        if (!s->queue_head) s->queue_tail = NULL;
        s->queued--;
        s->running++;
        int stopping = s->lane_stopping;
        pthread_mutex_unlock(&s->lane_mu);
        struct MHD_Connection *conn = p->conn;
        mw_http_request req = {p->method,   p->url, p->body.data ? p->body.data : "",
                               p->body.len, conn,   &p->scope,
                               &s->cancel};
        p->resp.status = 200;
        if (stopping)
            mw_http_text(&p->resp, 503, "the server is stopping\n");
        else
            p->r->h(p->r->cls, &req, &p->resp);
        pthread_mutex_lock(&s->lane_mu);
        s->running--;
        p->lane_state = 2;
        /* p belongs to libmicrohttpd again from here: not touched after. */
        MHD_resume_connection(conn);
    }
    pthread_mutex_unlock(&s->lane_mu);
    return NULL;
}

/* The lane is full: Prometheus's error shape, so that Grafana and promtool
 * show the reason, and Retry-After. */
static enum MHD_Result lane_refuse(mw_http_server *s, struct MHD_Connection *conn);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    mw_http_server *s = cls;
    pending *p = *con_cls;
    if (!p) {
        /* The headers are in, the body not yet read: a request its route's
         * guard refuses is answered now, without reading its body. */
        int mismatch;
        const route *gr = find_route(s, method, url, &mismatch);
        mw_http_scope scope = {0};
        if (gr && gr->role != MW_ROLE_PUBLIC && s->guard) {
            mw_http_request greq = {method, url, "", 0, conn, &scope, &s->cancel};
            mw_http_response gresp = {0};
            if (s->guard(s->guard_ctx, gr->role, &greq, &gresp) < 0) {
                mw_http_scope_clear(&scope);
                count_refusal(s, gresp.status == 401   ? MW_HTTP_REFUSED_UNAUTHENTICATED
                                 : gresp.status == 415 ? MW_HTTP_REFUSED_MEDIA_TYPE
                                                       : MW_HTTP_REFUSED_FORBIDDEN);
                return answer(s, conn, &gresp); /* refused before any lane slot */
            }
        }
        p = mw_xcalloc(1, sizeof(*p));
        p->scope = scope;
        mw_buf_init(&p->body, s->max_body);
        *con_cls = p;
        set_phase(s, conn, PHASE_BODY);
        return MHD_YES;
    }
    if (p->lane_state == 2) {
        p->lane_state = 3;
        return answer(s, conn, &p->resp);
    }
    if (*upload_size) {
        if (!p->too_large && mw_buf_append(&p->body, upload, *upload_size) < 0) p->too_large = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    set_phase(s, conn, PHASE_BUSY);
    mw_http_response resp = {0};
    if (p->too_large) {
        count_refusal(s, MW_HTTP_REFUSED_TOO_LARGE);
        mw_http_text(&resp, 413, "request body larger than %zu bytes\n", s->max_body);
        return answer(s, conn, &resp);
    }
    int wrong_method;
    const route *r = find_route(s, method, url, &wrong_method);
    if (!r) {
        char allow[128]; /* outlives the call below that copies it */
        if (wrong_method) {
            allowed_methods(s, url, allow, sizeof(allow));
            mw_http_text(&resp, 405, "method %s not allowed on %s\n", method, url);
            mw_http_add_header(&resp, "Allow", allow);
        } else
            mw_http_text(&resp, 404, "no such path: %s\n", url);
        if (!strncmp(url, "/api/", 5)) { /* Prometheus's JSON errors under /api/ */
            char msg[600];
            if (wrong_method)
                snprintf(msg, sizeof(msg), "method %.50s not allowed on %.500s", method, url);
            else
                snprintf(msg, sizeof(msg), "no such path: %.500s", url);
            mw_http_json_error(&resp, wrong_method ? 405 : 404,
                               wrong_method ? "bad_data" : "not_found", msg);
        }
        return answer(s, conn, &resp);
    }
    if (r->lane && s->nworkers) {
        p->r = r;
        p->method = method;
        p->url = url;
        p->conn = conn;
        if (lane_enqueue(s, p) == 0) return MHD_YES;
        return lane_refuse(s, conn);
    }
    mw_http_request req = {
        method, url, p->body.data ? p->body.data : "", p->body.len, conn, &p->scope, &s->cancel};
    resp.status = 200;
    r->h(r->cls, &req, &resp);
    return answer(s, conn, &resp);
}

static enum MHD_Result lane_refuse(mw_http_server *s, struct MHD_Connection *conn)
{
    mw_http_response resp = {0};
    count_refusal(s, MW_HTTP_REFUSED_QUERY_QUEUE_FULL);
    mw_http_text(&resp, 503,
                 "{\"status\":\"error\",\"errorType\":\"unavailable\",\"error\":\"too many "
                 "concurrent queries: %u running and %u waiting (--query-max-concurrency %u, "
                 "--query-max-queued %u); retry later\"}",
                 s->nworkers, (unsigned)s->set.lane_queue, s->nworkers,
                 (unsigned)s->set.lane_queue);
    resp.content_type = "application/json";
    mw_http_add_header(&resp, "Retry-After", "1");
    return answer(s, conn, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    mw_http_server *s = cls;
    pending *p = *con_cls;
    /* Kept alive: the wait for the next request line starts now. */
    set_phase(s, conn, PHASE_IDLE);
    if (!p) return;
    if (p->lane_state == 2) {
        /* Answered by the lane but never sent (the connection ended). */
        if (p->resp.stream) {
            if (p->resp.free_fn) p->resp.free_fn(p->resp.free_cls);
        } else if (!p->resp.body_static) {
            if (p->resp.free_fn)
                p->resp.free_fn(p->resp.free_cls);
            else
                free(p->resp.body);
        }
    }
    mw_buf_free(&p->body);
    mw_http_scope_clear(&p->scope);
    free(p);
    *con_cls = NULL;
}

/* Start the reaper and the lane's threads. */
static int start_threads(mw_http_server *s)
{
    if (mw_worker_start(&s->reaper, reaper_main, s) < 0) return -1;
    unsigned n = (unsigned)s->set.lane_threads;
    if (n > MAX_LANE_THREADS) n = MAX_LANE_THREADS;
    for (unsigned i = 0; i < n; i++) {
        if (mw_worker_start(&s->workers[i], lane_main, s) < 0) break;
        s->nworkers++;
    }
    return 0;
}

int mw_http_start(mw_http_server *s, const char *listen, char *err, size_t errsize)
{
    char host[256];
    uint16_t port;
    if (mw_parse_listen(listen, host, sizeof(host), &port) < 0) {
        snprintf(err, errsize, "invalid listen address '%s'", listen);
        return -1;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | s->extra_flags | MHD_ALLOW_SUSPEND_RESUME;
    static const struct MHD_OptionItem no_items[] = {{MHD_OPTION_END, 0, NULL}};
    if (host[0] == '\0') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_any;
        a6->sin6_port = htons(port);
        flags |= MHD_USE_DUAL_STACK;
    } else {
        struct addrinfo hints = {0}, *ai = NULL;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        char portstr[8];
        snprintf(portstr, sizeof(portstr), "%u", port);
        int rc = getaddrinfo(host, portstr, &hints, &ai);
        if (rc != 0 || !ai) {
            snprintf(err, errsize, "cannot resolve listen address '%s': %s", host,
                     gai_strerror(rc));
            return -1;
        }
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
        freeaddrinfo(ai);
    }
    /* A server never configured (unit tests) keeps libmicrohttpd's own
     * limits: no deadlines, no lane (lane routes run inline). */
    unsigned max_conn =
        s->set.max_connections > 0 ? (unsigned)s->set.max_connections + EVICTION_SLACK : 256;
    unsigned idle_s =
        s->set.idle_timeout_ms > 0 ? (unsigned)((s->set.idle_timeout_ms + 999) / 1000) : 30;
    if (start_threads(s) < 0) {
        snprintf(err, errsize, "cannot start the HTTP server's threads");
        return -1;
    }
    for (int attempt = 0; attempt < 2 && !s->d; attempt++) {
        s->d = MHD_start_daemon(
            flags, port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, s, MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s,
            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)FAST_THREADS, MHD_OPTION_CONNECTION_LIMIT,
            max_conn, MHD_OPTION_CONNECTION_TIMEOUT, idle_s, MHD_OPTION_ARRAY,
            s->extra_items ? s->extra_items : no_items, MHD_OPTION_END);
        if (!s->d && host[0] == '\0' && attempt == 0) {
            /* No IPv6 on this host: fall back to all IPv4 interfaces. */
            memset(&ss, 0, sizeof(ss));
            struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
            a4->sin_family = AF_INET;
            a4->sin_addr.s_addr = htonl(INADDR_ANY);
            a4->sin_port = htons(port);
            flags &= ~(unsigned)MHD_USE_DUAL_STACK;
        }
    }
    if (!s->d) {
        snprintf(err, errsize, "cannot listen on %s (address in use or not available)", listen);
        return -1; /* the threads are stopped by mw_http_free */
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : port;
    return 0;
}

int mw_http_port(const mw_http_server *s)
{
    return s->port;
}

void mw_http_free(mw_http_server *s)
{
    if (!s) return;
    /* The lane first: running handlers see the cancel flag, queued ones are
     * answered 503 and resumed, all while libmicrohttpd still runs to send
     * the answers; then the daemon, which has no suspended connection left. */
    atomic_store(&s->cancel, 1);
    pthread_mutex_lock(&s->lane_mu);
    s->lane_stopping = 1;
    pthread_cond_broadcast(&s->lane_cv);
    pthread_mutex_unlock(&s->lane_mu);
    for (unsigned i = 0; i < s->nworkers; i++)
        mw_worker_stop(&s->workers[i]);
    if (s->d) MHD_stop_daemon(s->d);
    mw_worker_stop(&s->reaper);
    for (int i = 0; i < MAX_LANE_THREADS; i++)
        mw_worker_destroy(&s->workers[i]);
    mw_worker_destroy(&s->reaper);
    pthread_cond_destroy(&s->lane_cv);
    pthread_mutex_destroy(&s->lane_mu);
    pthread_mutex_destroy(&s->conn_mu);
    free(s);
}

/* ---- GnuTLS: loaded with libmicrohttpd, not started ----
 *
 * Debian builds libmicrohttpd with HTTPS support, so it brings GnuTLS and
 * what GnuTLS needs (p11-kit, nettle, hogweed, gmp, tasn1, ...), and two
 * library constructors start GnuTLS before main(): GnuTLS's own and
 * libmicrohttpd's (MHD_init calls gnutls_global_init()). The agent serves
 * plain HTTP and never uses it; starting it parses its ASN.1 tables, probes
 * the CPU, seeds its random generator and touches its code and data: about
 * 0.8 MiB of resident memory in every agent (docs/benchmarks.md).
 *
 * GNUTLS_SKIP_GLOBAL_INIT is GnuTLS's own way (gnutls.h) for a program to
 * skip the start in GnuTLS's constructor. libmicrohttpd's call lands on the
 * gnutls_global_init() below, since the executable comes first in symbol
 * lookup: before main() it does nothing; from then on it is GnuTLS's own,
 * so that libcurl-gnutls (src/core/lazylib.c, https:// URLs) starts GnuTLS
 * as usual when it is the libcurl found. Ending GnuTLS that was never
 * started is a no-op in GnuTLS (its counter is zero). */
GNUTLS_SKIP_GLOBAL_INIT

/* Set by this executable's constructor, which runs after those of every
 * library it links. */
static int libraries_started;

__attribute__((constructor)) static void after_library_constructors(void)
{
    libraries_started = 1;
}

int gnutls_global_init(void)
{
    if (!__atomic_load_n(&libraries_started, __ATOMIC_ACQUIRE)) return 0;
    int (*real)(void);
    void *sym = dlsym(RTLD_NEXT, "gnutls_global_init");
    if (!sym) return GNUTLS_E_INTERNAL_ERROR;
    memcpy(&real, &sym, sizeof(real));
    return real();
}
