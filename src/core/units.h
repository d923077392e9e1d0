/* units.h - durations and sizes written like Prometheus writes them. */
#ifndef MW_UNITS_H
#define MW_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "1s", "500ms", "1m30s", "2h", "1d", "1w", "1y": one or more number+unit
 * terms, units in descending order, each used once. Returns 0 and the value
 * in milliseconds, or -1. */
int mw_parse_duration_ms(const char *s, int64_t *out_ms);
/* "512MiB", "1GB", "4096", "64KiB", "2TiB": bytes. Returns 0 or -1. */
int mw_parse_size(const char *s, uint64_t *out);
/* Format milliseconds as the shortest duration string ("1m30s"). */
void mw_format_duration(int64_t ms, char *out, size_t size);
/* Write NaN, +Inf or -Inf as Prometheus spells them and return 1 when v is
 * one of them; 0 (out untouched) for a finite v. */
int mw_format_nonfinite(double v, char *out, size_t size);

#endif
