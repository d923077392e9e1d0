/* lex.h - the PromQL lexer, shared by lex.c and parse.c (internal). */
#ifndef MW_QUERY_LEX_H
#define MW_QUERY_LEX_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    T_EOF,
    T_NUM,
    T_DUR,
    T_STR,
    T_ID,
    T_LPAREN,
    T_RPAREN,
    T_LBRACE,
    T_RBRACE,
    T_LBRACK,
    T_RBRACK,
    T_COMMA,
    T_ASSIGN, /* = in matchers */
    T_NEQ,
    T_EQL,
    T_RE,
    T_NRE,
    T_LT,
    T_GT,
    T_LE,
    T_GE,
    T_TRIM_UPPER, /* </ */
    T_TRIM_LOWER, /* >/ */
    T_ADD,
    T_SUB,
    T_MUL,
    T_DIV,
    T_MOD,
    T_POW,
    T_COLON,
    T_AT,
    T_ERR,
} tok_kind;

typedef struct tok {
    tok_kind k;
    int pos, len;
    double num;
    int64_t dur;
    char *str; /* T_STR unquoted, T_ID text */
} tok;

typedef struct parser {
    const char *q;
    size_t qlen;
    int p;
    tok t;
    char *err;
    size_t errsize;
    int failed, depth;
    /* The next selector may have only matchers that match "" (info()'s
     * second argument, a label selector); parse_selector clears it. */
    int bypass_empty_check;
} parser;

/* Fail the parse with "LINE:COL: parse error: ..." (the first error wins). */
void pq_errf(parser *ps, int pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Advance to the next token (ps->t). */
void pq_next(parser *ps);
/* Fail with "unexpected <token> <ctx>". */
void pq_unexpected(parser *ps, const char *ctx);
int pq_is_kw(const tok *t, const char *kw);

/* Duration expressions (durations.c). pq_dur_starts: 1 when the token may
 * begin one. pq_dur_parse: a whole expression ([range], [:step]);
 * pq_dur_parse_offset: the one operand `offset` takes. NULL on error (the
 * parse failed). */
typedef struct pq_dur pq_dur;
int pq_dur_starts(const tok *t);
pq_dur *pq_dur_parse(parser *ps);
pq_dur *pq_dur_parse_offset(parser *ps);

#endif
