/* matcher.h - label matchers (=, !=, =~, !~) for selecting series.
 *
 * Regular expressions are RE2 syntax through core/regex.h, fully anchored
 * and with "." matching newlines as in Prometheus 3: `a=~"b.*"` matches the
 * whole value. A label that a series does not have matches as the empty
 * string, as in Prometheus. */
#ifndef MW_MATCHER_H
#define MW_MATCHER_H

#include "../core/regex.h"

#include <stddef.h>

typedef enum { MW_MATCH_EQ, MW_MATCH_NEQ, MW_MATCH_RE, MW_MATCH_NRE } mw_match_op;

typedef struct mw_matcher {
    mw_match_op op;
    char *name;
    char *value;
    mw_regex *re;      /* MW_MATCH_RE and MW_MATCH_NRE */
    int matches_empty; /* whether "" (an absent label) matches */
} mw_matcher;

/* 0, or -1 with a one-line reason in err (a bad regular expression). */
int mw_matcher_init(mw_matcher *m, mw_match_op op, const char *name, const char *value, char *err,
                    size_t errsize);
/* A set matcher: name is one of values[0..n) (exact strings: each is
 * regex-escaped), or, with match_empty, absent or empty. Built as
 * name=~"v1|v2|..." (one compiled pattern), as prom-label-proxy scopes a
 * selector. 0, or -1 with a reason (a pattern over MW_REGEX_MAX_MEM). */
int mw_matcher_init_set(mw_matcher *m, const char *name, char *const *values, size_t n,
                        int match_empty, char *err, size_t errsize);
int mw_matcher_matches(const mw_matcher *m, const char *value);
void mw_matcher_free(mw_matcher *m);

#endif
