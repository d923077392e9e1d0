/* index.h - selecting series by matchers over an inverted index.
 *
 * The head and each block keep postings: for every label pair, the sorted
 * ids of the series that carry it. A selection intersects the postings of
 * the matchers that need a label (a="x", a=~"x|y") and subtracts those of the
 * matchers that an absent label satisfies (a!="x", a="" , a!~"x"), the way
 * Prometheus does, so that a query touches only the series it returns. */
#ifndef MW_INDEX_H
#define MW_INDEX_H

#include "matcher.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mw_ids {
    uint32_t *v;
    size_t n, cap;
} mw_ids;

void mw_ids_push(mw_ids *a, uint32_t id);
void mw_ids_free(mw_ids *a);
/* Sort and drop duplicates. */
void mw_ids_sort_unique(mw_ids *a);

typedef void (*mw_postings_fn)(void *arg, const uint32_t *ids, size_t n);

/* What an index offers to the selection. */
typedef struct mw_index_ops {
    /* Postings of name=value (nothing when absent). */
    void (*lookup)(void *ctx, const char *name, const char *value, mw_postings_fn fn, void *arg);
    /* Every value of name with its postings. */
    void (*values)(void *ctx, const char *name,
                   void (*fn)(void *arg, const char *value, const uint32_t *ids, size_t n),
                   void *arg);
    /* Every series id, sorted. */
    void (*all)(void *ctx, mw_ids *out);
    /* Length of the postings of name=value (0 when absent), without
     * reading them: the selection starts from the shortest list. */
    size_t (*count)(void *ctx, const char *name, const char *value);
} mw_index_ops;

/* The sorted ids of the series that all matchers accept. */
void mw_index_select(const mw_index_ops *ops, void *ctx, const mw_matcher *ms, size_t n,
                     mw_ids *out);

#endif
