/* exposition.c - Prometheus text 0.0.4 and OpenMetrics 1.0 rendering. */
#include "exposition.h"
#include "../core/units.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void mw_format_value(double v, char *out, size_t size)
{
    if (mw_format_nonfinite(v, out, size)) return;
    /* Integers (counters, bytes) are the common case: print them exactly.
     * The sign of -0.0 is kept, as Go's FormatFloat does. */
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(out, size, "%s%lld", v == 0 && signbit(v) ? "-" : "", (long long)v);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (strtod(out, NULL) == v) return;
    }
}

static void put_escaped(mw_buf *b, const char *s, int quote)
{
    const char *run = s;
    for (const char *p = s; *p; p++) {
        const char *esc = NULL;
        if (*p == '\\')
            esc = "\\\\";
        else if (*p == '\n')
            esc = "\\n";
        else if (*p == '"' && quote)
            esc = "\\\"";
        if (esc) {
            mw_buf_append(b, run, (size_t)(p - run));
            mw_buf_puts(b, esc);
            run = p + 1;
        }
    }
    mw_buf_puts(b, run);
}

/* Family name in OpenMetrics: counters drop "_total", info drops "_info". */
static size_t om_family_len(const mw_metric_desc *d)
{
    size_t n = strlen(d->name);
    if (d->type == MW_COUNTER && n > 6 && strcmp(d->name + n - 6, "_total") == 0) return n - 6;
    if (d->type == MW_INFO && n > 5 && strcmp(d->name + n - 5, "_info") == 0) return n - 5;
    return n;
}

static void put_sample(mw_buf *b, const char *name, const mw_sample *smp)
{
    char num[40];
    mw_buf_puts(b, name);
    if (smp->nlabels) {
        mw_buf_putc(b, '{');
        for (uint32_t i = 0; i < smp->nlabels; i++) {
            if (i) mw_buf_putc(b, ',');
            mw_buf_puts(b, smp->labels[i].name);
            mw_buf_append(b, "=\"", 2);
            put_escaped(b, smp->labels[i].value, 1);
            mw_buf_putc(b, '"');
        }
        mw_buf_putc(b, '}');
    }
    mw_buf_putc(b, ' ');
    mw_format_value(smp->value, num, sizeof(num));
    mw_buf_puts(b, num);
    mw_buf_putc(b, '\n');
}

/* Hands the rendered text to sink whenever out holds at least chunk bytes
 * (chunk 0: never, everything stays in out). */
void mw_render_begin(mw_render_cursor *c, const mw_snapshot *s, mw_format fmt)
{
    c->fmt = fmt;
    c->family = s->first;
    c->sample = NULL;
    c->done = 0;
}

static void put_family_header(mw_buf *out, const mw_metric_desc *d, mw_format fmt)
{
    static const char *text_types[] = {"gauge", "counter", "gauge"};
    static const char *om_types[] = {"gauge", "counter", "info"};
    if (fmt == MW_FMT_TEXT) {
        mw_buf_printf(out, "# HELP %s ", d->name);
        put_escaped(out, d->help, 0);
        mw_buf_printf(out, "\n# TYPE %s %s\n", d->name, text_types[d->type]);
    } else {
        int n = (int)om_family_len(d);
        mw_buf_printf(out, "# HELP %.*s ", n, d->name);
        put_escaped(out, d->help, 1);
        mw_buf_printf(out, "\n# TYPE %.*s %s\n", n, d->name, om_types[d->type]);
        if (d->unit[0]) mw_buf_printf(out, "# UNIT %.*s %s\n", n, d->name, d->unit);
    }
}

int mw_render_next(mw_render_cursor *c, mw_buf *out, size_t chunk)
{
    size_t goal = out->len + (chunk ? chunk : 1);
    while (!c->done && out->len < goal) {
        const mw_family *f = c->family;
        if (!f) {
            if (c->fmt == MW_FMT_OPENMETRICS) mw_buf_puts(out, "# EOF\n");
            c->done = 1;
            break;
        }
        if (!c->sample) {
            put_family_header(out, f->desc, c->fmt);
            c->sample = f->first;
        }
        while (c->sample && out->len < goal) {
            put_sample(out, f->desc->name, c->sample);
            c->sample = c->sample->next;
        }
        if (!c->sample) c->family = f->next; /* the next family, from its header */
    }
    return !c->done;
}

int mw_render_stream(const mw_snapshot *s, mw_format fmt, mw_buf *out, size_t chunk,
                     mw_render_sink sink, void *ctx)
{
    mw_render_cursor c;
    mw_render_begin(&c, s, fmt);
    while (mw_render_next(&c, out, chunk)) {
        if (sink(ctx, out->data, out->len) < 0) return -1;
        mw_buf_clear(out);
    }
    if (!out->len) return 0;
    int rc = sink(ctx, out->data, out->len);
    mw_buf_clear(out);
    return rc;
}

void mw_render(const mw_snapshot *s, mw_format fmt, mw_buf *out)
{
    mw_render_cursor c;
    mw_render_begin(&c, s, fmt);
    while (mw_render_next(&c, out, SIZE_MAX - out->len)) {
    }
}

/* Split the next comma-separated element of a header; returns its length. */
static size_t next_elem(const char **p, const char **start)
{
    while (**p == ' ' || **p == '\t' || **p == ',')
        (*p)++;
    *start = *p;
    while (**p && **p != ',')
        (*p)++;
    return (size_t)(*p - *start);
}

/* The value of parameter NAME in one element ("type;a=b;q=0.5"), without
 * quotes, or NULL when absent; *vlen gets its length. */
static const char *elem_param(const char *e, size_t n, const char *name, size_t *vlen)
{
    const char *end = e + n;
    size_t nl = strlen(name);
    for (const char *p = e; p < end; p++) {
        if (*p != ';') continue;
        const char *q = p + 1;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if ((size_t)(end - q) <= nl || strncasecmp(q, name, nl) != 0 || q[nl] != '=') continue;
        const char *v = q + nl + 1, *ve = v;
        while (ve < end && *ve != ';' && *ve != ' ' && *ve != '\t')
            ve++;
        if (ve - v >= 2 && *v == '"' && ve[-1] == '"') {
            v++;
            ve--;
        }
        *vlen = (size_t)(ve - v);
        return v;
    }
    return NULL;
}

/* q-value of one element, 1.0 by default. */
static double elem_q(const char *e, size_t n)
{
    size_t len;
    const char *v = elem_param(e, n, "q", &len);
    if (!v) return 1.0;
    char num[16];
    if (len >= sizeof(num)) return 0; /* no valid qvalue is this long */
    memcpy(num, v, len);
    num[len] = '\0';
    double q = strtod(num, NULL);
    return q > 0 ? (q > 1 ? 1 : q) : 0; /* NaN and negatives: not acceptable */
}

static int elem_is(const char *e, size_t n, const char *type)
{
    size_t t = strlen(type);
    if (n < t || strncasecmp(e, type, t) != 0) return 0;
    return n == t || e[t] == ';' || e[t] == ' ' || e[t] == '\t';
}

mw_format mw_negotiate_format(const char *accept)
{
    if (!accept) return MW_FMT_TEXT;
    double best_q = 0;
    mw_format best = MW_FMT_TEXT;
    const char *p = accept, *e;
    size_t n;
    while ((n = next_elem(&p, &e)) > 0) {
        double q = elem_q(e, n);
        int is_om = elem_is(e, n, "application/openmetrics-text");
        int is_text = elem_is(e, n, "text/plain");
        if (is_om) {
            /* Only versions we speak: 1.0.0 and the 0.0.1 draft it grew from. */
            size_t vl;
            const char *v = elem_param(e, n, "version", &vl);
            if (v && !(vl == 5 && (strncmp(v, "1.0.0", 5) == 0 || strncmp(v, "0.0.1", 5) == 0)))
                continue;
        }
        if (!is_om && !is_text) continue;
        if (q > best_q) {
            best_q = q;
            best = is_om ? MW_FMT_OPENMETRICS : MW_FMT_TEXT;
        }
    }
    return best;
}

int mw_accepts_gzip(const char *accept_encoding)
{
    if (!accept_encoding) return 0;
    const char *p = accept_encoding, *e;
    size_t n;
    while ((n = next_elem(&p, &e)) > 0)
        if (elem_is(e, n, "gzip")) return elem_q(e, n) > 0;
    return 0;
}
