/* index.c - matcher evaluation over sorted postings lists. */
#include "index.h"
#include "../core/util.h"

#include <stdlib.h>
#include <string.h>

void mw_ids_push(mw_ids *a, uint32_t id)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = mw_xrealloc(a->v, a->cap * sizeof(uint32_t));
    }
    a->v[a->n++] = id;
}

void mw_ids_free(mw_ids *a)
{
    free(a->v);
    memset(a, 0, sizeof(*a));
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void mw_ids_sort_unique(mw_ids *a)
{
    if (a->n < 2) return;
    int sorted = 1;
    for (size_t i = 1; i < a->n && sorted; i++)
        if (a->v[i - 1] >= a->v[i]) sorted = 0;
    if (sorted) return;
    qsort(a->v, a->n, sizeof(uint32_t), cmp_u32);
    size_t w = 1;
    for (size_t i = 1; i < a->n; i++)
        if (a->v[i] != a->v[w - 1]) a->v[w++] = a->v[i];
    a->n = w;
}

static void append_all(void *arg, const uint32_t *ids, size_t n)
{
    mw_ids *a = arg;
    if (a->n + n > a->cap) {
        a->cap = a->n + n > a->cap * 2 ? a->n + n : a->cap * 2;
        a->v = mw_xrealloc(a->v, a->cap * sizeof(uint32_t));
    }
    memcpy(a->v + a->n, ids, n * sizeof(uint32_t));
    a->n += n;
}

/* Intersecting a short sorted list with a long one as the long one is
 * handed over in sorted pieces: each id of the short list still ahead is
 * looked up by binary search in the piece, so neither a copy of the long
 * list nor a pass over it is made (a one-pod selector meets a metric name
 * with 100k series on a large node). */
typedef struct narrow_ctx {
    mw_ids *a;
    size_t i, w; /* next id of a to look up; ids kept so far */
} narrow_ctx;

static void narrow_piece(void *arg, const uint32_t *ids, size_t n)
{
    narrow_ctx *c = arg;
    mw_ids *a = c->a;
    size_t lo = 0;
    while (c->i < a->n && n > 0 && a->v[c->i] <= ids[n - 1]) {
        uint32_t x = a->v[c->i++];
        size_t hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (ids[mid] < x)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && ids[lo] == x) a->v[c->w++] = x;
    }
}

typedef struct collect_ctx {
    const mw_matcher *m;
    int want_match; /* collect values that match (1) or that do not (0) */
    mw_ids *out;
} collect_ctx;

static void collect_values(void *arg, const char *value, const uint32_t *ids, size_t n)
{
    collect_ctx *c = arg;
    if (mw_matcher_matches(c->m, value) == c->want_match) append_all(c->out, ids, n);
}

/* a := a ∩ b (both sorted). */
static void intersect(mw_ids *a, const mw_ids *b)
{
    size_t i = 0, j = 0, w = 0;
    while (i < a->n && j < b->n) {
        if (a->v[i] < b->v[j])
            i++;
        else if (a->v[i] > b->v[j])
            j++;
        else {
            a->v[w++] = a->v[i];
            i++;
            j++;
        }
    }
    a->n = w;
}

/* a := a \ b (both sorted). */
static void subtract(mw_ids *a, const mw_ids *b)
{
    size_t i = 0, j = 0, w = 0;
    while (i < a->n) {
        while (j < b->n && b->v[j] < a->v[i])
            j++;
        if (j < b->n && b->v[j] == a->v[i]) {
            i++;
            continue;
        }
        a->v[w++] = a->v[i++];
    }
    a->n = w;
}

/* Equality matchers by the length of their postings, shortest first. */
typedef struct eq_len {
    const mw_matcher *m;
    size_t len;
} eq_len;

static int cmp_len(const void *a, const void *b)
{
    size_t x = ((const eq_len *)a)->len, y = ((const eq_len *)b)->len;
    return x < y ? -1 : x > y;
}

/* out := the postings of m=value, or out ∩ them once out holds a set. */
static void select_eq(const mw_index_ops *ops, void *ctx, const mw_matcher *m, mw_ids *out,
                      int *have)
{
    if (!*have) {
        ops->lookup(ctx, m->name, m->value, append_all, out);
        *have = 1;
        return;
    }
    narrow_ctx c = {out, 0, 0};
    ops->lookup(ctx, m->name, m->value, narrow_piece, &c);
    out->n = c.w;
}

void mw_index_select(const mw_index_ops *ops, void *ctx, const mw_matcher *ms, size_t n,
                     mw_ids *out)
{
    out->n = 0;
    int have = 0;
    mw_ids tmp = {0};
    /* Positive equality matchers first, the shortest postings first: they
     * narrow the set the most, and a long list is then only searched. */
    eq_len eqs[64] = {{0}};
    size_t neq = 0;
    for (size_t k = 0; k < n; k++)
        if (!ms[k].matches_empty && ms[k].op == MW_MATCH_EQ && neq < 64) {
            eqs[neq].m = &ms[k];
            eqs[neq].len = ops->count(ctx, ms[k].name, ms[k].value);
            if (eqs[neq++].len == 0) goto done;
        }
    qsort(eqs, neq, sizeof(eqs[0]), cmp_len);
    for (size_t k = 0; k < neq && (!have || out->n); k++)
        select_eq(ops, ctx, eqs[k].m, out, &have);
    /* Then the other positive matchers, in their order. */
    size_t eq_seen = 0;
    for (size_t k = 0; k < n && (!have || out->n); k++) {
        const mw_matcher *m = &ms[k];
        if (m->matches_empty) continue;
        if (m->op == MW_MATCH_EQ) {
            /* The first 64 were taken above; more come only from callers
             * without the parser's limit of 64 matchers. */
            if (eq_seen++ >= neq) select_eq(ops, ctx, m, out, &have);
            continue;
        }
        tmp.n = 0;
        collect_ctx c = {m, 1, &tmp};
        ops->values(ctx, m->name, collect_values, &c);
        mw_ids_sort_unique(&tmp);
        if (!have) {
            mw_ids t = *out;
            *out = tmp;
            tmp = t;
            have = 1;
        } else {
            intersect(out, &tmp);
        }
    }
    if (!have) ops->all(ctx, out);
    /* Matchers an absent label satisfies: drop the series whose value fails. */
    for (size_t k = 0; k < n && out->n; k++) {
        const mw_matcher *m = &ms[k];
        if (!m->matches_empty) continue;
        tmp.n = 0;
        collect_ctx c = {m, 0, &tmp};
        ops->values(ctx, m->name, collect_values, &c);
        mw_ids_sort_unique(&tmp);
        subtract(out, &tmp);
    }
done:
    mw_ids_free(&tmp);
}
