/* fuzz_self_stat.c - the /proc/self/stat parser on arbitrary bytes. */
#include "collect/self.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_proc_stat ps;
    mw_parse_proc_stat(s, &ps);
    free(s);
    return 0;
}
