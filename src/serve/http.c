/* http.c - routing and bounded request handling over libmicrohttpd. */
#include "http.h"
#include "../core/buf.h"
#include "../core/config.h"
#include "../core/log.h"
#include "../core/util.h"
#include "exposition.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_ROUTES 128

typedef struct route {
    mw_http_role role;
    const char *method, *path;
    int prefix;
    mw_http_handler h;
    void *cls;
} route;

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
};

/* Per-connection state while a request body arrives. */
typedef struct pending {
    mw_buf body;
    int too_large;
    mw_http_scope scope; /* set by the guard, for the handler */
} pending;

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
    return s;
}

void mw_http_route(mw_http_server *s, mw_http_role role, const char *method, const char *path,
                   int prefix, mw_http_handler h, void *cls)
{
    if (s->nroutes >= MAX_ROUTES) abort(); /* programming error */
    s->routes[s->nroutes++] = (route){role, method, path, prefix, h, cls};
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
            mw_http_request greq = {method, url, "", 0, conn, &scope};
            mw_http_response gresp = {0};
            if (s->guard(s->guard_ctx, gr->role, &greq, &gresp) < 0) {
                mw_http_scope_clear(&scope);
                return send_response(conn, &gresp);
            }
        }
        p = mw_xcalloc(1, sizeof(*p));
        p->scope = scope;
        mw_buf_init(&p->body, s->max_body);
        *con_cls = p;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!p->too_large && mw_buf_append(&p->body, upload, *upload_size) < 0) p->too_large = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    mw_http_response resp = {0};
    if (p->too_large) {
        mw_http_text(&resp, 413, "request body larger than %zu bytes\n", s->max_body);
        return send_response(conn, &resp);
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
        return send_response(conn, &resp);
    }
    mw_http_request req = {method,      url,  p->body.data ? p->body.data : "",
                           p->body.len, conn, &p->scope};
    resp.status = 200;
    r->h(r->cls, &req, &resp);
    return send_response(conn, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    pending *p = *con_cls;
    if (!p) return;
    mw_buf_free(&p->body);
    mw_http_scope_clear(&p->scope);
    free(p);
    *con_cls = NULL;
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
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | s->extra_flags;
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
    for (int attempt = 0; attempt < 2 && !s->d; attempt++) {
        s->d = MHD_start_daemon(
            flags, port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)2,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned)256, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
            MHD_OPTION_ARRAY, s->extra_items ? s->extra_items : no_items, MHD_OPTION_END);
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
        return -1;
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
    if (s->d) MHD_stop_daemon(s->d);
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
