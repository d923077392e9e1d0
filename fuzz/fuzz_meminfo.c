/* fuzz_meminfo.c - the /proc/meminfo parser on arbitrary bytes. */
#include "collect/memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_meminfo m;
    mw_parse_meminfo(s, &m);
    mw_meminfo_field(s);
    free(s);
    return 0;
}
