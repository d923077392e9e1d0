/* fuzz_rwq_record.c - the remote-write queue's record reader on arbitrary
 * bytes (what a damaged segment file could hold): it must never read past
 * the input, and what it accepts must describe a record inside the input. */
#include "ship/queue.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        uint32_t ns, len;
        int64_t ts;
        const unsigned char *p;
        size_t n = mw_rwq_parse_record(data + off, size - off, &ns, &ts, &p, &len);
        if (!n) break;
        if (n > size - off || p + len > data + size || n != (size_t)len + 20) abort();
        off += n;
    }
    return 0;
}
