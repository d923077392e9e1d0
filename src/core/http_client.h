/* http_client.h - the one client for every outbound call (libcurl, loaded
 * on first use by src/core/lazylib.c): Prometheus and remote-write servers,
 * the Kubernetes API and the kubelet's pod-resources socket, webhooks, SMTP
 * servers, carbon-intensity APIs and the local agent.
 *
 * A caller fills an mw_http_call (URL, timeouts, TLS, headers, body, what to
 * keep of the answer) and hands it to mw_http_perform. Everything a request
 * needs is set here and only here: timeouts, NOSIGNAL, TLS options, proxy,
 * the bound on the answer, and redaction: the error text never holds a URL's
 * user:password@, a bearer token, a password or a secret header's value.
 * The server (libmicrohttpd) is src/serve/http.c. */
#ifndef MW_HTTP_CLIENT_H
#define MW_HTTP_CLIENT_H

#include "buf.h"

#include <stddef.h>
#include <stdint.h>

#define MW_HTTP_CALL_HEADERS 8
#define MW_HTTP_DETAIL_SIZE 256 /* libcurl's CURL_ERROR_SIZE */

/* What went wrong, for callers that act on it; the text is in error. */
typedef enum mw_http_failure {
    MW_HTTP_OK,          /* a complete answer (any HTTP status) */
    MW_HTTP_UNAVAILABLE, /* libcurl is not installed */
    MW_HTTP_TOO_LARGE,   /* the answer was longer than max_body */
    MW_HTTP_TIMEOUT,     /* timeout_ms (or connect_timeout_ms) ran out */
    MW_HTTP_CONNECT,     /* nothing listens there */
    MW_HTTP_TLS_VERIFY,  /* the server's certificate is not trusted */
    MW_HTTP_TLS_CLIENT,  /* our client certificate or key cannot be used */
    MW_HTTP_SEND_RECV,   /* the connection broke while sending or receiving */
    MW_HTTP_ABORTED,     /* should_abort asked to stop */
    MW_HTTP_WRITE,       /* on_data refused the data */
    MW_HTTP_OTHER,
} mw_http_failure;

typedef struct mw_http_tls {
    const char *ca_file, *ca_pem;     /* trust these CAs (a file, or PEM text) */
    const char *cert_file, *cert_pem; /* client certificate */
    const char *key_file, *key_pem;   /* its key */
    int insecure_skip_verify;         /* where a caller's users can ask for it */
    int require_tls;                  /* smtp://: STARTTLS or fail */
} mw_http_tls;

typedef struct mw_http_call {
    /* ---- the request ---- */
    const char *url;
    const char *protocols;                     /* "http,https" to refuse others; NULL: libcurl's */
    const char *user_agent;                    /* NULL: none */
    const char *headers[MW_HTTP_CALL_HEADERS]; /* "Name: value" lines; NULL ends */
    const char *secret_header;                 /* one more, whose value is a secret */
    const char *bearer_token;                  /* Authorization: Bearer TOKEN */
    const char *username, *password;           /* basic auth (HTTP) or SMTP login */
    int basic_auth;                            /* send username/password as HTTP basic */
    int post;                                  /* POST body (body_len bytes) */
    const char *method; /* with post: send the body with this method ("PATCH") */
    const void *body;
    size_t body_len;
    const char *accept_encoding; /* "": whatever libcurl decodes; NULL: none */
    /* Timeouts: connect_timeout_ms for the connection (0: libcurl's 300 s),
     * timeout_ms for the whole call (0: none, for streaming reads, which
     * should set low_speed_time_s instead). */
    int64_t connect_timeout_ms, timeout_ms;
    long low_speed_time_s; /* fail when under 1 byte/s for this long */
    long max_redirects;    /* > 0: follow that many redirects */
    const char *no_proxy;  /* "*": never a proxy (local agent); NULL: libcurl's env */
    const char *unix_socket;
    /* "HOST:PORT:CONNECT-HOST:CONNECT-PORT": connect there for HOST:PORT of
     * the URL, whose host is still the name the certificate is checked
     * against (libcurl's CURLOPT_CONNECT_TO); NULL: none. */
    const char *connect_to;
    int http2_prior_knowledge; /* gRPC over a socket */
    mw_http_tls tls;
    /* SMTP (smtp:// or smtps:// URL): the envelope, and the message as the
     * upload (body/body_len). */
    const char *mail_from;
    const char *const *mail_rcpt; /* NULL-terminated */
    /* ---- what to keep of the answer ---- */
    /* The body goes to answer, up to max_body bytes: one more is an error
     * (MW_HTTP_TOO_LARGE) unless truncate is set, when the rest is read and
     * dropped. max_body 0: the body is read and discarded. */
    size_t max_body;
    int truncate;
    /* Instead of answer: each piece as it comes; return 0, or -1 to stop
     * (MW_HTTP_WRITE). */
    int (*on_data)(const char *p, size_t n, void *cls);
    /* Each header line (trailers too), as libcurl gives it (with CRLF). */
    void (*on_header)(const char *line, size_t n, void *cls);
    int (*should_abort)(void *cls); /* polled during the transfer; non-zero stops it */
    void *cls;

    /* ---- the outcome ---- */
    mw_http_failure failure;
    long status; /* the HTTP status, 0 when none came */
    mw_buf answer;
    const char *reason;               /* libcurl's name for the failure, "" when none */
    char detail[MW_HTTP_DETAIL_SIZE]; /* libcurl's and the TLS library's detail, redacted */
    char error[1024];                 /* "URL: what went wrong", redacted; "" on success */
} mw_http_call;

/* A reusable connection (keep-alive) for one thread; NULL when libcurl is
 * not available. */
typedef struct mw_http_client mw_http_client;
mw_http_client *mw_http_client_new(void);
void mw_http_client_free(mw_http_client *c);

/* Perform the call on c (NULL: a connection of its own). Returns 0 when an
 * answer came (look at call->status), -1 with call->failure and error set.
 * Free call->answer with mw_http_call_free. */
int mw_http_perform(mw_http_client *c, mw_http_call *call);
void mw_http_call_free(mw_http_call *call);

/* Remove credentials from text (NUL-terminated, edited in place, size bytes
 * of room): the user:password@ of every URL, the word after "Bearer " and
 * "Basic ", and each of the given secrets (a NULL-terminated list; NULL and
 * "" entries are skipped) wherever it occurs, each becoming [redacted]. */
void mw_http_redact(char *text, size_t size, const char *const *secrets);
/* For a server whose certificate names `name` rather than url's host (TLS
 * server_name): url with its host replaced by name in out, and
 * "name:PORT:HOST:PORT" for the call's connect_to, so that the connection
 * still goes to url's host. 0, or -1 when url has no host or out is too
 * small. */
int mw_http_rename_host(const char *url, const char *name, char *out, size_t outsize,
                        char *connect_to, size_t ctsize);
/* A URL as shown in logs: without its user:password@. */
void mw_http_shown_url(const char *url, char *out, size_t size);

#endif
