/* filefd.c - system-wide open file handles against fs.file-max, from
 * /proc/sys/fs/file-nr (data loaders with many workers can exhaust it). */
#include "collector.h"
#include "filefd.h"
#include "../core/log.h"
#include "../core/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* clang-format off */
MW_METRIC(ALLOCATED, MW_GAUGE, "mlwatch_filefd_allocated", "", "File handles allocated system-wide.");
MW_METRIC(MAXIMUM, MW_GAUGE, "mlwatch_filefd_maximum", "", "Limit on file handles system-wide (fs.file-max).");
/* clang-format on */

int mw_parse_file_nr(const char *text, uint64_t *allocated, uint64_t *maximum)
{
    const char *p = text;
    uint64_t v[3];
    for (int i = 0; i < 3; i++) {
        mw_skip_blanks(&p);
        if (mw_parse_u64(&p, &v[i]) < 0) return -1;
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\0') return -1;
    }
    mw_skip_blanks(&p);
    if (*p == '\n') p++;
    if (*p) return -1;
    *allocated = v[0];
    *maximum = v[2];
    return 0;
}

static int filefd_init(const mw_env *env, void **state)
{
    (void)state;
    if (faccessat(env->host->rootfd, "proc/sys/fs/file-nr", R_OK, 0) < 0) {
        mw_log(MW_LOG_INFO, "filefd", "no proc/sys/fs/file-nr (%s)", strerror(errno));
        return MW_COLLECTOR_ABSENT;
    }
    return 0;
}

static void filefd_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/sys/fs/file-nr";
    char line[128];
    int rc = mw_read_lineat(ctx->env->host->rootfd, path, line, sizeof(line));
    uint64_t alloc, max;
    if (rc < 0)
        mw_collect_error(ctx, path, rc, NULL);
    else if (mw_parse_file_nr(line, &alloc, &max) < 0)
        mw_collect_error(ctx, path, 0, "malformed content");
    else {
        mw_emit(ctx->snap, &ALLOCATED, (double)alloc, MW_END);
        mw_emit(ctx->snap, &MAXIMUM, (double)max, MW_END);
    }
}

const mw_collector mw_collector_filefd = {
    .name = "filefd",
    .help = "File handles in use and their limit from /proc/sys/fs/file-nr",
    .init = filefd_init,
    .collect = filefd_collect,
};
