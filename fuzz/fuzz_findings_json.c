/* fuzz_findings_json.c - the parser of an agent's /api/v1/findings answer
 * (what `mlwatch doctor` reads) on arbitrary bytes, then the report of what
 * it accepted. */
#include "derive/findings.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dr_list l;
    dr_list_init(&l);
    char err[256];
    if (dr_list_from_json((const char *)data, size, &l, err, sizeof(err)) == 0) {
        dr_list_rank(&l);
        mw_buf b;
        mw_buf_init(&b, 0);
        dr_list_to_text(&l, "fuzz", 1, &b);
        mw_buf_free(&b);
        char *json = dr_list_to_json(&l, 0, "fuzz", 1);
        free(json);
    }
    dr_list_free(&l);
    return 0;
}
