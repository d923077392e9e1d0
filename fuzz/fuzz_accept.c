/* fuzz_accept.c - Accept and Accept-Encoding negotiation on arbitrary bytes.
 * The input is split at the first NUL: Accept before it, Accept-Encoding
 * after. Checks the answers are in range and never invented: OpenMetrics only
 * when the header names it, gzip only when the header names gzip. */
#include "serve/exposition.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void check(int ok)
{
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 2);
    memcpy(s, data, size);
    s[size] = '\0';
    s[size + 1] = '\0';
    const char *accept = s;
    const char *encoding = s + strlen(s) + 1;

    mw_format f = mw_negotiate_format(accept);
    check(f == MW_FMT_TEXT || f == MW_FMT_OPENMETRICS);
    if (f == MW_FMT_OPENMETRICS) check(strcasestr(accept, "application/openmetrics-text") != NULL);
    check(mw_negotiate_format(accept) == f); /* no hidden state */

    int gz = mw_accepts_gzip(encoding);
    check(gz == 0 || gz == 1);
    if (gz) check(strcasestr(encoding, "gzip") != NULL);
    check(mw_accepts_gzip(encoding) == gz);
    free(s);
    return 0;
}
