/* durations.c - Prometheus 3's duration expressions: arithmetic where a
 * duration goes (ranges, subquery steps, offsets: [5m*2], [1h/2],
 * offset (1h+5m)), plain numbers as seconds ([1800], offset 100), and
 * step(), range(), min_of() and max_of().
 *
 * An expression without step() or range() is folded while parsing, so the
 * node holds plain milliseconds as before; one that reads the query's step
 * or range is kept (pq_node's *_dur) and resolved when the query runs
 * (pq_dur_resolve), as Prometheus's durationVisitor does before evaluation.
 *
 * Grammar (Prometheus's generated_parser.y): + - lowest, then * / %, then
 * unary + -, then ^ (right associative), so -2^2 is -4. After `offset`
 * only one operand is taken (a number or duration with an optional sign, a
 * parenthesised expression, or a function), so `x offset 2 ^ 2` is
 * (x offset 2) ^ 2. */
#include "lex.h"
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Go's time.Duration holds nanoseconds in an int64. */
#define DUR_MAX_SECONDS 9223372036.854775807

typedef enum {
    PQ_DUR_NUM,   /* seconds */
    PQ_DUR_STEP,  /* step(): the query's step (0 for an instant query) */
    PQ_DUR_RANGE, /* range(): the query's end - start */
    PQ_DUR_NEG,   /* -l */
    PQ_DUR_BIN,   /* l op r */
    PQ_DUR_MIN,   /* min_of(l, r) */
    PQ_DUR_MAX,   /* max_of(l, r) */
} pq_dur_kind;

struct pq_dur {
    pq_dur_kind kind;
    int op; /* PQ_DUR_BIN: pq_binop (ADD SUB MUL DIV MOD POW) */
    double seconds;
    /* A duration literal alone (`[1001ms]`, `offset 1h`): its exact
     * milliseconds, as Prometheus keeps a literal's time.Duration; only
     * expressions go through seconds as floats. */
    int exact;
    int64_t ms;
    int pos;
    struct pq_dur *l, *r;
};

static pq_dur *dur_new(pq_dur_kind kind, int pos)
{
    pq_dur *d = mw_xcalloc(1, sizeof(*d));
    d->kind = kind;
    d->pos = pos;
    return d;
}

void pq_dur_free(pq_dur *d)
{
    if (!d) return;
    pq_dur_free(d->l);
    pq_dur_free(d->r);
    free(d);
}

int pq_dur_is_const(const pq_dur *d)
{
    if (!d) return 1;
    if (d->kind == PQ_DUR_STEP || d->kind == PQ_DUR_RANGE) return 0;
    return pq_dur_is_const(d->l) && pq_dur_is_const(d->r);
}

static pq_dur *parse_dur_expr(parser *ps, int minprec);

/* step(), range(), min_of(a, b), max_of(a, b): the name was read. */
static pq_dur *parse_dur_func(parser *ps, int pos)
{
    pq_dur_kind kind = pq_is_kw(&ps->t, "step")     ? PQ_DUR_STEP
                       : pq_is_kw(&ps->t, "range")  ? PQ_DUR_RANGE
                       : pq_is_kw(&ps->t, "min_of") ? PQ_DUR_MIN
                                                    : PQ_DUR_MAX;
    pq_next(ps);
    if (ps->t.k != T_LPAREN) {
        pq_unexpected(ps, "in duration expression, expected \"(\"");
        return NULL;
    }
    pq_next(ps);
    pq_dur *d = dur_new(kind, pos);
    if (kind == PQ_DUR_MIN || kind == PQ_DUR_MAX) {
        d->l = parse_dur_expr(ps, 0);
        if (!d->l) goto fail;
        if (ps->t.k != T_COMMA) {
            pq_unexpected(ps, "in duration expression, expected \",\"");
            goto fail;
        }
        pq_next(ps);
        d->r = parse_dur_expr(ps, 0);
        if (!d->r) goto fail;
    }
    if (ps->t.k != T_RPAREN) {
        pq_unexpected(ps, "in duration expression, expected \")\"");
        goto fail;
    }
    pq_next(ps);
    return d;
fail:
    pq_dur_free(d);
    return NULL;
}

static int is_dur_func(const tok *t)
{
    return t->k == T_ID && (pq_is_kw(t, "step") || pq_is_kw(t, "range") || pq_is_kw(t, "min_of") ||
                            pq_is_kw(t, "max_of"));
}

int pq_dur_starts(const tok *t)
{
    return t->k == T_NUM || t->k == T_DUR || t->k == T_LPAREN || t->k == T_ADD || t->k == T_SUB ||
           is_dur_func(t);
}

/* A number, a duration, (expr) or a function. */
static pq_dur *parse_dur_operand(parser *ps)
{
    int pos = ps->t.pos;
    if (ps->t.k == T_NUM || ps->t.k == T_DUR) {
        double s = ps->t.k == T_NUM ? ps->t.num : (double)ps->t.dur / 1000;
        if (!isfinite(s) || fabs(s) > DUR_MAX_SECONDS) {
            pq_errf(ps, pos, "duration out of range");
            return NULL;
        }
        pq_dur *d = dur_new(PQ_DUR_NUM, pos);
        d->seconds = s;
        if (ps->t.k == T_DUR) {
            d->exact = 1;
            d->ms = ps->t.dur;
        }
        pq_next(ps);
        return d;
    }
    if (ps->t.k == T_LPAREN) {
        pq_next(ps);
        pq_dur *d = parse_dur_expr(ps, 0);
        if (!d) return NULL;
        if (ps->t.k != T_RPAREN) {
            pq_unexpected(ps, "in duration expression, expected \")\"");
            pq_dur_free(d);
            return NULL;
        }
        pq_next(ps);
        return d;
    }
    if (is_dur_func(&ps->t)) return parse_dur_func(ps, pos);
    pq_unexpected(ps, "in duration expression, expected duration");
    return NULL;
}

/* Precedence: 1 + -, 2 * / %, 3 unary, 4 ^. */
static int dur_binop(tok_kind k, int *op, int *prec)
{
    switch (k) {
    case T_ADD:
        *op = PQ_OP_ADD, *prec = 1;
        return 1;
    case T_SUB:
        *op = PQ_OP_SUB, *prec = 1;
        return 1;
    case T_MUL:
        *op = PQ_OP_MUL, *prec = 2;
        return 1;
    case T_DIV:
        *op = PQ_OP_DIV, *prec = 2;
        return 1;
    case T_MOD:
        *op = PQ_OP_MOD, *prec = 2;
        return 1;
    case T_POW:
        *op = PQ_OP_POW, *prec = 4;
        return 1;
    default:
        return 0;
    }
}

static pq_dur *parse_dur_unary(parser *ps)
{
    if (ps->t.k == T_ADD || ps->t.k == T_SUB) {
        int pos = ps->t.pos, neg = ps->t.k == T_SUB;
        pq_next(ps);
        pq_dur *x = parse_dur_expr(ps, 3);
        if (!x || !neg) return x;
        pq_dur *d = dur_new(PQ_DUR_NEG, pos);
        d->l = x;
        return d;
    }
    return parse_dur_operand(ps);
}

static pq_dur *parse_dur_expr(parser *ps, int minprec)
{
    if (++ps->depth > 200) {
        pq_errf(ps, ps->t.pos, "expression nests too deeply");
        ps->depth--;
        return NULL;
    }
    pq_dur *lhs = parse_dur_unary(ps);
    if (!lhs) {
        ps->depth--;
        return NULL;
    }
    int op, prec;
    while (!ps->failed && dur_binop(ps->t.k, &op, &prec) && prec >= minprec) {
        int pos = ps->t.pos;
        pq_next(ps);
        /* ^ is right associative: its right side may hold another ^. */
        pq_dur *rhs = parse_dur_expr(ps, prec == 4 ? 4 : prec + 1);
        if (!rhs) break;
        if ((op == PQ_OP_DIV || op == PQ_OP_MOD) && rhs->kind == PQ_DUR_NUM && rhs->seconds == 0) {
            pq_errf(ps, pos, op == PQ_OP_DIV ? "division by zero" : "modulo by zero");
            pq_dur_free(rhs);
            break;
        }
        pq_dur *b = dur_new(PQ_DUR_BIN, pos);
        b->op = op;
        b->l = lhs;
        b->r = rhs;
        lhs = b;
    }
    ps->depth--;
    if (ps->failed) {
        pq_dur_free(lhs);
        return NULL;
    }
    return lhs;
}

pq_dur *pq_dur_parse(parser *ps)
{
    return parse_dur_expr(ps, 0);
}

pq_dur *pq_dur_parse_offset(parser *ps)
{
    if (ps->t.k == T_ADD || ps->t.k == T_SUB) {
        int pos = ps->t.pos, neg = ps->t.k == T_SUB;
        pq_next(ps);
        pq_dur *x = parse_dur_operand(ps);
        if (!x || !neg) return x;
        pq_dur *d = dur_new(PQ_DUR_NEG, pos);
        d->l = x;
        return d;
    }
    return parse_dur_operand(ps);
}

/* The value in seconds, or NAN with the error set. */
static double dur_value(const pq_dur *d, double step_s, double range_s, char *err, size_t errsize)
{
    double l, r;
    switch (d->kind) {
    case PQ_DUR_NUM:
        return d->seconds;
    case PQ_DUR_STEP:
        return step_s;
    case PQ_DUR_RANGE:
        return range_s;
    case PQ_DUR_NEG:
        return -dur_value(d->l, step_s, range_s, err, errsize);
    case PQ_DUR_MIN:
    case PQ_DUR_MAX:
        l = dur_value(d->l, step_s, range_s, err, errsize);
        r = dur_value(d->r, step_s, range_s, err, errsize);
        return d->kind == PQ_DUR_MIN ? fmin(l, r) : fmax(l, r);
    case PQ_DUR_BIN:
        l = dur_value(d->l, step_s, range_s, err, errsize);
        r = dur_value(d->r, step_s, range_s, err, errsize);
        switch (d->op) {
        case PQ_OP_ADD:
            return l + r;
        case PQ_OP_SUB:
            return l - r;
        case PQ_OP_MUL:
            return l * r;
        case PQ_OP_DIV:
            if (r == 0 && !*err) snprintf(err, errsize, "division by zero");
            return r == 0 ? NAN : l / r;
        case PQ_OP_MOD:
            if (r == 0 && !*err) snprintf(err, errsize, "modulo by zero");
            return r == 0 ? NAN : fmod(l, r);
        default:
            return pow(l, r);
        }
    }
    return NAN;
}

int pq_dur_eval(const pq_dur *d, int64_t step_ms, int64_t range_ms, int allow_negative,
                int64_t *out_ms, char *err, size_t errsize)
{
    err[0] = '\0';
    /* a literal alone, or negated (offset -1001ms): exact */
    const pq_dur *lit = d->kind == PQ_DUR_NEG ? d->l : d;
    if (lit->kind == PQ_DUR_NUM && lit->exact) {
        int64_t ms = d == lit ? lit->ms : -lit->ms;
        if (ms <= 0 && !allow_negative) {
            snprintf(err, errsize, "duration must be greater than 0");
            return -1;
        }
        *out_ms = ms;
        return 0;
    }
    double s = dur_value(d, (double)step_ms / 1000, (double)range_ms / 1000, err, errsize);
    if (err[0]) return -1;
    if (!isfinite(s)) {
        snprintf(err, errsize, "duration is NaN or infinite");
        return -1;
    }
    if (s <= 0 && !allow_negative) {
        snprintf(err, errsize, "duration must be greater than 0");
        return -1;
    }
    if (fabs(s) > DUR_MAX_SECONDS) {
        snprintf(err, errsize, "duration is out of range");
        return -1;
    }
    /* Prometheus: time.Duration(seconds*1000) * time.Millisecond, which
     * truncates toward zero. */
    *out_ms = (int64_t)(s * 1000);
    return 0;
}

static void put_dur(mw_buf *b, const pq_dur *d, int paren)
{
    static const char *const names[] = {
        [PQ_OP_ADD] = " + ", [PQ_OP_SUB] = " - ", [PQ_OP_MUL] = " * ",
        [PQ_OP_DIV] = " / ", [PQ_OP_MOD] = " % ", [PQ_OP_POW] = " ^ "};
    char num[PQ_VALUE_BUFSIZE];
    switch (d->kind) {
    case PQ_DUR_NUM:
        pq_format_value(d->seconds, num, sizeof(num));
        mw_buf_puts(b, num);
        return;
    case PQ_DUR_STEP:
        mw_buf_puts(b, "step()");
        return;
    case PQ_DUR_RANGE:
        mw_buf_puts(b, "range()");
        return;
    case PQ_DUR_NEG:
        mw_buf_putc(b, '-');
        put_dur(b, d->l, 1);
        return;
    case PQ_DUR_MIN:
    case PQ_DUR_MAX:
        mw_buf_puts(b, d->kind == PQ_DUR_MIN ? "min_of(" : "max_of(");
        put_dur(b, d->l, 0);
        mw_buf_puts(b, ", ");
        put_dur(b, d->r, 0);
        mw_buf_putc(b, ')');
        return;
    case PQ_DUR_BIN:
        if (paren) mw_buf_putc(b, '(');
        put_dur(b, d->l, 1);
        mw_buf_puts(b, names[d->op]);
        put_dur(b, d->r, 1);
        if (paren) mw_buf_putc(b, ')');
        return;
    }
}

void pq_dur_format(mw_buf *b, const pq_dur *d)
{
    put_dur(b, d, 0);
}
