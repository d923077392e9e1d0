/* fuzz_loadavg.c - the /proc/loadavg parser on arbitrary bytes. */
#include "collect/loadavg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_loadavg l;
    mw_parse_loadavg(s, &l);
    free(s);
    return 0;
}
