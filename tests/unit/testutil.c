/* testutil.c - fixture handling and snapshot queries for unit tests. */
#include "testutil.h"
#include "agent/agent.h"
#include "collect/procmap.h"
#include "core/util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tu_session {
    mw_config cfg;
    mw_hostfs host;
    mw_procmap *procmap;
    mw_env env;
    mw_collector_set *set;
};

static char tmpdirs[16][256];
static int ntmp;

int tu_library_mapped(const char *name)
{
    char want[128];
    snprintf(want, sizeof(want), "/%s", name);
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) {
        perror("tu_library_mapped: /proc/self/maps");
        abort();
    }
    char line[512];
    int found = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, want)) found = 1;
    fclose(f);
    return found;
}

const char *tu_fixture(const char *name)
{
    static char path[4][1024];
    static int slot;
    const char *base = getenv("MLWATCH_FIXTURES");
    char *p = path[slot++ % 4];
    if (base)
        snprintf(p, 1024, "%s/%s", base, name);
    else {
        char cwd[512];
        if (!getcwd(cwd, sizeof(cwd))) cwd[0] = '\0';
        snprintf(p, 1024, "%s/tests/fixtures/%s", cwd, name);
    }
    return p;
}

const char *tu_fixture_copy(const char *name)
{
    assert_true(ntmp < 16);
    char *dir = tmpdirs[ntmp++];
    snprintf(dir, 256, "/tmp/mlwatch-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "cp -a '%s/.' '%s/'", tu_fixture(name), dir);
    assert_int_equal(system(cmd), 0);
    return dir;
}

void tu_write(const char *root, const char *rel, const char *content)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

void tu_remove(const char *root, const char *rel)
{
    char cmd[8400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/%s'", root, rel);
    assert_int_equal(system(cmd), 0);
}

void tu_cleanup(void)
{
    for (int i = 0; i < ntmp; i++) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdirs[i]);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdirs[i]);
    }
    ntmp = 0;
}

tu_session *tu_open(const char *root, const char *collectors)
{
    tu_session *s = mw_xcalloc(1, sizeof(*s));
    mw_options_register_all();
    mw_config_defaults(&s->cfg);
    mw_strlcpy(s->cfg.root, root, sizeof(s->cfg.root));
    if (collectors) {
        char err[256];
        char *argv[] = {"mlwatch", "metrics", "--collectors", (char *)collectors};
        assert_int_equal(mw_config_from_args(&s->cfg, 4, argv, 2, NULL, NULL, 0, err, sizeof(err)),
                         0);
    }
    assert_int_equal(mw_hostfs_open(&s->host, root), 0);
    s->procmap = mw_procmap_new(&s->host);
    s->env = (mw_env){&s->cfg, &s->host, s->procmap, NULL, NULL, 0};
    s->set = mw_collector_set_new(&s->env);
    return s;
}

mw_snapshot *tu_run(tu_session *s)
{
    mw_snapshot *snap = mw_snapshot_new();
    mw_collector_set_run(s->set, snap);
    return snap;
}

uint64_t tu_errors(tu_session *s, const char *collector)
{
    return mw_collector_set_errors(s->set, collector);
}

mw_procmap *tu_procmap(tu_session *s)
{
    return s->procmap;
}

void tu_close(tu_session *s)
{
    mw_collector_set_free(s->set);
    mw_procmap_free(s->procmap);
    mw_hostfs_close(&s->host);
    free(s);
}

static const mw_sample *find(const mw_snapshot *snap, const char *name, va_list ap)
{
    const mw_family *f = mw_snapshot_find(snap, name);
    if (!f) return NULL;
    const char *want[64];
    size_t n = 0;
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k) break;
        want[n++] = k;
        want[n++] = va_arg(ap, const char *);
    }
    for (const mw_sample *smp = f->first; smp; smp = smp->next) {
        size_t matched = 0;
        for (size_t i = 0; i < n; i += 2)
            for (uint32_t j = 0; j < smp->nlabels; j++)
                if (strcmp(smp->labels[j].name, want[i]) == 0 &&
                    strcmp(smp->labels[j].value, want[i + 1]) == 0)
                    matched += 2;
        if (matched == n) return smp;
    }
    return NULL;
}

double tu_value(const mw_snapshot *snap, const char *name, ...)
{
    va_list ap;
    va_start(ap, name);
    const mw_sample *smp = find(snap, name, ap);
    va_end(ap);
    if (!smp) fail_msg("no sample of %s with the given labels", name);
    return smp ? smp->value : 0;
}

int tu_has(const mw_snapshot *snap, const char *name, ...)
{
    va_list ap;
    va_start(ap, name);
    const mw_sample *smp = find(snap, name, ap);
    va_end(ap);
    return smp != NULL;
}

size_t tu_count(const mw_snapshot *snap, const char *name)
{
    const mw_family *f = mw_snapshot_find(snap, name);
    return f ? f->nsamples : 0;
}
