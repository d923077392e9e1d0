/* exposition.h - rendering a snapshot as Prometheus text format 0.0.4 or
 * OpenMetrics 1.0, and choosing between them from an Accept header. */
#ifndef MW_EXPOSITION_H
#define MW_EXPOSITION_H

#include "../core/buf.h"
#include "../core/snapshot.h"

typedef enum { MW_FMT_TEXT, MW_FMT_OPENMETRICS } mw_format;

#define MW_CONTENT_TYPE_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define MW_CONTENT_TYPE_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* The whole exposition of s, appended to out. */
void mw_render(const mw_snapshot *s, mw_format fmt, mw_buf *out);

/* The same text in pieces, so that a large exposition never has to exist
 * whole: a cursor over the snapshot (which must outlive it), and
 * mw_render_next, which appends the next samples (and family headers) to
 * out until it grew by chunk bytes or more, or the end; it returns 1 while
 * more remains, 0 once the end has been appended. */
typedef struct mw_render_cursor {
    mw_format fmt;
    const mw_family *family; /* NULL: past the last family */
    const mw_sample *sample; /* next sample of family; NULL: its header is next */
    int done;
} mw_render_cursor;
void mw_render_begin(mw_render_cursor *c, const mw_snapshot *s, mw_format fmt);
int mw_render_next(mw_render_cursor *c, mw_buf *out, size_t chunk);

/* The pieces pushed to a sink instead (the gzip'd /metrics is compressed
 * while it is rendered): out collects them and is handed to sink (and
 * cleared) each time it holds chunk bytes or more, and once at the end.
 * Returns 0, or -1 as soon as sink does. */
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
