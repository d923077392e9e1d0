/* fuzz_filefd.c - the /proc/sys/fs/file-nr parser on arbitrary bytes. */
#include "collect/filefd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    uint64_t a, m;
    mw_parse_file_nr(s, &a, &m);
    free(s);
    return 0;
}
