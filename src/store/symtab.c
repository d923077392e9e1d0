/* symtab.c - string interning and label pairs (open addressing tables). */
#include "symtab.h"
#include "../core/util.h"

#include <stdlib.h>
#include <string.h>

uint64_t mw_hash64(const void *data, size_t len, uint64_t seed)
{
    return mw_hash64_inline(data, len, seed);
}

void mw_symtab_init(mw_symtab *t)
{
    memset(t, 0, sizeof(*t));
    mw_arena_init(&t->arena, 256 * 1024);
    t->nslots = 1024;
    t->slots = mw_xcalloc(t->nslots, sizeof(uint32_t));
    t->npair_slots = 1024;
    t->pair_slots = mw_xcalloc(t->npair_slots, sizeof(uint32_t));
}

void mw_symtab_free(mw_symtab *t)
{
    free(t->strs);
    free(t->lens);
    free(t->slots);
    free(t->pairs);
    free(t->pair_slots);
    mw_arena_free(&t->arena);
    memset(t, 0, sizeof(*t));
}

static uint32_t str_slot(const mw_symtab *t, const char *s, size_t len, int *found)
{
    uint32_t mask = t->nslots - 1;
    uint32_t i = (uint32_t)mw_hash64(s, len, 0) & mask;
    for (;;) {
        uint32_t v = t->slots[i];
        if (v == 0) {
            *found = 0;
            return i;
        }
        uint32_t sym = v - 1;
        if (t->lens[sym] == len && memcmp(t->strs[sym], s, len) == 0) {
            *found = 1;
            return i;
        }
        i = (i + 1) & mask;
    }
}

static void grow_strs(mw_symtab *t)
{
    uint32_t n = t->nslots * 2;
    uint32_t *slots = mw_xcalloc(n, sizeof(uint32_t));
    for (uint32_t sym = 0; sym < t->n; sym++) {
        uint32_t i = (uint32_t)mw_hash64(t->strs[sym], t->lens[sym], 0) & (n - 1);
        while (slots[i])
            i = (i + 1) & (n - 1);
        slots[i] = sym + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
}

int mw_sym_find(const mw_symtab *t, const char *s, size_t len, uint32_t *out)
{
    int found;
    uint32_t i = str_slot(t, s, len, &found);
    if (!found) return -1;
    *out = t->slots[i] - 1;
    return 0;
}

uint32_t mw_sym_intern(mw_symtab *t, const char *s, size_t len)
{
    int found;
    uint32_t i = str_slot(t, s, len, &found);
    if (found) return t->slots[i] - 1;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->strs = mw_xrealloc(t->strs, t->cap * sizeof(*t->strs));
        t->lens = mw_xrealloc(t->lens, t->cap * sizeof(*t->lens));
    }
    uint32_t sym = t->n++;
    t->strs[sym] = mw_arena_strndup(&t->arena, s, len);
    t->lens[sym] = (uint32_t)len;
    t->bytes += len + 1;
    t->slots[i] = sym + 1;
    if ((uint64_t)t->n * 4 > (uint64_t)t->nslots * 3) grow_strs(t);
    return sym;
}

static inline uint32_t pair_hash(uint32_t name, uint32_t value)
{
    return (uint32_t)(mw_hash_mix(((uint64_t)name << 32) | value, 0x9e3779b97f4a7c15ull) >> 7);
}

static uint32_t pair_slot(const mw_symtab *t, uint32_t name, uint32_t value, int *found)
{
    uint32_t mask = t->npair_slots - 1, i = pair_hash(name, value) & mask;
    for (;;) {
        uint32_t v = t->pair_slots[i];
        if (v == 0) {
            *found = 0;
            return i;
        }
        if (t->pairs[v - 1][0] == name && t->pairs[v - 1][1] == value) {
            *found = 1;
            return i;
        }
        i = (i + 1) & mask;
    }
}

int mw_pair_find(const mw_symtab *t, uint32_t name, uint32_t value, uint32_t *out)
{
    int found;
    uint32_t i = pair_slot(t, name, value, &found);
    if (!found) return -1;
    *out = t->pair_slots[i] - 1;
    return 0;
}

uint32_t mw_pair_intern(mw_symtab *t, uint32_t name, uint32_t value)
{
    int found;
    uint32_t i = pair_slot(t, name, value, &found);
    if (found) return t->pair_slots[i] - 1;
    if (t->npairs == t->pairs_cap) {
        t->pairs_cap = t->pairs_cap ? t->pairs_cap * 2 : 1024;
        t->pairs = mw_xrealloc(t->pairs, t->pairs_cap * sizeof(*t->pairs));
    }
    uint32_t p = t->npairs++;
    t->pairs[p][0] = name;
    t->pairs[p][1] = value;
    t->pair_slots[i] = p + 1;
    if ((uint64_t)t->npairs * 4 > (uint64_t)t->npair_slots * 3) {
        uint32_t n = t->npair_slots * 2;
        uint32_t *slots = mw_xcalloc(n, sizeof(uint32_t));
        for (uint32_t q = 0; q < t->npairs; q++) {
            uint32_t j = pair_hash(t->pairs[q][0], t->pairs[q][1]) & (n - 1);
            while (slots[j])
                j = (j + 1) & (n - 1);
            slots[j] = q + 1;
        }
        free(t->pair_slots);
        t->pair_slots = slots;
        t->npair_slots = n;
    }
    return p;
}

size_t mw_symtab_memory(const mw_symtab *t)
{
    return t->bytes + (size_t)t->cap * (sizeof(char *) + 4) + (size_t)t->nslots * 4 +
           (size_t)t->pairs_cap * 8 + (size_t)t->npair_slots * 4;
}
