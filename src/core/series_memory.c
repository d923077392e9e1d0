/* series_memory.c - the series of the last round, to find those that ended
 * (see series_memory.h).
 *
 * Collectors emit their series in the same order every round, so the fast
 * path compares each series with the one at the same place in the last
 * round's sequence (a sequential read: no cache miss per series, which a
 * table probe costs on a node of thousands of series between collectors'
 * file reads). A series out of place is found through an open-addressing
 * table of pool indices, and the comparison goes on after its old place.
 * The sweep reports the entries of the last round not seen in this one,
 * frees them, and makes this round's sequence the next one's reference. */
#include "series_memory.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

struct mw_series_entry {
    uint64_t hash;
    char *key; /* NULL until mw_series_memory_keep_key */
    uint32_t len;
    uint32_t round; /* last round marked in; 0: free (then len links the free list) */
    uint32_t pos;   /* place in the last round's sequence */
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
    for (uint32_t i = 0; i < m->npool; i++)
        if (m->pool[i].round) free(m->pool[i].key);
    free(m->pool);
    free(m->table);
    free(m->order);
    free(m->seq);
    memset(m, 0, sizeof(*m));
}

/* The table rebuilt with room for twice the live entries. */
static void rebuild_table(mw_series_memory *m)
{
    uint32_t tslots = 64;
    while (tslots < 2 * (m->n + 1))
        tslots *= 2;
    free(m->table);
    m->table = mw_xcalloc(tslots, sizeof(uint32_t));
    m->tslots = tslots;
    for (uint32_t p = 0; p < m->npool; p++) {
        if (!m->pool[p].round) continue;
        uint32_t i = (uint32_t)m->pool[p].hash & (tslots - 1);
        while (m->table[i])
            i = (i + 1) & (tslots - 1);
        m->table[i] = p + 1;
    }
}

static void seq_push(mw_series_memory *m, uint32_t p)
{
    if (m->nseq == m->seq_cap) {
        m->seq_cap = m->seq_cap ? 2 * m->seq_cap : 64;
        m->seq = mw_xrealloc(m->seq, m->seq_cap * sizeof(uint32_t));
    }
    m->seq[m->nseq++] = p;
}

int mw_series_memory_mark(mw_series_memory *m, uint64_t hash)
{
    m->last_new = 0;
    if (!m->round) m->round = 1; /* a zeroed memory works as an initialised one */
    /* Fast path: the series that came next last round. */
    if (m->cursor < m->norder) {
        uint32_t p = m->order[m->cursor];
        if (m->pool[p].hash == hash && m->pool[p].round != m->round) {
            m->pool[p].round = m->round;
            m->cursor++;
            seq_push(m, p);
            return 0;
        }
    }
    if (m->tslots) {
        for (uint32_t i = (uint32_t)hash & (m->tslots - 1); m->table[i];
             i = (i + 1) & (m->tslots - 1)) {
            uint32_t p = m->table[i] - 1;
            if (m->pool[p].hash != hash) continue;
            if (m->pool[p].round == m->round) return 0; /* twice in a round: one series */
            m->pool[p].round = m->round;
            if (m->pool[p].pos < m->norder && m->order[m->pool[p].pos] == p)
                m->cursor = m->pool[p].pos + 1; /* go on after its old place */
            seq_push(m, p);
            return 0;
        }
    }
    /* New. */
    uint32_t p;
    if (m->free_head) {
        p = m->free_head - 1;
        m->free_head = m->pool[p].len;
    } else {
        if (m->npool == m->pool_cap) {
            m->pool_cap = m->pool_cap ? 2 * m->pool_cap : 64;
            m->pool = mw_xrealloc(m->pool, m->pool_cap * sizeof(mw_series_entry));
        }
        p = m->npool++;
    }
    m->pool[p] = (mw_series_entry){hash, NULL, 0, m->round, UINT32_MAX};
    m->n++;
    if (2 * (m->n + 1) > m->tslots) {
        rebuild_table(m);
    } else {
        uint32_t i = (uint32_t)hash & (m->tslots - 1);
        while (m->table[i])
            i = (i + 1) & (m->tslots - 1);
        m->table[i] = p + 1;
    }
    seq_push(m, p);
    m->last_new = p + 1;
    return 1;
}

void mw_series_memory_keep_key(mw_series_memory *m, const void *key, size_t len)
{
    if (!m->last_new) return;
    mw_series_entry *e = &m->pool[m->last_new - 1];
    free(e->key);
    e->key = mw_xmalloc(len ? len : 1);
    memcpy(e->key, key, len);
    e->len = (uint32_t)len;
    m->last_new = 0;
}

size_t mw_series_memory_sweep(mw_series_memory *m,
                              void (*ended)(void *arg, const char *key, size_t len), void *arg)
{
    if (!m->round) m->round = 1;
    size_t gone = 0;
    /* Every live entry not marked now was in the last round's sequence. */
    for (uint32_t i = 0; i < m->norder; i++) {
        mw_series_entry *e = &m->pool[m->order[i]];
        if (!e->round || e->round == m->round) continue;
        if (ended && e->key) ended(arg, e->key, e->len);
        free(e->key);
        e->key = NULL;
        e->round = 0;
        e->len = m->free_head; /* onto the free list */
        m->free_head = m->order[i] + 1;
        gone++;
    }
    m->n -= (uint32_t)gone;
    if (gone) rebuild_table(m); /* probe chains broke where entries left */
    for (uint32_t i = 0; i < m->nseq; i++)
        m->pool[m->seq[i]].pos = i;
    uint32_t *t = m->order, tcap = m->order_cap;
    m->order = m->seq;
    m->order_cap = m->seq_cap;
    m->norder = m->nseq;
    m->seq = t;
    m->seq_cap = tcap;
    m->nseq = 0;
    m->cursor = 0;
    m->last_new = 0;
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
