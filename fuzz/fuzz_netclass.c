/* fuzz_netclass.c - the /sys/class/net speed and flags parsers on arbitrary bytes. */
#include "collect/netclass.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    double b;
    uint64_t v;
    mw_netclass_parse_speed(s, &b);
    mw_netclass_parse_hex(s, &v);
    free(s);
    return 0;
}
