/* format.c - a parsed expression written back as PromQL, in the form
 * Prometheus's String() gives it (what /api/v1/format_query answers for
 * an expression that fits one line): one space around binary operators,
 * `sum by (a) (x)`, matchers sorted, the metric name outside the braces,
 * strings as Go's strconv.Quote, numbers as strconv.FormatFloat(v, 'f',
 * -1), durations as Prometheus's model.Duration (1m30s, 1d, 2w). */
#include "../core/buf.h"
#include "../core/util.h"
#include "promql.h"
#include "qinternal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_duration(mw_buf *b, int64_t ms)
{
    if (ms == 0) {
        mw_buf_puts(b, "0s");
        return;
    }
    static const struct {
        const char *unit;
        int64_t mult;
        int exact; /* years and weeks only when nothing remains */
    } units[] = {{"y", 31536000000LL, 1}, {"w", 604800000LL, 1}, {"d", 86400000LL, 0},
                 {"h", 3600000LL, 0},     {"m", 60000LL, 0},     {"s", 1000LL, 0},
                 {"ms", 1LL, 0}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (units[i].exact && ms % units[i].mult) continue;
        int64_t v = ms / units[i].mult;
        if (v > 0) {
            mw_buf_printf(b, "%lld%s", (long long)v, units[i].unit);
            ms -= v * units[i].mult;
        }
    }
}

/* Go's strconv.Quote: printable text as it is (valid UTF-8 included),
 * \" \\ and the C escapes, \xHH for other bytes. */
static void put_quoted(mw_buf *b, const char *s)
{
    mw_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\a' ? "\\a"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\v' ? "\\v"
                                      : NULL;
        if (esc)
            mw_buf_puts(b, esc);
        else if (c < 0x20 || c == 0x7f)
            mw_buf_printf(b, "\\x%02x", c);
        else
            mw_buf_putc(b, (char)c);
    }
    mw_buf_putc(b, '"');
}

static void put_labels(mw_buf *b, char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i) mw_buf_puts(b, ", ");
        if (lbl_name_legacy(names[i]))
            mw_buf_puts(b, names[i]);
        else
            put_quoted(b, names[i]);
    }
}

/* A duration expression after offset, in parentheses as Prometheus 3
 * writes it when it is more than one operand. */
static void put_dur_paren(mw_buf *b, const pq_dur *d)
{
    mw_buf t;
    mw_buf_init(&t, 0);
    pq_dur_format(&t, d);
    size_t len;
    char *text = mw_buf_steal(&t, &len);
    int simple = strchr(text, ' ') == NULL;
    if (!simple) mw_buf_putc(b, '(');
    mw_buf_puts(b, text);
    if (!simple) mw_buf_putc(b, ')');
    free(text);
}

/* A range or step: its expression when it has one. */
static void put_range(mw_buf *b, const pq_dur *d, int64_t ms)
{
    if (d)
        pq_dur_format(b, d);
    else
        put_duration(b, ms);
}

/* fill(v), or fill_left(v) and fill_right(v) where they differ. */
static void put_fill(mw_buf *b, const pq_node *n)
{
    char v[PQ_VALUE_BUFSIZE];
    int both = n->fill == (PQ_FILL_LEFT | PQ_FILL_RIGHT);
    if (both && (n->fill_left == n->fill_right || (isnan(n->fill_left) && isnan(n->fill_right)))) {
        pq_format_value(n->fill_left, v, sizeof(v));
        mw_buf_printf(b, " fill (%s)", v);
        return;
    }
    if (n->fill & PQ_FILL_LEFT) {
        pq_format_value(n->fill_left, v, sizeof(v));
        mw_buf_printf(b, " fill_left (%s)", v);
    }
    if (n->fill & PQ_FILL_RIGHT) {
        pq_format_value(n->fill_right, v, sizeof(v));
        mw_buf_printf(b, " fill_right (%s)", v);
    }
}

/* Prometheus 3's anchored and smoothed modifiers of a selector. */
static void put_extended(mw_buf *b, const pq_node *sel)
{
    if (sel->extended == PQ_EXT_ANCHORED) mw_buf_puts(b, " anchored");
    if (sel->extended == PQ_EXT_SMOOTHED) mw_buf_puts(b, " smoothed");
}

/* @ and offset; an instant selector's anchored/smoothed between them, as
 * Prometheus prints them. */
static void put_at_offset(mw_buf *b, const pq_node *n)
{
    if (n->has_at) {
        if (n->at_kind == 1)
            mw_buf_puts(b, " @ start()");
        else if (n->at_kind == 2)
            mw_buf_puts(b, " @ end()");
        else
            mw_buf_printf(b, " @ %.3f", (double)n->at_ms / 1000);
    }
    if (n->kind == PQ_VSEL && !n->in_range) put_extended(b, n);
    if (n->offset_dur) {
        mw_buf_puts(b, " offset ");
        put_dur_paren(b, n->offset_dur);
    } else if (n->offset_ms > 0) {
        mw_buf_puts(b, " offset ");
        put_duration(b, n->offset_ms);
    } else if (n->offset_ms < 0) {
        mw_buf_puts(b, " offset -");
        put_duration(b, -n->offset_ms);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* name{matchers}, without @ and offset. */
static void put_selector(mw_buf *b, const pq_node *n)
{
    const char *name = n->str ? n->str : "";
    mw_buf_puts(b, name);
    char **items = mw_xcalloc(n->nmatchers ? n->nmatchers : 1, sizeof(char *));
    size_t k = 0;
    static const char *const ops[] = {"=", "!=", "=~", "!~"};
    for (size_t i = 0; i < n->nmatchers; i++) {
        const mw_matcher *m = &n->matchers[i];
        if (!strcmp(m->name, "__name__") && m->op == MW_MATCH_EQ && *name &&
            !strcmp(m->value, name))
            continue;
        mw_buf t;
        mw_buf_init(&t, 0);
        if (lbl_name_legacy(m->name))
            mw_buf_puts(&t, m->name);
        else
            put_quoted(&t, m->name);
        mw_buf_puts(&t, ops[m->op]);
        put_quoted(&t, m->value);
        size_t len;
        items[k++] = mw_buf_steal(&t, &len);
    }
    if (k) {
        qsort(items, k, sizeof(char *), cmp_str);
        mw_buf_putc(b, '{');
        for (size_t i = 0; i < k; i++) {
            if (i) mw_buf_putc(b, ',');
            mw_buf_puts(b, items[i]);
            free(items[i]);
        }
        mw_buf_putc(b, '}');
    }
    free(items);
}

static const char *binop_name(int op)
{
    static const char *const names[] = {
        [PQ_OP_ADD] = "+",       [PQ_OP_SUB] = "-",         [PQ_OP_MUL] = "*",
        [PQ_OP_DIV] = "/",       [PQ_OP_MOD] = "%",         [PQ_OP_POW] = "^",
        [PQ_OP_ATAN2] = "atan2", [PQ_OP_EQ] = "==",         [PQ_OP_NE] = "!=",
        [PQ_OP_GT] = ">",        [PQ_OP_LT] = "<",          [PQ_OP_GE] = ">=",
        [PQ_OP_LE] = "<=",       [PQ_OP_TRIM_UPPER] = "</", [PQ_OP_TRIM_LOWER] = ">/",
        [PQ_OP_AND] = "and",     [PQ_OP_OR] = "or",         [PQ_OP_UNLESS] = "unless"};
    return op > 0 && (size_t)op < sizeof(names) / sizeof(names[0]) && names[op] ? names[op] : "?";
}

static const char *aggop_name(int op)
{
    static const char *const names[] = {
        [PQ_AGG_SUM] = "sum",           [PQ_AGG_AVG] = "avg",
        [PQ_AGG_MIN] = "min",           [PQ_AGG_MAX] = "max",
        [PQ_AGG_COUNT] = "count",       [PQ_AGG_GROUP] = "group",
        [PQ_AGG_STDDEV] = "stddev",     [PQ_AGG_STDVAR] = "stdvar",
        [PQ_AGG_TOPK] = "topk",         [PQ_AGG_BOTTOMK] = "bottomk",
        [PQ_AGG_QUANTILE] = "quantile", [PQ_AGG_COUNT_VALUES] = "count_values",
        [PQ_AGG_LIMITK] = "limitk",     [PQ_AGG_LIMIT_RATIO] = "limit_ratio"};
    return op >= 0 && (size_t)op < sizeof(names) / sizeof(names[0]) ? names[op] : "?";
}

static void put_node(mw_buf *b, const pq_node *n)
{
    switch (n->kind) {
    case PQ_NUM: {
        if (n->num_duration && isfinite(n->num) && fabs(n->num) < 9e15) {
            if (n->num < 0) mw_buf_putc(b, '-');
            put_duration(b, llround(fabs(n->num) * 1000));
            break;
        }
        char num[PQ_VALUE_BUFSIZE];
        pq_format_value(n->num, num, sizeof(num));
        mw_buf_puts(b, num);
        break;
    }
    case PQ_STR:
        put_quoted(b, n->str ? n->str : "");
        break;
    case PQ_VSEL:
        put_selector(b, n);
        put_at_offset(b, n);
        break;
    case PQ_MSEL:
        put_selector(b, n->args[0]);
        mw_buf_putc(b, '[');
        put_range(b, n->range_dur, n->range_ms);
        mw_buf_putc(b, ']');
        put_extended(b, n->args[0]);
        put_at_offset(b, n->args[0]);
        break;
    case PQ_SUBQ:
        put_node(b, n->args[0]);
        mw_buf_putc(b, '[');
        put_range(b, n->range_dur, n->range_ms);
        mw_buf_putc(b, ':');
        if (n->step_dur || n->step_ms) put_range(b, n->step_dur, n->step_ms);
        mw_buf_putc(b, ']');
        put_at_offset(b, n);
        break;
    case PQ_UNARY:
        mw_buf_putc(b, (char)n->op);
        put_node(b, n->args[0]);
        break;
    case PQ_PAREN:
        mw_buf_putc(b, '(');
        put_node(b, n->args[0]);
        mw_buf_putc(b, ')');
        break;
    case PQ_BINARY:
        put_node(b, n->args[0]);
        mw_buf_printf(b, " %s", binop_name(n->op));
        if (n->return_bool) mw_buf_puts(b, " bool");
        if (n->nmatch_labels || n->on || n->card == PQ_CARD_MANY_ONE ||
            n->card == PQ_CARD_ONE_MANY) {
            mw_buf_puts(b, n->on ? " on (" : " ignoring (");
            put_labels(b, n->match_labels, n->nmatch_labels);
            mw_buf_putc(b, ')');
        }
        if (n->card == PQ_CARD_MANY_ONE || n->card == PQ_CARD_ONE_MANY) {
            mw_buf_puts(b, n->card == PQ_CARD_MANY_ONE ? " group_left (" : " group_right (");
            put_labels(b, n->include_labels, n->ninclude_labels);
            mw_buf_putc(b, ')');
        }
        put_fill(b, n);
        mw_buf_putc(b, ' ');
        put_node(b, n->args[1]);
        break;
    case PQ_AGG:
        mw_buf_puts(b, aggop_name(n->op));
        if (n->without || n->ngrouping) {
            mw_buf_puts(b, n->without ? " without (" : " by (");
            put_labels(b, n->grouping, n->ngrouping);
            mw_buf_puts(b, ") ");
        }
        mw_buf_putc(b, '(');
        for (size_t i = 0; i < n->nargs; i++) {
            if (i) mw_buf_puts(b, ", ");
            put_node(b, n->args[i]);
        }
        mw_buf_putc(b, ')');
        break;
    case PQ_CALL:
        mw_buf_puts(b, n->func ? n->func->name : "?");
        mw_buf_putc(b, '(');
        for (size_t i = 0; i < n->nargs; i++) {
            if (i) mw_buf_puts(b, ", ");
            put_node(b, n->args[i]);
        }
        mw_buf_putc(b, ')');
        break;
    }
}

char *pq_format(const pq_node *n)
{
    mw_buf b;
    mw_buf_init(&b, 0);
    put_node(&b, n);
    size_t len;
    char *s = mw_buf_steal(&b, &len);
    return s ? s : mw_xstrdup("");
}
