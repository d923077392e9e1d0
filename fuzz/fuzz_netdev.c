/* fuzz_netdev.c - the /proc/net/dev line parser on arbitrary bytes. */
#include "collect/netdev.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    const char *p = s;
    mw_netdev d;
    while (mw_parse_netdev_line(&p, &d) != 0) {
    }
    free(s);
    return 0;
}
