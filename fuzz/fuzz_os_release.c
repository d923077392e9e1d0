/* fuzz_os_release.c - the os-release parser on arbitrary bytes. */
#include "collect/osinfo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_os_release os;
    mw_parse_os_release(s, &os);
    free(s);
    return 0;
}
