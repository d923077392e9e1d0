/* template.c - parser and evaluator of the Go text/template subset that
 * alert labels and annotations use (template.h): text and {{ actions }}
 * with trim markers, comments, pipelines, variables ($x := ..., range $k,
 * $v := ...), fields (.Labels.x, $labels.x), parentheses, if / else if /
 * else, range (over labels and query results) and with. The functions are
 * in template_funcs.c. Unknown functions and syntax errors are parse
 * errors, as Go reports them when Prometheus loads a rule file. */
#include "template_internal.h"
#include "../core/buf.h"
#include "../core/util.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32
#define MAX_RANGE 10000
#define MAX_VARS 32

typedef enum {
    A_DOT,
    A_FIELD,
    A_VAR,
    A_STR,
    A_INT,
    A_FLOAT,
    A_BOOL,
    A_NIL,
    A_FUNC,
    A_PIPE
} arg_kind;

typedef struct pipe pipe;

typedef struct arg {
    arg_kind k;
    const char *s; /* A_STR text, A_VAR name (without $) */
    double f;
    long long i;
    const tpl_func *fn;
    pipe *p;
    const char **chain; /* .a.b after the operand */
    size_t nchain;
} arg;

typedef struct cmd {
    arg *args;
    size_t nargs;
} cmd;

struct pipe {
    const char *decl[2]; /* declared variables (without $) */
    int ndecl;
    int assign; /* "=" rather than ":=" */
    cmd *cmds;
    size_t ncmds;
};

typedef enum { N_TEXT, N_ACTION, N_IF, N_RANGE, N_WITH } node_kind;
typedef struct node node;
typedef struct list {
    node **v;
    size_t n;
} list;
struct node {
    node_kind k;
    const char *text;
    size_t len;
    pipe *p;
    list body, alt;
};

struct mw_tpl {
    mw_arena a;
    list root;
};

/* ---- parsing ---- */

typedef struct parser {
    mw_arena *a;
    const char *src, *p;
    int in_action; /* inside {{ }} */
    int depth;
    char *err;
    size_t errsize;
    int failed;
} parser;

static int line_of(const parser *ps, const char *at)
{
    int line = 1;
    for (const char *q = ps->src; q < at; q++)
        if (*q == '\n') line++;
    return line;
}

static int perr(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *ps, const char *fmt, ...)
{
    if (ps->failed) return -1;
    ps->failed = 1;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->errsize, "line %d: %s", line_of(ps, ps->p), msg);
    return -1;
}

static void skip_space(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

/* At the end of an action: "}}" or " -}}" (which trims what follows). */
static int at_close(parser *ps)
{
    skip_space(ps);
    if (ps->p[0] == '}' && ps->p[1] == '}') return 1;
    if (ps->p[0] == '-' && ps->p[1] == '}' && ps->p[2] == '}' && ps->p > ps->src &&
        isspace((unsigned char)ps->p[-1]))
        return 1;
    return 0;
}

static int eat_close(parser *ps)
{
    if (!at_close(ps)) return perr(ps, "unexpected \"%.10s\" in command", ps->p);
    int trim = ps->p[0] == '-';
    ps->p += trim ? 3 : 2;
    if (trim)
        while (isspace((unsigned char)*ps->p))
            ps->p++;
    ps->in_action = 0;
    return 0;
}

static int is_ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* A word: letters, digits and _. */
static const char *word(parser *ps)
{
    const char *s = ps->p;
    while (is_ident_char(*ps->p))
        ps->p++;
    return mw_arena_strndup(ps->a, s, (size_t)(ps->p - s));
}

/* .a.b.c after an operand (no space before the dots). */
static void chain(parser *ps, arg *a)
{
    const char *names[16];
    size_t n = 0;
    while (ps->p[0] == '.' && is_ident_char(ps->p[1]) && n < 16) {
        ps->p++;
        names[n++] = word(ps);
    }
    if (!n) return;
    a->chain = mw_arena_alloc(ps->a, n * sizeof(char *));
    memcpy(a->chain, names, n * sizeof(char *));
    a->nchain = n;
}

static int parse_string(parser *ps, arg *a)
{
    char q = *ps->p++;
    mw_buf b;
    mw_buf_init(&b, 1 << 16);
    while (*ps->p && *ps->p != q) {
        char c = *ps->p++;
        if (q == '"' && c == '\\') {
            char e = *ps->p++;
            switch (e) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case '\\':
                c = '\\';
                break;
            case '"':
                c = '"';
                break;
            case '\'':
                c = '\'';
                break;
            default:
                mw_buf_free(&b);
                return perr(ps, "invalid syntax");
            }
        } else if (q == '"' && c == '\n') {
            mw_buf_free(&b);
            return perr(ps, "unterminated quoted string");
        }
        mw_buf_putc(&b, c);
    }
    if (*ps->p != q) {
        mw_buf_free(&b);
        return perr(ps, q == '"' ? "unterminated quoted string" : "unterminated raw quoted string");
    }
    ps->p++;
    a->k = A_STR;
    a->s = mw_arena_strndup(ps->a, b.data ? b.data : "", b.len);
    mw_buf_free(&b);
    return 0;
}

static pipe *parse_pipe(parser *ps, int decl_ok, char close);

static int parse_operand(parser *ps, arg *a)
{
    memset(a, 0, sizeof(*a));
    char c = *ps->p;
    if (c == '"' || c == '`') return parse_string(ps, a);
    if (c == '(') {
        ps->p++;
        if (++ps->depth > MAX_DEPTH) return perr(ps, "nesting too deep");
        a->k = A_PIPE;
        a->p = parse_pipe(ps, 0, ')');
        ps->depth--;
        if (!a->p) return -1;
        if (*ps->p != ')') return perr(ps, "unclosed left paren");
        ps->p++;
        chain(ps, a);
        return 0;
    }
    if (c == '$') {
        ps->p++;
        a->k = A_VAR;
        a->s = word(ps);
        chain(ps, a);
        return 0;
    }
    if (c == '.') {
        if (is_ident_char(ps->p[1])) {
            a->k = A_FIELD;
            chain(ps, a);
        } else {
            ps->p++;
            a->k = A_DOT;
        }
        return 0;
    }
    if (isdigit((unsigned char)c) || ((c == '-' || c == '+') && isdigit((unsigned char)ps->p[1]))) {
        const char *s = ps->p;
        char *end;
        long long i = strtoll(s, &end, 0);
        if (*end == '.' || *end == 'e' || *end == 'E') {
            a->k = A_FLOAT;
            a->f = strtod(s, &end);
        } else {
            a->k = A_INT;
            a->i = i;
        }
        if (is_ident_char(*end)) return perr(ps, "bad number syntax: \"%.20s\"", s);
        ps->p = end;
        return 0;
    }
    if (isalpha((unsigned char)c) || c == '_') {
        const char *w = word(ps);
        if (strcmp(w, "true") == 0 || strcmp(w, "false") == 0) {
            a->k = A_BOOL;
            a->i = w[0] == 't';
        } else if (strcmp(w, "nil") == 0) {
            a->k = A_NIL;
        } else {
            a->fn = tpl_func_lookup(w);
            if (!a->fn) return perr(ps, "function \"%s\" not defined", w);
            a->k = A_FUNC;
            a->s = w;
        }
        return 0;
    }
    return perr(ps, "unexpected \"%c\" in command", c ? c : ' ');
}

/* Operands up to '|', the close or ')'. */
static int parse_cmd(parser *ps, cmd *out, char close)
{
    arg args[32];
    size_t n = 0;
    for (;;) {
        skip_space(ps);
        if (!*ps->p) return perr(ps, "unclosed action");
        if (*ps->p == '|' || (close == ')' && *ps->p == ')') || (close == '}' && at_close(ps)))
            break;
        if (n >= 32) return perr(ps, "too many arguments");
        if (parse_operand(ps, &args[n]) < 0) return -1;
        n++;
        if (*ps->p && !isspace((unsigned char)*ps->p) && *ps->p != '|' && *ps->p != ')' &&
            *ps->p != '}' && *ps->p != '-')
            return perr(ps, "unexpected \"%c\" in operand", *ps->p);
    }
    if (!n) return perr(ps, "missing command");
    out->args = mw_arena_alloc(ps->a, n * sizeof(arg));
    memcpy(out->args, args, n * sizeof(arg));
    out->nargs = n;
    for (size_t i = 1; i < n; i++)
        if (args[0].k != A_FUNC)
            return perr(ps, "can't give argument to non-function %s",
                        args[0].k == A_VAR ? "variable" : "value");
    return 0;
}

static pipe *parse_pipe(parser *ps, int decl_ok, char close)
{
    pipe *p = mw_arena_alloc(ps->a, sizeof(*p));
    memset(p, 0, sizeof(*p));
    skip_space(ps);
    /* $x := ..., $k, $v := ... (range), $x = ... */
    if (decl_ok && *ps->p == '$') {
        const char *save = ps->p;
        const char *names[2];
        int n = 0;
        for (;;) {
            if (*ps->p != '$') break;
            ps->p++;
            names[n++] = word(ps);
            skip_space(ps);
            if (*ps->p == ',' && n < decl_ok) {
                ps->p++;
                skip_space(ps);
                continue;
            }
            break;
        }
        if (ps->p[0] == ':' && ps->p[1] == '=') {
            ps->p += 2;
        } else if (ps->p[0] == '=' && n == 1) {
            ps->p += 1;
            p->assign = 1;
        } else {
            n = 0;
            ps->p = save;
        }
        for (int i = 0; i < n; i++)
            p->decl[i] = names[i];
        p->ndecl = n;
    }
    cmd cmds[16];
    size_t n = 0;
    for (;;) {
        if (n >= 16) {
            perr(ps, "pipeline too long");
            return NULL;
        }
        if (parse_cmd(ps, &cmds[n], close) < 0) return NULL;
        n++;
        if (*ps->p != '|') break;
        ps->p++;
    }
    for (size_t i = 1; i < n; i++)
        if (cmds[i].args[0].k != A_FUNC) {
            perr(ps, "non executable command in pipeline stage %zu", i + 1);
            return NULL;
        }
    p->cmds = mw_arena_alloc(ps->a, n * sizeof(cmd));
    memcpy(p->cmds, cmds, n * sizeof(cmd));
    p->ncmds = n;
    return p;
}

static void list_add(parser *ps, list *l, node *n)
{
    node **v = mw_arena_alloc(ps->a, (l->n + 1) * sizeof(node *));
    if (l->n) memcpy(v, l->v, l->n * sizeof(node *));
    v[l->n++] = n;
    l->v = v;
}

static node *new_node(parser *ps, node_kind k)
{
    node *n = mw_arena_alloc(ps->a, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->k = k;
    return n;
}

/* What ended a list: 0 end of text, 'e' {{end}}, 'l' {{else}}, 'i' {{else
 * if}} (the pipe then follows). */
static int parse_list(parser *ps, list *l);

/* After the keyword of if / range / with. */
static node *parse_control(parser *ps, node_kind k)
{
    if (++ps->depth > MAX_DEPTH) {
        perr(ps, "nesting too deep");
        return NULL;
    }
    node *n = new_node(ps, k);
    n->p = parse_pipe(ps, k == N_RANGE ? 2 : 1, '}');
    if (!n->p || eat_close(ps) < 0) return NULL;
    int end = parse_list(ps, &n->body);
    if (end < 0) return NULL;
    if (end == 'i') { /* else if: an if nested in the else branch */
        if (k != N_IF) {
            perr(ps, "unexpected \"if\" after else");
            return NULL;
        }
        node *inner = parse_control(ps, N_IF);
        if (!inner) return NULL;
        list_add(ps, &n->alt, inner);
        ps->depth--;
        return n;
    }
    if (end == 'l') {
        end = parse_list(ps, &n->alt);
        if (end < 0) return NULL;
        if (end != 'e') {
            perr(ps, "expected end; found %s", end ? "else" : "EOF");
            return NULL;
        }
    }
    if (end != 'e') {
        perr(ps, "unexpected EOF");
        return NULL;
    }
    ps->depth--;
    return n;
}

static int parse_list(parser *ps, list *l)
{
    for (;;) {
        const char *open = strstr(ps->p, "{{");
        const char *text_end = open ? open : ps->p + strlen(ps->p);
        int trim_left = open && open[2] == '-' && isspace((unsigned char)open[3]);
        const char *t_end = text_end;
        if (trim_left)
            while (t_end > ps->p && isspace((unsigned char)t_end[-1]))
                t_end--;
        if (t_end > ps->p) {
            node *t = new_node(ps, N_TEXT);
            t->len = (size_t)(t_end - ps->p);
            t->text = mw_arena_strndup(ps->a, ps->p, t->len); /* outlives the source */
            list_add(ps, l, t);
        }
        if (!open) {
            ps->p = text_end;
            return 0;
        }
        ps->p = open + 2 + (trim_left ? 2 : 0);
        ps->in_action = 1;
        skip_space(ps);
        if (ps->p[0] == '/' && ps->p[1] == '*') {
            const char *end = strstr(ps->p + 2, "*/");
            if (!end) return perr(ps, "unclosed comment");
            ps->p = end + 2;
            if (eat_close(ps) < 0) return -1;
            continue;
        }
        const char *kw = ps->p;
        size_t kwlen = 0;
        while (is_ident_char(kw[kwlen]))
            kwlen++;
#define KW(s) (kwlen == strlen(s) && strncmp(kw, s, kwlen) == 0)
        if (KW("end")) {
            ps->p += kwlen;
            if (eat_close(ps) < 0) return -1;
            return 'e';
        }
        if (KW("else")) {
            ps->p += kwlen;
            skip_space(ps);
            if (strncmp(ps->p, "if", 2) == 0 && !is_ident_char(ps->p[2])) {
                ps->p += 2;
                return 'i';
            }
            if (eat_close(ps) < 0) return -1;
            return 'l';
        }
        if (KW("if") || KW("range") || KW("with")) {
            node_kind k = KW("if") ? N_IF : KW("range") ? N_RANGE : N_WITH;
            ps->p += kwlen;
            node *n = parse_control(ps, k);
            if (!n) return -1;
            list_add(ps, l, n);
            continue;
        }
        if (KW("define") || KW("template") || KW("block") || KW("break") || KW("continue"))
            return perr(ps, "\"%.*s\" is not supported in rule templates", (int)kwlen, kw);
#undef KW
        node *n = new_node(ps, N_ACTION);
        n->p = parse_pipe(ps, 1, '}');
        if (!n->p || eat_close(ps) < 0) return -1;
        list_add(ps, l, n);
    }
}

mw_tpl *mw_tpl_parse(const char *text, char *err, size_t errsize)
{
    mw_tpl *t = mw_xcalloc(1, sizeof(*t));
    mw_arena_init(&t->a, 4096);
    parser ps = {.a = &t->a, .src = text, .p = text, .err = err, .errsize = errsize};
    int end = parse_list(&ps, &t->root);
    if (end > 0 && !ps.failed) perr(&ps, "unexpected {{%s}}", end == 'e' ? "end" : "else");
    if (ps.failed) {
        mw_tpl_free(t);
        return NULL;
    }
    return t;
}

void mw_tpl_free(mw_tpl *t)
{
    if (!t) return;
    mw_arena_free(&t->a);
    free(t);
}

/* ---- expansion ---- */

typedef struct var {
    const char *name;
    tv v;
} var;

typedef struct exec {
    tpl_env env;
    mw_buf out;
    var vars[MAX_VARS];
    size_t nvars;
    int depth;
    long ranged;
} exec;

int tpl_fail(tpl_env *env, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(env->err, env->errsize, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *kv_get(const mw_tpl_kv *kv, size_t n, const char *name, int *found)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].name, name) == 0) {
            *found = 1;
            return kv[i].value;
        }
    *found = 0;
    return "";
}

static int field(exec *x, tv *v, const char *name)
{
    int found;
    switch (v->k) {
    case TV_DATA: {
        const mw_tpl_data *d = x->env.d;
        if (strcmp(name, "Labels") == 0)
            *v = (tv){.k = TV_MAP, .kv = d->labels, .n = d->nlabels};
        else if (strcmp(name, "ExternalLabels") == 0)
            *v = (tv){.k = TV_MAP, .kv = d->external, .n = d->nexternal};
        else if (strcmp(name, "Value") == 0)
            *v = (tv){.k = TV_FLOAT, .f = d->value};
        else if (strcmp(name, "ExternalURL") == 0)
            *v = (tv){.k = TV_STR, .s = d->external_url ? d->external_url : ""};
        else
            return tpl_fail(&x->env, "can't evaluate field %s in type *template.tmplData", name);
        return 0;
    }
    case TV_MAP: {
        /* A missing key gives the map's zero value, "" (Prometheus's
         * missingkey=zero over map[string]string). */
        const char *s = kv_get(v->kv, v->n, name, &found);
        *v = (tv){.k = TV_STR, .s = s};
        return 0;
    }
    case TV_SAMPLE:
        if (strcmp(name, "Labels") == 0) {
            *v = (tv){.k = TV_MAP, .kv = v->smp->labels, .n = v->smp->nlabels};
            return 0;
        }
        if (strcmp(name, "Value") == 0) {
            *v = (tv){.k = TV_FLOAT, .f = v->smp->value};
            return 0;
        }
        return tpl_fail(&x->env, "can't evaluate field %s in type *template.sample", name);
    case TV_NIL:
        return tpl_fail(&x->env, "nil pointer evaluating interface {}.%s", name);
    default:
        return tpl_fail(&x->env, "can't evaluate field %s in type %s", name,
                        v->k == TV_STR ? "string" : "float64");
    }
}

static int eval_pipe(exec *x, const pipe *p, const tv *dot, tv *out);

static int lookup_var(exec *x, const char *name, tv *out)
{
    for (size_t i = x->nvars; i-- > 0;)
        if (strcmp(x->vars[i].name, name) == 0) {
            *out = x->vars[i].v;
            return 0;
        }
    return tpl_fail(&x->env, "undefined variable: $%s", name);
}

static int eval_arg(exec *x, const arg *a, const tv *dot, tv *out)
{
    switch (a->k) {
    case A_DOT:
        *out = *dot;
        break;
    case A_FIELD:
        *out = *dot;
        break;
    case A_VAR:
        if (lookup_var(x, a->s, out) < 0) return -1;
        break;
    case A_STR:
        *out = (tv){.k = TV_STR, .s = a->s};
        break;
    case A_INT:
        *out = (tv){.k = TV_INT, .i = a->i};
        break;
    case A_FLOAT:
        *out = (tv){.k = TV_FLOAT, .f = a->f};
        break;
    case A_BOOL:
        *out = (tv){.k = TV_BOOL, .i = a->i};
        break;
    case A_NIL:
        *out = (tv){.k = TV_NIL};
        break;
    case A_PIPE:
        if (eval_pipe(x, a->p, dot, out) < 0) return -1;
        break;
    case A_FUNC:
        return tpl_fail(&x->env, "function %s used as a value", a->s);
    }
    for (size_t i = 0; i < a->nchain; i++)
        if (field(x, out, a->chain[i]) < 0) return -1;
    return 0;
}

static int eval_cmd(exec *x, const cmd *c, const tv *dot, const tv *piped, tv *out)
{
    const arg *a0 = &c->args[0];
    if (a0->k != A_FUNC) {
        if (piped) return tpl_fail(&x->env, "can't give argument to non-function");
        return eval_arg(x, a0, dot, out);
    }
    const tpl_func *fn = a0->fn;
    size_t n = c->nargs - 1 + (piped ? 1 : 0);
    if ((int)n < fn->min_args || (fn->max_args >= 0 && (int)n > fn->max_args))
        return tpl_fail(&x->env, "wrong number of args for %s: want %d got %zu", a0->s,
                        fn->min_args, n);
    tv args[33];
    if (fn->lazy) { /* and / or: stop at the first that decides */
        for (size_t i = 0; i < n; i++) {
            if (i < c->nargs - 1) {
                if (eval_arg(x, &c->args[i + 1], dot, &args[i]) < 0) return -1;
            } else {
                args[i] = *piped;
            }
            int t = tv_truth(&args[i]);
            if (i + 1 == n || (fn->name[0] == 'a' ? !t : t)) {
                *out = args[i];
                return 0;
            }
        }
    }
    for (size_t i = 0; i + 1 < c->nargs; i++)
        if (eval_arg(x, &c->args[i + 1], dot, &args[i]) < 0) return -1;
    if (piped) args[n - 1] = *piped;
    if (fn->fn(&x->env, args, n, out) < 0) {
        char inner[512];
        mw_strlcpy(inner, x->env.err, sizeof(inner));
        return tpl_fail(&x->env, "error calling %s: %s", a0->s, inner);
    }
    return 0;
}

static int set_var(exec *x, const char *name, const tv *v, int assign)
{
    if (assign) {
        for (size_t i = x->nvars; i-- > 0;)
            if (strcmp(x->vars[i].name, name) == 0) {
                x->vars[i].v = *v;
                return 0;
            }
        return tpl_fail(&x->env, "undefined variable: $%s", name);
    }
    if (x->nvars >= MAX_VARS) return tpl_fail(&x->env, "too many variables");
    x->vars[x->nvars++] = (var){name, *v};
    return 0;
}

static int eval_pipe(exec *x, const pipe *p, const tv *dot, tv *out)
{
    if (++x->depth > MAX_DEPTH) return tpl_fail(&x->env, "nesting too deep");
    tv v = {.k = TV_NIL};
    for (size_t i = 0; i < p->ncmds; i++) {
        tv next;
        if (eval_cmd(x, &p->cmds[i], dot, i ? &v : NULL, &next) < 0) return -1;
        v = next;
    }
    x->depth--;
    *out = v;
    if (p->ndecl == 1 && set_var(x, p->decl[0], &v, p->assign) < 0) return -1;
    return 0;
}

static int walk(exec *x, const list *l, const tv *dot);

static int run_range(exec *x, const node *n, const tv *dot, const tv *over)
{
    size_t count = over->k == TV_MAP || over->k == TV_SAMPLES ? over->n : 0;
    if (over->k != TV_MAP && over->k != TV_SAMPLES && over->k != TV_NIL &&
        !(over->k == TV_INT && over->i >= 0))
        return tpl_fail(&x->env, "range can't iterate over %s", tv_print(&x->env, over));
    if (over->k == TV_INT) count = (size_t)over->i;
    if (!count) return walk(x, &n->alt, dot);
    size_t mark = x->nvars;
    for (size_t i = 0; i < count; i++) {
        if (++x->ranged > MAX_RANGE) return tpl_fail(&x->env, "range: too many iterations");
        tv key, elem;
        if (over->k == TV_MAP) {
            key = (tv){.k = TV_STR, .s = over->kv[i].name};
            elem = (tv){.k = TV_STR, .s = over->kv[i].value};
        } else if (over->k == TV_SAMPLES) {
            key = (tv){.k = TV_INT, .i = (long long)i};
            elem = (tv){.k = TV_SAMPLE, .smp = &over->smp[i]};
        } else {
            key = elem = (tv){.k = TV_INT, .i = (long long)i};
        }
        x->nvars = mark;
        if (n->p->ndecl == 1 && set_var(x, n->p->decl[0], &elem, 0) < 0) return -1;
        if (n->p->ndecl == 2 &&
            (set_var(x, n->p->decl[0], &key, 0) < 0 || set_var(x, n->p->decl[1], &elem, 0) < 0))
            return -1;
        if (walk(x, &n->body, &elem) < 0) return -1;
    }
    x->nvars = mark;
    return 0;
}

static int walk(exec *x, const list *l, const tv *dot)
{
    size_t mark = x->nvars; /* variables live to the end of their block */
    for (size_t i = 0; i < l->n; i++) {
        const node *n = l->v[i];
        tv v;
        switch (n->k) {
        case N_TEXT:
            if (mw_buf_append(&x->out, n->text, n->len) < 0)
                return tpl_fail(&x->env, "output longer than %d bytes", MW_TPL_MAX_OUTPUT);
            break;
        case N_ACTION:
            if (eval_pipe(x, n->p, dot, &v) < 0) return -1;
            if (n->p->ndecl) break; /* a declaration prints nothing */
            if (mw_buf_puts(&x->out, tv_print(&x->env, &v)) < 0)
                return tpl_fail(&x->env, "output longer than %d bytes", MW_TPL_MAX_OUTPUT);
            break;
        case N_IF:
        case N_WITH: {
            size_t inner = x->nvars;
            if (eval_pipe(x, n->p, dot, &v) < 0) return -1;
            int t = tv_truth(&v);
            if (walk(x, t ? &n->body : &n->alt, t && n->k == N_WITH ? &v : dot) < 0) return -1;
            x->nvars = inner;
            break;
        }
        case N_RANGE: {
            pipe p = *n->p;
            p.ndecl = 0; /* the declared names take each element, not the list */
            if (eval_pipe(x, &p, dot, &v) < 0 || run_range(x, n, dot, &v) < 0) return -1;
            break;
        }
        }
        if (x->depth > MAX_DEPTH) return tpl_fail(&x->env, "nesting too deep");
    }
    x->nvars = mark;
    return 0;
}

int mw_tpl_expand(const mw_tpl *t, const mw_tpl_data *d, char **out, char *err, size_t errsize)
{
    *out = NULL;
    mw_arena a;
    mw_arena_init(&a, 4096);
    exec *x = mw_xcalloc(1, sizeof(*x));
    x->env = (tpl_env){.a = &a, .d = d, .err = err, .errsize = errsize};
    mw_buf_init(&x->out, MW_TPL_MAX_OUTPUT);
    /* Prometheus's preamble: {{$labels := .Labels}}{{$externalLabels :=
     * .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}} */
    tv data = {.k = TV_DATA};
    x->vars[0] = (var){"", data};
    x->vars[1] = (var){"labels", {.k = TV_MAP, .kv = d->labels, .n = d->nlabels}};
    x->vars[2] = (var){"externalLabels", {.k = TV_MAP, .kv = d->external, .n = d->nexternal}};
    x->vars[3] = (var){"externalURL", {.k = TV_STR, .s = d->external_url ? d->external_url : ""}};
    x->vars[4] = (var){"value", {.k = TV_FLOAT, .f = d->value}};
    x->nvars = 5;
    int rc = walk(x, &t->root, &data);
    if (rc == 0) *out = mw_xstrdup(x->out.data ? x->out.data : "");
    mw_buf_free(&x->out);
    free(x);
    mw_arena_free(&a);
    return rc;
}
