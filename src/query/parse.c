/* parse.c - PromQL recursive-descent parser (the lexer is lex.c).
 *
 * Follows Prometheus' grammar (2.x): operator precedence from lowest
 * `or`, `and unless`, comparisons, `+ -`, `* / % atan2`, `^` (right
 * associative); unary minus binds tighter than `*` but looser than `^`
 * (-2^2 = -4). Keywords (by, on, bool, offset...) are plain identifiers
 * outside the places they are keywords, so they stay usable as label names.
 * Errors name the position as Prometheus does: "1:14: parse error: ...". */
#include "lex.h"
#include "qinternal.h"

#include "../core/util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEPTH 200
#define MAX_QUERY 65536

static pq_node *node_new(pq_kind k, int pos)
{
    pq_node *n = mw_xcalloc(1, sizeof(*n));
    n->kind = k;
    n->pos = pos;
    return n;
}

void pq_node_free(pq_node *n)
{
    if (!n) return;
    free(n->str);
    for (size_t i = 0; i < n->nmatchers; i++)
        mw_matcher_free(&n->matchers[i]);
    free(n->matchers);
    for (size_t i = 0; i < n->nmatch_labels; i++)
        free(n->match_labels[i]);
    free(n->match_labels);
    for (size_t i = 0; i < n->ninclude_labels; i++)
        free(n->include_labels[i]);
    free(n->include_labels);
    for (size_t i = 0; i < n->ngrouping; i++)
        free(n->grouping[i]);
    free(n->grouping);
    for (size_t i = 0; i < n->nargs; i++)
        pq_node_free(n->args[i]);
    free(n->args);
    pq_dur_free(n->range_dur);
    pq_dur_free(n->step_dur);
    pq_dur_free(n->offset_dur);
    free(n);
}

static void add_arg(pq_node *n, pq_node *c)
{
    n->args = mw_xrealloc(n->args, (n->nargs + 1) * sizeof(*n->args));
    n->args[n->nargs++] = c;
}

static const char *type_name(pq_type t)
{
    static const char *names[] = {"scalar", "string", "instant vector", "range vector"};
    return names[t];
}

static pq_node *parse_expr(parser *ps, int minprec);

static int binop_of(const tok *t, pq_binop *op, int *prec)
{
    switch (t->k) {
    case T_ADD:
        *op = PQ_OP_ADD;
        *prec = 4;
        return 1;
    case T_SUB:
        *op = PQ_OP_SUB;
        *prec = 4;
        return 1;
    case T_MUL:
        *op = PQ_OP_MUL;
        *prec = 5;
        return 1;
    case T_DIV:
        *op = PQ_OP_DIV;
        *prec = 5;
        return 1;
    case T_MOD:
        *op = PQ_OP_MOD;
        *prec = 5;
        return 1;
    case T_POW:
        *op = PQ_OP_POW;
        *prec = 6;
        return 1;
    case T_EQL:
        *op = PQ_OP_EQ;
        *prec = 3;
        return 1;
    case T_NEQ:
        *op = PQ_OP_NE;
        *prec = 3;
        return 1;
    case T_GT:
        *op = PQ_OP_GT;
        *prec = 3;
        return 1;
    case T_LT:
        *op = PQ_OP_LT;
        *prec = 3;
        return 1;
    case T_GE:
        *op = PQ_OP_GE;
        *prec = 3;
        return 1;
    case T_LE:
        *op = PQ_OP_LE;
        *prec = 3;
        return 1;
    case T_TRIM_UPPER: /* as Prometheus: the comparisons' precedence */
        *op = PQ_OP_TRIM_UPPER;
        *prec = 3;
        return 1;
    case T_TRIM_LOWER:
        *op = PQ_OP_TRIM_LOWER;
        *prec = 3;
        return 1;
    case T_ID:
        if (pq_is_kw(t, "and")) {
            *op = PQ_OP_AND;
            *prec = 2;
            return 1;
        }
        if (pq_is_kw(t, "unless")) {
            *op = PQ_OP_UNLESS;
            *prec = 2;
            return 1;
        }
        if (pq_is_kw(t, "or")) {
            *op = PQ_OP_OR;
            *prec = 1;
            return 1;
        }
        if (pq_is_kw(t, "atan2")) {
            *op = PQ_OP_ATAN2;
            *prec = 5;
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}

static int is_label_name(const char *s)
{
    if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return 0;
    return 1;
}

/* "(a, b, c)" after by/without/on/ignoring/group_x. */
static int parse_label_list(parser *ps, char ***out, size_t *nout)
{
    if (ps->t.k != T_LPAREN) {
        pq_unexpected(ps, "in grouping opts, expected \"(\"");
        return -1;
    }
    pq_next(ps);
    while (ps->t.k != T_RPAREN) {
        /* A quoted name: Prometheus 3's UTF-8 label names. */
        if (ps->t.k == T_STR ? !lbl_name_valid(ps->t.str)
                             : ps->t.k != T_ID || !is_label_name(ps->t.str)) {
            pq_unexpected(ps, "in grouping opts, expected label");
            return -1;
        }
        if (*nout >= 256) {
            pq_errf(ps, ps->t.pos, "too many labels in grouping");
            return -1;
        }
        *out = mw_xrealloc(*out, (*nout + 1) * sizeof(char *));
        (*out)[(*nout)++] = mw_xstrdup(ps->t.str);
        pq_next(ps);
        if (ps->t.k == T_COMMA) {
            pq_next(ps);
        } else if (ps->t.k != T_RPAREN) {
            pq_unexpected(ps, "in grouping opts, expected \",\" or \")\"");
            return -1;
        }
    }
    pq_next(ps);
    return 0;
}

static int add_matcher(parser *ps, pq_node *n, mw_match_op op, const char *name, const char *value,
                       int pos)
{
    char err[256];
    if (n->nmatchers >= 64) {
        pq_errf(ps, pos, "too many label matchers");
        return -1;
    }
    n->matchers = mw_xrealloc(n->matchers, (n->nmatchers + 1) * sizeof(mw_matcher));
    if (mw_matcher_init(&n->matchers[n->nmatchers], op, name, value, err, sizeof(err)) < 0) {
        pq_errf(ps, pos, "%s", err);
        return -1;
    }
    n->nmatchers++;
    return 0;
}

/* Selector after an optional metric name: {a="b", ...}. */
static pq_node *parse_selector(parser *ps, char *name, int pos)
{
    pq_node *n = node_new(PQ_VSEL, pos);
    n->type = PQ_T_VECTOR;
    n->str = name;
    int bypass = ps->bypass_empty_check;
    ps->bypass_empty_check = 0;
    if (name && add_matcher(ps, n, MW_MATCH_EQ, "__name__", name, pos) < 0) goto fail;
    if (ps->t.k == T_LBRACE) {
        pq_next(ps);
        while (ps->t.k != T_RBRACE) {
            /* Prometheus 3's UTF-8 names: a quoted label name, or a quoted
             * string alone, the metric name ({"my.metric", "a.b"="c"}). */
            int quoted = ps->t.k == T_STR;
            if (!quoted && (ps->t.k != T_ID || !is_label_name(ps->t.str))) {
                pq_unexpected(ps, "in label matching, expected label");
                goto fail;
            }
            if (quoted && !lbl_name_valid(ps->t.str)) {
                pq_errf(ps, ps->t.pos, "invalid UTF-8 rune");
                goto fail;
            }
            char *lname = mw_xstrdup(ps->t.str);
            int lpos = ps->t.pos;
            pq_next(ps);
            if (quoted && (ps->t.k == T_COMMA || ps->t.k == T_RBRACE)) {
                if (name || n->str_quoted) {
                    const char *first = "";
                    for (size_t i = 0; i < n->nmatchers && !*first; i++)
                        if (!strcmp(n->matchers[i].name, "__name__")) first = n->matchers[i].value;
                    pq_errf(ps, lpos, "metric name must not be set twice: \"%s\" or \"%s\"", first,
                            lname);
                    free(lname);
                    goto fail;
                }
                int rc = add_matcher(ps, n, MW_MATCH_EQ, "__name__", lname, lpos);
                free(lname);
                if (rc < 0) goto fail;
                n->str_quoted = 1;
                if (ps->t.k == T_COMMA) pq_next(ps);
                continue;
            }
            mw_match_op op;
            switch (ps->t.k) {
            case T_ASSIGN:
                op = MW_MATCH_EQ;
                break;
            case T_NEQ:
                op = MW_MATCH_NEQ;
                break;
            case T_RE:
                op = MW_MATCH_RE;
                break;
            case T_NRE:
                op = MW_MATCH_NRE;
                break;
            default:
                free(lname);
                pq_unexpected(ps, "in label matching, expected label matching operator");
                goto fail;
            }
            pq_next(ps);
            if (ps->t.k != T_STR) {
                free(lname);
                pq_unexpected(ps, "in label matching, expected string");
                goto fail;
            }
            int rc = add_matcher(ps, n, op, lname, ps->t.str, lpos);
            free(lname);
            if (rc < 0) goto fail;
            pq_next(ps);
            if (ps->t.k == T_COMMA) {
                pq_next(ps);
            } else if (ps->t.k != T_RBRACE) {
                pq_unexpected(ps, "in label matching, expected \",\" or \"}\"");
                goto fail;
            }
        }
        pq_next(ps);
    }
    /* At least one matcher that does not match the empty string. */
    int ok = 0;
    for (size_t i = 0; i < n->nmatchers; i++)
        if (!n->matchers[i].matches_empty) ok = 1;
    if (!ok && !bypass) {
        pq_errf(ps, pos, "vector selector must contain at least one non-empty matcher");
        goto fail;
    }
    return n;
fail:
    pq_node_free(n);
    return NULL;
}

/* Arguments after "(" up to and including ")", each added to n; with
 * label_selector, the second may be a selector that matches "". */
static int parse_args(parser *ps, pq_node *n, const char *expected, int label_selector)
{
    while (ps->t.k != T_RPAREN) {
        ps->bypass_empty_check = label_selector && n->nargs == 1;
        pq_node *a = parse_expr(ps, 0);
        ps->bypass_empty_check = 0;
        if (!a) return -1;
        add_arg(n, a);
        if (ps->t.k == T_COMMA) {
            pq_next(ps);
        } else if (ps->t.k != T_RPAREN) {
            pq_unexpected(ps, expected);
            return -1;
        }
    }
    pq_next(ps);
    return 0;
}

/* An aggregation's optional "by (...)" or "without (...)". */
static int parse_grouping(parser *ps, pq_node *n)
{
    if (ps->t.k != T_ID || !(pq_is_kw(&ps->t, "by") || pq_is_kw(&ps->t, "without"))) return 0;
    n->without = pq_is_kw(&ps->t, "without");
    n->has_grouping = 1;
    pq_next(ps);
    return parse_label_list(ps, &n->grouping, &n->ngrouping);
}

static pq_node *parse_call(parser *ps, char *name, int pos)
{
    const pq_func *f = pq_func_lookup(name);
    if (!f) {
        pq_errf(ps, pos, "unknown function with name \"%s\"", name);
        free(name);
        return NULL;
    }
    free(name);
    pq_node *n = node_new(PQ_CALL, pos);
    n->func = f;
    n->type = f->ret;
    pq_next(ps); /* ( */
    int is_info = !strcmp(f->name, "info");
    if (parse_args(ps, n, "in function call, expected \",\" or \")\"", is_info) < 0) goto fail;
    int max = f->variadic < 0 ? 1000 : f->nargs + f->variadic;
    if ((int)n->nargs < f->nargs || (int)n->nargs > max) {
        pq_errf(ps, pos, "expected %d argument(s) in call to \"%s\", got %zu", f->nargs, f->name,
                n->nargs);
        goto fail;
    }
    for (size_t i = 0; i < n->nargs; i++) {
        /* Optional arguments have args[nargs]'s type, however many. */
        pq_type want = i >= (size_t)f->nargs ? f->args[f->nargs] : f->args[i];
        if (n->args[i]->type != want) {
            pq_errf(ps, n->args[i]->pos, "expected type %s in call to function \"%s\", got %s",
                    type_name(want), f->name, type_name(n->args[i]->type));
            goto fail;
        }
    }
    /* info()'s second argument is a label selector: {...} without a name. */
    if (is_info && n->nargs > 1) {
        const pq_node *a = n->args[1];
        if (a->kind == PQ_VSEL && a->str) {
            pq_errf(ps, a->pos, "expected label selectors only, got vector selector instead");
            goto fail;
        }
        if (a->kind != PQ_VSEL) {
            pq_errf(ps, a->pos, "expected label selectors only");
            goto fail;
        }
    }
    return n;
fail:
    pq_node_free(n);
    return NULL;
}

static int agg_of(const char *s, pq_aggop *op)
{
    static const char *names[] = {"sum",      "avg",          "min",    "max",        "count",
                                  "group",    "stddev",       "stdvar", "topk",       "bottomk",
                                  "quantile", "count_values", "limitk", "limit_ratio"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcasecmp(s, names[i])) {
            *op = (pq_aggop)i;
            return 1;
        }
    return 0;
}

static pq_node *parse_agg(parser *ps, pq_aggop op, int pos)
{
    pq_node *n = node_new(PQ_AGG, pos);
    n->op = op;
    n->type = PQ_T_VECTOR;
    if (parse_grouping(ps, n) < 0) goto fail;
    if (ps->t.k != T_LPAREN) {
        pq_unexpected(ps, "in aggregation, expected \"(\"");
        goto fail;
    }
    pq_next(ps);
    if (parse_args(ps, n, "in aggregation, expected \",\" or \")\"", 0) < 0) goto fail;
    /* by/without may also follow the arguments, once. */
    if (!n->has_grouping && parse_grouping(ps, n) < 0) goto fail;
    int param = op == PQ_AGG_TOPK || op == PQ_AGG_BOTTOMK || op == PQ_AGG_QUANTILE ||
                op == PQ_AGG_COUNT_VALUES || op == PQ_AGG_LIMITK || op == PQ_AGG_LIMIT_RATIO;
    if (n->nargs != (size_t)(param ? 2 : 1)) {
        pq_errf(ps, pos,
                "wrong number of arguments for aggregate expression provided, expected %d, got %zu",
                param ? 2 : 1, n->nargs);
        goto fail;
    }
    pq_type ptype = op == PQ_AGG_COUNT_VALUES ? PQ_T_STRING : PQ_T_SCALAR;
    if (param && n->args[0]->type != ptype) {
        pq_errf(ps, n->args[0]->pos, "expected type %s in aggregation parameter, got %s",
                type_name(ptype), type_name(n->args[0]->type));
        goto fail;
    }
    if (n->args[n->nargs - 1]->type != PQ_T_VECTOR) {
        pq_errf(ps, n->args[n->nargs - 1]->pos,
                "expected type instant vector in aggregation expression, got %s",
                type_name(n->args[n->nargs - 1]->type));
        goto fail;
    }
    return n;
fail:
    pq_node_free(n);
    return NULL;
}

static pq_node *parse_primary(parser *ps)
{
    tok *t = &ps->t;
    int pos = t->pos;
    pq_node *n = NULL;
    switch (t->k) {
    case T_NUM:
        n = node_new(PQ_NUM, pos);
        n->num = t->num;
        n->type = PQ_T_SCALAR;
        pq_next(ps);
        return n;
    case T_DUR: /* Prometheus 3: a duration is a number of seconds too */
        n = node_new(PQ_NUM, pos);
        n->num = (double)t->dur / 1000;
        n->num_duration = 1;
        n->type = PQ_T_SCALAR;
        pq_next(ps);
        return n;
    case T_STR:
        n = node_new(PQ_STR, pos);
        n->str = t->str;
        t->str = NULL;
        n->type = PQ_T_STRING;
        pq_next(ps);
        return n;
    case T_LPAREN:
        pq_next(ps);
        n = node_new(PQ_PAREN, pos);
        pq_node *in = parse_expr(ps, 0);
        if (!in) {
            free(n);
            return NULL;
        }
        add_arg(n, in);
        n->type = in->type;
        if (ps->t.k != T_RPAREN) {
            pq_unexpected(ps, "in paren expression, expected \")\"");
            pq_node_free(n);
            return NULL;
        }
        pq_next(ps);
        return n;
    case T_LBRACE:
        return parse_selector(ps, NULL, pos);
    case T_ID: {
        char *name = t->str;
        t->str = NULL;
        pq_next(ps);
        pq_aggop aop;
        if (agg_of(name, &aop) &&
            (ps->t.k == T_LPAREN || pq_is_kw(&ps->t, "by") || pq_is_kw(&ps->t, "without"))) {
            free(name);
            return parse_agg(ps, aop, pos);
        }
        if (ps->t.k == T_LPAREN) return parse_call(ps, name, pos);
        static const char *reserved[] = {"by",         "without",     "on",     "ignoring",
                                         "group_left", "group_right", "bool",   "offset",
                                         "and",        "or",          "unless", "atan2"};
        for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
            if (!strcasecmp(name, reserved[i])) {
                pq_errf(ps, pos, "unexpected keyword \"%s\"", name);
                free(name);
                return NULL;
            }
        if (strchr(name, ':') == NULL && agg_of(name, &aop)) {
            pq_errf(ps, pos, "unexpected aggregation \"%s\"", name);
            free(name);
            return NULL;
        }
        return parse_selector(ps, name, pos);
    }
    default:
        pq_unexpected(ps, NULL);
        return NULL;
    }
}

/* A duration expression at the cursor (durations.c): folded into *ms when
 * it reads neither step() nor range(), else kept in *dx for the query to
 * resolve. A folded range or step must be positive. 0, or -1 (failed). */
static int parse_duration_at(parser *ps, int offset, const char *ctx, int64_t *ms, pq_dur **dx)
{
    *dx = NULL;
    *ms = 0;
    if (!pq_dur_starts(&ps->t)) {
        pq_unexpected(ps, ctx);
        return -1;
    }
    int pos = ps->t.pos;
    pq_dur *d = offset ? pq_dur_parse_offset(ps) : pq_dur_parse(ps);
    if (!d) return -1;
    if (!pq_dur_is_const(d)) {
        *dx = d;
        return 0;
    }
    char err[128];
    int rc = pq_dur_eval(d, 0, 0, offset, ms, err, sizeof(err));
    pq_dur_free(d);
    if (rc < 0) {
        pq_errf(ps, pos, "%s", err);
        return -1;
    }
    return 0;
}

/* offset, @, [range], [range:step] after a primary expression. */
static pq_node *parse_postfix(parser *ps, pq_node *n)
{
    while (n && !ps->failed) {
        if (ps->t.k == T_LBRACK) {
            int pos = ps->t.pos;
            pq_next(ps);
            int64_t range;
            pq_dur *range_dur;
            if (parse_duration_at(ps, 0, "in subquery or range selector, expected duration", &range,
                                  &range_dur) < 0)
                goto fail;
            if (ps->t.k == T_RBRACK) {
                if (n->kind != PQ_VSEL || n->has_at || n->offset_ms || n->offset_dur ||
                    n->extended) {
                    pq_errf(ps, pos, "ranges only allowed for vector selectors");
                    pq_dur_free(range_dur);
                    goto fail;
                }
                pq_next(ps);
                pq_node *m = node_new(PQ_MSEL, n->pos);
                n->in_range = 1;
                m->type = PQ_T_MATRIX;
                m->range_ms = range;
                m->range_dur = range_dur;
                add_arg(m, n);
                n = m;
                continue;
            }
            if (ps->t.k != T_COLON) {
                pq_unexpected(ps, "in subquery, expected \":\" or \"]\"");
                pq_dur_free(range_dur);
                goto fail;
            }
            pq_next(ps);
            int64_t step = 0;
            pq_dur *step_dur = NULL;
            if (ps->t.k != T_RBRACK &&
                parse_duration_at(ps, 0, "in subquery, expected duration", &step, &step_dur) < 0) {
                pq_dur_free(range_dur);
                goto fail;
            }
            if (ps->t.k != T_RBRACK) {
                pq_unexpected(ps, "in subquery, expected \"]\"");
                pq_dur_free(range_dur);
                pq_dur_free(step_dur);
                goto fail;
            }
            pq_next(ps);
            if (n->type != PQ_T_VECTOR) {
                pq_errf(ps, pos, "subquery is only allowed on instant vector, got %s",
                        type_name(n->type));
                pq_dur_free(range_dur);
                pq_dur_free(step_dur);
                goto fail;
            }
            pq_node *s = node_new(PQ_SUBQ, n->pos);
            s->type = PQ_T_MATRIX;
            s->range_ms = range;
            s->range_dur = range_dur;
            s->step_ms = step;
            s->step_dur = step_dur;
            add_arg(s, n);
            n = s;
        } else if (pq_is_kw(&ps->t, "offset")) {
            int pos = ps->t.pos;
            pq_next(ps);
            pq_node *target = n->kind == PQ_MSEL ? n->args[0] : n;
            if (target->kind != PQ_VSEL && target->kind != PQ_SUBQ) {
                pq_errf(ps, pos,
                        "offset modifier must be preceded by an instant vector selector or range "
                        "vector selector or a subquery");
                goto fail;
            }
            if (target->offset_ms || target->offset_dur) {
                pq_errf(ps, pos, "offset may not be set multiple times");
                goto fail;
            }
            if (parse_duration_at(ps, 1, "in offset, expected duration", &target->offset_ms,
                                  &target->offset_dur) < 0)
                goto fail;
        } else if (ps->t.k == T_AT) {
            int pos = ps->t.pos;
            pq_next(ps);
            pq_node *target = n->kind == PQ_MSEL ? n->args[0] : n;
            if (target->kind != PQ_VSEL && target->kind != PQ_SUBQ) {
                pq_errf(ps, pos,
                        "@ modifier must be preceded by an instant vector selector or range vector "
                        "selector or a subquery");
                goto fail;
            }
            if (target->has_at) {
                pq_errf(ps, pos, "@ <timestamp> may not be set multiple times");
                goto fail;
            }
            int neg = 0;
            if (ps->t.k == T_SUB || ps->t.k == T_ADD) {
                neg = ps->t.k == T_SUB;
                pq_next(ps);
            }
            if (ps->t.k == T_NUM || ps->t.k == T_DUR) {
                double v = ps->t.k == T_NUM ? ps->t.num : (double)ps->t.dur / 1000;
                if (neg) v = -v;
                if (!isfinite(v) || fabs(v) > 9e12) {
                    pq_errf(ps, ps->t.pos, "timestamp out of bounds for @ modifier: %g", v);
                    goto fail;
                }
                target->at_ms = (int64_t)llround(v * 1000);
                target->at_kind = 0;
                pq_next(ps);
            } else if (!neg && ps->t.k == T_ID &&
                       (pq_is_kw(&ps->t, "start") || pq_is_kw(&ps->t, "end"))) {
                target->at_kind = pq_is_kw(&ps->t, "start") ? 1 : 2;
                pq_next(ps);
                if (ps->t.k != T_LPAREN) {
                    pq_unexpected(ps, "in @, expected \"(\"");
                    goto fail;
                }
                pq_next(ps);
                if (ps->t.k != T_RPAREN) {
                    pq_unexpected(ps, "in @, expected \")\"");
                    goto fail;
                }
                pq_next(ps);
            } else {
                pq_unexpected(ps, "in @, expected timestamp");
                goto fail;
            }
            target->has_at = 1;
        } else if (pq_is_kw(&ps->t, "anchored") || pq_is_kw(&ps->t, "smoothed")) {
            const char *what = pq_is_kw(&ps->t, "anchored") ? "anchored" : "smoothed";
            int ext = what[0] == 'a' ? PQ_EXT_ANCHORED : PQ_EXT_SMOOTHED;
            pq_node *target = n->kind == PQ_MSEL ? n->args[0] : n;
            if (target->kind == PQ_SUBQ) {
                pq_errf(ps, n->pos, "%s modifier is not supported for subqueries", what);
                goto fail;
            }
            if (target->kind != PQ_VSEL) {
                pq_errf(ps, n->pos, "%s modifier not implemented", what);
                goto fail;
            }
            if (target->extended && target->extended != ext) {
                pq_errf(ps, n->pos, "anchored and smoothed modifiers cannot be used together");
                goto fail;
            }
            target->extended = ext;
            pq_next(ps);
        } else {
            break;
        }
    }
    return n;
fail:
    pq_node_free(n);
    return NULL;
}

static pq_node *parse_unary(parser *ps)
{
    if (ps->t.k == T_SUB || ps->t.k == T_ADD) {
        int pos = ps->t.pos;
        int op = ps->t.k == T_SUB ? '-' : '+';
        pq_next(ps);
        /* Binds looser than ^: -2^2 is -(2^2). */
        pq_node *e = parse_expr(ps, 6);
        if (!e) return NULL;
        if (e->type != PQ_T_SCALAR && e->type != PQ_T_VECTOR) {
            pq_errf(
                ps, pos,
                "unary expression only allowed on expressions of type scalar or instant vector, "
                "got %s",
                type_name(e->type));
            pq_node_free(e);
            return NULL;
        }
        if (e->kind == PQ_NUM) { /* fold -1 into a number */
            if (op == '-') e->num = -e->num;
            e->pos = pos;
            return e;
        }
        pq_node *n = node_new(PQ_UNARY, pos);
        n->op = op;
        n->type = e->type;
        add_arg(n, e);
        return n;
    }
    return parse_postfix(ps, parse_primary(ps));
}

static int is_cmp(pq_binop op)
{
    return op >= PQ_OP_EQ && op <= PQ_OP_LE;
}
static int is_set(pq_binop op)
{
    return op >= PQ_OP_AND;
}

/* 1 when the identifier at the cursor is followed by "(" (so `fill(0)` is
 * a modifier and `x + fill` a metric named fill). */
static int followed_by_paren(const parser *ps)
{
    int p = ps->p;
    while ((size_t)p < ps->qlen && isspace((unsigned char)ps->q[p]))
        p++;
    return (size_t)p < ps->qlen && ps->q[p] == '(';
}

/* fill(v), fill_left(v), fill_right(v), fill_left(v) fill_right(v) (either
 * order): v a number or duration, with an optional sign. */
static int parse_fill(parser *ps, pq_node *n)
{
    while (ps->t.k == T_ID && followed_by_paren(ps) &&
           (pq_is_kw(&ps->t, "fill") || pq_is_kw(&ps->t, "fill_left") ||
            pq_is_kw(&ps->t, "fill_right"))) {
        int pos = ps->t.pos;
        int which = pq_is_kw(&ps->t, "fill")        ? PQ_FILL_LEFT | PQ_FILL_RIGHT
                    : pq_is_kw(&ps->t, "fill_left") ? PQ_FILL_LEFT
                                                    : PQ_FILL_RIGHT;
        if ((n->fill & which) || (n->fill && which == (PQ_FILL_LEFT | PQ_FILL_RIGHT))) {
            pq_errf(ps, pos, "fill modifiers may not be set multiple times");
            return -1;
        }
        pq_next(ps); /* the name */
        pq_next(ps); /* ( */
        int neg = 0;
        if (ps->t.k == T_ADD || ps->t.k == T_SUB) {
            neg = ps->t.k == T_SUB;
            pq_next(ps);
        }
        if (ps->t.k != T_NUM && ps->t.k != T_DUR) {
            pq_unexpected(ps, "in fill modifier, expected number");
            return -1;
        }
        double v = ps->t.k == T_NUM ? ps->t.num : (double)ps->t.dur / 1000;
        if (neg) v = -v;
        pq_next(ps);
        if (ps->t.k != T_RPAREN) {
            pq_unexpected(ps, "in fill modifier, expected \")\"");
            return -1;
        }
        pq_next(ps);
        if (which & PQ_FILL_LEFT) n->fill_left = v;
        if (which & PQ_FILL_RIGHT) n->fill_right = v;
        n->fill |= which;
        if (is_set((pq_binop)n->op)) {
            pq_errf(ps, pos, "filling in missing series not allowed for set operators");
            return -1;
        }
    }
    return 0;
}

/* bool, on/ignoring, group_left/right, fill after a binary operator. */
static int parse_bin_modifiers(parser *ps, pq_node *n)
{
    pq_binop op = (pq_binop)n->op;
    if (pq_is_kw(&ps->t, "bool")) {
        if (!is_cmp(op)) {
            pq_errf(ps, ps->t.pos, "bool modifier can only be used on comparison operators");
            return -1;
        }
        n->return_bool = 1;
        pq_next(ps);
    }
    n->card = is_set(op) ? PQ_CARD_MANY_MANY : PQ_CARD_ONE_ONE;
    if (pq_is_kw(&ps->t, "on") || pq_is_kw(&ps->t, "ignoring")) {
        n->on = pq_is_kw(&ps->t, "on");
        n->has_matching = 1;
        pq_next(ps);
        if (parse_label_list(ps, &n->match_labels, &n->nmatch_labels) < 0) return -1;
        if (pq_is_kw(&ps->t, "group_left") || pq_is_kw(&ps->t, "group_right")) {
            int pos = ps->t.pos;
            if (is_set(op)) {
                pq_errf(ps, pos, "no grouping allowed for \"%s\" operation",
                        op == PQ_OP_AND  ? "and"
                        : op == PQ_OP_OR ? "or"
                                         : "unless");
                return -1;
            }
            n->card = pq_is_kw(&ps->t, "group_left") ? PQ_CARD_MANY_ONE : PQ_CARD_ONE_MANY;
            pq_next(ps);
            if (ps->t.k == T_LPAREN &&
                parse_label_list(ps, &n->include_labels, &n->ninclude_labels) < 0)
                return -1;
        }
    }
    return parse_fill(ps, n);
}

static pq_node *parse_expr(parser *ps, int minprec)
{
    if (++ps->depth > MAX_DEPTH) {
        pq_errf(ps, ps->t.pos, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
        ps->depth--;
        return NULL;
    }
    pq_node *lhs = parse_unary(ps);
    if (!lhs) {
        ps->depth--;
        return NULL;
    }
    while (!ps->failed) {
        pq_binop op;
        int prec;
        if (!binop_of(&ps->t, &op, &prec) || prec < minprec) break;
        int pos = ps->t.pos;
        pq_next(ps);
        pq_node *n = node_new(PQ_BINARY, pos);
        n->op = op;
        add_arg(n, lhs);
        lhs = n;
        if (parse_bin_modifiers(ps, n) < 0) break;
        /* ^ is right-associative: its rhs may hold another ^. */
        pq_node *rhs = parse_expr(ps, op == PQ_OP_POW ? prec : prec + 1);
        if (!rhs) break;
        add_arg(n, rhs);
        pq_type lt = n->args[0]->type, rt = rhs->type;
        if ((lt != PQ_T_SCALAR && lt != PQ_T_VECTOR) || (rt != PQ_T_SCALAR && rt != PQ_T_VECTOR)) {
            pq_errf(ps, pos, "binary expression must contain only scalar and instant vector types");
            break;
        }
        if (is_cmp(op) && lt == PQ_T_SCALAR && rt == PQ_T_SCALAR && !n->return_bool) {
            pq_errf(ps, pos, "comparisons between scalars must use BOOL modifier");
            break;
        }
        if (is_set(op) && (lt != PQ_T_VECTOR || rt != PQ_T_VECTOR)) {
            pq_errf(ps, pos, "set operator not allowed in binary scalar expression");
            break;
        }
        if ((lt != PQ_T_VECTOR || rt != PQ_T_VECTOR) && n->has_matching) {
            pq_errf(ps, pos, "vector matching only allowed between instant vectors");
            break;
        }
        if ((lt != PQ_T_VECTOR || rt != PQ_T_VECTOR) && n->fill) {
            pq_errf(ps, pos, "filling in missing series only allowed between instant vectors");
            break;
        }
        n->type = lt == PQ_T_VECTOR || rt == PQ_T_VECTOR ? PQ_T_VECTOR : PQ_T_SCALAR;
    }
    ps->depth--;
    if (ps->failed) {
        pq_node_free(lhs);
        return NULL;
    }
    return lhs;
}

pq_node *pq_parse(const char *query, char *err, size_t errsize)
{
    parser ps = {.q = query, .qlen = strlen(query), .err = err, .errsize = errsize};
    if (ps.qlen > MAX_QUERY) {
        snprintf(err, errsize, "1:1: parse error: query longer than %d bytes", MAX_QUERY);
        return NULL;
    }
    pq_next(&ps);
    if (ps.t.k == T_EOF) pq_errf(&ps, 0, "no expression found in input");
    pq_node *n = ps.failed ? NULL : parse_expr(&ps, 0);
    if (n && ps.t.k != T_EOF) {
        pq_unexpected(&ps, NULL);
        pq_node_free(n);
        n = NULL;
    }
    if (!n && !ps.failed) pq_errf(&ps, ps.t.pos, "no expression found in input");
    free(ps.t.str);
    return n;
}
