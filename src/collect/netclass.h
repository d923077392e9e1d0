/* netclass.h - parsers for /sys/class/net/<iface>/ attributes (exposed for
 * tests and fuzzing). */
#ifndef MW_NETCLASS_H
#define MW_NETCLASS_H

#include <stdint.h>

/* "speed": link speed in Mb/s as a signed decimal. Returns 0 with *bytes
 * set (Mb/s x 125000), 1 when the speed is unknown (-1 or 0: no link, or a
 * driver that does not know), -1 when malformed. */
int mw_netclass_parse_speed(const char *s, double *bytes);
/* "flags": "0x1003". Returns 0, or -1 when not a 0x-prefixed hex number. */
int mw_netclass_parse_hex(const char *s, uint64_t *out);

#endif
