/* regex_bound.h - refuse regular expressions that would make glibc's
 * regcomp take unbounded memory or stack, as RE2 (Prometheus's engine)
 * refuses them. One check for every regex a user can give us. */
#ifndef MW_REGEX_BOUND_H
#define MW_REGEX_BOUND_H

#include <stddef.h>

/* 0 when RE (RE2 syntax) is within bounds; -1 with a message naming the
 * problem and its offset otherwise. */
int mw_regex_check(const char *re, char *err, size_t errsize);

#endif
