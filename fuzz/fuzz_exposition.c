/* fuzz_exposition.c - rendering a snapshot built from arbitrary bytes
 * (label values and HELP texts with quotes, backslashes and newlines; NaN,
 * infinities, -0 and raw doubles as values) in both formats, then reading the
 * output back with a strict parser written here. Checks: every line ends with
 * '\n'; no raw newline inside a label value or HELP text; escapes are valid
 * and decode to exactly the emitted text; values read back bit for bit;
 * families and samples appear in emission order with the right HELP, TYPE
 * and UNIT lines; OpenMetrics ends with one "# EOF\n". */
#include "core/buf.h"
#include "core/snapshot.h"
#include "serve/exposition.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NDESC 5
#define MAX_SAMPLES 64
#define MAX_LABELS 4

static const struct {
    const char *name, *family, *unit;
    mw_metric_type type;
} table[NDESC] = {
    {"mlwatch_fz_seconds_total", "mlwatch_fz_seconds", "seconds", MW_COUNTER},
    {"mlwatch_fz_bytes", "mlwatch_fz_bytes", "bytes", MW_GAUGE},
    {"mlwatch_fz_build_info", "mlwatch_fz_build", "", MW_INFO},
    {"mlwatch_fz_count", "mlwatch_fz_count", "", MW_GAUGE},
    {"mlwatch_fz_events_total", "mlwatch_fz_events", "", MW_COUNTER},
};
static const char *label_names[MAX_LABELS] = {"cpu", "mode", "path", "le"};

typedef struct record {
    int desc;
    double value;
    int nlabels;
    const char *values[MAX_LABELS];
} record;

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static void check(int ok)
{
    if (!ok) abort();
}

static uint8_t byte(input *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

/* A string of up to 63 bytes; NUL bytes become newlines (C strings). */
static char *string(input *in)
{
    size_t len = byte(in) % 64;
    if (len > in->n) len = in->n;
    char *s = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        s[i] = in->p[i] ? (char)in->p[i] : '\n';
    s[len] = '\0';
    in->p += len;
    in->n -= len;
    return s;
}

static double value(input *in)
{
    uint8_t sel = byte(in);
    switch (sel % 8) {
    case 0:
        return NAN;
    case 1:
        return INFINITY;
    case 2:
        return -INFINITY;
    case 3:
        return -0.0;
    case 4: {
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = bits << 8 | byte(in);
        double v;
        memcpy(&v, &bits, sizeof(v));
        return v;
    }
    case 5:
        return (double)(int8_t)byte(in) * 1e15;
    default:
        return (double)byte(in) / 7.0;
    }
}

/* Decode an escaped text from p up to the terminator `end_char`; returns the
 * position of the terminator, or NULL if an escape is invalid, a raw newline
 * or a forbidden raw character appears. quote: '"' must be escaped. */
static const char *unescape(const char *p, char end_char, int quote, mw_buf *out)
{
    mw_buf_clear(out);
    for (;; p++) {
        if (*p == end_char) return p;
        if (*p == '\0' || *p == '\n') return NULL;
        if (*p == '"' && quote) return NULL;
        if (*p != '\\') {
            mw_buf_putc(out, *p);
            continue;
        }
        p++;
        if (*p == '\\')
            mw_buf_putc(out, '\\');
        else if (*p == 'n')
            mw_buf_putc(out, '\n');
        else if (*p == '"' && quote)
            mw_buf_putc(out, '"');
        else
            return NULL;
    }
}

static int same_value(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof(a)) == 0;
}

/* Expect `want` at *p; advance past it. */
static void expect(const char **p, const char *want)
{
    size_t n = strlen(want);
    check(strncmp(*p, want, n) == 0);
    *p += n;
}

static void verify(const char *out, mw_format fmt, const mw_metric_desc *descs, const int *order,
                   int nfam, const record *recs, int nrec)
{
    static const char *text_types[] = {"gauge", "counter", "gauge"};
    static const char *om_types[] = {"gauge", "counter", "info"};
    int om = fmt == MW_FMT_OPENMETRICS;
    const char *p = out;
    mw_buf tmp;
    mw_buf_init(&tmp, 0);
    int seen = 0;
    for (int f = 0; f < nfam; f++) {
        int d = order[f];
        const char *fam = om ? table[d].family : table[d].name;
        /* # HELP */
        expect(&p, "# HELP ");
        expect(&p, fam);
        expect(&p, " ");
        p = unescape(p, '\n', om, &tmp);
        check(p != NULL);
        check(tmp.len == strlen(descs[d].help) &&
              memcmp(tmp.data ? tmp.data : "", descs[d].help, tmp.len) == 0);
        expect(&p, "\n# TYPE ");
        expect(&p, fam);
        expect(&p, " ");
        expect(&p, om ? om_types[table[d].type] : text_types[table[d].type]);
        expect(&p, "\n");
        if (om && table[d].unit[0]) {
            expect(&p, "# UNIT ");
            expect(&p, fam);
            expect(&p, " ");
            expect(&p, table[d].unit);
            expect(&p, "\n");
        }
        /* Samples of this family, in emission order. */
        for (int r = 0; r < nrec; r++) {
            if (recs[r].desc != d) continue;
            expect(&p, table[d].name);
            if (recs[r].nlabels) {
                expect(&p, "{");
                for (int l = 0; l < recs[r].nlabels; l++) {
                    if (l) expect(&p, ",");
                    expect(&p, label_names[l]);
                    expect(&p, "=\"");
                    p = unescape(p, '"', 1, &tmp);
                    check(p != NULL);
                    check(tmp.len == strlen(recs[r].values[l]) &&
                          memcmp(tmp.data ? tmp.data : "", recs[r].values[l], tmp.len) == 0);
                    p++;
                }
                expect(&p, "}");
            }
            expect(&p, " ");
            const char *nl = strchr(p, '\n');
            check(nl != NULL && nl > p && nl - p < 40);
            char num[40];
            memcpy(num, p, (size_t)(nl - p));
            num[nl - p] = '\0';
            char *end;
            double v = strtod(num, &end);
            check(*end == '\0');
            check(same_value(v, recs[r].value));
            p = nl + 1;
            seen++;
        }
    }
    check(seen == nrec);
    if (om) expect(&p, "# EOF\n");
    check(*p == '\0');
    mw_buf_free(&tmp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    mw_metric_desc descs[NDESC];
    char *helps[NDESC];
    for (int d = 0; d < NDESC; d++) {
        helps[d] = string(&in);
        descs[d] = (mw_metric_desc){table[d].name, helps[d], table[d].unit, table[d].type};
    }
    record recs[MAX_SAMPLES];
    int nrec = 0, order[NDESC], nfam = 0, used[NDESC] = {0};
    char *strings[MAX_SAMPLES * MAX_LABELS];
    int nstrings = 0;
    mw_snapshot *s = mw_snapshot_new();
    while (in.n && nrec < MAX_SAMPLES) {
        record *r = &recs[nrec++];
        uint8_t b = byte(&in);
        r->desc = b % NDESC;
        r->nlabels = (b / NDESC) % (MAX_LABELS + 1);
        r->value = value(&in);
        mw_label labels[MAX_LABELS];
        for (int l = 0; l < r->nlabels; l++) {
            r->values[l] = strings[nstrings++] = string(&in);
            labels[l] = (mw_label){label_names[l], r->values[l]};
        }
        if (!used[r->desc]) {
            used[r->desc] = 1;
            order[nfam++] = r->desc;
        }
        mw_emitv(s, &descs[r->desc], r->value, (size_t)r->nlabels, labels);
    }
    for (int f = 0; f < 2; f++) {
        mw_format fmt = f ? MW_FMT_OPENMETRICS : MW_FMT_TEXT;
        mw_buf out;
        mw_buf_init(&out, 0);
        mw_render(s, fmt, &out);
        check(!out.overflow);
        char *text = mw_buf_steal(&out, NULL);
        check(text != NULL);
        verify(text, fmt, descs, order, nfam, recs, nrec);
        free(text);
    }
    mw_snapshot_free(s);
    for (int i = 0; i < nstrings; i++)
        free(strings[i]);
    for (int d = 0; d < NDESC; d++)
        free(helps[d]);
    return 0;
}
