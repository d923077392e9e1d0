/* auth.c - roles, bearer tokens from files, the default policy by listening
 * address, and the refusal of browser-postable writes (auth.h).
 *
 * A token file is re-read when its identity or times change (a Kubernetes
 * Secret update swaps a symbolic link: a new inode), checked at most once a
 * second; a file that turns unreadable or malformed keeps its last good
 * tokens and is logged (its path and line, never a token). A presented
 * token is compared with every token of the role, each over the full
 * fixed-size slot, without stopping at the first difference or the first
 * match, so the time taken says nothing of how much of a token was right. */
#include "auth.h"
#include "access_policy.h"
#include "tls.h"
#include "../core/config.h"
#include "../core/log.h"
#include "../core/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_SLOT 256 /* a token is at most TOKEN_SLOT - 1 bytes */
#define TOKEN_MIN 16
#define TOKENS_PER_FILE 32
#define TOKEN_FILE_MAX (64 * 1024)
#define RECHECK_MS 1000

static const char *const role_names[MW_HTTP_NROLES] = {"public", "metrics", "read", "write",
                                                       "admin"};

typedef struct token_set {
    int n;
    unsigned char tok[TOKENS_PER_FILE][TOKEN_SLOT]; /* zero-padded */
} token_set;

typedef struct token_file {
    const char *path; /* in the settings; NULL: the role has no tokens */
    pthread_mutex_t mu;
    int64_t checked_ms; /* CLOCK_MONOTONIC */
    struct stat st;     /* of the tokens in use */
    token_set set;
} token_file;

/* A loaded --access-policy: the parsed file and the tokens of its
 * token_file bindings (tokens[i].path NULL for user and group bindings). */
typedef struct policy_state {
    mw_access_policy pol;
    token_file *tokens;
    struct stat st;
} policy_state;

#define MAX_PROXIES 32
typedef struct cidr {
    unsigned char addr[16]; /* IPv4 as ::ffff:a.b.c.d */
    int bits;
} cidr;

struct mw_auth {
    mw_auth_settings settings;
    token_file files[MW_HTTP_NROLES];
    int loopback;
    char listen[300];
    mw_tls *tls;
    /* Every use of the policy holds pmu: a reload swaps it whole. */
    pthread_mutex_t pmu;
    policy_state *policy; /* NULL: no --access-policy */
    int64_t policy_checked_ms;
    cidr proxies[MAX_PROXIES];
    int nproxies;
};

#define OPT(n, t, f, d, v, h) MW_OPT(mw_auth_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option auth_rows[] = {
    OPT("metrics-token-file", MW_OPT_PATH, token_file[MW_ROLE_METRICS], "", NULL, "File of bearer tokens (one a line) that may scrape GET /metrics; unset: /metrics is open"),
    OPT("read-token-file", MW_OPT_PATH, token_file[MW_ROLE_READ], "", NULL, "File of bearer tokens that may use the query APIs, the UI and findings; unset: open"),
    OPT("write-token-file", MW_OPT_PATH, token_file[MW_ROLE_WRITE], "", NULL, "File of bearer tokens that may POST /api/v1/write; unset: open on a loopback --listen, refused (403) on any other address"),
    OPT("admin-token-file", MW_OPT_PATH, token_file[MW_ROLE_ADMIN], "", NULL, "File of bearer tokens that may compact, snapshot, delete and reload; unset: open on a loopback --listen, refused (403) on any other address"),
    OPT("tls-cert-file", MW_OPT_PATH, tls_cert_file, "", NULL, "PEM certificate (chain) to serve HTTPS with; re-read when it changes"),
    OPT("tls-key-file", MW_OPT_PATH, tls_key_file, "", NULL, "PEM private key of --tls-cert-file; re-read when it changes"),
    OPT("tls-client-ca-file", MW_OPT_PATH, tls_client_ca_file, "", NULL, "PEM CA certificates: every request but /-/healthy and /-/ready then needs a client certificate they signed (mutual TLS; re-read when it changes)"),
    OPT("access-policy", MW_OPT_PATH, access_policy, "", NULL, "YAML file binding read tokens, proxy users and groups to the namespaces they may see (docs/security.md); re-read when it changes. Set: every read needs an identity"),
    OPT("trusted-proxy", MW_OPT_STRING, trusted_proxy, "", NULL, "Comma-separated addresses or CIDRs of authenticating proxies (oauth2-proxy) whose --proxy-user-header and --proxy-groups-header are believed; from any other address those headers are ignored"),
    OPT("proxy-user-header", MW_OPT_STRING, proxy_user_header, "X-Forwarded-User", NULL, "Header naming the user that a trusted proxy authenticated"),
    OPT("proxy-groups-header", MW_OPT_STRING, proxy_groups_header, "X-Forwarded-Groups", NULL, "Header with the comma-separated groups of that user"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_auth_options = MW_OPTION_GROUP(
    "HTTP server: tokens and TLS", "src/serve/auth.c", mw_auth_settings, auth_rows, NULL);

static int64_t monotonic_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
static int is_b64token(const char *s, size_t n)
{
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'))
            break;
    }
    if (i == 0) return 0;
    for (; i < n; i++)
        if (s[i] != '=') return 0;
    return 1;
}

/* Parse a token file's text: one token a line; blank lines and lines
 * starting with '#' skipped; white space around a token ignored. */
static int parse_tokens(const char *path, const char *text, size_t len, token_set *out, char *err,
                        size_t errsize)
{
    memset(out, 0, sizeof(*out));
    int line = 0;
    size_t pos = 0;
    while (pos < len) {
        line++;
        const char *start = text + pos;
        const char *nl = memchr(start, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - start) : len - pos;
        pos += n + (nl ? 1 : 0);
        while (n && (start[0] == ' ' || start[0] == '\t'))
            start++, n--;
        while (n && (start[n - 1] == ' ' || start[n - 1] == '\t' || start[n - 1] == '\r'))
            n--;
        if (n == 0 || start[0] == '#') continue;
        if (n < TOKEN_MIN || n >= TOKEN_SLOT || !is_b64token(start, n)) {
            snprintf(err, errsize,
                     "%s:%d: a token must be %d to %d characters of A-Z a-z 0-9 - . _ ~ + / "
                     "(then = padding)",
                     path, line, TOKEN_MIN, TOKEN_SLOT - 1);
            return -1;
        }
        if (out->n == TOKENS_PER_FILE) {
            snprintf(err, errsize, "%s:%d: more than %d tokens", path, line, TOKENS_PER_FILE);
            return -1;
        }
        memcpy(out->tok[out->n++], start, n);
    }
    if (out->n == 0) {
        snprintf(err, errsize, "%s: no token in the file", path);
        return -1;
    }
    return 0;
}

static int load_tokens(const char *path, token_set *out, struct stat *st, char *err, size_t errsize)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *text = NULL;
    int rc = -1;
    if (fstat(fd, st) < 0) {
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
    } else if (!S_ISREG(st->st_mode) || st->st_size > TOKEN_FILE_MAX) {
        snprintf(err, errsize, "%s: not a regular file of at most %d bytes", path, TOKEN_FILE_MAX);
    } else {
        text = mw_xmalloc((size_t)st->st_size + 1);
        ssize_t got = 0, r;
        while (got < st->st_size && (r = read(fd, text + got, (size_t)(st->st_size - got))) > 0)
            got += r;
        rc = parse_tokens(path, text, (size_t)got, out, err, errsize);
        /* The file's text held secrets: wipe it before freeing. */
        memset(text, 0, (size_t)st->st_size + 1);
        __asm__ __volatile__("" ::"r"(text) : "memory");
    }
    free(text);
    close(fd);
    return rc;
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Re-read f when it changed (f->mu held). */
static void refresh(token_file *f)
{
    int64_t now = monotonic_ms();
    if (now - f->checked_ms < RECHECK_MS) return;
    f->checked_ms = now;
    struct stat st;
    char err[PATH_MAX + 200];
    if (stat(f->path, &st) < 0) {
        mw_log_once(MW_LOG_WARN, "auth", f->path, "token file %s: %s; keeping its last tokens",
                    f->path, strerror(errno));
        return;
    }
    if (same_file(&st, &f->st)) return;
    token_set *fresh = mw_xmalloc(sizeof(*fresh));
    if (load_tokens(f->path, fresh, &st, err, sizeof(err)) < 0) {
        mw_log_once(MW_LOG_WARN, "auth", f->path, "token file %s; keeping its last tokens", err);
    } else {
        f->set = *fresh;
        f->st = st;
        mw_log(MW_LOG_INFO, "auth", "token file %s re-read: %d token(s)", f->path, f->set.n);
    }
    memset(fresh, 0, sizeof(*fresh));
    __asm__ __volatile__("" ::"r"(fresh) : "memory");
    free(fresh);
}

/* 1 when the padded token equals one of f's: every slot compared in full. */
static int matches(token_file *f, const unsigned char *padded)
{
    pthread_mutex_lock(&f->mu);
    refresh(f);
    volatile unsigned found = 0;
    for (int i = 0; i < f->set.n; i++) {
        unsigned diff = 0;
        for (size_t j = 0; j < TOKEN_SLOT; j++)
            diff |= f->set.tok[i][j] ^ padded[j];
        found |= (unsigned)(diff == 0);
    }
    pthread_mutex_unlock(&f->mu);
    return found != 0;
}

int mw_auth_token_has_role(mw_auth *a, const char *token, size_t len, mw_http_role role)
{
    if (!a->files[role].path || len == 0 || len >= TOKEN_SLOT) return 0;
    unsigned char padded[TOKEN_SLOT] = {0};
    memcpy(padded, token, len);
    int ok = matches(&a->files[role], padded);
    memset(padded, 0, sizeof(padded));
    __asm__ __volatile__("" ::"r"(padded) : "memory");
    return ok;
}

int mw_auth_listen_is_loopback(const char *listen)
{
    char host[256];
    uint16_t port;
    if (mw_parse_listen(listen, host, sizeof(host), &port) < 0 || !host[0]) return 0;
    if (strcasecmp(host, "localhost") == 0) return 1;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6)) return 1;
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return 0;
}

static void policy_free(policy_state *ps)
{
    if (!ps) return;
    for (size_t i = 0; i < ps->pol.n; i++)
        if (ps->tokens[i].path) pthread_mutex_destroy(&ps->tokens[i].mu);
    free(ps->tokens);
    mw_access_policy_free(&ps->pol);
    free(ps);
}

/* Read the policy and the token files it names. NULL with a message. */
static policy_state *policy_load(const char *path, char *err, size_t errsize)
{
    policy_state *ps = mw_xcalloc(1, sizeof(*ps));
    if (stat(path, &ps->st) < 0) {
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        free(ps);
        return NULL;
    }
    if (mw_access_policy_load(path, &ps->pol, err, errsize) < 0) {
        free(ps);
        return NULL;
    }
    ps->tokens = mw_xcalloc(ps->pol.n ? ps->pol.n : 1, sizeof(token_file));
    for (size_t i = 0; i < ps->pol.n; i++) {
        mw_binding *b = &ps->pol.b[i];
        if (b->kind != MW_BIND_TOKEN_FILE) continue;
        token_file *f = &ps->tokens[i];
        char why[PATH_MAX + 200];
        if (load_tokens(b->subject, &f->set, &f->st, why, sizeof(why)) < 0) {
            snprintf(err, errsize, "%s:%d: token_file %s", path, b->line, why);
            policy_free(ps);
            return NULL;
        }
        pthread_mutex_init(&f->mu, NULL);
        f->path = b->subject;
        f->checked_ms = monotonic_ms();
    }
    return ps;
}

/* Re-read the policy when its file changed (a->pmu held); a file that
 * turns unreadable or malformed keeps the last good policy. */
static void policy_refresh(mw_auth *a)
{
    int64_t now = monotonic_ms();
    if (now - a->policy_checked_ms < RECHECK_MS) return;
    a->policy_checked_ms = now;
    const char *path = a->settings.access_policy;
    struct stat st;
    if (stat(path, &st) < 0) {
        mw_log_once(MW_LOG_WARN, "auth", path, "access policy %s: %s; keeping the last policy",
                    path, strerror(errno));
        return;
    }
    if (same_file(&st, &a->policy->st)) return;
    char err[PATH_MAX + 600];
    policy_state *fresh = policy_load(path, err, sizeof(err));
    if (!fresh) {
        mw_log_once(MW_LOG_WARN, "auth", path, "access policy %s; keeping the last policy", err);
        return;
    }
    policy_free(a->policy);
    a->policy = fresh;
    mw_log(MW_LOG_INFO, "auth", "access policy %s re-read: %zu binding(s)", path, fresh->pol.n);
}

static int parse_cidr(const char *s, cidr *out)
{
    char host[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof(host)) return -1;
    memcpy(host, s, n);
    host[n] = '\0';
    struct in_addr a4;
    int max;
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, host, &a4) == 1) {
        out->addr[10] = out->addr[11] = 0xff;
        memcpy(out->addr + 12, &a4, 4);
        max = 32;
    } else if (inet_pton(AF_INET6, host, out->addr) == 1) {
        max = 128;
    } else {
        return -1;
    }
    int bits = max;
    if (slash) {
        char *end;
        long b = strtol(slash + 1, &end, 10);
        if (*end || end == slash + 1 || b < 0 || b > max) return -1;
        bits = (int)b;
    }
    out->bits = bits + (max == 32 ? 96 : 0);
    return 0;
}

static int cidr_contains(const cidr *c, const unsigned char addr[16])
{
    int full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(c->addr, addr, (size_t)full) != 0) return 0;
    if (!rest) return 1;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (c->addr[full] & mask) == (addr[full] & mask);
}

/* Whether the request comes straight from a --trusted-proxy address. */
static int from_trusted_proxy(const mw_auth *a, const mw_http_request *req)
{
    if (!a->nproxies || !req->conn) return 0;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return 0;
    unsigned char addr[16] = {0};
    if (ci->client_addr->sa_family == AF_INET) {
        addr[10] = addr[11] = 0xff;
        memcpy(addr + 12, &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr,
               4);
    } else if (ci->client_addr->sa_family == AF_INET6) {
        memcpy(addr, &((const struct sockaddr_in6 *)(const void *)ci->client_addr)->sin6_addr, 16);
    } else {
        return 0;
    }
    for (int i = 0; i < a->nproxies; i++)
        if (cidr_contains(&a->proxies[i], addr)) return 1;
    return 0;
}

/* Add binding b's namespaces to the scope (a union over the bindings that
 * apply to one identity). */
static void scope_add(mw_http_scope *sc, const mw_binding *b)
{
    sc->scoped = 1;
    sc->node_series |= b->node_series;
    for (size_t i = 0; i < b->nnamespaces; i++) {
        int dup = 0;
        for (size_t k = 0; k < sc->n; k++)
            dup |= strcmp(sc->namespaces[k], b->namespaces[i]) == 0;
        if (dup) continue;
        sc->namespaces = mw_xrealloc(sc->namespaces, (sc->n + 1) * sizeof(char *));
        sc->namespaces[sc->n++] = mw_xstrdup(b->namespaces[i]);
    }
}

/* Whether group is in the comma-separated list. */
static int in_groups(const char *groups, const char *group)
{
    size_t gl = strlen(group);
    const char *p = groups;
    while (p && *p) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        size_t t = n;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t == gl && memcmp(p, group, gl) == 0) return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* The scope of a proxy's user: 0, or -1 with a 403 when no binding names
 * the user or one of the groups. */
static int user_scope(mw_auth *a, const char *user, const char *groups, mw_http_scope *sc,
                      mw_http_response *resp)
{
    pthread_mutex_lock(&a->pmu);
    policy_refresh(a);
    int found = 0;
    for (size_t i = 0; i < a->policy->pol.n; i++) {
        const mw_binding *b = &a->policy->pol.b[i];
        int applies = (b->kind == MW_BIND_USER && strcmp(b->subject, user) == 0) ||
                      (b->kind == MW_BIND_GROUP && groups && in_groups(groups, b->subject));
        if (applies) scope_add(sc, b), found = 1;
    }
    pthread_mutex_unlock(&a->pmu);
    if (!found) {
        mw_http_text(resp, 403,
                     "user '%.128s' has no namespaces in the access policy (--access-policy)\n",
                     user);
        return -1;
    }
    return 0;
}

/* Whether the token is one of the policy's token_file bindings; fills sc. */
static int token_scope(mw_auth *a, const char *tok, size_t len, mw_http_scope *sc)
{
    if (len == 0 || len >= TOKEN_SLOT) return 0;
    unsigned char padded[TOKEN_SLOT] = {0};
    memcpy(padded, tok, len);
    pthread_mutex_lock(&a->pmu);
    policy_refresh(a);
    int found = 0;
    for (size_t i = 0; i < a->policy->pol.n; i++) {
        token_file *f = &a->policy->tokens[i];
        if (f->path && matches(f, padded)) scope_add(sc, &a->policy->pol.b[i]), found = 1;
    }
    pthread_mutex_unlock(&a->pmu);
    memset(padded, 0, sizeof(padded));
    __asm__ __volatile__("" ::"r"(padded) : "memory");
    return found;
}

mw_auth *mw_auth_open(const mw_auth_settings *s, const char *listen, char *err, size_t errsize)
{
    mw_auth *a = mw_xcalloc(1, sizeof(*a));
    a->settings = *s;
    a->loopback = mw_auth_listen_is_loopback(listen);
    snprintf(a->listen, sizeof(a->listen), "%s", listen);
    for (int r = 0; r < MW_HTTP_NROLES; r++)
        pthread_mutex_init(&a->files[r].mu, NULL);
    pthread_mutex_init(&a->pmu, NULL);
    if (a->settings.access_policy[0]) {
        char why[PATH_MAX + 600];
        a->policy = policy_load(a->settings.access_policy, why, sizeof(why));
        if (!a->policy) {
            snprintf(err, errsize, "--access-policy %s", why);
            mw_auth_free(a);
            return NULL;
        }
        a->policy_checked_ms = monotonic_ms();
    }
    for (const char *p = a->settings.trusted_proxy; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char item[80];
        snprintf(item, sizeof(item), "%.*s", (int)(n < 79 ? n : 79), p);
        if (a->nproxies == MAX_PROXIES || n >= sizeof(item) ||
            parse_cidr(item, &a->proxies[a->nproxies]) < 0) {
            snprintf(err, errsize,
                     "--trusted-proxy: '%s' is not an address or CIDR (a.b.c.d/n, x::/n), or "
                     "more than %d of them",
                     item, MAX_PROXIES);
            mw_auth_free(a);
            return NULL;
        }
        a->nproxies++;
        p = comma ? comma + 1 : p + n;
    }
    for (int r = MW_ROLE_METRICS; r < MW_HTTP_NROLES; r++) {
        token_file *f = &a->files[r];
        if (!a->settings.token_file[r][0]) continue;
        f->path = a->settings.token_file[r];
        char why[PATH_MAX + 200];
        if (load_tokens(f->path, &f->set, &f->st, why, sizeof(why)) < 0) {
            snprintf(err, errsize, "--%s-token-file %s", role_names[r], why);
            mw_auth_free(a);
            return NULL;
        }
        f->checked_ms = monotonic_ms();
    }
    if (s->tls_cert_file[0] || s->tls_key_file[0] || s->tls_client_ca_file[0]) {
        a->tls =
            mw_tls_open(s->tls_cert_file, s->tls_key_file, s->tls_client_ca_file, err, errsize);
        if (!a->tls) {
            mw_auth_free(a);
            return NULL;
        }
    }
    return a;
}

void mw_auth_attach(mw_auth *a, mw_http_server *http)
{
    mw_http_set_guard(http, mw_auth_guard, a);
    if (a->tls)
        mw_http_set_daemon_extra(http, mw_tls_daemon_flags(a->tls), mw_tls_daemon_items(a->tls));
}

int mw_auth_tls(const mw_auth *a)
{
    return a->tls != NULL;
}

void mw_auth_free(mw_auth *a)
{
    if (!a) return;
    for (int r = 0; r < MW_HTTP_NROLES; r++)
        pthread_mutex_destroy(&a->files[r].mu);
    policy_free(a->policy);
    pthread_mutex_destroy(&a->pmu);
    mw_tls_free(a->tls);
    memset(a, 0, sizeof(*a));
    __asm__ __volatile__("" ::"r"(a) : "memory");
    free(a);
}

/* The media type of a Content-Type value, without parameters, compared
 * case-insensitively with want. */
static int media_type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    if (strncasecmp(ct, want, n) != 0) return 0;
    const char *rest = ct + n;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    return *rest == '\0' || *rest == ';';
}

/* What a browser page may send cross-origin without a preflight (the
 * Fetch standard's CORS-safelisted request-header Content-Type values). */
static int browser_simple(const char *ct)
{
    return media_type_is(ct, "application/x-www-form-urlencoded") ||
           media_type_is(ct, "multipart/form-data") || media_type_is(ct, "text/plain");
}

static void unauthorized(mw_http_response *resp, const char *why, mw_http_role role)
{
    mw_http_text(resp, 401, "%s: this path needs a bearer token with the %s role\n", why,
                 role_names[role]);
    mw_http_add_header(resp, "WWW-Authenticate", "Bearer realm=\"mlwatch\"");
}

/* The bearer token of the request (*tok, *len), or -1 after a 401. */
static int bearer(const mw_http_request *req, mw_http_response *resp, mw_http_role role,
                  const char **tok, size_t *len)
{
    const char *h = mw_http_header(req, "Authorization");
    if (!h) {
        unauthorized(resp, "no Authorization header", role);
        return -1;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        unauthorized(resp, "the Authorization header is not a bearer token", role);
        return -1;
    }
    const char *t = h + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
        n--;
    *tok = t;
    *len = n;
    return 0;
}

/* A token without ROLE: 403 when it is known by another role, else 401. */
static int refuse_token(mw_auth *a, const char *tok, size_t len, mw_http_role role,
                        mw_http_response *resp)
{
    for (int r = MW_ROLE_METRICS; r < MW_HTTP_NROLES; r++)
        if (r != (int)role && mw_auth_token_has_role(a, tok, len, (mw_http_role)r)) {
            mw_http_text(resp, 403, "this bearer token does not have the %s role\n",
                         role_names[role]);
            return -1;
        }
    unauthorized(resp, "unknown bearer token", role);
    return -1;
}

/* A read with --access-policy: every read needs an identity. A trusted
 * proxy's user (its headers, believed only from --trusted-proxy addresses)
 * is scoped by the user and group bindings; else a bearer token: one of
 * --read-token-file sees everything, one of a token_file binding its
 * namespaces. */
static int guard_scoped_read(mw_auth *a, const mw_http_request *req, mw_http_response *resp)
{
    if (from_trusted_proxy(a, req)) {
        const char *user = mw_http_header(req, a->settings.proxy_user_header);
        if (user && *user)
            return user_scope(a, user, mw_http_header(req, a->settings.proxy_groups_header),
                              req->scope, resp);
    }
    const char *tok;
    size_t len;
    if (bearer(req, resp, MW_ROLE_READ, &tok, &len) < 0) return -1;
    if (mw_auth_token_has_role(a, tok, len, MW_ROLE_READ)) return 0;
    if (token_scope(a, tok, len, req->scope)) return 0;
    return refuse_token(a, tok, len, MW_ROLE_READ, resp);
}

int mw_auth_guard(void *ctx, mw_http_role role, const mw_http_request *req, mw_http_response *resp)
{
    mw_auth *a = ctx;
    if (role == MW_ROLE_PUBLIC || role >= MW_HTTP_NROLES) return 0;
    if (a->tls && !mw_tls_peer_verified(a->tls, req->conn)) {
        mw_http_text(resp, 403,
                     "this path needs a client certificate signed by the CA of "
                     "--tls-client-ca-file\n");
        return -1;
    }
    token_file *f = &a->files[role];
    if (role == MW_ROLE_READ && a->policy) return guard_scoped_read(a, req, resp);
    if (f->path) {
        const char *tok;
        size_t len;
        if (bearer(req, resp, role, &tok, &len) < 0) return -1;
        if (!mw_auth_token_has_role(a, tok, len, role))
            return refuse_token(a, tok, len, role, resp);
    } else if ((role == MW_ROLE_WRITE || role == MW_ROLE_ADMIN) && !a->loopback) {
        mw_http_text(resp, 403,
                     "%s requests are refused: mlwatch listens on %s, not a loopback address, "
                     "and --%s-token-file is not set (docs/security.md)\n",
                     role_names[role], a->listen, role_names[role]);
        return -1;
    }
    if (role == MW_ROLE_WRITE || role == MW_ROLE_ADMIN) {
        const char *ct = mw_http_header(req, "Content-Type");
        if (role == MW_ROLE_WRITE && (!ct || !media_type_is(ct, "application/x-protobuf"))) {
            mw_http_text(resp, 415,
                         "remote write needs Content-Type: application/x-protobuf (got '%.64s')\n",
                         ct ? ct : "none");
            return -1;
        }
        if (ct && browser_simple(ct)) {
            mw_http_text(resp, 415,
                         "Content-Type '%.64s' is refused here: a browser page may post it "
                         "without a CORS preflight\n",
                         ct);
            return -1;
        }
    }
    return 0;
}
