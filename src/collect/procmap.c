/* procmap.c - PLACEHOLDER until implemented. */
#include "procmap.h"
#include "../core/util.h"

#include <stdlib.h>

struct mw_procmap {
    int dummy;
};

mw_procmap *mw_procmap_new(const mw_hostfs *host)
{
    (void)host;
    return mw_xcalloc(1, sizeof(mw_procmap));
}
void mw_procmap_free(mw_procmap *m)
{
    free(m);
}
void mw_procmap_begin(mw_procmap *m)
{
    (void)m;
}
void mw_procmap_set(mw_procmap *m, int pid, const mw_container_ref *ref)
{
    (void)m;
    (void)pid;
    (void)ref;
}
void mw_procmap_end(mw_procmap *m)
{
    (void)m;
}
int mw_procmap_lookup(mw_procmap *m, int pid, mw_container_ref *out)
{
    (void)m;
    (void)pid;
    (void)out;
    return -1;
}
size_t mw_procmap_size(mw_procmap *m)
{
    (void)m;
    return 0;
}
