/* matcher.c - label matchers over POSIX regular expressions. */
#include "matcher.h"
#include "../core/buf.h"
#include "../core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Translate the RE2 subset that POSIX ERE lacks but dashboards use; refuse
 * what would silently mean something else under POSIX. */
static int translate(const char *re, mw_buf *out, char *err, size_t errsize)
{
    int in_bracket = 0;
    mw_buf_puts(out, "^(");
    for (size_t i = 0; re[i]; i++) {
        char c = re[i];
        if (c == '\\' && re[i + 1]) {
            char n = re[++i];
            const char *cls = NULL;
            switch (n) {
            case 'd':
                cls = in_bracket ? "0-9" : "[0-9]";
                break;
            case 'D':
                cls = in_bracket ? NULL : "[^0-9]";
                break;
            case 'w':
                cls = in_bracket ? "A-Za-z0-9_" : "[A-Za-z0-9_]";
                break;
            case 'W':
                cls = in_bracket ? NULL : "[^A-Za-z0-9_]";
                break;
            case 's':
                cls = in_bracket ? "[:space:]" : "[[:space:]]";
                break;
            case 'S':
                cls = in_bracket ? NULL : "[^[:space:]]";
                break;
            case 'p':
            case 'P':
            case 'b':
            case 'B':
            case 'A':
            case 'z':
                snprintf(err, errsize,
                         "regular expression: \\%c at offset %zu is RE2 syntax that "
                         "POSIX extended expressions do not support",
                         n, i - 1);
                return -1;
            default:
                if (in_bracket) {
                    /* In POSIX brackets a backslash is literal; RE2 escapes. */
                    mw_buf_putc(out, n);
                } else {
                    mw_buf_putc(out, '\\');
                    mw_buf_putc(out, n);
                }
                continue;
            }
            if (!cls) {
                snprintf(err, errsize,
                         "regular expression: \\%c inside brackets at offset %zu "
                         "is not supported",
                         n, i - 1);
                return -1;
            }
            mw_buf_puts(out, cls);
            continue;
        }
        if (!in_bracket && c == '(' && re[i + 1] == '?') {
            snprintf(err, errsize,
                     "regular expression: '(?' at offset %zu (flags, non-capturing "
                     "or named groups) is RE2 syntax that POSIX extended expressions do not "
                     "support",
                     i);
            return -1;
        }
        if (!in_bracket && (c == '*' || c == '+' || c == '?' || c == '}') && re[i + 1] == '?') {
            snprintf(err, errsize,
                     "regular expression: non-greedy '%c?' at offset %zu is not "
                     "supported",
                     c, i);
            return -1;
        }
        if (!in_bracket && c == '[') {
            in_bracket = 1;
            mw_buf_putc(out, c);
            if (re[i + 1] == '^') mw_buf_putc(out, re[++i]);
            if (re[i + 1] == ']') mw_buf_putc(out, re[++i]);
            continue;
        }
        if (in_bracket && c == '[' && (re[i + 1] == ':' || re[i + 1] == '.' || re[i + 1] == '=')) {
            const char *end = strstr(re + i + 2, (char[]){re[i + 1], ']', 0});
            if (end) {
                size_t n = (size_t)(end + 2 - (re + i));
                mw_buf_append(out, re + i, n);
                i += n - 1;
                continue;
            }
        }
        if (in_bracket && c == ']') in_bracket = 0;
        mw_buf_putc(out, c);
    }
    mw_buf_puts(out, ")$");
    return 0;
}

int mw_matcher_init(mw_matcher *m, mw_match_op op, const char *name, const char *value, char *err,
                    size_t errsize)
{
    memset(m, 0, sizeof(*m));
    m->op = op;
    if (op == MW_MATCH_RE || op == MW_MATCH_NRE) {
        mw_buf b;
        mw_buf_init(&b, 1 << 20);
        if (translate(value, &b, err, errsize) < 0 || b.overflow) {
            if (b.overflow) snprintf(err, errsize, "regular expression longer than 1 MiB");
            mw_buf_free(&b);
            return -1;
        }
        int rc = regcomp(&m->re, b.data, REG_EXTENDED | REG_NOSUB);
        mw_buf_free(&b);
        if (rc != 0) {
            char msg[200];
            regerror(rc, &m->re, msg, sizeof(msg));
            snprintf(err, errsize, "regular expression '%.200s': %s", value, msg);
            return -1;
        }
        m->has_re = 1;
    }
    m->name = mw_xstrdup(name);
    m->value = mw_xstrdup(value);
    m->matches_empty = mw_matcher_matches(m, "");
    return 0;
}

int mw_matcher_matches(const mw_matcher *m, const char *value)
{
    switch (m->op) {
    case MW_MATCH_EQ:
        return strcmp(value, m->value) == 0;
    case MW_MATCH_NEQ:
        return strcmp(value, m->value) != 0;
    case MW_MATCH_RE:
        return regexec(&m->re, value, 0, NULL, 0) == 0;
    case MW_MATCH_NRE:
        return regexec(&m->re, value, 0, NULL, 0) != 0;
    }
    return 0;
}

void mw_matcher_free(mw_matcher *m)
{
    if (m->has_re) regfree(&m->re);
    free(m->name);
    free(m->value);
    memset(m, 0, sizeof(*m));
}
