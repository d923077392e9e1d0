/* fuzz_access_policy.c - the --access-policy parser (serve/access_policy.c)
 * on arbitrary bytes. Besides crashes and sanitizer reports it checks its
 * promises: an error is one message starting with the file name and leaves
 * the output untouched; a success has at least one binding, each with a
 * subject and something to see (a namespace or node-level series). */
#include "serve/access_policy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_access_policy p = {(mw_binding *)(uintptr_t)1, 7};
    char err[1024] = "";
    int rc = mw_access_policy_parse("p.yaml", (const char *)data, size, &p, err, sizeof(err));
    if (rc < 0) {
        check(strncmp(err, "p.yaml:", 7) == 0);
        check(p.b == (mw_binding *)(uintptr_t)1 && p.n == 7);
        return 0;
    }
    check(rc == 0 && p.n >= 1 && p.n <= MW_POLICY_MAX_BINDINGS);
    for (size_t i = 0; i < p.n; i++) {
        const mw_binding *b = &p.b[i];
        check(b->subject && b->subject[0]);
        check(b->nnamespaces > 0 || b->node_series);
        for (size_t k = 0; k < b->nnamespaces; k++)
            check(b->namespaces[k][0] != '\0');
    }
    mw_access_policy_free(&p);
    return 0;
}
