/* fuzz_kubeconfig.c - the kubeconfig parser (src/kube/kube_parse.c) on
 * arbitrary bytes: never crashes, every field it fills is terminated, an
 * accepted file names a server, a refused one leaves nothing behind. */
#include "kube/kube.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static mw_kube_creds c;
    char err[512];
    int rc = mw_kubeconfig_parse((const char *)data, size, "/etc/k", &c, err, sizeof(err));
    check(rc == 0 || rc == -1);
    if (rc == 0) {
        check(c.server[0] != '\0');
        check(memchr(c.server, 0, sizeof(c.server)) && memchr(c.ca_file, 0, sizeof(c.ca_file)) &&
              memchr(c.ca_data, 0, sizeof(c.ca_data)) && memchr(c.token, 0, sizeof(c.token)) &&
              memchr(c.client_key_data, 0, sizeof(c.client_key_data)));
    } else {
        check(c.server[0] == '\0' && c.token[0] == '\0');
        check(memchr(err, 0, sizeof(err)) != NULL);
    }
    return 0;
}
