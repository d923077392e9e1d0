/* cgroup_stat.c - parsers of cgroup control files, see cgroup_stat.h. */
#include "cgroup_stat.h"
#include "../core/parse.h"

#include <limits.h>
#include <string.h>

/* The first line "KEY value" of a "key value\n" file (cpu.stat, memory.stat:
 * 50 lines on a recent kernel), found with memmem rather than line by line.
 * Returns 1 and sets *out, 0 when absent, -1 when its value is malformed. */
static int find_kv(const char *text, size_t len, const char *key, uint64_t *out)
{
    size_t klen = strlen(key);
    const char *p = text, *end = text + len;
    while ((p = memmem(p, (size_t)(end - p), key, klen)) != NULL) {
        const char *after = p + klen;
        if ((p == text || p[-1] == '\n') && (*after == ' ' || *after == '\t')) {
            mw_skip_blanks(&after);
            if (mw_parse_u64(&after, out) < 0) return -1;
            mw_skip_blanks(&after);
            return *after == '\n' || *after == '\0' ? 1 : -1;
        }
        p = after;
    }
    return 0;
}

/* The values of up to 8 keys. Bit i of the result is set when keys[i] was
 * found; -1 when a wanted key has a malformed value. */
static int scan_kv(const char *text, const char *const *keys, size_t nkeys, uint64_t *vals)
{
    size_t len = strlen(text);
    int found = 0;
    for (size_t i = 0; i < nkeys && i < 8; i++) {
        int rc = find_kv(text, len, keys[i], &vals[i]);
        if (rc < 0) return -1;
        if (rc > 0) found |= 1 << i;
    }
    return found;
}

static int usec_to_ns(uint64_t us, uint64_t *ns)
{
    if (us > UINT64_MAX / 1000) return -1;
    *ns = us * 1000;
    return 0;
}

int mw_parse_cg2_cpu_stat(const char *text, mw_cg_cpu *out)
{
    static const char *const keys[] = {"usage_usec", "nr_periods", "nr_throttled",
                                       "throttled_usec"};
    uint64_t v[4] = {0};
    int f = scan_kv(text, keys, 4, v);
    memset(out, 0, sizeof(*out));
    if (f < 0 || !(f & 1) || usec_to_ns(v[0], &out->usage_ns) < 0) return -1;
    if ((f & 14) == 14) {
        if (usec_to_ns(v[3], &out->throttled_ns) < 0) return -1;
        out->has_throttling = 1;
        out->nr_periods = v[1];
        out->nr_throttled = v[2];
    }
    return 0;
}

int mw_parse_cg1_cpu_stat(const char *text, mw_cg_cpu *out)
{
    static const char *const keys[] = {"nr_periods", "nr_throttled", "throttled_time"};
    uint64_t v[3] = {0};
    int f = scan_kv(text, keys, 3, v);
    if (f != 7) return -1;
    out->has_throttling = 1;
    out->nr_periods = v[0];
    out->nr_throttled = v[1];
    out->throttled_ns = v[2];
    return 0;
}

int mw_parse_cg_memory_stat(const char *text, int v1, mw_cg_memstat *out)
{
    static const char *const k2[] = {"inactive_file", "anon"};
    static const char *const k1[] = {"total_inactive_file", "total_rss"};
    uint64_t v[2] = {0};
    int f = scan_kv(text, v1 ? k1 : k2, 2, v);
    memset(out, 0, sizeof(*out));
    if (f < 0 || !(f & 1)) return -1;
    out->has_inactive_file = 1;
    out->inactive_file = v[0];
    out->has_rss = (f & 2) != 0;
    out->rss = v[1];
    return 0;
}

static int end_of_value(const char *p)
{
    mw_skip_blanks(&p);
    if (*p == '\n') p++;
    return *p == '\0' ? 0 : -1;
}

int mw_parse_cg2_cpu_max(const char *text, int64_t *quota_us, uint64_t *period_us)
{
    const char *p = text;
    if (strncmp(p, "max", 3) == 0) {
        *quota_us = -1;
        p += 3;
    } else {
        uint64_t q;
        if (mw_parse_u64(&p, &q) < 0 || q > INT64_MAX) return -1;
        *quota_us = (int64_t)q;
    }
    if (*p++ != ' ') return -1;
    if (mw_parse_u64(&p, period_us) < 0 || *period_us == 0) return -1;
    return end_of_value(p);
}

int mw_parse_cg_value(const char *text, int64_t *out)
{
    const char *p = text;
    if (strncmp(p, "max", 3) == 0) {
        *out = INT64_MAX;
        p += 3;
    } else if (mw_parse_i64(&p, out) < 0) {
        return -1;
    }
    return end_of_value(p);
}

int mw_parse_cg_procs(const char *text, void (*fn)(int pid, void *arg), void *arg)
{
    const char *p = text;
    int n = 0;
    while (*p) {
        uint64_t pid;
        if (mw_parse_u64(&p, &pid) < 0 || pid == 0 || pid > INT_MAX) return -1;
        if (*p == '\n')
            p++;
        else if (*p)
            return -1;
        if (fn) fn((int)pid, arg);
        if (n < INT_MAX) n++;
    }
    return n;
}
