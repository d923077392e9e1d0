/* regex.h - the one regular-expression engine of the program: RE2 (Debian's
 * libre2, behind the C++ shim regex.cc), with Prometheus 3's semantics.
 *
 * Every pattern is fully anchored, as Prometheus compiles its matchers,
 * relabelling rules and label_replace: "^(?s:" + re + ")$", so "b" does not
 * match "ab" and "." also matches a newline. RE2 answers in time linear in
 * the subject (no backtracking), and a pattern whose compiled program would
 * need more than MW_REGEX_MAX_MEM is refused. Compiled patterns are
 * immutable: one may be matched from several threads at once. */
#ifndef MW_REGEX_H
#define MW_REGEX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RE2's max_mem for one pattern: its program and its DFA cache together (a
 * DFA that would need more falls back to RE2's NFA, still linear). RE2's own
 * default; the biggest Grafana multi-value selections (thousands of
 * alternatives) fit. TODO(option): a configuration option once parts own
 * their options (issue 22). */
#define MW_REGEX_MAX_MEM (8 << 20)

typedef struct mw_regex mw_regex;

/* Where group k of a match lies in the subject: [start, end), or both -1
 * when the group did not take part in the match. Group 0 is the whole
 * match. */
typedef struct mw_regex_span {
    long start, end;
} mw_regex_span;

/* The compiled, anchored pattern, or NULL with RE2's own one-line error
 * text in err (e.g. "missing ): (a"). */
mw_regex *mw_regex_compile(const char *pattern, char *err, size_t errsize);
void mw_regex_free(mw_regex *re);

/* 1 when the whole of s matches, 0 when not. */
int mw_regex_match(const mw_regex *re, const char *s);

/* Capturing groups of the pattern, group 0 not counted. */
size_t mw_regex_ngroups(const mw_regex *re);

/* Match s and fill spans[0..nspans) (group 0 first; groups past the
 * pattern's own are -1). 1 on a match, 0 otherwise. */
int mw_regex_capture(const mw_regex *re, const char *s, mw_regex_span *spans, size_t nspans);

/* Expand tmpl with the groups of a match of s, as Go's regexp.Expand does
 * (Prometheus's label_replace and relabelling use it): $1 ${1} $name
 * ${name}; a name is the longest run of letters, digits and _, so "$1x"
 * names the group "1x"; a group that does not exist or did not take part
 * expands to nothing; "$$" is "$"; a "$" not followed by a name stays.
 * Writes at most outsize-1 bytes and a NUL to out (out may be NULL when
 * outsize is 0) and returns the length of the whole expansion, as
 * snprintf does. */
size_t mw_regex_expand(const mw_regex *re, const char *tmpl, const char *s,
                       const mw_regex_span *spans, size_t nspans, char *out, size_t outsize);

#ifdef __cplusplus
}
#endif

#endif
