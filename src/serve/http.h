/* http.h - the one HTTP layer: a small router on top of libmicrohttpd.
 *
 * Handlers are registered before mw_http_start() and fill a
 * mw_http_response whose body the server frees (through free_fn) once it
 * has been sent. Request bodies are read up to a bound (413 beyond it).
 * Routes of mw_http_route run on libmicrohttpd's threads and must be quick
 * (/metrics, health, remote write); routes of mw_http_route_lane (queries)
 * run on the lane's own threads, a bounded number at once with a short
 * queue, beyond which the server answers 503 (docs/http.md). */
#ifndef MW_HTTP_H
#define MW_HTTP_H

#include "../core/options.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mw_http_server mw_http_server;
struct MHD_Connection;

/* The namespaces a read identity may see (docs/security.md "Namespace-scoped
 * access"): filled by the guard (serve/auth.c) for each request, read by the
 * handlers, which pass it into the query engine. Owned by the request. */
typedef struct mw_http_scope {
    int scoped;      /* 0: every series */
    int node_series; /* when scoped: whether series without a namespace label are visible */
    size_t n;
    char **namespaces;
} mw_http_scope;

/* Whether scope lets its holder see something of namespace ns (NULL or "":
 * a node-level series or finding). */
int mw_http_scope_allows(const mw_http_scope *scope, const char *ns);
/* Empty the scope (unscoped again) and free its namespaces. */
void mw_http_scope_clear(mw_http_scope *scope);

typedef struct mw_http_request {
    const char *method;
    const char *path; /* without the query string */
    const char *body;
    size_t body_len;
    struct MHD_Connection *conn;
    mw_http_scope *scope; /* never NULL in a handler; the guard fills it */
    /* Nonzero once the server is stopping: a long handler ends early. */
    const _Atomic int *cancel;
} mw_http_request;

#define MW_HTTP_MAX_HEADERS 8 /* the web UI sets 6: CSP, nosniff, cache, ETag, Vary, encoding */

typedef struct mw_http_response {
    int status;
    const char *content_type;
    char *body; /* owned by the response unless free_fn is NULL and static */
    size_t len;
    void (*free_fn)(void *cls); /* called with free_cls after sending; NULL = free(body) */
    void *free_cls;
    /* Instead of body: a body of unknown length, sent as it is produced
     * (chunked in HTTP/1.1). stream(free_cls, buf, max) writes the next
     * bytes into buf and returns their count (1 to max), 0 at the end or -1
     * to abort the response; free_fn(free_cls), when set, is called when
     * done. */
    long (*stream)(void *cls, char *buf, size_t max);
    int body_static; /* body is a string literal: never freed */
    const char *header_names[MW_HTTP_MAX_HEADERS];
    const char *header_values[MW_HTTP_MAX_HEADERS];
    int nheaders;
} mw_http_response;

typedef void (*mw_http_handler)(void *cls, const mw_http_request *req, mw_http_response *resp);

/* What a route needs from its caller (docs/security.md): every route is
 * registered with one. PUBLIC routes (health, readiness, the landing page)
 * are never guarded; the others go through the guard (serve/auth.c). */
typedef enum {
    MW_ROLE_PUBLIC,
    MW_ROLE_METRICS, /* GET /metrics */
    MW_ROLE_READ,    /* query APIs, UI, findings, series/labels/metadata */
    MW_ROLE_WRITE,   /* POST /api/v1/write */
    MW_ROLE_ADMIN,   /* store compaction, snapshots, deletion, reload */
} mw_http_role;
#define MW_HTTP_NROLES 5

/* The server's limits (its options table, http.c): connections, their
 * deadlines, and the lane. */
typedef struct mw_http_settings {
    double max_connections, max_connections_per_ip;
    int64_t idle_timeout_ms, header_timeout_ms, body_timeout_ms, write_timeout_ms;
    double lane_threads, lane_queue;
} mw_http_settings;
extern const mw_option_group mw_http_options;

mw_http_server *mw_http_new(size_t max_body);
/* Before mw_http_start. A server never configured has libmicrohttpd's
 * limits, no deadlines and no lane (lane routes run inline). */
void mw_http_configure(mw_http_server *s, const mw_http_settings *set);
/* path matches exactly, or as a prefix when prefix is set. method NULL = any. */
void mw_http_route(mw_http_server *s, mw_http_role role, const char *method, const char *path,
                   int prefix, mw_http_handler h, void *cls);
/* The same for a handler that may take long (a query): it runs on the lane,
 * once the guard has let the request through. */
void mw_http_route_lane(mw_http_server *s, mw_http_role role, const char *method, const char *path,
                        int prefix, mw_http_handler h, void *cls);

/* The guard decides, once a request's headers are in and before its body
 * is read, whether a route of this role may serve it: 0 to go on, or -1
 * with resp filled (401, 403, 415 ...). Called for every non-PUBLIC route. */
typedef int (*mw_http_guard)(void *ctx, mw_http_role role, const mw_http_request *req,
                             mw_http_response *resp);
void mw_http_set_guard(mw_http_server *s, mw_http_guard g, void *ctx);
/* Extra libmicrohttpd start flags and options (TLS, serve/tls.c): items is
 * an array of struct MHD_OptionItem ending with MHD_OPTION_END, alive while
 * the server runs. Before mw_http_start(). */
void mw_http_set_daemon_extra(mw_http_server *s, unsigned flags, const void *items);
/* Bind and start serving on ADDR:PORT. Returns 0, or -1 with a message. */
int mw_http_start(mw_http_server *s, const char *listen, char *err, size_t errsize);
/* The port actually bound (useful with port 0 in tests). */
int mw_http_port(const mw_http_server *s);
void mw_http_free(mw_http_server *s); /* stops the server if running */

/* Requests answered with a refusal, by reason (the status in brackets). */
typedef enum mw_http_refusal {
    MW_HTTP_REFUSED_UNAUTHENTICATED,  /* 401: no token, or an unknown one */
    MW_HTTP_REFUSED_FORBIDDEN,        /* 403: the token lacks the role, no client certificate */
    MW_HTTP_REFUSED_MEDIA_TYPE,       /* 415: a browser-postable Content-Type */
    MW_HTTP_REFUSED_TOO_LARGE,        /* 413: a body over the bound */
    MW_HTTP_REFUSED_QUERY_QUEUE_FULL, /* 503: the query lane is full */
    MW_HTTP_REFUSED_PER_IP_LIMIT,     /* closed on accept: its address holds the most allowed */
    MW_HTTP_REFUSED_REASONS
} mw_http_refusal;

/* What the server's limits have done so far. */
typedef struct mw_http_stats_t {
    uint64_t connections;                               /* open now */
    uint64_t cut_idle, cut_header, cut_body, cut_write; /* closed past a deadline */
    uint64_t evicted; /* closed to make room for a new connection */
    uint64_t lane_running, lane_queued, lane_refused;
    uint64_t refused[MW_HTTP_REFUSED_REASONS];
} mw_http_stats_t;
void mw_http_stats(mw_http_server *s, mw_http_stats_t *out);
/* The figures above as the agent's own series (mlwatch_http_*), every
 * reason always present; no client address, path or token in any label. */
struct mw_snapshot;
void mw_http_emit_metrics(mw_http_server *s, struct mw_snapshot *snap);

const char *mw_http_header(const mw_http_request *r, const char *name);
/* Prometheus's JSON error, {"status":"error","errorType":TYPE,"error":MSG},
 * in place of what resp held. */
void mw_http_json_error(mw_http_response *resp, int status, const char *type, const char *msg);
/* Whether the request's Accept-Encoding takes gzip (q > 0). */
int mw_http_accepts_gzip(const mw_http_request *r);
const char *mw_http_arg(const mw_http_request *r, const char *name);

/* Fill resp with a static or formatted text body. */
void mw_http_text(mw_http_response *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mw_http_add_header(mw_http_response *resp, const char *name, const char *value);

#endif
