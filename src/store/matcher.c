/* matcher.c - label matchers; regular expressions through core/regex.h. */
#include "matcher.h"
#include "../core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mw_matcher_init(mw_matcher *m, mw_match_op op, const char *name, const char *value, char *err,
                    size_t errsize)
{
    memset(m, 0, sizeof(*m));
    m->op = op;
    if (op == MW_MATCH_RE || op == MW_MATCH_NRE) {
        char why[256];
        m->re = mw_regex_compile(value, why, sizeof(why));
        if (!m->re) {
            snprintf(err, errsize, "error parsing regexp: %s", why);
            return -1;
        }
    }
    m->name = mw_xstrdup(name);
    m->value = mw_xstrdup(value);
    m->matches_empty = mw_matcher_matches(m, "");
    return 0;
}

int mw_matcher_matches(const mw_matcher *m, const char *value)
{
    switch (m->op) {
    case MW_MATCH_EQ:
        return strcmp(value, m->value) == 0;
    case MW_MATCH_NEQ:
        return strcmp(value, m->value) != 0;
    case MW_MATCH_RE:
        return mw_regex_match(m->re, value);
    case MW_MATCH_NRE:
        return !mw_regex_match(m->re, value);
    }
    return 0;
}

void mw_matcher_free(mw_matcher *m)
{
    mw_regex_free(m->re);
    free(m->name);
    free(m->value);
    memset(m, 0, sizeof(*m));
}
