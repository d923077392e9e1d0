/* exposition.h - rendering a snapshot as Prometheus text format 0.0.4 or
 * OpenMetrics 1.0, and choosing between them from an Accept header. */
#ifndef MW_EXPOSITION_H
#define MW_EXPOSITION_H

#include "../core/buf.h"
#include "../core/snapshot.h"

typedef enum { MW_FMT_TEXT, MW_FMT_OPENMETRICS } mw_format;

#define MW_CONTENT_TYPE_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define MW_CONTENT_TYPE_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

void mw_render(const mw_snapshot *s, mw_format fmt, mw_buf *out);
/* The same text in pieces: out collects it and is handed to sink (and
 * cleared) each time it holds chunk bytes or more, and once at the end, so
 * that a large exposition never has to exist whole (the gzip'd /metrics is
 * compressed while it is rendered). Returns 0, or -1 as soon as sink does. */
typedef int (*mw_render_sink)(void *ctx, const char *data, size_t len);
int mw_render_stream(const mw_snapshot *s, mw_format fmt, mw_buf *out, size_t chunk,
                     mw_render_sink sink, void *ctx);
/* Pick the format an Accept header prefers (q-values honoured; ties go to the
 * earlier entry; absent, empty or wildcard-only: text). */
mw_format mw_negotiate_format(const char *accept);
/* 1 when an Accept-Encoding header accepts gzip with q > 0. */
int mw_accepts_gzip(const char *accept_encoding);
/* Shortest text that reads back as the same double; NaN, +Inf, -Inf. */
void mw_format_value(double v, char *out, size_t size);

#endif
