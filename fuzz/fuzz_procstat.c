/* fuzz_procstat.c - the /proc/stat parser on arbitrary bytes. */
#include "collect/cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void sink(void *arg, const mw_cpu_times *t)
{
    uint64_t *sum = arg;
    for (unsigned i = 0; i < t->ncols; i++)
        *sum += t->ticks[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_procstat st;
    uint64_t sum = 0;
    mw_parse_procstat(s, &st, sink, &sum);
    mw_parse_procstat(s, &st, NULL, NULL);
    free(s);
    return 0;
}
