/* netstat.h - parser for /proc/net/snmp and /proc/net/netstat (exposed for
 * tests and fuzzing). */
#ifndef MW_NETSTAT_H
#define MW_NETSTAT_H

#include <stdint.h>

/* Called once per field of a well-formed section. */
typedef void (*mw_netstat_cb)(void *arg, const char *proto, const char *field, int64_t value);

/* Both files are pairs of lines per protocol, a header with the field names
 * and a line with the values:
 *
 *   Tcp: RtoAlgorithm RtoMin ... CurrEstab ...
 *   Tcp: 1 200 ... 12 ...
 *
 * Values are decimal, some signed (Tcp MaxConn is -1). A pair whose two
 * prefixes differ, whose counts differ, or with a value that is not a number
 * is malformed: none of its fields are passed on (a half-parsed section
 * would shift names against values). Blank lines are ignored; at most 512
 * fields per section. Returns the number of malformed sections. */
int mw_parse_netstat(const char *text, mw_netstat_cb cb, void *arg);

#endif
