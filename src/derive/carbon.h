/* carbon.h - the grid's carbon intensity (gCO2eq/kWh) from a static value,
 * a schedule file or an HTTP JSON API.
 *
 * The API is polled on its own thread: a slow, failing, malformed or
 * oversized answer keeps the last good value and is counted, and reading the
 * current value (each collection cycle) only takes a mutex. */
#ifndef MW_CARBON_H
#define MW_CARBON_H

#include "../core/snapshot.h"

#include <limits.h>

#include <stddef.h>
#include <stdint.h>

typedef struct mw_carbon_opts {
    const char *spec;        /* --carbon-intensity: NUMBER, FILE (CSV) or http(s)://URL; "" = off */
    const char *url;         /* carbon.url (used when spec is empty) */
    const char *json_path;   /* "carbonIntensity", "data[0].intensity.actual", ... */
    const char *auth_header; /* header name, e.g. "auth-token" */
    const char *auth_file;   /* file holding the header's value; "" = no header */
    int64_t refresh_ms, timeout_ms;
    size_t max_body;
} mw_carbon_opts;

typedef struct mw_carbon mw_carbon;

/* Returns 0 with *out set (NULL when nothing is configured), or -1 with a
 * one-line reason in err. */
int mw_carbon_open(const mw_carbon_opts *o, mw_carbon **out, char *err, size_t errsize);
void mw_carbon_close(mw_carbon *c);

/* The intensity now (gCO2eq/kWh) and its age in seconds; < 0 when unknown. */
double mw_carbon_now(mw_carbon *c, int64_t now_ms, double *age_s);
/* The mean intensity over [from_ms, to_ms]: a schedule's rows weighted by
 * the time each holds in it (time before the first row counts as 0: never
 * back-filled); a constant or an API's latest value otherwise. < 0 when
 * unknown throughout. */
double mw_carbon_mean(mw_carbon *c, int64_t from_ms, int64_t to_ms);
/* "constant", "schedule", "api", or "none" for NULL. */
const char *mw_carbon_source(const mw_carbon *c);
/* Emit mlwatch_carbon_intensity_grams_per_kwh{source}, _age_seconds and the fetch
 * counters. */
void mw_carbon_emit(mw_carbon *c, mw_snapshot *snap, int64_t now_ms);
/* Successful fetches and failures so far (tests). */
void mw_carbon_counts(mw_carbon *c, uint64_t *ok, uint64_t *failures);

/* --- parsers (unit-tested and fuzzed) --- */

/* The number at PATH ("a.b[0].c", an optional leading "$." ignored) of the
 * JSON body. A numeric string counts; null, other types, negatives and
 * non-finite values are errors. Returns 0 or -1 with the reason in err. */
int mw_carbon_json_value(const char *body, size_t len, const char *path, double *out, char *err,
                         size_t errsize);

/* A schedule: rows "TIME,GRAMS" where TIME is an RFC 3339 UTC time
 * ("2024-05-01T12:00:00Z", absolute) or "HH:MM" (every day, UTC); each value
 * holds until the next row. '#' comments and one header line are allowed. */
typedef struct mw_carbon_row {
    int64_t at; /* ms since the epoch, or ms since midnight for daily rows */
    double grams;
} mw_carbon_row;
typedef struct mw_carbon_schedule {
    mw_carbon_row *rows;
    size_t n;
    int daily;
} mw_carbon_schedule;

#define MW_CARBON_MAX_ROWS 100000

int mw_carbon_schedule_parse(const char *text, size_t len, mw_carbon_schedule *s, char *err,
                             size_t errsize);
void mw_carbon_schedule_free(mw_carbon_schedule *s);
/* Value at now_ms and when its row began; < 0 when before the first row. */
double mw_carbon_schedule_at(const mw_carbon_schedule *s, int64_t now_ms, int64_t *since_ms);
/* Time-weighted mean over [from_ms, to_ms] (see mw_carbon_mean). */
double mw_carbon_schedule_mean(const mw_carbon_schedule *s, int64_t from_ms, int64_t to_ms);

/* The carbon settings (--carbon-intensity and the `carbon:` section),
 * parsed by carbon_config.c into the energy module's settings. */
typedef struct mw_carbon_settings {
    char intensity[PATH_MAX]; /* NUMBER, schedule FILE or URL; "" = none */
    char url[2048];           /* carbon: section */
    char json_path[256];
    char auth_header[128];
    char auth_file[PATH_MAX];
    int64_t refresh_ms, timeout_ms;
    uint64_t max_body;
} mw_carbon_settings;
/* The defaults of the `carbon:` section's keys. */
void mw_carbon_settings_defaults(mw_carbon_settings *c);
/* The `carbon:` section of the config file (carbon_config.c). */
int mw_carbon_config_section(mw_carbon_settings *c, const char *file, void *doc, void *node,
                             char *err, size_t errsize);

#endif
