/* psi.c - pressure stall information parser, see psi.h. */
#include "psi.h"
#include "../core/parse.h"

#include <string.h>

static int parse_line(const char **p, uint64_t *total, double *avg10)
{
    /* after "some " or "full ": avg10=X avg60=X avg300=X total=N */
    static const char *keys[] = {"avg10=", "avg60=", "avg300=", "total="};
    for (int i = 0; i < 4; i++) {
        mw_skip_blanks(p);
        size_t n = strlen(keys[i]);
        if (strncmp(*p, keys[i], n) != 0) return -1;
        *p += n;
        if (i < 3) {
            double v;
            if (mw_parse_double(p, &v) < 0) return -1;
            if (i == 0) *avg10 = v;
        } else if (mw_parse_u64(p, total) < 0) {
            return -1;
        }
    }
    mw_skip_blanks(p);
    if (**p == '\n')
        (*p)++;
    else if (**p)
        return -1;
    return 0;
}

int mw_parse_psi(const char *text, mw_psi *out)
{
    memset(out, 0, sizeof(*out));
    const char *p = text;
    while (*p) {
        if (strncmp(p, "some ", 5) == 0) {
            p += 5;
            if (out->has_some || parse_line(&p, &out->some_total_us, &out->some_avg10) < 0)
                return -1;
            out->has_some = 1;
        } else if (strncmp(p, "full ", 5) == 0) {
            p += 5;
            if (out->has_full || parse_line(&p, &out->full_total_us, &out->full_avg10) < 0)
                return -1;
            out->has_full = 1;
        } else {
            return -1;
        }
    }
    return out->has_some || out->has_full ? 0 : -1;
}
