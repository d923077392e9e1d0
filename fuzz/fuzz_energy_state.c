/* fuzz_energy_state.c - the energy state file parser on arbitrary bytes;
 * whatever it accepts must dump and parse again. */
#include "derive/energy_state.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_energy_params p = {.idle_watts_per_cpu = 1, .max_watts_per_cpu = 2, .max_containers = 64};
    mw_energy *e = mw_energy_new(&p);
    char err[512];
    if (mw_energy_state_parse(e, (const char *)data, size, "fuzz", err, sizeof(err)) == 0) {
        char *text = mw_energy_state_dump(e, "fuzz", 1);
        mw_energy *again = mw_energy_new(&p);
        if (mw_energy_state_parse(again, text, strlen(text), "fuzz", err, sizeof(err)) != 0)
            abort();
        mw_energy_free(again);
        free(text);
    }
    mw_energy_free(e);
    return 0;
}
