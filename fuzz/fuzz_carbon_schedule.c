/* fuzz_carbon_schedule.c - the carbon intensity schedule (CSV) parser on
 * arbitrary bytes, and lookups in what it accepts. */
#include "derive/carbon.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_carbon_schedule s;
    char err[256];
    if (mw_carbon_schedule_parse((const char *)data, size, &s, err, sizeof(err)) == 0) {
        int64_t since;
        mw_carbon_schedule_at(&s, 0, &since);
        mw_carbon_schedule_at(&s, 1714521600000LL, &since);
        mw_carbon_schedule_at(&s, -86400001LL, &since);
        mw_carbon_schedule_free(&s);
    }
    return 0;
}
