/* regex_bound.c - bounds on user-given regular expressions (PromQL
 * matchers and label_replace, relabelling rules), checked before glibc's
 * regcomp sees them: RE2's refusals (nested repetition, counts over 1000)
 * and a bound on the size of the pattern once counted repetitions are
 * expanded. docs/promql.md says why and where this is stricter than RE2. */
#include "regex_bound.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RE2 refuses nested repetition (a++, a*{2}) and counts over 1000;
 * glibc's regcomp accepts them and may need memory exponential in the
 * pattern. Refuse them first, as Prometheus would, so that no query can
 * make the process grow without bound. glibc also expands a counted
 * repetition by copying its atom, recursively: "(a|b|...|z){1000}" or
 * "((a){100}){100}" build parse trees deep enough to overflow a thread's
 * stack (found by fuzz_promql), so the size of the pattern after expanding
 * every count is bounded too, as RE2 bounds its program size. */
#define RE_MAX_EXPANDED 1000 /* atoms after expanding counted repetitions */
/* Parts that can match the empty string (an empty alternative, x?, x*) cost
 * glibc far more than a character once repeated: "(ab||){140}" took 486 MB
 * to compile. They weigh this many atoms. */
#define RE_NULLABLE_WEIGHT 50
#define RE_MAX_DEPTH 32 /* nested groups */

int mw_regex_check(const char *re, char *err, size_t errsize)
{
    int prev_quant = 0;
    long total = 0;
    /* expanded size of each open group's contents so far; [0] = the pattern */
    long group[RE_MAX_DEPTH + 1] = {0};
    int depth = 0;
    long last_atom = 0; /* expanded size of the atom a quantifier applies to */
    for (const char *p = re; *p; p++) {
        int quant = 0;
        long atom = 1;
        if (*p == '\\') {
            if (p[1]) p++;
        } else if (*p == '(') {
            if (depth == RE_MAX_DEPTH) {
                snprintf(err, errsize, "regular expression nests groups deeper than %d",
                         RE_MAX_DEPTH);
                return -1;
            }
            group[++depth] = 0;
            prev_quant = 0;
            last_atom = 0;
            continue;
        } else if (*p == ')') {
            /* RE2 refuses an unbalanced ")"; letting it through would also
             * close the group the matcher wraps the pattern in for anchoring,
             * and move a count onto the whole pattern. */
            if (depth == 0) {
                snprintf(err, errsize, "unexpected ) in regular expression at offset %d",
                         (int)(p - re));
                return -1;
            }
            atom = group[depth--] + 1;
        } else if (*p == '[') {
            p++;
            if (*p == '^') p++;
            if (*p == ']') p++;
            while (*p && *p != ']') {
                if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
                    const char *e = strchr(p + 2, ']');
                    if (!e) break;
                    p = e;
                }
                p++;
            }
            if (!*p) break;
        } else if (*p == '*' || *p == '+' || *p == '?') {
            quant = 1;
            if (*p == '?' && prev_quant == 1) quant = 2; /* non-greedy marker */
            atom = 0;
            if (*p != '+' && quant == 1) {
                group[depth] += RE_NULLABLE_WEIGHT;
                last_atom += RE_NULLABLE_WEIGHT;
            }
        } else if (*p == '|') {
            /* an empty alternative: "(|", "||", "|)", or at either end */
            if (p == re || p[-1] == '(' || p[-1] == '|' || p[1] == '|' || p[1] == ')' || !p[1])
                group[depth] += RE_NULLABLE_WEIGHT;
        } else if (*p == '{' && (isdigit((unsigned char)p[1]) || p[1] == ',')) {
            /* glibc also reads "{,n}" as {0,n} (RE2 as literal text) */
            char *end = (char *)p + 1;
            long lo = p[1] == ',' ? 0 : strtol(p + 1, &end, 10), hi = lo;
            if (*end == ',')
                hi = isdigit((unsigned char)end[1]) ? strtol(end + 1, &end, 10) : lo;
            else if (*end != '}')
                goto plain;
            if (*end == ',') end++;
            if (*end != '}') goto plain;
            if (lo > 1000 || hi > 1000 || (total += hi > lo ? hi : lo) > 1000) {
                snprintf(err, errsize,
                         "bad repetition operator in regular expression: counts over 1000");
                return -1;
            }
            long times = hi > lo ? hi : lo;
            /* the atom is already counted once; its copies add the rest */
            group[depth] += last_atom * (times > 0 ? times - 1 : 0);
            last_atom *= times > 0 ? times : 1;
            if (group[depth] > RE_MAX_EXPANDED) goto too_large;
            quant = 1;
            p = end;
            atom = 0;
        }
        if (quant == 1 && prev_quant) {
            snprintf(err, errsize,
                     "invalid nested repetition operator in regular expression at offset %d",
                     (int)(p - re));
            return -1;
        }
        if (atom) {
            group[depth] += atom;
            last_atom = atom;
            if (group[depth] > RE_MAX_EXPANDED) goto too_large;
        }
        prev_quant = quant;
        continue;
    plain:
        group[depth] += 1;
        last_atom = 1;
        prev_quant = 0;
    }
    if (depth > 0) {
        snprintf(err, errsize, "missing ) in regular expression");
        return -1;
    }
    if (strlen(re) > 4096) {
        snprintf(err, errsize, "regular expression longer than 4096 bytes");
        return -1;
    }
    return 0;
too_large:
    snprintf(err, errsize,
             "regular expression too large: more than %d elements once its counted "
             "repetitions are expanded",
             RE_MAX_EXPANDED);
    return -1;
}
