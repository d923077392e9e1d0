/* fuzz_carbon_json.c - the carbon intensity API answer (JSON body and the
 * configured path) on arbitrary bytes: the first line is the path, the rest
 * the body. */
#include "derive/carbon.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t plen = nl ? (size_t)(nl - data) : size;
    char *path = malloc(plen + 1);
    memcpy(path, data, plen);
    path[plen] = '\0';
    const char *body = nl ? (const char *)nl + 1 : "";
    size_t blen = nl ? size - plen - 1 : 0;
    double v;
    char err[256];
    mw_carbon_json_value(body, blen, path, &v, err, sizeof(err));
    mw_carbon_json_value(body, blen, "data[0].intensity.actual", &v, err, sizeof(err));
    free(path);
    return 0;
}
