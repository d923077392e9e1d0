/* fuzz_numa_meminfo.c - the NUMA node meminfo and numastat parsers on
 * arbitrary bytes. */
#include "collect/numa.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_node_meminfo m;
    mw_parse_node_meminfo(s, &m);
    mw_numastat n;
    mw_parse_numastat(s, &n);
    free(s);
    return 0;
}
