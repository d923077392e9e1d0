/* fuzz_netstat.c - the /proc/net/snmp and netstat parser on arbitrary bytes. */
#include "collect/netstat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void cb(void *arg, const char *proto, const char *field, int64_t value)
{
    (void)arg;
    (void)value;
    if (strlen(proto) + strlen(field) > 200) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_parse_netstat(s, cb, NULL);
    free(s);
    return 0;
}
