/* fuzz_vmstat.c - the /proc/vmstat parser on arbitrary bytes. */
#include "collect/vmstat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_vmstat v;
    mw_parse_vmstat(s, &v);
    mw_vmstat_field(s);
    free(s);
    return 0;
}
