/* fuzz_psi.c - the pressure stall information parser on arbitrary bytes. */
#include "collect/psi.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_psi p;
    mw_parse_psi(s, &p);
    free(s);
    return 0;
}
