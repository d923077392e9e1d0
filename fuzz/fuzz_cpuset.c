/* fuzz_cpuset.c - the parser of cgroup cpuset lists (cpuset.cpus.effective,
 * cpuset.mems.effective) that the doctor reads, on arbitrary bytes. */
#include "derive/findings.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    uint64_t bits[16];
    int n = dr_parse_cpuset(s, bits, 1024);
    if (n > 1024) abort();
    free(s);
    return 0;
}
