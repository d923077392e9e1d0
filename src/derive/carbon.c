/* carbon.c - carbon intensity sources: static, schedule file, HTTP JSON API
 * polled on a thread (libcurl + jansson); see carbon.h and docs/energy.md. */
#include "carbon.h"
#include "../core/buf.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_INTENSITY 100000.0 /* gCO2eq/kWh; coal is about 1000 */
#define SCHEDULE_MAX_FILE (16u << 20)

enum { F_TIMEOUT, F_HTTP, F_NETWORK, F_MALFORMED, F_OVERSIZED, F_N };
static const char *const failure_names[F_N] = {"timeout", "http_status", "network", "malformed",
                                               "oversized"};

/* clang-format off */
MW_METRIC(INTENSITY, MW_GAUGE, "mlwatch_carbon_intensity_grams_per_kwh", "grams_per_kwh", "Carbon intensity of the grid used for CO2 (gCO2eq per kWh), source constant (a number), schedule (a CSV file) or api (a JSON API); absent while unknown.");
MW_METRIC(AGE, MW_GAUGE, "mlwatch_carbon_intensity_age_seconds", "seconds", "Age of the carbon intensity in use: since the last good API answer or the schedule row began.");
MW_METRIC(FETCHES, MW_COUNTER, "mlwatch_carbon_fetches_total", "", "Good answers from the carbon intensity API.");
MW_METRIC(FAILURES, MW_COUNTER, "mlwatch_carbon_fetch_failures_total", "", "Carbon intensity API requests that failed, by reason; the last good value is kept.");
/* clang-format on */

typedef enum { SRC_STATIC, SRC_SCHEDULE, SRC_URL } src_kind;

struct mw_carbon {
    src_kind kind;
    double value;
    int64_t value_ms; /* when the URL value was fetched */
    mw_carbon_schedule sched;
    /* URL */
    char *url, *path, *header;
    int64_t refresh_ms, timeout_ms;
    size_t max_body;
    mw_worker w; /* URL source: the poller; its mutex guards the fetched value */
    int have;
    uint64_t ok, fail[F_N];
};

/* --- JSON path ---------------------------------------------------------------- */

int mw_carbon_json_value(const char *body, size_t len, const char *path, double *out, char *err,
                         size_t errsize)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_DECODE_ANY, &je);
    if (!root) {
        snprintf(err, errsize, "not JSON (line %d: %s)", je.line, je.text);
        return -1;
    }
    const json_t *cur = root;
    const char *p = path;
    if (strncmp(p, "$.", 2) == 0) p += 2;
    int rc = -1;
    while (*p) {
        const char *end = p + strcspn(p, ".[");
        if (end > p) {
            char key[128];
            size_t n = (size_t)(end - p);
            if (n >= sizeof(key)) {
                snprintf(err, errsize, "path element too long");
                goto out;
            }
            memcpy(key, p, n);
            key[n] = '\0';
            if (!json_is_object(cur) || !(cur = json_object_get(cur, key))) {
                snprintf(err, errsize, "no '%s' at %.*s", key, (int)(end - path), path);
                goto out;
            }
        }
        p = end;
        while (*p == '[') {
            char *close;
            errno = 0;
            unsigned long i = strtoul(p + 1, &close, 10);
            if (close == p + 1 || *close != ']' || errno) {
                snprintf(err, errsize, "bad index in path '%s'", path);
                goto out;
            }
            if (!json_is_array(cur) || i >= json_array_size(cur)) {
                snprintf(err, errsize, "no element [%lu] at %.*s", i, (int)(p - path), path);
                goto out;
            }
            cur = json_array_get(cur, i);
            p = close + 1;
        }
        if (*p == '.')
            p++;
        else if (*p) {
            snprintf(err, errsize, "bad path '%s'", path);
            goto out;
        }
    }
    double v;
    if (json_is_number(cur)) {
        v = json_number_value(cur);
    } else if (json_is_string(cur)) {
        char *end;
        v = strtod(json_string_value(cur), &end);
        if (end == json_string_value(cur) || *end) {
            snprintf(err, errsize, "value at '%s' is a string, not a number", path);
            goto out;
        }
    } else {
        snprintf(err, errsize, "value at '%s' is %s, not a number", path,
                 json_is_null(cur) ? "null" : "not a number");
        goto out;
    }
    if (!isfinite(v) || v < 0 || v > MAX_INTENSITY) {
        snprintf(err, errsize, "value %g at '%s' is not an intensity (0 to %g)", v, path,
                 MAX_INTENSITY);
        goto out;
    }
    *out = v;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* --- schedule ------------------------------------------------------------------ */

static int parse_time(const char *s, size_t n, int64_t *at, int *daily)
{
    char buf[40];
    if (n >= sizeof(buf)) return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    unsigned h, m;
    int used = 0;
    if (sscanf(buf, "%2u:%2u%n", &h, &m, &used) == 2 && (size_t)used == n && h < 24 && m < 60) {
        *at = ((int64_t)h * 60 + m) * 60000;
        *daily = 1;
        return 0;
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    char *end = strptime(buf, "%Y-%m-%dT%H:%M", &tm);
    if (!end) return -1;
    if (*end == ':') {
        unsigned sec;
        if (sscanf(end, ":%2u%n", &sec, &used) != 1 || sec > 60) return -1;
        tm.tm_sec = (int)sec;
        end += used;
    }
    if (strcmp(end, "Z") != 0) return -1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return -1;
    *at = (int64_t)t * 1000;
    *daily = 0;
    return 0;
}

int mw_carbon_schedule_parse(const char *text, size_t len, mw_carbon_schedule *s, char *err,
                             size_t errsize)
{
    memset(s, 0, sizeof(*s));
    size_t cap = 0, lineno = 0;
    int kinds = 0; /* 1 absolute, 2 daily */
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        const char *q = p;
        p = nl ? nl + 1 : end;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        const char *e2 = le;
        while (e2 > q && (e2[-1] == '\r' || e2[-1] == ' ' || e2[-1] == '\t'))
            e2--;
        if (q == e2 || *q == '#') continue;
        const char *comma = memchr(q, ',', (size_t)(e2 - q));
        if (!comma) {
            snprintf(err, errsize, "line %zu: expected TIME,GRAMS", lineno);
            goto fail;
        }
        int64_t at;
        int daily;
        if (parse_time(q, (size_t)(comma - q), &at, &daily) < 0) {
            if (s->n == 0 && kinds == 0 && lineno == 1) continue; /* a header */
            snprintf(err, errsize,
                     "line %zu: bad time (expected 2024-05-01T12:00:00Z or HH:MM, UTC)", lineno);
            goto fail;
        }
        char num[64];
        size_t nn = (size_t)(e2 - comma - 1);
        if (nn == 0 || nn >= sizeof(num)) {
            snprintf(err, errsize, "line %zu: bad value", lineno);
            goto fail;
        }
        memcpy(num, comma + 1, nn);
        num[nn] = '\0';
        char *ne;
        double g = strtod(num, &ne);
        if (ne == num || *ne || !isfinite(g) || g < 0 || g > MAX_INTENSITY) {
            snprintf(err, errsize, "line %zu: '%s' is not an intensity (0 to %g gCO2eq/kWh)",
                     lineno, num, MAX_INTENSITY);
            goto fail;
        }
        kinds |= daily ? 2 : 1;
        if (kinds == 3) {
            snprintf(err, errsize, "line %zu: mixes HH:MM and absolute times", lineno);
            goto fail;
        }
        if (s->n && at <= s->rows[s->n - 1].at) {
            snprintf(err, errsize, "line %zu: times must increase", lineno);
            goto fail;
        }
        if (s->n >= MW_CARBON_MAX_ROWS) {
            snprintf(err, errsize, "more than %d rows", MW_CARBON_MAX_ROWS);
            goto fail;
        }
        if (s->n == cap) {
            cap = cap ? cap * 2 : 64;
            s->rows = mw_xrealloc(s->rows, cap * sizeof(*s->rows));
        }
        s->rows[s->n++] = (mw_carbon_row){at, g};
        s->daily = daily;
    }
    if (!s->n) {
        snprintf(err, errsize, "no rows");
        goto fail;
    }
    return 0;
fail:
    mw_carbon_schedule_free(s);
    return -1;
}

void mw_carbon_schedule_free(mw_carbon_schedule *s)
{
    free(s->rows);
    memset(s, 0, sizeof(*s));
}

double mw_carbon_schedule_at(const mw_carbon_schedule *s, int64_t now_ms, int64_t *since_ms)
{
    if (!s->n) return -1;
    int64_t t = now_ms, base = 0;
    if (s->daily) {
        base = now_ms - ((now_ms % 86400000) + 86400000) % 86400000;
        t = now_ms - base;
    }
    /* Last row at or before t (binary search). */
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->rows[mid].at <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) {
        if (!s->daily) return -1;
        /* Before today's first row: yesterday's last row still holds. */
        *since_ms = base - 86400000 + s->rows[s->n - 1].at;
        return s->rows[s->n - 1].grams;
    }
    *since_ms = base + s->rows[lo - 1].at;
    return s->rows[lo - 1].grams;
}

/* When the value after t may next change: the next row's time. */
static int64_t schedule_next(const mw_carbon_schedule *s, int64_t t)
{
    int64_t base = 0, tt = t;
    if (s->daily) {
        base = t - ((t % 86400000) + 86400000) % 86400000;
        tt = t - base;
    }
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->rows[mid].at <= tt)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->n) return base + s->rows[lo].at;
    return s->daily ? base + 86400000 : INT64_MAX;
}

double mw_carbon_schedule_mean(const mw_carbon_schedule *s, int64_t from_ms, int64_t to_ms)
{
    int64_t since;
    if (to_ms <= from_ms) return mw_carbon_schedule_at(s, to_ms, &since);
    double sum = 0;
    int known = 0;
    int64_t t = from_ms;
    for (int i = 0; t < to_ms && i < 100000; i++) {
        int64_t next = schedule_next(s, t);
        if (next > to_ms || next <= t) next = to_ms;
        double v = mw_carbon_schedule_at(s, t, &since);
        if (v >= 0) {
            sum += v * (double)(next - t);
            known = 1;
        }
        t = next;
    }
    return known ? sum / (double)(to_ms - from_ms) : -1;
}

/* --- URL polling ----------------------------------------------------------------- */

/* One request; returns -1 on success (value set) or the failure reason. */
static int fetch_once(mw_carbon *c, double *value)
{
    mw_http_call call = {.url = c->url,
                         .secret_header = c->header,
                         .headers = {"Accept: application/json"},
                         .max_body = c->max_body,
                         .timeout_ms = c->timeout_ms,
                         .connect_timeout_ms = c->timeout_ms,
                         .max_redirects = 3,
                         .protocols = "http,https",
                         .user_agent = "mlwatch"};
    int rc = mw_http_perform(NULL, &call);
    int why = -1;
    char err[256] = "";
    if (call.failure == MW_HTTP_UNAVAILABLE) {
        mw_http_call_free(&call);
        return F_NETWORK;
    } else if (call.failure == MW_HTTP_TOO_LARGE) {
        why = F_OVERSIZED;
        snprintf(err, sizeof(err), "answer larger than %zu bytes", c->max_body);
    } else if (call.failure == MW_HTTP_TIMEOUT) {
        why = F_TIMEOUT;
        snprintf(err, sizeof(err), "no answer within %lld ms", (long long)c->timeout_ms);
    } else if (rc < 0) {
        why = F_NETWORK;
        snprintf(err, sizeof(err), "%s", call.reason);
    } else if (call.status != 200) {
        why = F_HTTP;
        snprintf(err, sizeof(err), "HTTP status %ld", call.status);
    } else if (mw_carbon_json_value(call.answer.data ? call.answer.data : "", call.answer.len,
                                    c->path, value, err, sizeof(err)) < 0) {
        why = F_MALFORMED;
    }
    if (why >= 0)
        mw_log_once(MW_LOG_WARN, "carbon", failure_names[why],
                    "carbon intensity API: %s; keeping the last good value", err);
    mw_http_call_free(&call);
    return why;
}

static void *poll_thread(void *arg)
{
    mw_carbon *c = arg;
    pthread_mutex_lock(&c->w.mu);
    while (!c->w.stop) {
        pthread_mutex_unlock(&c->w.mu);
        double v = 0;
        int why = fetch_once(c, &v);
        pthread_mutex_lock(&c->w.mu);
        if (why < 0) {
            c->value = v;
            c->value_ms = mw_now_ms();
            c->have = 1;
            c->ok++;
        } else {
            c->fail[why]++;
        }
        mw_worker_wait_locked(&c->w, c->refresh_ms);
    }
    pthread_mutex_unlock(&c->w.mu);
    return NULL;
}

/* The auth file holds the header's value: one line. */
static int read_secret(const char *path, char *out, size_t size, char *err, size_t errsize)
{
    char why[PATH_MAX + 128];
    int rc = mw_read_secret_file(path, out, size, why, sizeof(why));
    if (rc == -1) {
        snprintf(err, errsize, "carbon auth file %s", why);
        return -1;
    }
    if (rc == -2 || !out[0] || strpbrk(out, "\r\n")) {
        snprintf(err, errsize, "carbon auth file %s: must hold one line of at most %zu bytes", path,
                 size - 2);
        return -1;
    }
    return 0;
}

static int start_url(mw_carbon *c, const mw_carbon_opts *o, const char *url, char *err,
                     size_t errsize)
{
    c->kind = SRC_URL;
    c->url = mw_xstrdup(url);
    c->path = mw_xstrdup(o->json_path && *o->json_path ? o->json_path : "carbonIntensity");
    c->refresh_ms = o->refresh_ms > 0 ? o->refresh_ms : 300000;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    c->max_body = o->max_body ? o->max_body : 1 << 20;
    if (o->auth_file && *o->auth_file) {
        char secret[4096];
        if (read_secret(o->auth_file, secret, sizeof(secret), err, errsize) < 0) return -1;
        const char *name = o->auth_header && *o->auth_header ? o->auth_header : "auth-token";
        size_t n = strlen(name) + strlen(secret) + 3;
        c->header = mw_xmalloc(n);
        snprintf(c->header, n, "%s: %s", name, secret);
    }
    mw_worker_init(&c->w);
    if (mw_worker_start(&c->w, poll_thread, c) < 0) {
        mw_worker_destroy(&c->w);
        snprintf(err, errsize, "cannot start the carbon intensity thread");
        return -1;
    }
    return 0;
}

int mw_carbon_open(const mw_carbon_opts *o, mw_carbon **out, char *err, size_t errsize)
{
    *out = NULL;
    const char *spec = o->spec ? o->spec : "";
    const char *url = o->url ? o->url : "";
    if (!*spec && !*url) return 0;
    mw_carbon *c = mw_xcalloc(1, sizeof(*c));
    int rc = 0;
    if (!*spec || strncmp(spec, "http://", 7) == 0 || strncmp(spec, "https://", 8) == 0) {
        rc = start_url(c, o, *spec ? spec : url, err, errsize);
    } else {
        char *end;
        double v = strtod(spec, &end);
        if (end != spec && !*end) {
            if (!isfinite(v) || v < 0 || v > MAX_INTENSITY) {
                snprintf(err, errsize, "--carbon-intensity %s: not an intensity (0 to %g)", spec,
                         MAX_INTENSITY);
                rc = -1;
            }
            c->kind = SRC_STATIC;
            c->value = v;
            c->have = 1;
        } else {
            c->kind = SRC_SCHEDULE;
            FILE *f = fopen(spec, "rb");
            if (!f) {
                snprintf(err, errsize,
                         "--carbon-intensity %s: not a number, a URL or a readable "
                         "schedule file (%s)",
                         spec, strerror(errno));
                rc = -1;
            } else {
                char *text = mw_xmalloc(SCHEDULE_MAX_FILE);
                size_t n = fread(text, 1, SCHEDULE_MAX_FILE, f);
                fclose(f);
                char why[256];
                if (n == SCHEDULE_MAX_FILE) {
                    snprintf(err, errsize, "%s: schedule larger than 16 MiB", spec);
                    rc = -1;
                } else if (mw_carbon_schedule_parse(text, n, &c->sched, why, sizeof(why)) < 0) {
                    snprintf(err, errsize, "%s: %s", spec, why);
                    rc = -1;
                }
                free(text);
            }
        }
    }
    if (rc < 0) {
        mw_carbon_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

void mw_carbon_close(mw_carbon *c)
{
    if (!c) return;
    if (c->w.started) {
        /* At most one request in flight, bounded by its timeout. */
        mw_worker_stop(&c->w);
        mw_worker_destroy(&c->w);
    }
    mw_carbon_schedule_free(&c->sched);
    free(c->url);
    free(c->path);
    free(c->header);
    free(c);
}

double mw_carbon_now(mw_carbon *c, int64_t now_ms, double *age_s)
{
    double v = -1, age = 0;
    if (!c) return -1;
    switch (c->kind) {
    case SRC_STATIC:
        v = c->value;
        break;
    case SRC_SCHEDULE: {
        int64_t since = now_ms;
        v = mw_carbon_schedule_at(&c->sched, now_ms, &since);
        age = (double)(now_ms - since) / 1000.0;
        break;
    }
    case SRC_URL:
        pthread_mutex_lock(&c->w.mu);
        if (c->have) {
            v = c->value;
            age = (double)(now_ms - c->value_ms) / 1000.0;
        }
        pthread_mutex_unlock(&c->w.mu);
        break;
    }
    if (age_s) *age_s = age < 0 ? 0 : age;
    return v;
}

double mw_carbon_mean(mw_carbon *c, int64_t from_ms, int64_t to_ms)
{
    if (c && c->kind == SRC_SCHEDULE) return mw_carbon_schedule_mean(&c->sched, from_ms, to_ms);
    return mw_carbon_now(c, to_ms, NULL);
}

static const char *const source_names[] = {"constant", "schedule", "api"};

const char *mw_carbon_source(const mw_carbon *c)
{
    return c ? source_names[c->kind] : "none";
}

void mw_carbon_counts(mw_carbon *c, uint64_t *ok, uint64_t *failures)
{
    *ok = *failures = 0;
    if (!c || c->kind != SRC_URL) return;
    pthread_mutex_lock(&c->w.mu);
    *ok = c->ok;
    for (int i = 0; i < F_N; i++)
        *failures += c->fail[i];
    pthread_mutex_unlock(&c->w.mu);
}

void mw_carbon_emit(mw_carbon *c, mw_snapshot *snap, int64_t now_ms)
{
    if (!c) return;
    double age;
    double v = mw_carbon_now(c, now_ms, &age);
    if (v >= 0) {
        mw_emit(snap, &INTENSITY, v, "source", source_names[c->kind], MW_END);
        mw_emit(snap, &AGE, age, MW_END);
    }
    if (c->kind != SRC_URL) return;
    pthread_mutex_lock(&c->w.mu);
    uint64_t ok = c->ok, fail[F_N];
    memcpy(fail, c->fail, sizeof(fail));
    pthread_mutex_unlock(&c->w.mu);
    mw_emit(snap, &FETCHES, (double)ok, MW_END);
    for (int i = 0; i < F_N; i++)
        mw_emit(snap, &FAILURES, (double)fail[i], "reason", failure_names[i], MW_END);
}
