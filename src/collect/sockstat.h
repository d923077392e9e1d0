/* sockstat.h - parser for /proc/net/sockstat and sockstat6 (exposed for
 * tests and fuzzing). */
#ifndef MW_SOCKSTAT_H
#define MW_SOCKSTAT_H

#include <stdint.h>

/* Called once per key/value of a well-formed line. */
typedef void (*mw_sockstat_cb)(void *arg, const char *proto, const char *key, uint64_t value);

/* Lines are "PROTO: key value key value ...":
 *
 *   sockets: used 290
 *   TCP: inuse 5 orphan 0 tw 2 alloc 7 mem 1
 *   FRAG6: inuse 0 memory 0
 *
 * A line without "PROTO:", with an odd number of tokens or a value that is
 * not an unsigned number is malformed and none of its values are passed on.
 * Blank lines are ignored; at most 32 pairs per line. Returns the number of
 * malformed lines. */
int mw_parse_sockstat(const char *text, mw_sockstat_cb cb, void *arg);

#endif
