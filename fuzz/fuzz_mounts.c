/* fuzz_mounts.c - the mount table parser (in place, with octal unescaping)
 * and the filesystem filters on arbitrary bytes. */
#include "collect/mounts.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char *p = s;
    mw_mount m;
    int rc;
    while ((rc = mw_parse_mount_line(&p, &m)) != 0) {
        if (rc < 0) continue;
        mw_fs_type_skipped(m.fstype);
        mw_fs_mountpoint_skipped(m.mountpoint);
        mw_mount_has_option(m.options, "ro");
    }
    free(s);
    return 0;
}
