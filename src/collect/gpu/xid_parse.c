/* xid_parse.c - parsers of /dev/kmsg records and of the NVIDIA driver's XID,
 * SXID and "GPU at" lines (xid.h). Bytes in, fields out: no allocation, no
 * regular expression (800k records of a flood are parsed in the GPU thread's
 * poll), bounded by the caller's line. Fuzzed by fuzz/fuzz_xid.c. */
#include "xid.h"
#include "gpu.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* A decimal number at *p (at most 20 digits); advances *p. */
static int take_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    int n = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (++n > 19) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (n == 0) return -1;
    *p = s;
    *out = v;
    return 0;
}

int mw_kmsg_parse_record(const char *line, size_t len, mw_kmsg_record *r)
{
    const char *p = line, *end = line + len;
    uint64_t prio;
    if (take_u64(&p, end, &prio) < 0 || prio > 0xffffff || p >= end || *p++ != ',') return -1;
    if (take_u64(&p, end, &r->seq) < 0 || p >= end || *p++ != ',') return -1;
    if (take_u64(&p, end, &r->usec) < 0 || p >= end || *p++ != ',') return -1;
    if (p >= end || (*p != '-' && *p != 'c' && *p != '+')) return -1;
    r->flag = *p++;
    /* Later kernels may add fields after the flags ("caller=T123"). */
    const char *semi = memchr(p, ';', (size_t)(end - p));
    if (!semi || (p < semi && *p != ',')) return -1;
    r->prio = (unsigned)prio;
    r->msg = semi + 1;
    r->msg_len = (size_t)(end - semi - 1);
    return 0;
}

static int starts(const char *p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0;
}

/* "0000:3b:00", "PCI:0000:3b:00.0", "00000000:3B:00" up to stop (and a
 * space after it when stop is ':', whose PCI id has colons itself): the
 * canonical domain:bus:device in out. Returns 0 or -1. */
static int take_pci(const char **pp, const char *end, char stop, char out[16])
{
    const char *p = *pp;
    if (starts(p, end, "PCI:")) p += 4;
    const char *q = p;
    while (q < end && q - p < 24 && !(*q == stop && (stop != ':' || (q + 1 < end && q[1] == ' '))))
        q++;
    if (q >= end || *q != stop) return -1;
    char id[32], canon[32];
    size_t n = (size_t)(q - p);
    memcpy(id, p, n);
    id[n] = '\0';
    if (!strchr(id, '.') && n + 2 < sizeof(id)) strcat(id, ".0");
    if (mw_gpu_parse_pci_bus_id(id, canon, sizeof(canon)) < 0) return -1;
    char *dot = strrchr(canon, '.');
    if (dot) *dot = '\0';
    if (strlen(canon) >= 16) return -1;
    strcpy(out, canon);
    *pp = q + 1;
    return 0;
}

static void skip_spaces(const char **p, const char *end)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
}

/* "pid=1234, ", "pid='<unknown>', ", "name=python3, " */
static void take_process(const char **pp, const char *end, mw_xid_line *x)
{
    const char *p = *pp;
    if (starts(p, end, "pid=")) {
        p += 4;
        uint64_t pid;
        const char *q = p;
        if (take_u64(&q, end, &pid) == 0 && pid <= 0x7fffffff) x->pid = (int64_t)pid;
        while (p < end && *p != ',')
            p++;
        if (p < end) p++;
        skip_spaces(&p, end);
    }
    if (starts(p, end, "name=")) {
        p += 5;
        const char *q = p;
        while (q < end && *q != ',')
            q++;
        if (q - p != 9 || memcmp(p, "<unknown>", 9) != 0)
            mw_gpu_clean_string(x->process, sizeof(x->process), p, (size_t)(q - p));
        p = q < end ? q + 1 : q;
        skip_spaces(&p, end);
    }
    *pp = p;
}

int mw_xid_parse_line(const char *msg, size_t len, mw_xid_line *x)
{
    memset(x, 0, sizeof(*x));
    x->pid = -1;
    const char *p = msg, *end = msg + len;
    skip_spaces(&p, end);
    if (starts(p, end, "NVRM: ")) {
        p += 6;
        if (starts(p, end, "GPU at ")) {
            p += 7;
            if (take_pci(&p, end, ':', x->pci) < 0) return MW_XID_LINE_NONE;
            skip_spaces(&p, end);
            if (!starts(p, end, "GPU-")) return MW_XID_LINE_NONE;
            const char *q = p;
            while (q < end && (isalnum((unsigned char)*q) || *q == '-'))
                q++;
            mw_gpu_clean_string(x->uuid, sizeof(x->uuid), p, (size_t)(q - p));
            return x->kind = MW_XID_LINE_GPU_AT;
        }
        if (!starts(p, end, "Xid (")) return MW_XID_LINE_NONE;
        p += 5;
        x->kind = MW_XID_LINE_XID;
    } else {
        /* nvidia-nvswitchN: SXid (PCI:...): CODE, ... */
        const char *q = p;
        while (q < end && *q != ':' && q - p < 23)
            q++;
        if (q >= end || *q != ':' || !starts(p, end, "nvidia-nvswitch")) return MW_XID_LINE_NONE;
        mw_gpu_clean_string(x->device, sizeof(x->device), p, (size_t)(q - p));
        p = q + 1;
        skip_spaces(&p, end);
        if (!starts(p, end, "SXid (")) return MW_XID_LINE_NONE;
        p += 6;
        x->kind = MW_XID_LINE_SXID;
    }
    if (take_pci(&p, end, ')', x->pci) < 0 || !starts(p, end, ":")) return x->kind = 0;
    p++;
    skip_spaces(&p, end);
    uint64_t code;
    if (take_u64(&p, end, &code) < 0 || code > 0xffffffffu) return x->kind = 0;
    x->code = (uint32_t)code;
    if (p < end && *p == ',') p++;
    skip_spaces(&p, end);
    if (x->kind == MW_XID_LINE_XID) take_process(&p, end, x);
    mw_gpu_clean_string(x->text, sizeof(x->text), p, (size_t)(end - p));
    return x->kind;
}
