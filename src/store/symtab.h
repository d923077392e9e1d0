/* symtab.h - interned label strings and label pairs for the store's head.
 *
 * Every distinct string (label name or value) is stored once and named by a
 * 32-bit symbol; every distinct (name, value) pair is named by a 32-bit pair
 * id, which is what a series' label set and the inverted index refer to. A
 * million series of a GPU cluster share a few hundred thousand strings, so a
 * series costs 4 bytes per label instead of a copy of its strings. */
#ifndef MW_SYMTAB_H
#define MW_SYMTAB_H

#include "../core/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 64-bit hash of bytes (fast, not cryptographic; the seed chains calls). */
uint64_t mw_hash64(const void *p, size_t len, uint64_t seed);

/* The same, inline (a series' labels are a dozen short strings: the calls
 * were a part of the 7 % of ingest's CPU the hash takes). */
static inline uint64_t mw_hash_rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t mw_hash_mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)(r >> 64) ^ (uint64_t)r;
}

static inline uint64_t mw_hash64_inline(const void *data, size_t len, uint64_t seed)
{
    /* A multiply-mix hash in the style of wyhash: 8 bytes per step. */
    const unsigned char *p = data;
    const uint64_t k1 = 0xa0761d6478bd642full, k2 = 0xe7037ed1a0b428dbull;
    uint64_t h = seed ^ k1 ^ (uint64_t)len;
    while (len >= 8) {
        h = mw_hash_mix(h ^ mw_hash_rd64(p), k2);
        p += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < len; i++)
        tail |= (uint64_t)p[i] << (8 * i);
    h = mw_hash_mix(h ^ tail ^ k2, k1 ^ (uint64_t)len);
    return mw_hash_mix(h, k2);
}

typedef struct mw_symtab {
    const char **strs; /* symbol -> NUL-terminated string */
    uint32_t *lens;
    uint32_t n, cap;
    uint32_t *slots; /* open addressing: symbol + 1, 0 = empty */
    uint32_t nslots;
    /* label pairs */
    uint32_t (*pairs)[2]; /* pair -> {name symbol, value symbol} */
    uint32_t npairs, pairs_cap;
    uint32_t *pair_slots;
    uint32_t npair_slots;
    mw_arena arena;
    size_t bytes; /* string bytes, for accounting */
} mw_symtab;

void mw_symtab_init(mw_symtab *t);
void mw_symtab_free(mw_symtab *t);
uint32_t mw_sym_intern(mw_symtab *t, const char *s, size_t len);
/* 0 and the symbol, or -1 when the string was never interned. */
int mw_sym_find(const mw_symtab *t, const char *s, size_t len, uint32_t *out);
static inline const char *mw_sym_str(const mw_symtab *t, uint32_t sym)
{
    return t->strs[sym];
}
uint32_t mw_pair_intern(mw_symtab *t, uint32_t name, uint32_t value);
int mw_pair_find(const mw_symtab *t, uint32_t name, uint32_t value, uint32_t *out);
/* Memory held, bytes (self-metrics). */
size_t mw_symtab_memory(const mw_symtab *t);

#endif
