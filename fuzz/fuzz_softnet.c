/* fuzz_softnet.c - the /proc/net/softnet_stat line parser on arbitrary bytes. */
#include "collect/softnet.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    const char *p = s;
    mw_softnet n;
    while (mw_parse_softnet_line(&p, &n) != 0) {
    }
    free(s);
    return 0;
}
