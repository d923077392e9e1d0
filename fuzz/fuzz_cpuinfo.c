/* fuzz_cpuinfo.c - the /proc/cpuinfo parser on arbitrary bytes. */
#include "collect/cpuinfo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    static mw_cpuinfo_cpu cpus[64];
    size_t n, pk, cores;
    mw_parse_cpuinfo(s, cpus, 64, &n);
    mw_cpuinfo_topology(cpus, n, &pk, &cores);
    if (pk > n + 1 || cores > n) abort();
    free(s);
    return 0;
}
