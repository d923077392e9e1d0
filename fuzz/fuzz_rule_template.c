/* fuzz_rule_template.c - the template interpreter of alert labels and
 * annotations (rules/template.c) on arbitrary bytes: parsed, then expanded
 * with labels, a value and a query() that answers two samples. Besides
 * crashes and sanitizer reports it checks its promises: an error is one
 * "line N: ..." message; an expansion is bounded (MW_TPL_MAX_OUTPUT). */
#include "rules/template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

static int query(void *ctx, const char *expr, mw_arena *a, mw_tpl_sample **out, size_t *n,
                 char *err, size_t errsize)
{
    (void)ctx;
    (void)err;
    (void)errsize;
    mw_tpl_kv *l = mw_arena_alloc(a, 2 * sizeof(*l));
    l[0] = (mw_tpl_kv){"instance", "a"};
    l[1] = (mw_tpl_kv){"job", expr};
    *out = mw_arena_alloc(a, 2 * sizeof(mw_tpl_sample));
    (*out)[0] = (mw_tpl_sample){l, 2, 1.5};
    (*out)[1] = (mw_tpl_sample){l, 1, -2};
    *n = strlen(expr) % 3;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char err[512] = "";
    mw_tpl *t = mw_tpl_parse(text, err, sizeof(err));
    if (!t) {
        check(strncmp(err, "line ", 5) == 0);
        free(text);
        return 0;
    }
    static const mw_tpl_kv labels[] = {{"gpu", "0"}, {"node", "n1"}};
    mw_tpl_data d = {labels, 2, labels, 1, 1860, "http://x", query, NULL};
    char *out = NULL;
    if (mw_tpl_expand(t, &d, &out, err, sizeof(err)) == 0) {
        check(out != NULL && strlen(out) <= MW_TPL_MAX_OUTPUT);
        free(out);
    } else {
        check(out == NULL && err[0]);
    }
    mw_tpl_free(t);
    free(text);
    return 0;
}
