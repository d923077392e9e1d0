/* crc.h - the chunk records' checksum: zlib's crc32 value.
 *
 * mw_crc32 returns exactly crc32(0, p, n) (the CRC-32 of gzip), computed by
 * zlib until the first query and by ISA-L after it (crc.c says why). */
#ifndef MW_CRC_H
#define MW_CRC_H

#include <stddef.h>
#include <stdint.h>

uint32_t mw_crc32(const uint8_t *p, size_t n);
/* Called by each query: from now on ISA-L computes the checksums (loaded by
 * the next one computed; zlib still does when libisal.so.2 cannot be
 * loaded). */
void mw_crc32_for_queries(void);

#endif
