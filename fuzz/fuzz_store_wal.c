/* fuzz_store_wal.c - the WAL reader (src/store/wal.c framing and
 * store_append.c records) on arbitrary segment contents: framing with
 * lengths and checksums, then series and samples records applied to a real
 * store's head as recovery does. Records that fail their checksum end the
 * parse; a record whose contents are malformed is refused, never crashes.
 * The checksum is recomputed here for half of the inputs so that the
 * fuzzer reaches the record decoders. */
#include "store/store_internal.h"
#include "store/wal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static mw_store *store;
static char dir[] = "/tmp/mlwatch-fuzz-wal-XXXXXX";

static void cleanup(void)
{
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        /* nothing else to do at exit */
    }
}

static mw_store *get_store(void)
{
    if (store) return store;
    static int registered;
    if (!mkdtemp(dir)) abort();
    if (!registered++) atexit(cleanup);
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    char err[256];
    store = mw_store_open(&o, err, sizeof(err));
    if (!store) abort();
    return store;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned runs;
    if (size < 1) return 0;
    if (store && ++runs % 2000 == 0) {
        /* A fresh head now and then: memory stays bounded over long runs. */
        mw_store_close(store);
        store = NULL;
        cleanup();
        strcpy(dir, "/tmp/mlwatch-fuzz-wal-XXXXXX");
    }
    mw_store *s = get_store();
    uint8_t *p = malloc(size);
    memcpy(p, data + 1, size - 1);
    size_t n = size - 1;
    if (data[0] & 1) {
        /* Fix up the checksums of well-framed records. */
        for (size_t off = 0; off + 9 <= n;) {
            uint32_t len = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 |
                           (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
            if (len > n - off - 9) break;
            uint32_t crc = (uint32_t)crc32(0, p + off + 8, len + 1);
            for (int i = 0; i < 4; i++)
                p[off + 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
            off += 9 + (size_t)len;
        }
    }
    uint64_t records = 0;
    char reason[128];
    size_t good = mw_wal_parse(p, n, mw_store_replay_record, s, &records, reason, sizeof(reason));
    if (good > n || (good < n && !reason[0])) abort();
    free(p);
    return 0;
}
