/* processes.c - the busiest processes, for machines whose workloads are not
 * in containers: every interval, the CPU time each process used since the
 * last one (/proc/PID/stat, user + system), summed by command name and
 * user, and the top --process-top groups by CPU (then resident memory, then
 * name) as three gauges each. Labels are the command and the user only (no
 * PID, by the naming conventions), so the series are at most
 * --process-top per family whatever the machine runs. The user is the
 * owner of /proc/PID (the process's effective user), named from etc/passwd
 * under --root, else its number. Kernel threads (PF_KTHREAD) are left out:
 * they have no memory and are not anyone's work. A process seen for the
 * first time counts all its CPU time (it started within the interval,
 * except on the first cycle, which emits nothing). */
#include "collector.h"
#include "self.h"
#include "../core/options.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* clang-format off */
MW_METRIC(TOP_CPU, MW_GAUGE, "mlwatch_top_processes_cpu_usage_ratio", "ratio", "CPU seconds per second over the last interval of the busiest processes, by command and user (1: one CPU; the top --process-top groups).");
MW_METRIC(TOP_RSS, MW_GAUGE, "mlwatch_top_processes_resident_bytes", "bytes", "Resident memory of the busiest processes, by command and user.");
MW_METRIC(TOP_N, MW_GAUGE, "mlwatch_top_processes", "", "Processes of each of the busiest command and user groups.");
/* clang-format on */

#define MAX_PROCS 65536 /* tracked per cycle; past it, processes are not seen */
#define PF_KTHREAD 0x00200000u

typedef struct mw_processes_settings {
    double top;
} mw_processes_settings;

static int check_top(const char *v, char *why, size_t n)
{
    return mw_check_range(v, 0, 100, 1, "a whole number from 0 to 100", why, n);
}

/* clang-format off */
static const mw_option processes_rows[] = {
    MW_OPT(mw_processes_settings, "process-top", MW_OPT_NUMBER, top, "10", check_top, "Busiest processes to report, by command and user (0: none; at most 100)"),
};
/* clang-format on */
const mw_option_group mw_processes_options = MW_OPTION_GROUP(
    "processes collector", "src/collect/processes.c", mw_processes_settings, processes_rows, NULL);

typedef struct proc {
    int pid;
    unsigned uid;
    uint64_t start, ticks, rss;
    char comm[32];
} proc;

typedef struct group {
    const char *comm;
    unsigned uid;
    double cpu;
    uint64_t rss;
    unsigned n;
} group;

typedef struct user {
    unsigned uid;
    char name[33];
} user;

typedef struct proc_state {
    const mw_env *env;
    size_t top;
    proc *prev, *cur;
    size_t nprev, ncur;
    int64_t prev_ms; /* 0: no cycle yet */
    double hz, page;
    user *users;
    size_t nusers;
} proc_state;

static void load_users(proc_state *st)
{
    mw_buf b;
    mw_buf_init(&b, 1u << 20);
    if (mw_hostfs_read(st->env->host, "etc/passwd", &b, 1u << 20) == 0) {
        const char *p = b.data, *line, *end;
        while (mw_next_line(&p, &line, &end)) {
            size_t len = (size_t)(end - line);
            const char *c1 = memchr(line, ':', len);
            const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
            if (!c2 || (size_t)(c1 - line) >= sizeof(st->users[0].name) || st->nusers >= 4096)
                continue;
            unsigned long uid = strtoul(c2 + 1, NULL, 10);
            st->users = mw_xrealloc(st->users, (st->nusers + 1) * sizeof(*st->users));
            user *u = &st->users[st->nusers++];
            u->uid = (unsigned)uid;
            memcpy(u->name, line, (size_t)(c1 - line));
            u->name[c1 - line] = '\0';
        }
    }
    mw_buf_free(&b);
}

static void user_name(const proc_state *st, unsigned uid, char *out, size_t size)
{
    for (size_t i = 0; i < st->nusers; i++)
        if (st->users[i].uid == uid) {
            mw_strlcpy(out, st->users[i].name, size);
            return;
        }
    snprintf(out, size, "%u", uid);
}

static int processes_init(const mw_env *env, void **state)
{
    const mw_processes_settings *s = mw_config_group(env->cfg, &mw_processes_options);
    proc_state *st = mw_xcalloc(1, sizeof(*st));
    st->env = env;
    st->top = (size_t)s->top;
    st->hz = (double)sysconf(_SC_CLK_TCK);
    st->page = (double)sysconf(_SC_PAGESIZE);
    load_users(st);
    *state = st;
    return 0;
}

static int by_pid(const void *a, const void *b)
{
    const proc *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Busiest first: CPU, then memory, then name and user (a stable order). */
static int by_use(const void *a, const void *b)
{
    const group *x = a, *y = b;
    if (x->cpu != y->cpu) return x->cpu < y->cpu ? 1 : -1;
    if (x->rss != y->rss) return x->rss < y->rss ? 1 : -1;
    int c = strcmp(x->comm, y->comm);
    if (c) return c;
    return (x->uid > y->uid) - (x->uid < y->uid);
}

static int by_key(const void *a, const void *b)
{
    const group *x = a, *y = b;
    int c = strcmp(x->comm, y->comm);
    if (c) return c;
    return (x->uid > y->uid) - (x->uid < y->uid);
}

/* Read every /proc/PID/stat into st->cur, sorted by pid. */
static void scan(proc_state *st, mw_collect_ctx *ctx)
{
    st->ncur = 0;
    int fd = mw_hostfs_opendirfd(st->env->host, "proc");
    if (fd < 0) {
        mw_collect_error(ctx, "proc", fd, "cannot list processes");
        return;
    }
    DIR *d = mw_fdopendir_dup(fd);
    if (!d) {
        close(fd);
        return;
    }
    if (!st->cur) st->cur = mw_xcalloc(MAX_PROCS, sizeof(proc));
    mw_buf b;
    mw_buf_init(&b, 4096);
    struct dirent *de;
    while (st->ncur < MAX_PROCS && (de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
        char path[300];
        snprintf(path, sizeof(path), "%s/stat", de->d_name);
        struct stat sb;
        if (fstatat(fd, de->d_name, &sb, 0) < 0 || mw_readat(fd, path, &b, 4096) < 0)
            continue; /* gone in between, or no stat in a fixture: not an error */
        mw_proc_stat ps;
        if (mw_parse_proc_stat(b.data, &ps) < 0) {
            char where[320];
            snprintf(where, sizeof(where), "proc/%s", path);
            mw_collect_error(ctx, where, 0, "malformed content");
            continue;
        }
        if (ps.flags & PF_KTHREAD) continue;
        proc *p = &st->cur[st->ncur++];
        p->pid = atoi(de->d_name);
        p->uid = (unsigned)sb.st_uid;
        p->start = ps.starttime_ticks;
        p->ticks = ps.utime_ticks + ps.stime_ticks;
        p->rss = ps.rss_pages;
        mw_strlcpy(p->comm, ps.comm, sizeof(p->comm));
    }
    mw_buf_free(&b);
    closedir(d);
    close(fd);
    if (st->ncur) qsort(st->cur, st->ncur, sizeof(proc), by_pid);
}

static void processes_collect(void *state, mw_collect_ctx *ctx)
{
    proc_state *st = state;
    if (!st->top) return;
    scan(st, ctx);
    int64_t now = ctx->snap->timestamp_ms;
    double dt = st->prev_ms && now > st->prev_ms ? (double)(now - st->prev_ms) / 1000.0 : 0;
    group *g = st->ncur ? mw_xcalloc(st->ncur, sizeof(group)) : NULL;
    size_t ng = 0;
    for (size_t i = 0, j = 0; i < st->ncur && dt > 0; i++) {
        const proc *p = &st->cur[i];
        while (j < st->nprev && st->prev[j].pid < p->pid)
            j++;
        uint64_t was = 0; /* new (or a reused pid): all its time */
        if (j < st->nprev && st->prev[j].pid == p->pid && st->prev[j].start == p->start &&
            st->prev[j].ticks <= p->ticks)
            was = st->prev[j].ticks;
        g[ng++] = (group){p->comm, p->uid, (double)(p->ticks - was) / st->hz / dt,
                          (uint64_t)((double)p->rss * st->page), 1};
    }
    /* One group per command and user (qsort's base must not be NULL, even for
     * no elements: UBSan stops the agent on the first, empty, round). */
    if (ng) qsort(g, ng, sizeof(group), by_key);
    size_t m = 0;
    for (size_t i = 0; i < ng; i++) {
        if (m && by_key(&g[m - 1], &g[i]) == 0) {
            g[m - 1].cpu += g[i].cpu;
            g[m - 1].rss += g[i].rss;
            g[m - 1].n++;
        } else {
            g[m++] = g[i];
        }
    }
    if (m) qsort(g, m, sizeof(group), by_use);
    for (size_t i = 0; i < m && i < st->top; i++) {
        char who[40];
        user_name(st, g[i].uid, who, sizeof(who));
        mw_emit(ctx->snap, &TOP_CPU, g[i].cpu, "command", g[i].comm, "user", who, MW_END);
        mw_emit(ctx->snap, &TOP_RSS, (double)g[i].rss, "command", g[i].comm, "user", who, MW_END);
        mw_emit(ctx->snap, &TOP_N, g[i].n, "command", g[i].comm, "user", who, MW_END);
    }
    free(g);
    /* This cycle's table is the next one's previous. */
    proc *t = st->prev;
    st->prev = st->cur;
    st->nprev = st->ncur;
    st->cur = t;
    st->prev_ms = now;
}

static void processes_destroy(void *state)
{
    proc_state *st = state;
    if (!st) return;
    free(st->prev);
    free(st->cur);
    free(st->users);
    free(st);
}

const mw_collector mw_collector_processes = {
    .name = "processes",
    .help = "The busiest processes by command and user (/proc/PID/stat), top --process-top",
    .options = &mw_processes_options,
    .init = processes_init,
    .collect = processes_collect,
    .destroy = processes_destroy,
};
