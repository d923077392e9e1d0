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
    for (size_t i = 0; i < n; i++)
        mw_ids_push(a, ids[i]);
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

void mw_index_select(const mw_index_ops *ops, void *ctx, const mw_matcher *ms, size_t n,
                     mw_ids *out)
{
    out->n = 0;
    int have = 0;
    mw_ids tmp = {0};
    /* Positive matchers first: they narrow the set the most. */
    for (size_t k = 0; k < n; k++) {
        const mw_matcher *m = &ms[k];
        if (m->matches_empty) continue;
        tmp.n = 0;
        if (m->op == MW_MATCH_EQ) {
            ops->lookup(ctx, m->name, m->value, append_all, &tmp);
        } else {
            collect_ctx c = {m, 1, &tmp};
            ops->values(ctx, m->name, collect_values, &c);
            mw_ids_sort_unique(&tmp);
        }
        if (!have) {
            mw_ids t = *out;
            *out = tmp;
            tmp = t;
            have = 1;
        } else {
            intersect(out, &tmp);
        }
        if (out->n == 0) goto done;
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
