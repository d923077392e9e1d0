/* fuzz_workload_state.c - the workload state file parser on arbitrary
 * bytes; whatever it accepts must dump and parse again. */
#include "derive/energy_workloads.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_workloads *w = mw_workloads_new(NULL, NULL);
    char err[512];
    if (mw_workloads_parse(w, (const char *)data, size, "fuzz", err, sizeof(err)) == 0) {
        char *text = mw_workloads_dump(w, "fuzz", 1);
        mw_workloads *again = mw_workloads_new(NULL, NULL);
        if (mw_workloads_parse(again, text, strlen(text), "fuzz", err, sizeof(err)) != 0) abort();
        mw_workloads_free(again);
        free(text);
    }
    mw_workloads_free(w);
    return 0;
}
