/* promql.h - PromQL: the syntax tree, the parser and the evaluator over the
 * embedded store. docs/promql.md lists what is supported and where it
 * differs from Prometheus.
 *
 * Times are int64 milliseconds; durations too. Parsing never crashes and
 * bounds its work (nesting depth, query length); evaluation bounds memory by
 * a sample budget and time by a deadline. */
#ifndef MW_PROMQL_H
#define MW_PROMQL_H

#include "../store/store.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PQ_NUM,
    PQ_STR,
    PQ_VSEL,  /* instant vector selector */
    PQ_MSEL,  /* range vector selector: child is a PQ_VSEL */
    PQ_SUBQ,  /* subquery: child[range:step] */
    PQ_UNARY, /* op '-' or '+' */
    PQ_BINARY,
    PQ_AGG,
    PQ_CALL,
    PQ_PAREN,
} pq_kind;

typedef enum { PQ_T_SCALAR, PQ_T_STRING, PQ_T_VECTOR, PQ_T_MATRIX } pq_type;

typedef enum {
    PQ_OP_NONE,
    PQ_OP_ADD,
    PQ_OP_SUB,
    PQ_OP_MUL,
    PQ_OP_DIV,
    PQ_OP_MOD,
    PQ_OP_POW,
    PQ_OP_ATAN2,
    PQ_OP_EQ,
    PQ_OP_NE,
    PQ_OP_GT,
    PQ_OP_LT,
    PQ_OP_GE,
    PQ_OP_LE,
    PQ_OP_TRIM_UPPER, /* </ keeps a histogram's observations below */
    PQ_OP_TRIM_LOWER, /* >/ keeps those above */
    PQ_OP_AND,
    PQ_OP_OR,
    PQ_OP_UNLESS,
} pq_binop;

typedef enum {
    PQ_AGG_SUM,
    PQ_AGG_AVG,
    PQ_AGG_MIN,
    PQ_AGG_MAX,
    PQ_AGG_COUNT,
    PQ_AGG_GROUP,
    PQ_AGG_STDDEV,
    PQ_AGG_STDVAR,
    PQ_AGG_TOPK,
    PQ_AGG_BOTTOMK,
    PQ_AGG_QUANTILE,
    PQ_AGG_COUNT_VALUES,
    PQ_AGG_LIMITK,      /* Prometheus 3 */
    PQ_AGG_LIMIT_RATIO, /* Prometheus 3 */
} pq_aggop;

enum { PQ_FILL_LEFT = 1, PQ_FILL_RIGHT = 2 };

enum { PQ_EXT_NONE, PQ_EXT_ANCHORED, PQ_EXT_SMOOTHED };

typedef enum { PQ_CARD_ONE_ONE, PQ_CARD_MANY_ONE, PQ_CARD_ONE_MANY, PQ_CARD_MANY_MANY } pq_card;

typedef struct pq_func pq_func;
/* A duration expression that reads the query's step() or range()
 * (durations.c); constant ones are folded into the *_ms fields. */
typedef struct pq_dur pq_dur;

typedef struct pq_node {
    pq_kind kind;
    pq_type type; /* of the value it evaluates to */
    int pos;      /* byte offset in the query */
    double num;
    char *str;        /* PQ_STR; PQ_VSEL: metric name or NULL */
    int str_quoted;   /* PQ_VSEL: the name came quoted inside {...} */
    int num_duration; /* PQ_NUM: written as a duration (1h), printed so */
    /* Selectors and subqueries. */
    mw_matcher *matchers;
    size_t nmatchers;
    int64_t range_ms, step_ms, offset_ms;
    pq_dur *range_dur, *step_dur, *offset_dur; /* NULL: the *_ms value holds */
    int has_at;                                /* @ modifier */
    /* Prometheus 3's selector modifiers (on the instant selector, also
     * for a range one): PQ_EXT_*; in_range: the selector of a PQ_MSEL. */
    int extended, in_range;
    int at_kind; /* 0 = timestamp, 1 = start(), 2 = end() */
    int64_t at_ms;
    /* Operators. */
    int op; /* pq_binop, pq_aggop, or the unary operator */
    int return_bool;
    pq_card card;
    int on; /* on(...) rather than ignoring(...) */
    int has_matching;
    char **match_labels, **include_labels;
    size_t nmatch_labels, ninclude_labels;
    /* Prometheus 3's fill(v), fill_left(v), fill_right(v): a side with no
     * series of the match group takes the value (PQ_FILL_* bits). */
    int fill;
    double fill_left, fill_right;
    /* Aggregations: grouping labels. */
    int without, has_grouping;
    char **grouping;
    size_t ngrouping;
    const pq_func *func;
    struct pq_node **args; /* children: CALL args; AGG [param,] expr; BINARY lhs rhs; others 1 */
    size_t nargs;
} pq_node;

/* A PromQL function: its signature and implementation (qinternal.h), one
 * row of func_table.c. NULL for an unknown name. */
const pq_func *pq_func_lookup(const char *name);

/* Parse QUERY. NULL with "LINE:COL: parse error: ..." in err on failure. */
pq_node *pq_parse(const char *query, char *err, size_t errsize);
void pq_node_free(pq_node *n);
/* The expression as PromQL text in Prometheus's String() form (format.c);
 * malloc'd. */
char *pq_format(const pq_node *n);
/* Parse a duration ("5m", "1h30m") or float seconds ("30", "1.5"); -1 on
 * error. */
int pq_parse_duration(const char *s, int64_t *ms);

/* Evaluation. */
typedef struct pq_limits {
    size_t max_samples; /* samples in memory at once (loaded + computed) */
    int64_t timeout_ms;
    int64_t lookback_ms;
    /* Windows as Prometheus 2 took them, [t - range, t] (and lookback
     * [t - delta, t]); 0: as Prometheus 3, (t - range, t], a sample exactly
     * at the start is out. */
    int closed_windows;
    /* Prometheus 3's promql-delayed-name-removal: what drops the metric
     * name marks the series and the name goes at the end (label_replace
     * and by (__name__) still read it); 0: it goes at once. */
    int delayed_name_removal;
    /* Per query: a matcher ANDed with every selector (a namespace-scoped
     * reader's, docs/security.md); NULL: none. */
    const mw_matcher *scope;
    size_t max_series; /* series one selector may load (0: no limit) */
    /* Nonzero: stop now (the server is stopping); checked with the deadline. */
    const _Atomic int *cancel;
} pq_limits;

void pq_default_limits(pq_limits *l);

/* blk: NULL when name and value are each malloc'd; else both lie in a
 * block shared by the labels of one set (one allocation per label set
 * instead of two per label), freed with its last label (labels.c). */
typedef struct pq_label {
    char *name, *value;
    void *blk;
} pq_label;

typedef struct pq_series {
    pq_label *labels;
    size_t nlabels;
    int drop_name; /* delayed name removal: the name goes at the end */
    int64_t *t;
    double *v;
    size_t n;
} pq_series;

/* One of Prometheus 3's annotations: a warning or an info about the query
 * (docs/promql.md, "Annotations"). msg is Prometheus's text without its
 * position, the key two of them merge by; pos the byte offset in the query
 * of the expression it names. histogram_quantile's monotonicity info also
 * carries what it merged over steps and series (mono). */
typedef struct pq_annot {
    int info; /* 1: an info; 0: a warning */
    char *msg;
    int pos;
    int mono;
    int64_t min_ts, max_ts;
    double min_bucket, max_bucket, max_diff;
    size_t count; /* occurrences merged, less one */
} pq_annot;

/* The text the API answers: msg and the position as "(LINE:COL)" in
 * query, as Prometheus writes it; malloc'd. */
char *pq_annot_text(const pq_annot *a, const char *query);
/* Go's %g (strconv 'g', -1): shortest digits, an exponent below 1e-4 and
 * from 1e21... as Go does (from 1e6), "+Inf", "NaN"; the annotations'
 * numbers. */
void pq_format_go_g(double v, char *buf, size_t size);

typedef struct pq_result {
    pq_type type;
    double scalar; /* PQ_T_SCALAR at an instant */
    char *str;
    pq_series *series; /* vector: one point each; matrix: points */
    size_t nseries;
    int64_t t; /* instant queries: the evaluation time */
    /* Stored chunks that failed their checksum: their samples are missing
     * from the result, and the API answers with a warning. */
    size_t damaged_chunks;
    /* For stats=all: samples read from the store, and the most samples in
     * memory at once. */
    size_t total_samples, peak_samples;
    /* Warnings and infos, in the order they were first raised. */
    pq_annot *annots;
    size_t nannots;
    /* Native histograms the values refer to (pq_result_histogram). */
    struct mw_histogram *hists;
    size_t nhists;
} pq_result;
/* The histogram a result's value stands for, or NULL for a float. */
const struct mw_histogram *pq_result_histogram(const pq_result *r, double v);

enum { PQ_ERR_BAD_DATA = 400, PQ_ERR_EXECUTION = 422, PQ_ERR_TIMEOUT = 503 };

/* Instant query at T (start == end, step 0) or range query. 0, or one of
 * PQ_ERR_* with a message. A range query's result is a matrix (a scalar
 * expression gives one series without labels). */
int pq_eval(mw_store *store, const pq_node *expr, int64_t start, int64_t end, int64_t step,
            const pq_limits *lim, pq_result *out, char *err, size_t errsize);
void pq_result_free(pq_result *r);

/* Value formatting as Prometheus does (Go's strconv 'f', -1): shortest
 * representation that reads back to the same double, no exponent. A buffer
 * of PQ_VALUE_BUFSIZE bytes holds every answer; a shorter one gets the
 * answer cut as snprintf cuts it. */
void pq_format_value(double v, char *buf, size_t size);
/* The longest answer is "-0." and 324 decimals, and its NUL: the spacing of
 * the smallest doubles is 2^-1074 (about 4.9e-324), so a decimal ending at
 * 10^-324 always reads back, and the shortest one ends there or before
 * (-3 * 2^-1074 is -0.000...015, 327 characters). DBL_MAX has 309 digits. */
#define PQ_VALUE_BUFSIZE 328

#endif
