/* ui.h - the built-in web UI: embedded assets and the query proxy.
 *
 * src/serve/ui.c is the `ui` agent module: it serves the embedded files
 * (src/serve/ui_assets.h) under /ui/, redirects / there, tells the page
 * where to send its PromQL queries (/ui/config.json) and, with --query-url,
 * forwards those queries to a Prometheus-compatible server
 * (src/serve/ui_proxy.c). The functions below are the parts the unit tests
 * drive without a server. docs/ui.md. */
#ifndef MW_UI_H
#define MW_UI_H

#include "../core/options.h"
#include "http.h"
#include "ui_assets.h"

#include <stdint.h>

/* The Content-Security-Policy of every UI response: our own scripts,
 * styles, images and API only; no inline script, no framing. */
#define MW_UI_CSP                                                                                  \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "                   \
    "frame-ancestors 'none'"

/* The asset served at path ("/ui/" is index.html), or NULL. */
const mw_ui_asset *mw_ui_find(const mw_ui_asset *table, size_t n, const char *path);
/* Whether an If-None-Match header value names etag (or is "*"). */
int mw_ui_etag_matches(const char *if_none_match, const char *etag);
/* Answer GET path from table: 200 (gzip when Accept-Encoding allows it,
 * mw_accepts_gzip of exposition.h), 304, 404, or 503
 * with `missing` when the UI was not built in. Header values point to
 * static strings. */
void mw_ui_serve(const mw_ui_asset *table, size_t n, const char *missing, const char *path,
                 const char *accept_encoding, const char *if_none_match, mw_http_response *resp);

/* The web UI's settings (ui.c): where its queries go ("" = the embedded
 * store). */
typedef struct mw_ui_settings {
    char query_url[1024];
} mw_ui_settings;
extern const mw_option_group mw_ui_options;

/* ---- the query proxy (ui_proxy.c) ---- */

#define MW_UI_PROXY_MAX_BODY (32u << 20)

typedef struct mw_ui_proxy {
    char base[1024];  /* http(s)://host[:port][/prefix], without a trailing slash */
    char shown[1024]; /* base without user:password@, for messages and the page */
    int64_t timeout_ms;
    size_t max_body; /* bound on the upstream's answer */
} mw_ui_proxy;

/* Validator of --query-url (an http(s) base URL). */
int mw_ui_check_query_url(const char *v, char *why, size_t whysize);
/* Check URL (config validator too); 0, or -1 with the reason. */
int mw_ui_proxy_init(mw_ui_proxy *p, const char *url, int64_t timeout_ms, char *why,
                     size_t whysize);
/* Whether the path after /api/v1/ is one the UI may forward: query,
 * query_range, series, labels, label/NAME/values, metadata,
 * status/buildinfo. */
int mw_ui_proxy_allowed(const char *sub);
/* Forward one API call (sub: the path after /api/v1/; query: the encoded
 * query string without '?', or ""; body: a POST's form) and fill resp: the
 * upstream's answer when it is 2xx, 400 or 422 (the API's own errors), else
 * 502 with a Prometheus-style JSON error saying what failed. */
void mw_ui_proxy_forward(const mw_ui_proxy *p, const char *method, const char *sub,
                         const char *query, const char *body, size_t body_len,
                         mw_http_response *resp);

#endif
