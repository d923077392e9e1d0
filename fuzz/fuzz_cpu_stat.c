/* fuzz_cpu_stat.c - the cgroup control file parsers (cgroup_stat.h: cpu.stat
 * v1 and v2, memory.stat, cpu.max, single values, cgroup.procs) and the PSI
 * parser they share with the host, on arbitrary bytes. */
#include "collect/cgroup_stat.h"
#include "collect/psi.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void on_pid(int pid, void *arg)
{
    if (pid <= 0) abort();
    (*(int *)arg)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_cg_cpu c;
    mw_cg_memstat m;
    int64_t q, v;
    uint64_t p;
    mw_psi psi;
    mw_parse_cg2_cpu_stat(s, &c);
    memset(&c, 0, sizeof(c));
    mw_parse_cg1_cpu_stat(s, &c);
    mw_parse_cg_memory_stat(s, 0, &m);
    mw_parse_cg_memory_stat(s, 1, &m);
    if (mw_parse_cg2_cpu_max(s, &q, &p) == 0 && (p == 0 || q < -1)) abort();
    mw_parse_cg_value(s, &v);
    int n = 0, rc = mw_parse_cg_procs(s, on_pid, &n);
    if (rc >= 0 && rc != n) abort();
    mw_parse_psi(s, &psi);
    free(s);
    return 0;
}
