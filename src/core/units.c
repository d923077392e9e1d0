/* units.c - durations and sizes, see units.h. */
#include "units.h"
#include "parse.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *suffix;
    int64_t ms;
} duration_units[] = {
    {"y", 365LL * 24 * 3600 * 1000},
    {"w", 7LL * 24 * 3600 * 1000},
    {"d", 24LL * 3600 * 1000},
    {"h", 3600LL * 1000},
    {"m", 60LL * 1000},
    {"s", 1000},
    {"ms", 1},
};

int mw_parse_duration_ms(const char *s, int64_t *out_ms)
{
    const char *p = s;
    int64_t total = 0;
    int last_unit = -1;
    if (!*p) return -1;
    while (*p) {
        uint64_t n;
        if (mw_parse_u64(&p, &n) < 0) return -1;
        int unit = -1;
        /* "ms" must win over "m" */
        if (p[0] == 'm' && p[1] == 's')
            unit = 6;
        else
            for (int i = 0; i < 6; i++)
                if (*p == duration_units[i].suffix[0]) unit = i;
        if (unit < 0 || unit <= last_unit) return -1;
        p += strlen(duration_units[unit].suffix);
        if (n > (uint64_t)(INT64_MAX / duration_units[unit].ms)) return -1;
        int64_t add = (int64_t)n * duration_units[unit].ms;
        if (total > INT64_MAX - add) return -1;
        total += add;
        last_unit = unit;
    }
    *out_ms = total;
    return 0;
}

void mw_format_duration(int64_t ms, char *out, size_t size)
{
    size_t off = 0;
    if (ms == 0) {
        snprintf(out, size, "0s");
        return;
    }
    out[0] = '\0';
    for (int i = 0; i < 7 && off < size; i++) {
        int64_t n = ms / duration_units[i].ms;
        if (!n) continue;
        ms -= n * duration_units[i].ms;
        int w = snprintf(out + off, size - off, "%lld%s", (long long)n, duration_units[i].suffix);
        if (w < 0) return;
        off += (size_t)w;
    }
}

static const struct {
    const char *suffix;
    uint64_t mult;
} size_units[] = {
    {"KiB", 1ULL << 10},
    {"MiB", 1ULL << 20},
    {"GiB", 1ULL << 30},
    {"TiB", 1ULL << 40},
    {"KB", 1000ULL},
    {"MB", 1000000ULL},
    {"GB", 1000000000ULL},
    {"TB", 1000000000000ULL},
    {"B", 1},
    {"", 1},
};

int mw_parse_size(const char *s, uint64_t *out)
{
    const char *p = s;
    uint64_t n;
    if (mw_parse_u64(&p, &n) < 0) return -1;
    for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
        if (strcmp(p, size_units[i].suffix) == 0) {
            if (n > UINT64_MAX / size_units[i].mult) return -1;
            *out = n * size_units[i].mult;
            return 0;
        }
    }
    return -1;
}

int mw_format_nonfinite(double v, char *out, size_t size)
{
    if (isnan(v))
        snprintf(out, size, "NaN");
    else if (isinf(v))
        snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
    else
        return 0;
    return 1;
}
