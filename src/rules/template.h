/* template.h - the templates of alert labels and annotations: the subset of
 * Go's text/template that Prometheus rule files use, with Prometheus's
 * functions (docs/rules.md lists them).
 *
 * Parsed once when a rule file loads (an unknown function or a syntax
 * error is a load error), expanded at each evaluation. Expansion is
 * bounded: its output (64 KiB), the iterations of range, the depth of
 * nesting and the queries that query() runs. */
#ifndef MW_RULES_TEMPLATE_H
#define MW_RULES_TEMPLATE_H

#include "../core/arena.h"

#include <stddef.h>

typedef struct mw_tpl mw_tpl;

typedef struct mw_tpl_kv {
    const char *name, *value;
} mw_tpl_kv;

/* One sample of query()'s answer; labels sorted by name. */
typedef struct mw_tpl_sample {
    mw_tpl_kv *labels;
    size_t nlabels;
    double value;
} mw_tpl_sample;

/* Runs query()'s expression at the evaluation time: 0 with its samples
 * allocated in a, or -1 with a one-line reason. */
typedef int (*mw_tpl_query_fn)(void *ctx, const char *expr, mw_arena *a, mw_tpl_sample **out,
                               size_t *n, char *err, size_t errsize);

/* What a template sees: .Labels ($labels), .ExternalLabels
 * ($externalLabels), .Value ($value), .ExternalURL ($externalURL). */
typedef struct mw_tpl_data {
    const mw_tpl_kv *labels;
    size_t nlabels;
    const mw_tpl_kv *external;
    size_t nexternal;
    double value;
    const char *external_url;
    mw_tpl_query_fn query; /* NULL: query() fails */
    void *query_ctx;
} mw_tpl_data;

#define MW_TPL_MAX_OUTPUT (64 * 1024)

/* Parse text. NULL with "line L: message" (Go's own wording where it has
 * one, e.g. `function "foo" not defined`) in err. */
mw_tpl *mw_tpl_parse(const char *text, char *err, size_t errsize);
/* Expand into a malloc'd string: 0, or -1 with why in err (and *out NULL). */
int mw_tpl_expand(const mw_tpl *t, const mw_tpl_data *d, char **out, char *err, size_t errsize);
void mw_tpl_free(mw_tpl *t);

/* Go's fmt %v of a float64 (strconv 'g', shortest): "1860", "1.5e+06",
 * "NaN", "+Inf". The answer fits in 32 bytes. */
void mw_tpl_format_float(double v, char *out, size_t size);

#endif
