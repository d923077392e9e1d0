/* fuzz_units.c - durations, sizes and listen addresses on arbitrary bytes.
 * Checks that every accepted duration formats back to text that parses to
 * the same value, and that sizes agree with a plain reference parser. */
#include "core/config.h"
#include "core/units.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

/* Reference: digits, then exactly one known suffix (or none). */
static int ref_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KB", 1000ULL},
                 {"MB", 1000000ULL},
                 {"GB", 1000000000ULL},
                 {"TB", 1000000000000ULL},
                 {"KiB", 1ULL << 10},
                 {"MiB", 1ULL << 20},
                 {"GiB", 1ULL << 30},
                 {"TiB", 1ULL << 40}};
    uint64_t n = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(n, 10, &n) ||
            __builtin_add_overflow(n, (uint64_t)(*p - '0'), &n))
            return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(p, units[i].suffix) == 0)
            return __builtin_mul_overflow(n, units[i].mult, out) ? -1 : 0;
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';

    int64_t ms = -1;
    if (mw_parse_duration_ms(s, &ms) == 0) {
        check(ms >= 0);
        check(strchr(s, '.') == NULL && strchr(s, '-') == NULL && strchr(s, ' ') == NULL);
        char text[64];
        mw_format_duration(ms, text, sizeof(text));
        check(strlen(text) < 40);
        int64_t back = -1;
        check(mw_parse_duration_ms(text, &back) == 0 && back == ms);
    }

    uint64_t a = 7, b = 7;
    int ra = mw_parse_size(s, &a), rb = ref_size(s, &b);
    check(ra == rb);
    if (ra == 0) check(a == b);

    char host[64];
    uint16_t port;
    if (mw_parse_listen(s, host, sizeof(host), &port) == 0) {
        check(memchr(host, '\0', sizeof(host)) != NULL);
        check(strlen(host) < size);
    }
    free(s);
    return 0;
}
