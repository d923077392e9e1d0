/* history_ring.c - the doctor's ring of frames, with the frames between the
 * oldest and the newest packed.
 *
 * A frame keeps one stride of the history (a cycle, or one in every few);
 * the rules compare the window's first frame with the newest and walk the
 * frames between for the PSI totals. The newest frame keeps its containers'
 * values whole (the rules read it most), and so does the oldest (the first
 * frame of the default window, and where every reconstruction starts); a
 * frame between holds the float differences from the frame before of the
 * values that moved (dr_packed in findings.h): most of a full history's
 * memory is those frames.
 *
 * Packing happens when a frame stops being the newest (its predecessor's
 * values are reconstructed first, so that the difference corrects the
 * predecessor's rounding); unpacking when the frame before is dropped and it
 * becomes the oldest. */
#include "findings.h"
#include "../core/util.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const size_t value_at[DR_CTR_VALUES] = {
    offsetof(dr_container, cpu_s),      offsetof(dr_container, throttled_periods),
    offsetof(dr_container, periods),    offsetof(dr_container, throttled_s),
    offsetof(dr_container, mem_some_s), offsetof(dr_container, mem_full_s),
    offsetof(dr_container, io_some_s)};

static double get_value(const dr_container *c, size_t k)
{
    double v;
    memcpy(&v, (const char *)c + value_at[k], sizeof(v));
    return v;
}

static void set_value(dr_container *c, size_t k, double v)
{
    memcpy((char *)c + value_at[k], &v, sizeof(v));
}

static dr_frame *slot(const dr_history *h, size_t i)
{
    return h->frames[(h->start + i) % DR_MAX_FRAMES];
}

/* The place of packed container j of frame f in the frame before (or
 * DR_ANCHOR | its anchor). */
static uint32_t place_before(const dr_frame *f, size_t j)
{
    return f->prev ? f->prev[j] : (uint32_t)j;
}

static unsigned kind_of(const dr_packed *p, size_t k)
{
    return (p->kinds >> (2 * k)) & 3u;
}

/* Differences of packed container p before value k. */
static uint32_t diffs_below(const dr_packed *p, size_t k)
{
    unsigned below = p->kinds & ((1u << (2 * k)) - 1u);
    return (uint32_t)__builtin_popcount(below & 0xAAAAu); /* DR_DIFF: the high bit */
}

/* Index in f->diffs of the first difference of packed container j. */
static uint32_t first_diff(const dr_frame *f, size_t j)
{
    size_t from = j - j % DR_MARK_EVERY;
    uint32_t d = f->marks[from / DR_MARK_EVERY];
    for (size_t i = from; i < j; i++)
        d += diffs_below(&f->packed[i], DR_CTR_VALUES);
    return d;
}

/* Value k of packed container j of frame f, given its value in the frame
 * before (base, -1 when absent there); d: the index of j's first
 * difference (first_diff). */
static double unpack_value(const dr_frame *f, size_t j, uint32_t d, size_t k, double base)
{
    uint32_t b = place_before(f, j);
    if (b & DR_ANCHOR) return f->anchors[b & ~DR_ANCHOR].v[k];
    unsigned kind = kind_of(&f->packed[j], k);
    if (kind == DR_GONE || base < 0) return DR_NO_VALUE;
    if (kind == DR_SAME) return base;
    return base + (double)f->diffs[d + diffs_below(&f->packed[j], k)];
}

/* Container j of packed frame f, given the frame before's values (prev);
 * *d: the index of its first difference, moved past its last. */
static void unpack_one(const dr_frame *f, size_t j, uint32_t *d, const dr_container *prev,
                       dr_container *out)
{
    uint32_t b = place_before(f, j);
    out->id = f->ids->id[j];
    for (size_t k = 0; k < DR_CTR_VALUES; k++)
        set_value(out, k,
                  unpack_value(f, j, *d, k, b & DR_ANCHOR ? DR_NO_VALUE : get_value(&prev[b], k)));
    *d += diffs_below(&f->packed[j], DR_CTR_VALUES);
}

dr_container *dr_history_values(const dr_history *h, size_t i)
{
    /* From the nearest whole frame at or before i (the oldest at the
     * latest), forward, in two buffers of the largest frame's size. */
    size_t from = i, cap = 0;
    while (slot(h, from)->packed)
        from--;
    for (size_t k = from; k <= i; k++)
        if (slot(h, k)->nctrs > cap) cap = slot(h, k)->nctrs;
    dr_container *cur = mw_xcalloc(cap + 1, sizeof(*cur));
    const dr_frame *w = slot(h, from);
    if (w->nctrs) memcpy(cur, w->ctrs, w->nctrs * sizeof(*cur));
    if (from == i) return cur;
    dr_container *next = mw_xcalloc(cap + 1, sizeof(*next));
    for (size_t k = from + 1; k <= i; k++) {
        const dr_frame *p = slot(h, k);
        uint32_t d = 0;
        for (size_t j = 0; j < p->nctrs; j++)
            unpack_one(p, j, &d, cur, &next[j]);
        dr_container *t = cur;
        cur = next;
        next = t;
    }
    free(next);
    return cur;
}

/* The index of the nearest frame at or before i with whole CPUs. */
static size_t whole_cpus_at(const dr_history *h, size_t i)
{
    while (slot(h, i)->pcpus) /* the oldest frame's CPUs are whole */
        i--;
    return i;
}

const dr_frame *dr_history_cpu_ids(const dr_history *h, size_t i)
{
    return slot(h, whole_cpus_at(h, i));
}

dr_cpu *dr_history_cpus(const dr_history *h, size_t i)
{
    size_t from = whole_cpus_at(h, i);
    const dr_frame *w = slot(h, from);
    dr_cpu *c = mw_xcalloc(w->ncpus + 1, sizeof(*c));
    if (w->ncpus) memcpy(c, w->cpus, w->ncpus * sizeof(*c));
    for (size_t k = from + 1; k <= i; k++) {
        const dr_cpu_packed *p = slot(h, k)->pcpus;
        for (size_t j = 0; j < w->ncpus; j++) {
            c[j].busy_s += (double)p[j].busy_d;
            c[j].total_s += (double)p[j].total_d;
            c[j].hz = (double)p[j].hz;
            c[j].max_hz = (double)p[j].max_hz;
        }
    }
    return c;
}

/* Frame f's CPUs packed against the frame before's (prev, n of them), into
 * out; 0 when they are not the same CPUs (or a difference is no float). */
static int pack_cpus(const dr_frame *f, const dr_cpu *prev, size_t n, dr_cpu_packed *out)
{
    if (f->ncpus != n) return 0;
    for (size_t j = 0; j < n; j++) {
        const dr_cpu *c = &f->cpus[j];
        double busy = c->busy_s - prev[j].busy_s, total = c->total_s - prev[j].total_s;
        if (c->cpu != prev[j].cpu || !(fabs(busy) <= FLT_MAX && fabs(total) <= FLT_MAX) ||
            !(fabs(c->hz) <= FLT_MAX && fabs(c->max_hz) <= FLT_MAX))
            return 0;
        out[j] = (dr_cpu_packed){(float)busy, (float)total, (float)c->hz, (float)c->max_hz};
    }
    return 1;
}

void dr_history_series(const dr_history *h, size_t i0, const char *key, size_t field, double *out)
{
    size_t k = 0;
    while (k < DR_CTR_VALUES && value_at[k] != field)
        k++;
    double cur = DR_NO_VALUE;
    for (size_t i = 0; i < h->n; i++) {
        const dr_frame *f = slot(h, i);
        long j = k < DR_CTR_VALUES ? dr_frame_find(f, key) : -1;
        if (j < 0) {
            cur = DR_NO_VALUE;
        } else if (f->ctrs) {
            cur = get_value(&f->ctrs[j], k);
        } else { /* the frame before has it (or the record is an anchor) */
            cur = unpack_value(f, (size_t)j, first_diff(f, (size_t)j), k, cur);
        }
        if (i >= i0) out[i - i0] = cur < 0 ? DR_NO_VALUE : cur;
    }
}

/* What pack() makes of a frame's containers. */
typedef struct packing {
    dr_cpu_packed *cpus; /* NULL: the CPUs stay whole */
    dr_packed *packed;
    float *diffs;
    size_t ndiffs;
    uint32_t *prev; /* NULL: every container at its own place */
    dr_anchor *anchors;
    size_t nanchors;
    dr_idset *ids;
    const dr_use *uses; /* the frame before's, the same: shared (NULL: not) */
} packing;

/* A copy of f in the other layout: its containers (and CPUs, with
 * pk->cpus) packed (pk), or whole (ctrs, and cpus unless NULL). f's
 * allocation is freed; its identities and the rest are moved over. */
static dr_frame *relayout(dr_frame *f, const packing *pk, const dr_container *ctrs,
                          const dr_cpu *cpus)
{
    dr_frame_shape shape = {.ncpus = f->ncpus,
                            .nctrs = f->nctrs,
                            .ndiffs = pk ? pk->ndiffs : 0,
                            .nanchors = pk ? pk->nanchors : 0,
                            .ngpus = f->ngpus,
                            .nuses = pk && pk->uses ? 0 : f->nuses,
                            .cpus_packed = pk && pk->cpus,
                            .packed = pk ? (pk->prev ? 2 : 1) : 0};
    dr_frame *n = dr_frame_alloc(&shape);
    n->t_ms = f->t_ms;
    n->pool = f->pool;
    n->own = f->own;
    n->governors = f->governors;
    n->now = f->now;
    if (n->pcpus && f->ncpus) memcpy(n->pcpus, pk->cpus, f->ncpus * sizeof(dr_cpu_packed));
    if (n->cpus && f->ncpus) memcpy(n->cpus, cpus ? cpus : f->cpus, f->ncpus * sizeof(dr_cpu));
    if (f->ngpus) memcpy(n->gpus, f->gpus, f->ngpus * sizeof(dr_gpu));
    if (pk && pk->uses) {
        n->uses = (dr_use *)(uintptr_t)pk->uses;
        n->nuses = f->nuses;
    } else if (f->nuses) {
        memcpy(n->uses, f->uses, f->nuses * sizeof(dr_use));
    }
    if (pk) {
        n->ids = pk->ids;
        if (f->nctrs) memcpy(n->packed, pk->packed, f->nctrs * sizeof(dr_packed));
        if (pk->ndiffs) memcpy(n->diffs, pk->diffs, pk->ndiffs * sizeof(float));
        if (pk->prev && f->nctrs) memcpy(n->prev, pk->prev, f->nctrs * sizeof(uint32_t));
        if (pk->nanchors) memcpy(n->anchors, pk->anchors, pk->nanchors * sizeof(dr_anchor));
        uint32_t d = 0;
        for (size_t j = 0; j < f->nctrs; j++) {
            if (j % DR_MARK_EVERY == 0) n->marks[j / DR_MARK_EVERY] = d;
            d += diffs_below(&n->packed[j], DR_CTR_VALUES);
        }
    }
    if (ctrs && f->nctrs) memcpy(n->ctrs, ctrs, f->nctrs * sizeof(dr_container));
    free(f);
    return n;
}

/* Pack frame i (whole, neither the oldest nor the newest) against frame
 * i - 1's values. */
static void pack(dr_history *h, size_t i)
{
    dr_frame *f = slot(h, i);
    const dr_frame *before = slot(h, i - 1);
    dr_container *prev = dr_history_values(h, i - 1);
    packing pk = {.packed = mw_xcalloc(f->nctrs + 1, sizeof(dr_packed)),
                  .diffs = mw_xcalloc(f->nctrs * DR_CTR_VALUES + 1, sizeof(float)),
                  .prev = mw_xcalloc(f->nctrs + 1, sizeof(uint32_t))};
    /* Anchors are the exception (a container new since the frame before):
     * grown as met, not sized for every container. */
    size_t acap = 0, b = 0;
    int in_place = 1; /* every container at its own place in the frame before */
    for (size_t j = 0; j < f->nctrs; j++) {
        const dr_container *c = &f->ctrs[j];
        /* Both frames are sorted by key: one walk finds each predecessor. */
        int cmp = 1;
        while (b < before->nctrs && (cmp = strcmp(prev[b].id->key, c->id->key)) < 0)
            b++;
        /* Whole when the frame before lacks the container or a value this
         * one has, or when a difference does not fit a float. */
        int anchor = b >= before->nctrs || cmp != 0;
        double diff[DR_CTR_VALUES];
        for (size_t k = 0; k < DR_CTR_VALUES && !anchor; k++) {
            double v = get_value(c, k), base = get_value(&prev[b], k);
            diff[k] = v >= 0 ? v - base : NAN;
            anchor = v >= 0 && !(base >= 0 && fabs(diff[k]) <= FLT_MAX);
        }
        if (anchor) {
            if (pk.nanchors == acap) {
                acap = acap ? acap * 2 : 16;
                pk.anchors = mw_xrealloc(pk.anchors, acap * sizeof(dr_anchor));
            }
            for (size_t k = 0; k < DR_CTR_VALUES; k++)
                pk.anchors[pk.nanchors].v[k] = get_value(c, k);
            pk.prev[j] = DR_ANCHOR | (uint32_t)pk.nanchors++;
            in_place = 0;
            continue;
        }
        pk.prev[j] = (uint32_t)b;
        in_place = in_place && b == j;
        unsigned kinds = 0;
        for (size_t k = 0; k < DR_CTR_VALUES; k++) {
            float d = (float)diff[k];
            unsigned kind = isnan(diff[k]) ? DR_GONE : d == 0.0f ? DR_SAME : DR_DIFF;
            if (kind == DR_DIFF) pk.diffs[pk.ndiffs++] = d;
            kinds |= kind << (2 * k);
        }
        pk.packed[j].kinds = (uint16_t)kinds;
    }
    uint32_t *places = pk.prev;
    if (in_place) pk.prev = NULL;
    pk.ids = dr_idset_take(f->pool, f->ctrs, f->nctrs, before->packed ? before->ids : NULL);
    /* Which containers use which GPUs changes seldom: the same uses of the
     * same containers are the frame before's (drop_oldest gives the frames
     * that share them a copy when their owner goes). */
    if (pk.ids == before->ids && f->nuses == before->nuses &&
        (!f->nuses || memcmp(f->uses, before->uses, f->nuses * sizeof(dr_use)) == 0))
        pk.uses = before->uses;
    dr_cpu *prev_cpus = dr_history_cpus(h, i - 1);
    pk.cpus = mw_xcalloc(f->ncpus + 1, sizeof(dr_cpu_packed));
    if (!pack_cpus(f, prev_cpus, before->ncpus, pk.cpus)) {
        free(pk.cpus);
        pk.cpus = NULL;
    }
    h->frames[(h->start + i) % DR_MAX_FRAMES] = relayout(f, &pk, NULL, NULL);
    free(prev_cpus);
    free(pk.cpus);
    free(prev);
    free(pk.packed);
    free(pk.diffs);
    free(places);
    free(pk.anchors);
}

void dr_history_init(dr_history *h, int64_t history_ms, int64_t interval_ms)
{
    memset(h, 0, sizeof(*h));
    h->history_ms = history_ms > 0 ? history_ms : 1;
    int64_t cycles = interval_ms > 0 ? h->history_ms / interval_ms + 1 : 1;
    h->stride = (unsigned)((cycles + DR_MAX_FRAMES - 2) / (DR_MAX_FRAMES - 1));
    if (h->stride < 1) h->stride = 1;
}

size_t dr_history_len(const dr_history *h)
{
    return h->n;
}

const dr_frame *dr_history_at(const dr_history *h, size_t i)
{
    return i < h->n ? slot(h, i) : NULL;
}

static void drop_oldest(dr_history *h)
{
    /* The next frame becomes the oldest: whole again, from the values the
     * dropped one gives it (and its own copy of the uses it shares). */
    if (h->n >= 2 && slot(h, 1)->packed) {
        dr_container *next = dr_history_values(h, 1);
        dr_cpu *next_cpus = slot(h, 1)->pcpus ? dr_history_cpus(h, 1) : NULL;
        dr_frame *f = slot(h, 1);
        size_t sharing = 2; /* the frames after it that share its uses: 2..sharing-1 */
        while (sharing < h->n && slot(h, sharing)->uses == f->uses)
            sharing++;
        dr_idset_give(f->pool, f->ids);
        dr_frame *n = relayout(f, NULL, next, next_cpus);
        h->frames[(h->start + 1) % DR_MAX_FRAMES] = n;
        for (size_t k = 2; k < sharing; k++)
            slot(h, k)->uses = n->uses;
        free(next);
        free(next_cpus);
    }
    dr_frame_free(h->frames[h->start]);
    h->frames[h->start] = NULL;
    h->start = (h->start + 1) % DR_MAX_FRAMES;
    h->n--;
}

void dr_history_push(dr_history *h, dr_frame *f)
{
    if (h->n >= 2 && h->skipped + 1 < h->stride) {
        /* Between two kept frames the newest slot slides forward. */
        size_t last = (h->start + h->n - 1) % DR_MAX_FRAMES;
        dr_frame_free(h->frames[last]);
        h->frames[last] = f;
        h->skipped++;
    } else {
        if (h->n) {
            /* The rules read these parts of the newest frame only. */
            dr_frame_drop_now(slot(h, h->n - 1));
            if (h->n >= 2) pack(h, h->n - 1);
        }
        if (h->n == DR_MAX_FRAMES) drop_oldest(h);
        h->frames[(h->start + h->n) % DR_MAX_FRAMES] = f;
        h->n++;
        h->skipped = 0;
    }
    /* Keep the history covered: drop the oldest while the next one is old
     * enough on its own. */
    while (h->n >= 2 && f->t_ms - dr_history_at(h, 1)->t_ms >= h->history_ms)
        drop_oldest(h);
}

void dr_history_free(dr_history *h)
{
    for (size_t i = 0; i < h->n; i++)
        dr_frame_free(slot(h, i));
    h->n = 0;
    dr_strpool_free(&h->pool);
}
