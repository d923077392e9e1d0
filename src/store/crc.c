/* crc.c - the chunk records' checksum: the CRC-32 of gzip, zlib's crc32.
 *
 * Queries check every head chunk they read (a range query checks hundreds
 * of thousands of ~170-byte records): zlib's table-driven crc32 was a tenth
 * of such a query's time, ISA-L's crc32_gzip_refl (carry-less
 * multiplication where the CPU has it, chosen by ISA-L at run time) under
 * 1 %. ISA-L costs ~200 KB of resident pages, though, and an agent nobody
 * queries checksums only the chunks it cuts and compacts (milliseconds of
 * zlib every few minutes). So the first query loads ISA-L
 * (mw_crc32_for_queries, through src/core/lazylib.c); until then zlib
 * computes the same value. */
#include "crc.h"

#include <isa-l/crc.h>
#include <stdatomic.h>
#include <zlib.h>

static atomic_int use_isal;

void mw_crc32_for_queries(void)
{
    atomic_store_explicit(&use_isal, 1, memory_order_relaxed);
}

uint32_t mw_crc32(const uint8_t *p, size_t n)
{
    if (atomic_load_explicit(&use_isal, memory_order_relaxed))
        return crc32_gzip_refl(0, p, (uint64_t)n);
    return (uint32_t)crc32_z(0L, p, n);
}
