/* crc.h - the chunk records' checksum: zlib's crc32 value, through ISA-L.
 *
 * Every head chunk read by a query is checked (a range query checks
 * hundreds of thousands of ~170-byte records), and zlib's table-driven
 * crc32 was a tenth of the query's time. mw_crc32 returns exactly
 * crc32(0, p, n) (the CRC-32 of gzip), so files written before and after
 * stay compatible. */
#ifndef MW_CRC_H
#define MW_CRC_H

#include <stddef.h>
#include <stdint.h>

uint32_t mw_crc32(const uint8_t *p, size_t n);

#endif
