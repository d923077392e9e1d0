/* snapshot.c - one collection cycle's samples, see snapshot.h. */
#include "snapshot.h"
#include "hash.h"
#include "util.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_name(const char *s)
{
    return mw_fnv1a64_str(MW_FNV1A64_SEED, s);
}

/* The index lives while a snapshot is built, through the whole collection
 * cycle (its peak memory): a slot is the value alone, 8 bytes (its hash is
 * computed again when the index grows), and the first index is sized for
 * as many values as the last sealed snapshot had, so that it need not grow
 * (growing holds the old and the new index at once). On a node of 100 pods
 * with 8 GPUs (953 values): 16 KB instead of 32 + 16. */
struct mw_interned {
    const char *value; /* in the arena; NULL = free slot */
};

static atomic_size_t last_ninterned;

static void intern_grow(mw_snapshot *s)
{
    size_t n = s->ninterned_slots * 2;
    if (!n) {
        n = 1024;
        while (n < 2 * (atomic_load(&last_ninterned) + 1))
            n *= 2;
    }
    struct mw_interned *t = mw_xcalloc(n, sizeof(*t));
    for (size_t i = 0; i < s->ninterned_slots; i++) {
        const struct mw_interned *e = &s->interned[i];
        if (!e->value) continue;
        size_t j = hash_name(e->value) & (n - 1);
        while (t[j].value)
            j = (j + 1) & (n - 1);
        t[j] = *e;
    }
    free(s->interned);
    s->interned = t;
    s->ninterned_slots = n;
}

/* The snapshot's copy of v, made on first use. */
static const char *intern(mw_snapshot *s, const char *v)
{
    if ((s->ninterned + 1) * 2 > s->ninterned_slots) intern_grow(s);
    uint64_t h = hash_name(v);
    size_t mask = s->ninterned_slots - 1, i = h & mask;
    for (; s->interned[i].value; i = (i + 1) & mask)
        if (strcmp(s->interned[i].value, v) == 0) return s->interned[i].value;
    s->interned[i].value = mw_arena_strdup(&s->arena, v);
    s->ninterned++;
    return s->interned[i].value;
}

/* The label set last copied from a caller's array, by that array's address.
 * Collectors that keep one array per container (the cgroup collector) emit
 * it once per family: each sample after the first finds its set here. A
 * full index of every distinct set shares more, but hashing into a table
 * of thousands made the 8-GPU collector's cycle 190 us (80 %) slower on a
 * 100-pod node, for 100 KB less per snapshot. */
struct mw_labelset {
    const mw_label *from;   /* the caller's array */
    const mw_label *labels; /* the snapshot's copy, values interned */
    uint32_t n;
};
#define SET_BITS 11 /* 2048 slots: a few times the containers of a large node */

/* The snapshot's copy of l (from the caller's array `from`, values already
 * interned), shared with the previous sample from that array when it has
 * the same labels. */
static const mw_label *share_set(mw_snapshot *s, const mw_label *from, const mw_label *l, size_t n)
{
    static const mw_label none[1];
    if (n == 0) return none;
    if (!s->sets) s->sets = mw_xcalloc((size_t)1 << SET_BITS, sizeof(*s->sets));
    struct mw_labelset *e = &s->sets[((uintptr_t)from * 0x9e3779b97f4a7c15ULL) >> (64 - SET_BITS)];
    if (e->from == from && e->n == n && memcmp(e->labels, l, n * sizeof(*l)) == 0) return e->labels;
    mw_label *copy = mw_arena_alloc(&s->arena, n * sizeof(*l));
    memcpy(copy, l, n * sizeof(*l));
    e->from = from;
    e->labels = copy;
    e->n = (uint32_t)n;
    s->nsets++;
    return copy;
}

void mw_snapshot_seal(mw_snapshot *s)
{
    if (s->ninterned) atomic_store(&last_ninterned, s->ninterned);
    free(s->interned);
    s->interned = NULL;
    s->ninterned = s->ninterned_slots = 0;
    free(s->sets);
    s->sets = NULL;
}

mw_snapshot *mw_snapshot_new(void)
{
    mw_snapshot *s = mw_xcalloc(1, sizeof(*s));
    mw_arena_init(&s->arena, 64 * 1024);
    s->nslots = 256;
    s->slots = mw_xcalloc(s->nslots, sizeof(*s->slots));
    s->timestamp_ms = mw_now_ms();
    return s;
}

void mw_snapshot_free(mw_snapshot *s)
{
    if (!s) return;
    mw_arena_free(&s->arena);
    free(s->slots);
    free(s->interned);
    free(s->sets);
    free(s);
}

static size_t find_slot(mw_family **slots, size_t nslots, const char *name)
{
    size_t i = hash_name(name) & (nslots - 1);
    while (slots[i] && strcmp(slots[i]->desc->name, name) != 0)
        i = (i + 1) & (nslots - 1);
    return i;
}

static void grow(mw_snapshot *s)
{
    size_t n = s->nslots * 2;
    mw_family **slots = mw_xcalloc(n, sizeof(*slots));
    for (mw_family *f = s->first; f; f = f->next)
        slots[find_slot(slots, n, f->desc->name)] = f;
    free(s->slots);
    s->slots = slots;
    s->nslots = n;
}

static mw_family *family_lookup(mw_snapshot *s, const mw_metric_desc *d);

static mw_family *family_for(mw_snapshot *s, const mw_metric_desc *d)
{
    /* Collectors emit a family's samples one after another: the family of
     * the previous sample is by far the most likely hit. */
    if (s->last_used && s->last_used->desc == d) return s->last_used;
    mw_family *f = family_lookup(s, d);
    s->last_used = f;
    return f;
}

static mw_family *family_lookup(mw_snapshot *s, const mw_metric_desc *d)
{
    size_t i = find_slot(s->slots, s->nslots, d->name);
    if (s->slots[i]) return s->slots[i];
    if ((s->nfamilies + 1) * 2 > s->nslots) {
        grow(s);
        i = find_slot(s->slots, s->nslots, d->name);
    }
    mw_family *f = mw_arena_alloc(&s->arena, sizeof(*f));
    memset(f, 0, sizeof(*f));
    f->desc = d;
    if (s->last)
        s->last->next = f;
    else
        s->first = f;
    s->last = f;
    s->slots[i] = f;
    s->nfamilies++;
    return f;
}

void mw_emitv(mw_snapshot *s, const mw_metric_desc *d, double value, size_t nlabels,
              const mw_label *labels)
{
    if (nlabels > MW_MAX_LABELS) nlabels = MW_MAX_LABELS;
    mw_family *f = family_for(s, d);
    mw_label set[MW_MAX_LABELS];
    for (size_t i = 0; i < nlabels; i++) {
        set[i].name = labels[i].name;
        set[i].value = intern(s, labels[i].value ? labels[i].value : "");
    }
    mw_sample *smp = mw_arena_alloc(&s->arena, sizeof(*smp));
    smp->next = NULL;
    smp->value = value;
    smp->labels = share_set(s, labels, set, nlabels);
    smp->nlabels = (uint32_t)nlabels;
    if (f->last)
        f->last->next = smp;
    else
        f->first = smp;
    f->last = smp;
    f->nsamples++;
    s->nsamples++;
}

void mw_emit(mw_snapshot *s, const mw_metric_desc *d, double value, ...)
{
    mw_label labels[MW_MAX_LABELS];
    size_t n = 0;
    va_list ap;
    va_start(ap, value);
    for (;;) {
        const char *name = va_arg(ap, const char *);
        if (!name) break;
        const char *val = va_arg(ap, const char *);
        if (n < MW_MAX_LABELS) {
            labels[n].name = name;
            labels[n].value = val;
            n++;
        }
    }
    va_end(ap);
    mw_emitv(s, d, value, n, labels);
}

void mw_snapshot_label_all(mw_snapshot *s, const char *name, const char *value)
{
    const char *v = mw_arena_strdup(&s->arena, value);
    const mw_label *from = NULL, *to = NULL;
    for (mw_family *f = s->first; f; f = f->next)
        for (mw_sample *smp = f->first; smp; smp = smp->next) {
            uint32_t n = smp->nlabels, i;
            for (i = 0; i < n && strcmp(smp->labels[i].name, name) != 0; i++) {
            }
            if (i < n || n >= MW_MAX_LABELS) continue; /* has it, or no room */
            if (smp->labels != from || !to) {
                mw_label *copy = mw_arena_alloc(&s->arena, (n + 1) * sizeof(*copy));
                if (n) memcpy(copy, smp->labels, n * sizeof(*copy));
                copy[n] = (mw_label){name, v};
                from = smp->labels;
                to = copy;
            }
            smp->labels = to;
            smp->nlabels = n + 1;
        }
}

const mw_family *mw_snapshot_find(const mw_snapshot *s, const char *name)
{
    size_t i = find_slot(s->slots, s->nslots, name);
    return s->slots[i];
}

static int sample_has(const mw_sample *smp, const char *name, const char *value)
{
    for (uint32_t i = 0; i < smp->nlabels; i++)
        if (strcmp(smp->labels[i].name, name) == 0) return strcmp(smp->labels[i].value, value) == 0;
    return value[0] == '\0'; /* an absent label equals the empty value */
}

int mw_snapshot_get(const mw_snapshot *s, const char *name, double *out, ...)
{
    const mw_family *f = mw_snapshot_find(s, name);
    if (!f) return -1;
    const char *want[2 * MW_MAX_LABELS];
    size_t n = 0;
    va_list ap;
    va_start(ap, out);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k) break;
        const char *v = va_arg(ap, const char *);
        if (n + 2 <= 2 * MW_MAX_LABELS) {
            want[n++] = k;
            want[n++] = v;
        }
    }
    va_end(ap);
    for (const mw_sample *smp = f->first; smp; smp = smp->next) {
        size_t i;
        for (i = 0; i < n; i += 2)
            if (!sample_has(smp, want[i], want[i + 1])) break;
        if (i == n) {
            *out = smp->value;
            return 0;
        }
    }
    return -1;
}
