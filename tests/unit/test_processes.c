/* test_processes.c - the busiest-processes collector (src/collect/
 * processes.c) on a /proc tree written here, with the snapshots' clock set
 * by the test: CPU over the interval by command and user, resident memory,
 * process counts, kernel threads left out, a new process and a reused pid,
 * users named from etc/passwd, the --process-top bound, a malformed stat. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "collect/collector.h"
#include "core/options.h"
#include "core/snapshot.h"
#include "core/util.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

/* /proc/PID/stat of a process: flags, ticks (utime; stime 0), start, rss;
 * /proc/PID owned by uid. */
static void proc(const char *root, int pid, const char *comm, unsigned uid, unsigned flags,
                 unsigned ticks, unsigned start, unsigned rss)
{
    char rel[64], text[512];
    snprintf(rel, sizeof(rel), "proc/%d/stat", pid);
    snprintf(text, sizeof(text),
             "%d (%s) S 1 %d %d 0 -1 %u 10 0 0 0 %u 0 0 0 20 0 1 0 %u 8192000 %u "
             "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
             pid, comm, pid, pid, flags, ticks, start, rss);
    tu_write(root, rel, text);
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/proc/%d", root, pid);
    if (chown(dir, uid, uid) < 0) fail_msg("chown %s: needs root (CI runs as root)", dir);
}

typedef struct harness {
    mw_config cfg;
    mw_hostfs host;
    mw_env env;
    mw_collector_set *set;
} harness;

static void open_h(harness *h, const char *root, const char *top)
{
    mw_options_register_all();
    mw_config_defaults(&h->cfg);
    mw_strlcpy(h->cfg.root, root, sizeof(h->cfg.root));
    char err[256];
    char *argv[] = {"mlwatch",   "metrics",       "--collectors",
                    "processes", "--process-top", (char *)top};
    assert_int_equal(mw_config_from_args(&h->cfg, 6, argv, 2, NULL, NULL, 0, err, sizeof(err)), 0);
    assert_int_equal(mw_hostfs_open(&h->host, root), 0);
    h->env = (mw_env){&h->cfg, &h->host, NULL, NULL, NULL, 0};
    h->set = mw_collector_set_new(&h->env);
}

static mw_snapshot *run_at(harness *h, int64_t ms)
{
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = ms;
    mw_collector_set_run(h->set, s);
    return s;
}

static void close_h(harness *h)
{
    mw_collector_set_free(h->set);
    mw_hostfs_close(&h->host);
}

#define CPU(c, u)                                                                                  \
    tu_value(s, "mlwatch_top_processes_cpu_usage_ratio", "command", c, "user", u, MW_END)
#define RSS(c, u)                                                                                  \
    tu_value(s, "mlwatch_top_processes_resident_bytes", "command", c, "user", u, MW_END)
#define NPROC(c, u) tu_value(s, "mlwatch_top_processes", "command", c, "user", u, MW_END)

static void top_by_command_and_user(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_write(root, "etc/passwd",
             "root:x:0:0:root:/root:/bin/bash\npostgres:x:106:112::/var/lib/postgresql:/bin/sh\n"
             "alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n");
    const unsigned KTHREAD = 0x00200000;
    proc(root, 10, "postgres", 106, 0, 100, 50, 1000);
    proc(root, 11, "postgres", 106, 0, 0, 60, 500);
    proc(root, 12, "postgres", 0, 0, 5, 70, 10);
    proc(root, 13, "my (odd) name", 1000, 0, 20, 80, 300);
    proc(root, 14, "kworker/0:1", 0, KTHREAD, 0, 2, 0);
    proc(root, 16, "old", 0, 0, 10, 500, 40);
    proc(root, 17, "idle", 1000, 0, 7, 90, 9000);
    proc(root, 18, "idle2", 0, 0, 3, 95, 100);
    proc(root, 20, "x", 4242, 0, 0, 99, 1);
    harness h;
    open_h(&h, root, "6");
    mw_snapshot *s = run_at(&h, 1000000);
    assert_int_equal(tu_count(s, "mlwatch_top_processes_cpu_usage_ratio"), 0); /* no interval yet */
    mw_snapshot_free(s);

    /* 2 s later. */
    proc(root, 10, "postgres", 106, 0, 300, 50, 1000);      /* +200 */
    proc(root, 11, "postgres", 106, 0, 200, 60, 500);       /* +200 */
    proc(root, 12, "postgres", 0, 0, 25, 70, 10);           /* +20 */
    proc(root, 13, "my (odd) name", 1000, 0, 180, 80, 300); /* +160 */
    proc(root, 14, "kworker/0:1", 0, KTHREAD, 900, 2, 0);   /* left out */
    proc(root, 15, "short", 0, 0, 60, 150000, 20);          /* new: 60 */
    proc(root, 16, "reused", 0, 0, 40, 150100, 30);         /* a new process: 40 */
    proc(root, 17, "idle", 1000, 0, 7, 90, 9000);           /* 0 */
    proc(root, 18, "idle2", 0, 0, 3, 95, 100);              /* 0, cut */
    proc(root, 20, "x", 4242, 0, 80, 99, 1);                /* +80 */
    tu_write(root, "proc/21/stat", "21 (broken S 1\n");     /* malformed */
    s = run_at(&h, 1002000);
    double hz = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    assert_int_equal(tu_count(s, "mlwatch_top_processes_cpu_usage_ratio"), 6);
    assert_int_equal(tu_count(s, "mlwatch_top_processes_resident_bytes"), 6);
    assert_int_equal(tu_count(s, "mlwatch_top_processes"), 6);
    assert_value(CPU("postgres", "postgres"), 400 / hz / 2);
    assert_value(RSS("postgres", "postgres"), 1500 * page);
    assert_value(NPROC("postgres", "postgres"), 2);
    assert_value(CPU("my (odd) name", "alice"), 160 / hz / 2);
    assert_value(CPU("x", "4242"), 80 / hz / 2);
    assert_value(CPU("short", "root"), 60 / hz / 2);
    assert_value(CPU("reused", "root"), 40 / hz / 2);
    assert_value(CPU("postgres", "root"), 20 / hz / 2);
    assert_value(NPROC("postgres", "root"), 1);
    assert_false(tu_has(s, "mlwatch_top_processes_cpu_usage_ratio", "command", "kworker/0:1",
                        "user", "root", MW_END));
    /* idle (0 CPU, 9000 pages) would be 7th: cut by --process-top 6. */
    assert_false(tu_has(s, "mlwatch_top_processes", "command", "idle", "user", "alice", MW_END));
    assert_int_equal(mw_collector_set_errors(h.set, "processes"), 1);
    mw_snapshot_free(s);
    close_h(&h);

    /* --process-top 8: the idle ones in by memory, then name; 0: none. */
    open_h(&h, root, "8");
    mw_snapshot_free(run_at(&h, 2000000));
    s = run_at(&h, 2001000);
    assert_int_equal(tu_count(s, "mlwatch_top_processes"), 8);
    assert_value(CPU("idle", "alice"), 0);
    assert_value(RSS("idle", "alice"), 9000 * page);
    assert_value(CPU("idle2", "root"), 0);
    mw_snapshot_free(s);
    close_h(&h);
    open_h(&h, root, "0");
    mw_snapshot_free(run_at(&h, 3000000));
    s = run_at(&h, 3001000);
    assert_int_equal(tu_count(s, "mlwatch_top_processes"), 0);
    mw_snapshot_free(s);
    close_h(&h);
    tu_cleanup();
}

/* --process-top takes a whole number from 0 to 100. */
static void top_option(void **state)
{
    (void)state;
    mw_options_register_all();
    const char *bad[] = {"-1", "101", "2.5", "ten"};
    for (size_t i = 0; i < 4; i++) {
        mw_config cfg;
        mw_config_defaults(&cfg);
        char err[256] = "";
        char *argv[] = {"mlwatch", "metrics", "--process-top", (char *)bad[i]};
        assert_int_equal(mw_config_from_args(&cfg, 4, argv, 2, NULL, NULL, 0, err, sizeof(err)),
                         -1);
        assert_non_null(strstr(err, "whole number from 0 to 100"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(top_by_command_and_user),
        cmocka_unit_test(top_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
