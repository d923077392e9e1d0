/* template_fmt.c - printf in rule templates: Go's fmt.Sprintf for the
 * verbs rule files use (%v %s %d %f %e %g %x %q %t %%, flags, width and
 * precision), with Go's answers for what C would not print the same way:
 * NaN and +Inf, a verb that does not fit its operand ("%!d(float64=1.5)"),
 * a missing operand ("%!d(MISSING)") and extra ones ("%!(EXTRA ...)"). */
#include "template_internal.h"
#include "../core/buf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *type_name(const tv *v)
{
    switch (v->k) {
    case TV_STR:
        return "string";
    case TV_FLOAT:
        return "float64";
    case TV_INT:
        return "int";
    case TV_BOOL:
        return "bool";
    case TV_MAP:
        return "map[string]string";
    case TV_SAMPLES:
        return "template.queryResult";
    case TV_SAMPLE:
        return "*template.sample";
    default:
        return "";
    }
}

static void bad_verb(tpl_env *env, mw_buf *b, char verb, const tv *v)
{
    if (v->k == TV_NIL)
        mw_buf_printf(b, "%%!%c(<nil>)", verb);
    else
        mw_buf_printf(b, "%%!%c(%s=%s)", verb, type_name(v), tv_print(env, v));
}

/* Pad s to width as Go does: spaces (left or, with '-', right), or zeros
 * after the sign with '0'. */
static void pad(mw_buf *b, const char *s, int width, int minus, int zero)
{
    int len = (int)strlen(s);
    if (len >= width) {
        mw_buf_puts(b, s);
        return;
    }
    if (minus) {
        mw_buf_puts(b, s);
        for (int i = len; i < width; i++)
            mw_buf_putc(b, ' ');
        return;
    }
    if (zero) {
        if (*s == '-' || *s == '+') mw_buf_putc(b, *s++);
        for (int i = len; i < width; i++)
            mw_buf_putc(b, '0');
        mw_buf_puts(b, s);
        return;
    }
    for (int i = len; i < width; i++)
        mw_buf_putc(b, ' ');
    mw_buf_puts(b, s);
}

static void quote(mw_buf *b, const char *s)
{
    mw_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            mw_buf_printf(b, "\\%c", *p);
        else if (*p == '\n')
            mw_buf_puts(b, "\\n");
        else if (*p == '\t')
            mw_buf_puts(b, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            mw_buf_printf(b, "\\x%02x", *p);
        else
            mw_buf_putc(b, (char)*p);
    }
    mw_buf_putc(b, '"');
}

const char *tpl_sprintf(tpl_env *env, const char *fmt, const tv *args, size_t n)
{
    mw_buf b;
    mw_buf_init(&b, MW_TPL_MAX_OUTPUT);
    size_t used = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            mw_buf_putc(&b, *p);
            continue;
        }
        const char *start = p++;
        int minus = 0, plus = 0, sharp = 0, space = 0, zero = 0;
        for (;; p++) {
            if (*p == '-')
                minus = 1;
            else if (*p == '+')
                plus = 1;
            else if (*p == '#')
                sharp = 1;
            else if (*p == ' ')
                space = 1;
            else if (*p == '0')
                zero = !minus;
            else
                break;
        }
        int width = -1, prec = -1;
        if (*p >= '0' && *p <= '9')
            for (width = 0; *p >= '0' && *p <= '9' && width < 1000; p++)
                width = width * 10 + (*p - '0');
        if (*p == '.') {
            p++;
            for (prec = 0; *p >= '0' && *p <= '9' && prec < 1000; p++)
                prec = prec * 10 + (*p - '0');
        }
        char verb = *p;
        if (!verb) {
            mw_buf_puts(&b, "%!(NOVERB)");
            break;
        }
        if (verb == '%') {
            mw_buf_putc(&b, '%');
            continue;
        }
        if (used >= n) {
            mw_buf_printf(&b, "%%!%c(MISSING)", verb);
            continue;
        }
        const tv *v = &args[used++];
        char cfmt[32], out[512];
        snprintf(cfmt, sizeof(cfmt), "%%%s%s%s%s", plus ? "+" : "", sharp ? "#" : "",
                 space ? " " : "", prec >= 0 ? "." : "");
        if (prec >= 0) snprintf(cfmt + strlen(cfmt), sizeof(cfmt) - strlen(cfmt), "%d", prec);
        size_t cl = strlen(cfmt);
        out[0] = '\0';
        switch (verb) {
        case 'v':
        case 's':
            if (verb == 's' && v->k != TV_STR && v->k != TV_MAP && v->k != TV_BOOL) {
                bad_verb(env, &b, verb, v);
                continue;
            }
            {
                const char *s = tv_print(env, v);
                if (prec >= 0 && v->k == TV_STR && (int)strlen(s) > prec) {
                    char *cut = mw_arena_strndup(env->a, s, (size_t)prec);
                    s = cut;
                }
                pad(&b, s, width, minus, 0);
            }
            continue;
        case 'd':
            if (v->k != TV_INT) {
                bad_verb(env, &b, verb, v);
                continue;
            }
            snprintf(cfmt + cl, sizeof(cfmt) - cl, "lld");
            snprintf(out, sizeof(out), cfmt, v->i);
            break;
        case 'x':
        case 'X':
        case 'o':
            if (v->k == TV_INT) {
                snprintf(cfmt + cl, sizeof(cfmt) - cl, "ll%c", verb);
                snprintf(out, sizeof(out), cfmt, v->i);
            } else if (v->k == TV_STR && verb != 'o') {
                mw_buf hex;
                mw_buf_init(&hex, MW_TPL_MAX_OUTPUT);
                for (const unsigned char *q = (const unsigned char *)v->s; *q; q++)
                    mw_buf_printf(&hex, verb == 'x' ? "%02x" : "%02X", *q);
                pad(&b, hex.data ? hex.data : "", width, minus, zero);
                mw_buf_free(&hex);
                continue;
            } else {
                bad_verb(env, &b, verb, v);
                continue;
            }
            break;
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G': {
            if (v->k != TV_FLOAT) {
                bad_verb(env, &b, verb, v);
                continue;
            }
            if (isnan(v->f) || isinf(v->f)) {
                const char *s = isnan(v->f) ? (plus ? "+NaN" : "NaN") : v->f > 0 ? "+Inf" : "-Inf";
                pad(&b, s, width, minus, 0);
                continue;
            }
            snprintf(cfmt + cl, sizeof(cfmt) - cl, "%c", verb);
            snprintf(out, sizeof(out), cfmt, v->f);
            break;
        }
        case 't':
            if (v->k != TV_BOOL) {
                bad_verb(env, &b, verb, v);
                continue;
            }
            pad(&b, v->i ? "true" : "false", width, minus, 0);
            continue;
        case 'q': {
            if (v->k != TV_STR) {
                bad_verb(env, &b, verb, v);
                continue;
            }
            mw_buf q;
            mw_buf_init(&q, MW_TPL_MAX_OUTPUT);
            quote(&q, v->s);
            pad(&b, q.data, width, minus, 0);
            mw_buf_free(&q);
            continue;
        }
        default:
            mw_buf_printf(&b, "%%!%c(%s=%s)", verb, type_name(v), tv_print(env, v));
            (void)start;
            continue;
        }
        pad(&b, out, width, minus, zero);
    }
    if (used < n) {
        mw_buf_puts(&b, "%!(EXTRA ");
        for (size_t i = used; i < n; i++)
            mw_buf_printf(&b, "%s%s=%s", i > used ? ", " : "", type_name(&args[i]),
                          tv_print(env, &args[i]));
        mw_buf_putc(&b, ')');
    }
    const char *s = mw_arena_strdup(env->a, b.data ? b.data : "");
    mw_buf_free(&b);
    return s;
}
