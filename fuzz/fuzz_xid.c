/* fuzz_xid.c - the kernel log record parser and the XID/SXID/"GPU at" line
 * parser on arbitrary bytes (not terminated), and the kmsg reader's line
 * splitting through a catalog-backed health engine: nothing read past the
 * input, parsed fields terminated and printable. */
#include "collect/gpu/gpu.h"
#include "collect/gpu/xid.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void printable(const char *s, size_t size)
{
    if (strnlen(s, size) == size) abort();
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes: ASan sees any read past it. */
    char *s = malloc(size ? size : 1);
    memcpy(s, data, size);
    mw_kmsg_record r;
    if (mw_kmsg_parse_record(s, size, &r) == 0) {
        if (r.msg < s || r.msg + r.msg_len > s + size) abort();
        mw_xid_line x;
        mw_xid_parse_line(r.msg, r.msg_len, &x);
    }
    mw_xid_line x;
    int kind = mw_xid_parse_line(s, size, &x);
    if (kind < MW_XID_LINE_NONE || kind > MW_XID_LINE_GPU_AT) abort();
    if (kind != MW_XID_LINE_NONE) {
        printable(x.pci, sizeof(x.pci));
        printable(x.text, sizeof(x.text));
        printable(x.process, sizeof(x.process));
        printable(x.device, sizeof(x.device));
        printable(x.uuid, sizeof(x.uuid));
        if (strlen(x.pci) < 7) abort(); /* at least "0:0:00"-like, canonical domain:bus:dev */
    }
    free(s);
    return 0;
}
