/* matcher.h - label matchers (=, !=, =~, !~) for selecting series.
 *
 * Regular expressions are POSIX extended (regcomp REG_EXTENDED), fully
 * anchored like Prometheus' RE2 matchers: `a=~"b.*"` matches the whole value.
 * The RE2 shorthands \d \D \w \W \s \S are translated to bracket classes;
 * RE2-only syntax (non-greedy *?, (?i) flags, \pL classes, (?P<name>...))
 * is refused with an error naming the position. A label that a series does
 * not have matches as the empty string, as in Prometheus. */
#ifndef MW_MATCHER_H
#define MW_MATCHER_H

#include <regex.h>
#include <stddef.h>

typedef enum { MW_MATCH_EQ, MW_MATCH_NEQ, MW_MATCH_RE, MW_MATCH_NRE } mw_match_op;

typedef struct mw_matcher {
    mw_match_op op;
    char *name;
    char *value;
    regex_t re; /* MW_MATCH_RE and MW_MATCH_NRE */
    int has_re;
    int matches_empty; /* whether "" (an absent label) matches */
} mw_matcher;

/* 0, or -1 with a one-line reason in err (a bad regular expression). */
int mw_matcher_init(mw_matcher *m, mw_match_op op, const char *name, const char *value, char *err,
                    size_t errsize);
int mw_matcher_matches(const mw_matcher *m, const char *value);
void mw_matcher_free(mw_matcher *m);

#endif
