/* matcher.c - label matchers; regular expressions through core/regex.h. */
#include "matcher.h"
#include "../core/buf.h"
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

int mw_matcher_init_set(mw_matcher *m, const char *name, char *const *values, size_t n,
                        int match_empty, char *err, size_t errsize)
{
    mw_buf re;
    mw_buf_init(&re, 0);
    for (size_t i = 0; i < n; i++) {
        if (i) mw_buf_append(&re, "|", 1);
        for (const unsigned char *c = (const unsigned char *)values[i]; *c; c++) {
            /* As RE2's QuoteMeta: every ASCII byte but [A-Za-z0-9_] escaped;
             * bytes of UTF-8 sequences as they are. */
            if (*c < 0x80 && !((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                               (*c >= '0' && *c <= '9') || *c == '_'))
                mw_buf_append(&re, "\\", 1);
            mw_buf_append(&re, (const char *)c, 1);
        }
    }
    /* Nothing at all: a pattern no string matches. */
    if (n == 0 && !match_empty) {
        static const char none[] = "[^\\x00-\\x{10FFFF}]";
        mw_buf_append(&re, none, sizeof(none) - 1);
    } else if (match_empty && n)
        mw_buf_append(&re, "|", 1);
    mw_buf_append(&re, "", 1);
    int rc = mw_matcher_init(m, MW_MATCH_RE, name, re.data, err, errsize);
    mw_buf_free(&re);
    return rc;
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
