/* notify_fmt.h - helpers the message formats share (notify_format.c for
 * idle sessions, alert_format.c for rule-alert groups). */
#ifndef MW_NOTIFY_FMT_H
#define MW_NOTIFY_FMT_H

#include "../core/buf.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* "2026-12-02T13:00:00Z" of a time in ms. */
void mw_notify_rfc3339(int64_t ms, char *out, size_t n);
/* A header value on one line: a label value with a newline must not add
 * headers. */
void mw_notify_header_safe(const char *in, char *out, size_t n);
/* Append j as compact ASCII JSON and release it. */
void mw_notify_dump_json(json_t *j, mw_buf *out);

#endif
