/* fuzz_ib_rate.c - the InfiniBand port rate and state parsers on arbitrary
 * bytes. */
#include "collect/infiniband.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    double rate;
    unsigned code;
    char name[32];
    mw_ib_parse_rate(s, &rate);
    mw_ib_parse_state(s, &code, name, sizeof(name));
    mw_ib_parse_state(s, &code, name, 1);
    free(s);
    return 0;
}
