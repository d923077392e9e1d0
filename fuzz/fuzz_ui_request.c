/* fuzz_ui_request.c - what the web UI parses from a request, on arbitrary
 * bytes (src/serve/ui.c, ui_proxy.c). The input is split at NULs into an
 * If-None-Match value, a path and a --query-url. Checks: ETag matching is
 * deterministic and only matches what the header names (or '*'); serving
 * any path from the embedded table answers 200, 304 or 404 with the CSP;
 * only the documented API paths are forwarded, never with '.', '?' or '%';
 * an accepted query URL is an http(s) base without '?', '#' or a trailing
 * slash, and its shown form has no '@' before the path. */
#include "serve/ui.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 3);
    memcpy(s, data, size);
    s[size] = s[size + 1] = s[size + 2] = '\0';
    const char *inm = s;
    const char *path = inm + strlen(inm) + 1;
    const char *url = path + strlen(path) + 1;

    int m = mw_ui_etag_matches(inm, "\"0123456789abcdef\"");
    check(m == mw_ui_etag_matches(inm, "\"0123456789abcdef\""));
    if (m) check(strstr(inm, "0123456789abcdef") || strchr(inm, '*'));

    mw_http_response r = {0};
    mw_ui_serve(mw_ui_assets, mw_ui_nassets, mw_ui_missing, path, "gzip", inm, &r);
    if (mw_ui_missing)
        check(r.status == 503);
    else
        check(r.status == 200 || r.status == 304 || r.status == 404);
    if (r.status == 200 || r.status == 304) {
        check(r.nheaders >= 2 && strcmp(r.header_values[0], MW_UI_CSP) == 0);
        check(r.body_static);
    } else {
        free(r.body);
    }

    if (mw_ui_proxy_allowed(path)) check(!strpbrk(path, ".?%#\\") && !strstr(path, "//"));

    mw_ui_proxy p;
    char why[256];
    if (mw_ui_proxy_init(&p, url, 0, why, sizeof(why)) == 0) {
        check(strncmp(p.base, "http://", 7) == 0 || strncmp(p.base, "https://", 8) == 0);
        check(!strpbrk(p.base, "?# \t\r\n"));
        size_t n = strlen(p.base);
        check(n > 0 && p.base[n - 1] != '/');
        const char *host = strstr(p.shown, "://") + 3, *slash = strchr(host, '/');
        const char *at = strchr(host, '@');
        check(!at || (slash && at > slash));
    } else {
        check(why[0] != '\0');
    }
    free(s);
    return 0;
}
