/* parse.c - strict number and line parsers, see parse.h. */
#include "parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int mw_parse_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9') return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    *p = s;
    return 0;
}

int mw_parse_i64(const char **p, int64_t *out)
{
    const char *s = *p;
    int neg = 0;
    if (*s == '-' || *s == '+') neg = *s++ == '-';
    uint64_t u;
    if (mw_parse_u64(&s, &u) < 0) return -1;
    if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX) return -1;
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    *p = s;
    return 0;
}

int mw_parse_double(const char **p, double *out)
{
    const char *s = *p;
    if (!*s || *s == ' ' || *s == '\t' || *s == '\n') return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE) return -1;
    *out = v;
    *p = end;
    return 0;
}

void mw_skip_blanks(const char **p)
{
    while (**p == ' ' || **p == '\t')
        (*p)++;
}

int mw_next_line(const char **p, const char **start, const char **end)
{
    if (!**p) return 0;
    const char *nl = strchr(*p, '\n');
    const char *e = nl ? nl : *p + strlen(*p);
    const char *s = *p;
    *p = nl ? nl + 1 : e;
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    *start = s;
    *end = e;
    return 1;
}

int mw_next_whole_line(const char **p, const char **line, const char **nl, unsigned *cut)
{
    if (!**p) return 0;
    const char *e = strchr(*p, '\n');
    if (!e) {
        (*cut)++;
        return 0;
    }
    *line = *p;
    *nl = e;
    *p = e + 1;
    return 1;
}

size_t mw_next_token(const char **q, const char *e, const char **start)
{
    while (*q < e && (**q == ' ' || **q == '\t'))
        (*q)++;
    *start = *q;
    while (*q < e && **q != ' ' && **q != '\t')
        (*q)++;
    return (size_t)(*q - *start);
}

void mw_skip_line(const char **p)
{
    const char *nl = strchr(*p, '\n');
    *p = nl ? nl + 1 : *p + strlen(*p);
}

int mw_kv_u64(const char *text, const char *key, uint64_t *out)
{
    size_t klen = strlen(key);
    const char *line = text;
    while (*line) {
        if (strncmp(line, key, klen) == 0 && (line[klen] == ' ' || line[klen] == '\t')) {
            const char *p = line + klen;
            mw_skip_blanks(&p);
            if (mw_parse_u64(&p, out) < 0) return -2;
            mw_skip_blanks(&p);
            return (*p == '\n' || *p == '\0') ? 0 : -2;
        }
        mw_skip_line(&line);
    }
    return -1;
}

int mw_parse_cpulist(const char *s, uint64_t *bits, size_t nbits)
{
    memset(bits, 0, ((nbits + 63) / 64) * sizeof(uint64_t));
    const char *p = s;
    int count = 0;
    while (*p == ' ')
        p++;
    if (*p == '\n' || *p == '\0') return 0; /* empty list: a memory-only node */
    for (;;) {
        uint64_t a, b;
        if (mw_parse_u64(&p, &a) < 0) return -1;
        b = a;
        if (*p == '-') {
            p++;
            if (mw_parse_u64(&p, &b) < 0 || b < a) return -1;
        }
        if (b >= nbits) return -1;
        for (uint64_t c = a; c <= b; c++) {
            if (!(bits[c / 64] & (1ULL << (c % 64)))) count++;
            bits[c / 64] |= 1ULL << (c % 64);
        }
        if (*p == ',') {
            p++;
            continue;
        }
        while (*p == ' ' || *p == '\n')
            p++;
        return *p ? -1 : count;
    }
}
