/* hash.h - FNV-1a, the one simple string hash: h = (h ^ byte) * prime for
 * each byte, from a starting value (an offset basis, or a hash so far to
 * continue it over more bytes). For tables, shard choice and stable names;
 * the store's series hash is mw_hash64 (store/symtab.h), built for speed. */
#ifndef MW_HASH_H
#define MW_HASH_H

#include <stddef.h>
#include <stdint.h>

#define MW_FNV1A64_PRIME 1099511628211ULL
/* The standard 64-bit offset basis (0xcbf29ce484222325). */
#define MW_FNV1A64_BASIS 14695981039346656037ULL
/* The starting value every 64-bit FNV-1a in mlwatch has used from the
 * start: the standard basis with its last decimal digit lost. It is kept
 * because its hashes are on disk and on the wire: the remote-write queue's
 * folder names (url-<hash>, ship/rw_config.c) and Alertmanager fingerprints
 * (notify/notify_format.c); with another value an upgraded agent would
 * orphan its queued samples. */
#define MW_FNV1A64_SEED 1469598103934665603ULL

#define MW_FNV1A32_PRIME 16777619U
#define MW_FNV1A32_BASIS 2166136261U /* the standard 32-bit offset basis */

static inline uint64_t mw_fnv1a64_byte(uint64_t h, unsigned char c)
{
    return (h ^ c) * MW_FNV1A64_PRIME;
}

/* h continued over the bytes of NUL-terminated s. */
static inline uint64_t mw_fnv1a64_str(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = mw_fnv1a64_byte(h, *p);
    return h;
}

/* h continued over n bytes. */
static inline uint64_t mw_fnv1a64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = mw_fnv1a64_byte(h, p[i]);
    return h;
}

/* h continued over the bytes of NUL-terminated s, 32 bits. */
static inline uint32_t mw_fnv1a32_str(uint32_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * MW_FNV1A32_PRIME;
    return h;
}

#endif
