/* series_memory.c - the series of the last round, to find those that ended
 * (see series_memory.h). An open-addressing table by hash; each entry
 * remembers the round it was last marked in and its key. A sweep reports and frees the
 * entries of older rounds and rebuilds the table from the survivors (open
 * addressing cannot simply empty a slot), which is O(series) once a round. */
#include "series_memory.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

struct mw_series_entry {
    uint64_t hash;
    char *key; /* NULL until mw_series_memory_keep_key */
    uint32_t len;
    uint32_t round; /* 0: empty slot */
};

double mw_stale_nan(void)
{
    uint64_t bits = MW_STALE_NAN_BITS;
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

int mw_is_stale_nan(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return bits == MW_STALE_NAN_BITS;
}

void mw_series_memory_init(mw_series_memory *m)
{
    memset(m, 0, sizeof(*m));
    m->round = 1;
}

void mw_series_memory_destroy(mw_series_memory *m)
{
    for (size_t i = 0; i < m->nslots; i++)
        free(m->slots[i].key);
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

static void place(mw_series_entry *slots, size_t nslots, const mw_series_entry *e)
{
    size_t i = (size_t)e->hash & (nslots - 1);
    while (slots[i].round)
        i = (i + 1) & (nslots - 1);
    slots[i] = *e;
}

static void resize(mw_series_memory *m, size_t nslots)
{
    mw_series_entry *slots = mw_xcalloc(nslots, sizeof(*slots));
    for (size_t i = 0; i < m->nslots; i++)
        if (m->slots[i].round) place(slots, nslots, &m->slots[i]);
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
}

int mw_series_memory_mark(mw_series_memory *m, uint64_t hash)
{
    m->last_new = NULL;
    if (!m->round) m->round = 1; /* a zeroed memory works as an initialised one */
    if (m->nslots) {
        for (size_t i = (size_t)hash & (m->nslots - 1); m->slots[i].round;
             i = (i + 1) & (m->nslots - 1)) {
            mw_series_entry *e = &m->slots[i];
            if (e->hash == hash) {
                e->round = m->round;
                return 0;
            }
        }
    }
    if (2 * (m->n + 1) > m->nslots) resize(m, m->nslots ? 2 * m->nslots : 64);
    size_t i = (size_t)hash & (m->nslots - 1);
    while (m->slots[i].round)
        i = (i + 1) & (m->nslots - 1);
    m->slots[i] = (mw_series_entry){hash, NULL, 0, m->round};
    m->last_new = &m->slots[i];
    m->n++;
    return 1;
}

void mw_series_memory_keep_key(mw_series_memory *m, const void *key, size_t len)
{
    mw_series_entry *e = m->last_new;
    if (!e) return;
    free(e->key);
    e->key = mw_xmalloc(len ? len : 1);
    memcpy(e->key, key, len);
    e->len = (uint32_t)len;
    m->last_new = NULL;
}

size_t mw_series_memory_sweep(mw_series_memory *m,
                              void (*ended)(void *arg, const char *key, size_t len), void *arg)
{
    size_t gone = 0;
    for (size_t i = 0; i < m->nslots; i++) {
        mw_series_entry *e = &m->slots[i];
        if (!e->round || e->round == m->round) continue;
        if (ended && e->key) ended(arg, e->key, e->len);
        free(e->key);
        e->key = NULL;
        e->round = 0;
        gone++;
    }
    m->last_new = NULL; /* entries move */
    if (gone) {
        m->n -= gone;
        /* Rebuild (probe chains broke where slots were emptied), shrinking
         * when a quarter or less is used so that a round of many ended
         * series gives its memory back. */
        size_t nslots = m->nslots;
        while (nslots > 64 && 4 * m->n <= nslots / 2)
            nslots /= 2;
        resize(m, nslots);
    }
    m->round++;
    if (m->round == 0) m->round = 1; /* 0 is never a current round */
    return gone;
}

void mw_series_key_add(mw_buf *key, const char *name, const char *value)
{
    mw_buf_append(key, name, strlen(name) + 1);
    mw_buf_append(key, value ? value : "", (value ? strlen(value) : 0) + 1);
}

size_t mw_series_key_labels(const char *key, size_t len, mw_label *out, size_t max)
{
    size_t n = 0, off = 0;
    while (off < len && n < max) {
        const char *name = key + off;
        off += strnlen(name, len - off) + 1;
        if (off >= len) break;
        const char *value = key + off;
        off += strnlen(value, len - off) + 1;
        out[n++] = (mw_label){name, value};
    }
    return n;
}
