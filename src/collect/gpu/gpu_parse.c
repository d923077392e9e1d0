/* gpu_parse.c - parsing and formatting of strings that GPU libraries hand
 * us (PCI bus IDs, MIG device names, driver versions), see gpu.h. The
 * libraries are trusted code but their strings are still bounded and
 * checked: they end up in label values. */
#include "gpu.h"
#include "../../core/util.h"

#include <stdio.h>
#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parse 1..maxdigits hex digits at *p; returns -1 if none or too many. */
static int parse_hex(const char **p, unsigned maxdigits, uint32_t *out)
{
    uint32_t v = 0;
    unsigned n = 0;
    while (hexval(**p) >= 0) {
        if (++n > maxdigits) return -1;
        v = v * 16 + (uint32_t)hexval(**p);
        (*p)++;
    }
    if (n == 0) return -1;
    *out = v;
    return 0;
}

int mw_gpu_parse_pci_bus_id(const char *s, char *out, size_t size)
{
    /* [domain:]bus:device.function, domain up to 8 hex digits. */
    uint32_t a, b, c, fn, domain = 0, bus, dev;
    const char *p = s;
    if (parse_hex(&p, 8, &a) < 0 || *p++ != ':') return -1;
    if (parse_hex(&p, 2, &b) < 0) return -1;
    if (*p == ':') {
        p++;
        if (parse_hex(&p, 2, &c) < 0) return -1;
        domain = a;
        bus = b;
        dev = c;
    } else {
        if (a > 0xff) return -1;
        bus = a;
        dev = b;
    }
    if (*p++ != '.') return -1;
    if (parse_hex(&p, 1, &fn) < 0 || *p != '\0') return -1;
    if (dev > 0x1f || fn > 7) return -1;
    int n;
    if (domain <= 0xffff)
        n = snprintf(out, size, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
    else
        n = snprintf(out, size, "%08x:%02x:%02x.%x", domain, bus, dev, fn);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

int mw_gpu_parse_mig_profile(const char *name, char *out, size_t size)
{
    /* The profile is the word after the last " MIG " in the device name:
     * "<n>g.<m>gb" with optional "+me" style suffixes. */
    const char *m = NULL;
    for (const char *p = strstr(name, " MIG "); p; p = strstr(p + 1, " MIG "))
        m = p + 5;
    if (!m) return -1;
    const char *p = m;
    if (*p < '1' || *p > '9') return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p++ != 'g' || *p++ != '.') return -1;
    if (*p < '1' || *p > '9') return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p[0] != 'g' || p[1] != 'b') return -1;
    p += 2;
    while (*p == '+' || *p == '.' || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))
        p++;
    if (*p != '\0' && *p != ' ') return -1;
    size_t n = (size_t)(p - m);
    if (n >= size) return -1;
    memcpy(out, m, n);
    out[n] = '\0';
    return 0;
}

static int parse_num(const char **p, unsigned *out)
{
    unsigned v = 0;
    int n = 0;
    while (**p >= '0' && **p <= '9') {
        if (++n > 9) return -1;
        v = v * 10 + (unsigned)(**p - '0');
        (*p)++;
    }
    if (n == 0) return -1;
    *out = v;
    return 0;
}

int mw_gpu_parse_driver_version(const char *s, unsigned *major, unsigned *minor, unsigned *patch)
{
    const char *p = s;
    *major = *minor = *patch = 0;
    if (parse_num(&p, major) < 0) return -1;
    if (*p == '.') {
        p++;
        if (parse_num(&p, minor) < 0) return -1;
        if (*p == '.') {
            p++;
            if (parse_num(&p, patch) < 0) return -1;
        }
    }
    return *p == '\0' ? 0 : -1;
}

void mw_gpu_format_cpulist(const uint64_t *bits, size_t nwords, char *out, size_t size)
{
    size_t len = 0, nbits = nwords * 64;
    if (size) out[0] = '\0';
    for (size_t i = 0; i < nbits;) {
        if (!(bits[i / 64] >> (i % 64) & 1)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j + 1 < nbits && (bits[(j + 1) / 64] >> ((j + 1) % 64) & 1))
            j++;
        char item[48];
        int n = j == i ? snprintf(item, sizeof(item), "%s%zu", len ? "," : "", i)
                       : snprintf(item, sizeof(item), "%s%zu-%zu", len ? "," : "", i, j);
        if (n < 0 || len + (size_t)n + 1 > size) {
            /* Does not fit: an incomplete list would be wrong, so none. */
            if (size) out[0] = '\0';
            return;
        }
        memcpy(out + len, item, (size_t)n + 1);
        len += (size_t)n;
        i = j + 1;
    }
}

void mw_gpu_clean_string(char *dst, size_t size, const char *src, size_t srclen)
{
    if (!size) return;
    size_t n = 0;
    for (size_t i = 0; i < srclen && src[i] && n + 1 < size; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    while (n && dst[n - 1] == ' ')
        n--;
    dst[n] = '\0';
    size_t start = 0;
    while (dst[start] == ' ')
        start++;
    if (start) memmove(dst, dst + start, n - start + 1);
}
