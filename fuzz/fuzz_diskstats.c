/* fuzz_diskstats.c - the /proc/diskstats line parser and the whole-disk
 * filter on arbitrary bytes. */
#include "collect/diskstats.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    const char *p = s;
    mw_diskstat d;
    int rc;
    while ((rc = mw_parse_diskstats_line(&p, &d)) != 0)
        if (rc > 0) mw_disk_is_whole(d.name);
    free(s);
    return 0;
}
