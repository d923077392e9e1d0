/* osinfo.c - the distribution (os-release under --root) and the running
 * kernel (uname), to tell apart nodes of a fleet that differ in OS image or
 * kernel when one of them misbehaves.
 *
 * os-release is read at init only (it changes with an OS upgrade, which
 * restarts the agent anyway): etc/os-release, else usr/lib/os-release, as
 * os-release(5) says. uname(2) is the kernel the agent runs on: --root
 * changes which files are read, never the kernel, so in a container with
 * the host mounted at /host it is still the host's kernel, but the nodename
 * is the container's unless it shares the host's UTS namespace. */
#include "collector.h"
#include "osinfo.h"
#include "../core/parse.h"
#include "../core/log.h"
#include "../core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

/* clang-format off */
MW_METRIC(OS_INFO, MW_INFO, "mlwatch_os_info", "", "Operating system from os-release(5); the value is 1.");
MW_METRIC(UNAME_INFO, MW_INFO, "mlwatch_uname_info", "", "The running kernel as uname(2) reports it to the agent; the value is 1.");
/* clang-format on */

/* --- parser ---------------------------------------------------------- */

static int key_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || (c >= 'a' && c <= 'z');
}

/* Unquote [v, e) into out (cut to size). Returns 0 or -1. */
static int unquote(const char *v, const char *e, char *out, size_t size)
{
    size_t n = 0;
    char q = (v < e && (*v == '"' || *v == '\'')) ? *v++ : 0;
    while (v < e) {
        char c = *v++;
        if (q && c == q) {
            while (v < e && (*v == ' ' || *v == '\t'))
                v++;
            if (v != e) return -1;
            q = 0;
            break;
        }
        if (q == '"' && c == '\\' && v < e && strchr("\"\\$`", *v)) c = *v++;
        if (n + 1 < size) out[n++] = c;
    }
    if (q) return -1;
    if (size) out[n] = '\0';
    return 0;
}

int mw_parse_os_release(const char *text, mw_os_release *out)
{
    memset(out, 0, sizeof(*out));
    int bad = 0;
    const char *p = text, *s, *e;
    while (mw_next_line(&p, &s, &e)) {
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            e--;
        if (s == e || *s == '#') continue;
        const char *k = s;
        while (s < e && key_char(*s))
            s++;
        if (s == k || s == e || *s != '=') {
            bad++;
            continue;
        }
        size_t klen = (size_t)(s - k);
        char *dst = NULL;
        size_t size = 0;
#define KEY(name, field)                                                                           \
    if (klen == sizeof(name) - 1 && memcmp(k, name, klen) == 0) {                                  \
        dst = out->field;                                                                          \
        size = sizeof(out->field);                                                                 \
    }
        KEY("NAME", name)
        KEY("ID", id)
        KEY("VERSION_ID", version_id)
        KEY("PRETTY_NAME", pretty_name)
#undef KEY
        char scratch[8] = "";
        if (unquote(s + 1, e, dst ? dst : scratch, dst ? size : sizeof(scratch)) < 0) {
            if (dst) dst[0] = '\0';
            bad++;
        }
    }
    return bad;
}

/* --- collection ----------------------------------------------------- */

typedef struct osinfo_state {
    int have_os;
    int bad;       /* malformed lines, counted at the first collect */
    char path[32]; /* the os-release that was read */
    mw_os_release os;
} osinfo_state;

static int osinfo_init(const mw_env *env, void **state)
{
    osinfo_state *st = mw_xcalloc(1, sizeof(*st));
    static const char *const paths[] = {"etc/os-release", "usr/lib/os-release"};
    mw_buf buf;
    mw_buf_init(&buf, 64 * 1024);
    for (size_t i = 0; i < 2 && !st->have_os; i++) {
        int rc = mw_hostfs_read(env->host, paths[i], &buf, 64 * 1024);
        if (rc < 0) continue;
        st->bad = mw_parse_os_release(buf.data ? buf.data : "", &st->os);
        mw_strlcpy(st->path, paths[i], sizeof(st->path));
        st->have_os = 1;
    }
    mw_buf_free(&buf);
    if (!st->have_os)
        mw_log(MW_LOG_INFO, "osinfo",
               "no etc/os-release or usr/lib/os-release: no mlwatch_os_info");
    *state = st;
    return 0;
}

static void osinfo_collect(void *state, mw_collect_ctx *ctx)
{
    osinfo_state *st = state;
    for (; st->bad > 0; st->bad--)
        mw_collect_error(ctx, st->path, 0, "malformed line");
    if (st->have_os)
        mw_emit(ctx->snap, &OS_INFO, 1, "name", st->os.name, "id", st->os.id, "version_id",
                st->os.version_id, "pretty_name", st->os.pretty_name, MW_END);
    struct utsname u;
    if (uname(&u) < 0) {
        mw_collect_error(ctx, "uname(2)", -errno, NULL);
        return;
    }
    mw_emit(ctx->snap, &UNAME_INFO, 1, "sysname", u.sysname, "release", u.release, "version",
            u.version, "machine", u.machine, "nodename", u.nodename, MW_END);
}

static void osinfo_destroy(void *state)
{
    free(state);
}

const mw_collector mw_collector_osinfo = {
    .name = "osinfo",
    .help = "Distribution from os-release and the running kernel from uname(2)",
    .init = osinfo_init,
    .collect = osinfo_collect,
    .destroy = osinfo_destroy,
};
