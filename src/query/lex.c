/* lex.c - the PromQL lexer: numbers (decimal, hex, Inf, NaN), durations
 * (1h30m, 5m, 100ms), strings in three quotes with Go's escapes,
 * identifiers, operators; comments from # to the end of the line. */
#include "lex.h"

#include "../core/buf.h"
#include "../core/util.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pq_parse_duration(const char *s, int64_t *ms);

#define MAX_DURATION_MS (INT64_MAX / 1000000)

void pq_errf(parser *ps, int pos, const char *fmt, ...)
{
    if (ps->failed) return;
    ps->failed = 1;
    int line = 1, col = 1;
    for (int i = 0; i < pos && (size_t)i < ps->qlen; i++) {
        if (ps->q[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->errsize, "%d:%d: parse error: %s", line, col, msg);
}

/* Durations: one or more NUMBER UNIT pairs, units y w d h m s ms. */

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Go's numeric escapes at s (after the backslash): \xHH and \OOO (a byte,
 * octal at most 255), \uHHHH and \UHHHHHHHH (a code point, written as
 * UTF-8; no surrogates, at most U+10FFFF). The characters used, or -1. */
static int go_escape(const char *s, int avail, mw_buf *b)
{
    int digits = s[0] == 'x' ? 2 : s[0] == 'u' ? 4 : s[0] == 'U' ? 8 : 3;
    int base = s[0] >= '0' && s[0] <= '7' ? 8 : 16, start = base == 8 ? 0 : 1;
    if (avail < start + digits) return -1;
    unsigned long v = 0;
    for (int i = start; i < start + digits; i++) {
        int d = base == 8 ? (s[i] >= '0' && s[i] <= '7' ? s[i] - '0' : -1) : hexval(s[i]);
        if (d < 0) return -1;
        v = v * (unsigned long)base + (unsigned long)d;
    }
    if (s[0] == 'x' || base == 8) {
        if (v > 255) return -1;
        mw_buf_putc(b, (char)v);
    } else {
        char u[4];
        int n = mw_utf8_put(v, u);
        if (!n) return -1; /* a surrogate or past U+10FFFF */
        for (int i = 0; i < n; i++)
            mw_buf_putc(b, u[i]);
    }
    return start + digits;
}

static int lex_duration(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int64_t total = 0;
    if (n == 0) return -1;
    while (i < n) {
        if (!isdigit((unsigned char)s[i])) return -1;
        int64_t x = 0;
        while (i < n && isdigit((unsigned char)s[i])) {
            if (x > INT64_MAX / 10 - 10) return -1;
            x = x * 10 + (s[i++] - '0');
        }
        int64_t mul;
        if (i + 1 < n && s[i] == 'm' && s[i + 1] == 's') {
            mul = 1;
            i += 2;
        } else if (i < n) {
            switch (s[i++]) {
            case 'y':
                mul = 365LL * 86400000;
                break;
            case 'w':
                mul = 7LL * 86400000;
                break;
            case 'd':
                mul = 86400000;
                break;
            case 'h':
                mul = 3600000;
                break;
            case 'm':
                mul = 60000;
                break;
            case 's':
                mul = 1000;
                break;
            default:
                return -1;
            }
        } else {
            return -1;
        }
        /* Go's time.Duration (int64 nanoseconds) ends at about 292 years;
         * so does Prometheus' duration syntax, and so does ours, which
         * keeps all time arithmetic far from overflowing. */
        if (x > MAX_DURATION_MS / mul || total > MAX_DURATION_MS - x * mul) return -1;
        total += x * mul;
    }
    *out = total;
    return 0;
}

int pq_parse_duration(const char *s, int64_t *ms)
{
    if (!s || !*s) return -1;
    if (lex_duration(s, strlen(s), ms) == 0) return 0;
    char *end;
    double d = strtod(s, &end);
    if (*end || !isfinite(d) || fabs(d * 1000) > (double)MAX_DURATION_MS) return -1;
    *ms = (int64_t)llround(d * 1000);
    return 0;
}

static char *xstrndup(const char *s, size_t n)
{
    char *r = mw_xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

/* ':' does not start a name, so that [5m:1m] lexes as a subquery. */
static int is_id_start(int c)
{
    return isalpha(c) || c == '_';
}
static int is_id_char(int c)
{
    return isalnum(c) || c == '_' || c == ':';
}

void pq_next(parser *ps)
{
    free(ps->t.str);
    memset(&ps->t, 0, sizeof(ps->t));
    const char *q = ps->q;
    int n = (int)ps->qlen;
    for (;;) {
        while (ps->p < n && isspace((unsigned char)q[ps->p]))
            ps->p++;
        if (ps->p < n && q[ps->p] == '#') { /* comment to end of line */
            while (ps->p < n && q[ps->p] != '\n')
                ps->p++;
            continue;
        }
        break;
    }
    tok *t = &ps->t;
    t->pos = ps->p;
    if (ps->p >= n) {
        t->k = T_EOF;
        return;
    }
    int c = (unsigned char)q[ps->p];
    int c2 = ps->p + 1 < n ? (unsigned char)q[ps->p + 1] : 0;
    if (isdigit(c) || (c == '.' && isdigit(c2))) {
        int s = ps->p, e = s;
        while (e < n && (isalnum((unsigned char)q[e]) || q[e] == '.'))
            e++;
        /* A duration when it consists of digit+unit groups. */
        int64_t d;
        if (lex_duration(q + s, (size_t)(e - s), &d) == 0) {
            t->k = T_DUR;
            t->dur = d;
            t->len = e - s;
            ps->p = e;
            return;
        }
        char buf[128];
        /* Numbers may have exponents with signs: rescan with strtod. */
        int len = n - s < 127 ? n - s : 127;
        memcpy(buf, q + s, (size_t)len);
        buf[len] = '\0';
        char *end;
        double v = (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X'))
                       ? (double)strtoull(buf, &end, 16)
                       : strtod(buf, &end);
        if (end == buf || isalnum((unsigned char)*end) || *end == '_' || *end == '.') {
            t->k = T_ERR;
            pq_errf(ps, s, "bad number or duration syntax: \"%.*s\"", e - s, q + s);
            return;
        }
        t->k = T_NUM;
        t->num = v;
        t->len = (int)(end - buf);
        ps->p = s + t->len;
        return;
    }
    if (is_id_start(c)) {
        int e = ps->p;
        while (e < n && is_id_char((unsigned char)q[e]))
            e++;
        t->len = e - ps->p;
        t->str = xstrndup(q + ps->p, (size_t)t->len);
        ps->p = e;
        if (!strcasecmp(t->str, "inf") || !strcasecmp(t->str, "nan")) {
            t->k = T_NUM;
            t->num = !strcasecmp(t->str, "inf") ? INFINITY : NAN;
            return;
        }
        t->k = T_ID;
        return;
    }
    if (c == '"' || c == '\'' || c == '`') {
        int s = ps->p, e = s + 1;
        mw_buf b;
        mw_buf_init(&b, 0);
        while (e < n && q[e] != c) {
            if (c != '`' && q[e] == '\\' && e + 1 < n) {
                e++;
                char ch = q[e];
                switch (ch) {
                case 'n':
                    mw_buf_putc(&b, '\n');
                    break;
                case 't':
                    mw_buf_putc(&b, '\t');
                    break;
                case 'r':
                    mw_buf_putc(&b, '\r');
                    break;
                case '\\':
                case '"':
                case '\'':
                    mw_buf_putc(&b, ch);
                    break;
                case 'a':
                    mw_buf_putc(&b, '\a');
                    break;
                case 'b':
                    mw_buf_putc(&b, '\b');
                    break;
                case 'f':
                    mw_buf_putc(&b, '\f');
                    break;
                case 'v':
                    mw_buf_putc(&b, '\v');
                    break;
                case 'x':
                case 'u':
                case 'U':
                case '0':
                case '1':
                case '2':
                case '3':
                case '4':
                case '5':
                case '6':
                case '7': {
                    int used = go_escape(q + e, n - e, &b);
                    if (used < 0) {
                        mw_buf_free(&b);
                        t->k = T_ERR;
                        pq_errf(ps, e - 1,
                                "invalid escape sequence '\\%c' (Go's \\xHH, \\OOO, "
                                "\\uHHHH or \\UHHHHHHHH)",
                                ch);
                        return;
                    }
                    e += used;
                    continue;
                }
                default:
                    mw_buf_free(&b);
                    t->k = T_ERR;
                    pq_errf(ps, e - 1, "unknown escape sequence '\\%c'", ch);
                    return;
                }
                e++;
                continue;
            }
            if (q[e] == '\n' && c != '`') break;
            mw_buf_putc(&b, q[e]);
            e++;
        }
        if (e >= n || q[e] != c) {
            mw_buf_free(&b);
            t->k = T_ERR;
            pq_errf(ps, s, "unterminated quoted string %c", c);
            return;
        }
        size_t len;
        t->str = mw_buf_steal(&b, &len);
        if (!t->str) t->str = mw_xstrdup("");
        t->k = T_STR;
        t->len = e + 1 - s;
        ps->p = e + 1;
        return;
    }
    static const struct {
        const char *s;
        tok_kind k;
    } ops[] = {{"==", T_EQL},   {"!=", T_NEQ},   {"=~", T_RE},         {"!~", T_NRE},
               {"<=", T_LE},    {">=", T_GE},    {"</", T_TRIM_UPPER}, {">/", T_TRIM_LOWER},
               {"(", T_LPAREN}, {")", T_RPAREN}, {"{", T_LBRACE},      {"}", T_RBRACE},
               {"[", T_LBRACK}, {"]", T_RBRACK}, {",", T_COMMA},       {"=", T_ASSIGN},
               {"<", T_LT},     {">", T_GT},     {"+", T_ADD},         {"-", T_SUB},
               {"*", T_MUL},    {"/", T_DIV},    {"%", T_MOD},         {"^", T_POW},
               {":", T_COLON},  {"@", T_AT}};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        size_t l = strlen(ops[i].s);
        if ((size_t)(n - ps->p) >= l && memcmp(q + ps->p, ops[i].s, l) == 0) {
            t->k = ops[i].k;
            t->len = (int)l;
            ps->p += (int)l;
            return;
        }
    }
    t->k = T_ERR;
    pq_errf(ps, ps->p, "unexpected character: '%c'", isprint(c) ? c : '?');
}

static const char *tok_desc(const tok *t, char *buf, size_t size)
{
    switch (t->k) {
    case T_EOF:
        return "end of input";
    case T_NUM:
        return "number";
    case T_DUR:
        return "duration";
    case T_STR:
        return "string";
    case T_ID:
        snprintf(buf, size, "identifier \"%.60s\"", t->str);
        return buf;
    default:
        break;
    }
    return NULL;
}

void pq_unexpected(parser *ps, const char *ctx)
{
    char buf[96], desc[128];
    const char *d = tok_desc(&ps->t, buf, sizeof(buf));
    if (!d) {
        snprintf(desc, sizeof(desc), "\"%.*s\"", ps->t.len, ps->q + ps->t.pos);
        d = desc;
    }
    pq_errf(ps, ps->t.pos, "unexpected %s%s%s", d, ctx ? " " : "", ctx ? ctx : "");
}

int pq_is_kw(const tok *t, const char *kw)
{
    return t->k == T_ID && !strcasecmp(t->str, kw);
}
