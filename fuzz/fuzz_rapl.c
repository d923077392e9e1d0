/* fuzz_rapl.c - powercap entry names, and the wrap arithmetic on arbitrary
 * counter values (it must never overflow or trap). */
#include "collect/rapl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    int pkg, sub;
    mw_rapl_parse_entry(s, &pkg, &sub);
    free(s);
    if (size >= 24) {
        uint64_t v[3];
        memcpy(v, data, sizeof(v));
        uint64_t d = mw_rapl_delta(v[0], v[1], v[2]);
        /* Never more than one full range (or the new value after a reset). */
        if (d > v[1] && d > v[2]) abort();
    }
    return 0;
}
