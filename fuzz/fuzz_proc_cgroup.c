/* fuzz_proc_cgroup.c - the /proc/<pid>/cgroup parser on arbitrary bytes. */
#include "collect/cgroup_path.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char path[512], tiny[4];
    if (mw_parse_proc_cgroup(s, path, sizeof(path)) == 0 && path[0] != '/') abort();
    mw_parse_proc_cgroup(s, tiny, sizeof(tiny));
    free(s);
    return 0;
}
