/* fuzz_hwmon.c - hwmon sensor file names and values on arbitrary bytes. */
#include "collect/hwmon.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_hwmon_kind kind;
    unsigned index;
    int average;
    int64_t v;
    mw_hwmon_parse_file(s, &kind, &index, &average);
    mw_hwmon_parse_value(s, &v);
    free(s);
    return 0;
}
