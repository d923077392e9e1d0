/* snapshot.c - one collection cycle's samples, see snapshot.h. */
#include "snapshot.h"
#include "util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

struct mw_interned {
    const char *value; /* in the arena; NULL = free slot */
    uint64_t hash;
};

static void intern_grow(mw_snapshot *s)
{
    size_t n = s->ninterned_slots ? s->ninterned_slots * 2 : 1024;
    struct mw_interned *t = mw_xcalloc(n, sizeof(*t));
    for (size_t i = 0; i < s->ninterned_slots; i++) {
        const struct mw_interned *e = &s->interned[i];
        if (!e->value) continue;
        size_t j = e->hash & (n - 1);
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
        if (s->interned[i].hash == h && strcmp(s->interned[i].value, v) == 0)
            return s->interned[i].value;
    s->interned[i].value = mw_arena_strdup(&s->arena, v);
    s->interned[i].hash = h;
    s->ninterned++;
    return s->interned[i].value;
}

struct mw_labelset {
    const mw_label *labels; /* in the arena; NULL = free slot */
    uint64_t hash;
    uint32_t n;
};

/* Label names are literals and values are interned: a set is its pointers. */
static uint64_t hash_set(const mw_label *l, size_t n)
{
    uint64_t h = 1469598103934665603ULL ^ n;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (uint64_t)(uintptr_t)l[i].name) * 1099511628211ULL;
        h = (h ^ (uint64_t)(uintptr_t)l[i].value) * 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static void sets_grow(mw_snapshot *s)
{
    size_t n = s->nsets_slots ? s->nsets_slots * 2 : 1024;
    struct mw_labelset *t = mw_xcalloc(n, sizeof(*t));
    for (size_t i = 0; i < s->nsets_slots; i++) {
        const struct mw_labelset *e = &s->sets[i];
        if (!e->labels) continue;
        size_t j = e->hash & (n - 1);
        while (t[j].labels)
            j = (j + 1) & (n - 1);
        t[j] = *e;
    }
    free(s->sets);
    s->sets = t;
    s->nsets_slots = n;
}

/* The snapshot's copy of the label set l (values already interned), shared
 * by every sample of the same set. */
static const mw_label *share_set(mw_snapshot *s, const mw_label *l, size_t n)
{
    static const mw_label none[1];
    if (n == 0) return none;
    if ((s->nsets + 1) * 2 > s->nsets_slots) sets_grow(s);
    uint64_t h = hash_set(l, n);
    size_t mask = s->nsets_slots - 1, i = h & mask;
    for (; s->sets[i].labels; i = (i + 1) & mask)
        if (s->sets[i].hash == h && s->sets[i].n == n &&
            memcmp(s->sets[i].labels, l, n * sizeof(*l)) == 0)
            return s->sets[i].labels;
    mw_label *copy = mw_arena_alloc(&s->arena, n * sizeof(*l));
    memcpy(copy, l, n * sizeof(*l));
    s->sets[i].labels = copy;
    s->sets[i].hash = h;
    s->sets[i].n = (uint32_t)n;
    s->nsets++;
    return copy;
}

void mw_snapshot_seal(mw_snapshot *s)
{
    free(s->interned);
    s->interned = NULL;
    s->ninterned = s->ninterned_slots = 0;
    free(s->sets);
    s->sets = NULL;
    s->nsets = s->nsets_slots = 0;
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
    smp->labels = share_set(s, set, nlabels);
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
