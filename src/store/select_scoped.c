/* select_scoped.c - a selection narrowed by one more matcher (store.h):
 * the namespace scope of a reader, added to every selector as
 * prom-label-proxy adds it in front of Prometheus. */
#include "store_internal.h"
#include "../core/util.h"

#include <stdlib.h>
#include <string.h>

int mw_store_select_scoped(mw_store *s, const mw_matcher *scope, const mw_matcher *ms, size_t nm,
                           int64_t mint, int64_t maxt, size_t max_samples, mw_select_result *out,
                           char *err, size_t errsize)
{
    return mw_store_select_hinted(s, scope, ms, nm, mint, maxt, max_samples, NULL, out, err,
                                  errsize);
}

int mw_store_select_hinted(mw_store *s, const mw_matcher *scope, const mw_matcher *ms, size_t nm,
                           int64_t mint, int64_t maxt, size_t max_samples,
                           const mw_select_hint *hint, mw_select_result *out, char *err,
                           size_t errsize)
{
    if (!scope)
        return mw_store_select_ex(s, ms, nm, mint, maxt, max_samples, hint, out, err, errsize);
    /* Shallow copies: the matchers stay owned by their callers. */
    mw_matcher *all = mw_xmalloc((nm + 1) * sizeof(*all));
    if (nm) memcpy(all, ms, nm * sizeof(*all));
    all[nm] = *scope;
    int rc = mw_store_select_ex(s, all, nm + 1, mint, maxt, max_samples, hint, out, err, errsize);
    free(all);
    return rc;
}
