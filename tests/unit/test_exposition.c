/* test_exposition.c - Prometheus text 0.0.4 and OpenMetrics 1.0 rendering,
 * value formatting and content negotiation (src/serve/exposition.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/snapshot.h"
#include "serve/exposition.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mw_metric_desc CPU_SECONDS = {"mlwatch_cpu_seconds_total", "CPU time spent, by mode",
                                           "seconds", MW_COUNTER};
static const mw_metric_desc MEM_BYTES = {
    "mlwatch_memory_bytes", "Memory \"in use\"; C:\\dir\nsecond line", "bytes", MW_GAUGE};
static const mw_metric_desc BUILD_INFO = {"mlwatch_build_info", "Build identity", "", MW_INFO};
static const mw_metric_desc TASKS = {"mlwatch_tasks", "", "", MW_GAUGE};

static mw_snapshot *sample_snapshot(void)
{
    mw_snapshot *s = mw_snapshot_new();
    mw_emit(s, &CPU_SECONDS, 12.5, "cpu", "0", "mode", "user", MW_END);
    mw_emit(s, &MEM_BYTES, 1e21, "kind", "a\"b\\c\nd", MW_END);
    mw_emit(s, &BUILD_INFO, 1, "version", "0.1.0", "revision", "", MW_END);
    mw_emit(s, &CPU_SECONDS, 3, "cpu", "1", "mode", "system", MW_END);
    mw_emit(s, &TASKS, NAN, MW_END);
    mw_emit(s, &TASKS, INFINITY, "x", "1", MW_END);
    mw_emit(s, &TASKS, -INFINITY, "x", "2", MW_END);
    mw_emit(s, &TASKS, -0.0, "x", "3", MW_END);
    return s;
}

static char *render(const mw_snapshot *s, mw_format fmt)
{
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_render(s, fmt, &b);
    return mw_buf_steal(&b, NULL);
}

static void render_text(void **state)
{
    (void)state;
    mw_snapshot *s = sample_snapshot();
    char *out = render(s, MW_FMT_TEXT);
    /* Families in order of first emission; HELP escapes only \ and newline;
     * label values escape \, " and newline; info is a gauge. */
    assert_string_equal(out,
                        "# HELP mlwatch_cpu_seconds_total CPU time spent, by mode\n"
                        "# TYPE mlwatch_cpu_seconds_total counter\n"
                        "mlwatch_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 12.5\n"
                        "mlwatch_cpu_seconds_total{cpu=\"1\",mode=\"system\"} 3\n"
                        "# HELP mlwatch_memory_bytes Memory \"in use\"; C:\\\\dir\\nsecond line\n"
                        "# TYPE mlwatch_memory_bytes gauge\n"
                        "mlwatch_memory_bytes{kind=\"a\\\"b\\\\c\\nd\"} 1e+21\n"
                        "# HELP mlwatch_build_info Build identity\n"
                        "# TYPE mlwatch_build_info gauge\n"
                        "mlwatch_build_info{version=\"0.1.0\",revision=\"\"} 1\n"
                        "# HELP mlwatch_tasks \n"
                        "# TYPE mlwatch_tasks gauge\n"
                        "mlwatch_tasks NaN\n"
                        "mlwatch_tasks{x=\"1\"} +Inf\n"
                        "mlwatch_tasks{x=\"2\"} -Inf\n"
                        "mlwatch_tasks{x=\"3\"} -0\n");
    free(out);
    mw_snapshot_free(s);
}

static void render_openmetrics(void **state)
{
    (void)state;
    mw_snapshot *s = sample_snapshot();
    char *out = render(s, MW_FMT_OPENMETRICS);
    /* Counter family without _total (samples keep it), UNIT for units, info
     * family without _info, HELP escapes " as well, and # EOF at the end. */
    assert_string_equal(out, "# HELP mlwatch_cpu_seconds CPU time spent, by mode\n"
                             "# TYPE mlwatch_cpu_seconds counter\n"
                             "# UNIT mlwatch_cpu_seconds seconds\n"
                             "mlwatch_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 12.5\n"
                             "mlwatch_cpu_seconds_total{cpu=\"1\",mode=\"system\"} 3\n"
                             "# HELP mlwatch_memory_bytes Memory \\\"in use\\\"; "
                             "C:\\\\dir\\nsecond line\n"
                             "# TYPE mlwatch_memory_bytes gauge\n"
                             "# UNIT mlwatch_memory_bytes bytes\n"
                             "mlwatch_memory_bytes{kind=\"a\\\"b\\\\c\\nd\"} 1e+21\n"
                             "# HELP mlwatch_build Build identity\n"
                             "# TYPE mlwatch_build info\n"
                             "mlwatch_build_info{version=\"0.1.0\",revision=\"\"} 1\n"
                             "# HELP mlwatch_tasks \n"
                             "# TYPE mlwatch_tasks gauge\n"
                             "mlwatch_tasks NaN\n"
                             "mlwatch_tasks{x=\"1\"} +Inf\n"
                             "mlwatch_tasks{x=\"2\"} -Inf\n"
                             "mlwatch_tasks{x=\"3\"} -0\n"
                             "# EOF\n");
    free(out);
    mw_snapshot_free(s);
}

static void render_empty_and_appends(void **state)
{
    (void)state;
    mw_snapshot *s = mw_snapshot_new();
    char *out = render(s, MW_FMT_TEXT);
    assert_string_equal(out, "");
    free(out);
    out = render(s, MW_FMT_OPENMETRICS);
    assert_string_equal(out, "# EOF\n");
    free(out);

    /* mw_render appends to what the buffer holds. */
    mw_emit(s, &TASKS, 7, MW_END);
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_buf_puts(&b, "prefix\n");
    mw_render(s, MW_FMT_TEXT, &b);
    assert_string_equal(b.data, "prefix\n# HELP mlwatch_tasks \n# TYPE mlwatch_tasks gauge\n"
                                "mlwatch_tasks 7\n");
    mw_buf_free(&b);
    mw_snapshot_free(s);
}

static void format_values(void **state)
{
    (void)state;
    const struct {
        double v;
        const char *want;
    } cases[] = {
        {0, "0"},
        {-0.0, "-0"},
        {1, "1"},
        {-1, "-1"},
        {12.5, "12.5"},
        {0.1, "0.1"},
        {1.0 / 3, "0.3333333333333333"},
        {2.0 / 3, "0.6666666666666666"},
        {1e21, "1e+21"},
        {1e-7, "1e-07"},
        {123456789012345678.0, "1.2345678901234568e+17"},
        {9007199254740991.0, "9007199254740991"},
        {9007199254740992.0, "9007199254740992"},
        {-9007199254740992.0, "-9007199254740992"},
        {18446744073709551615.0, "1.8446744073709552e+19"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {NAN, "NaN"},
        {-NAN, "NaN"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[40];
        mw_format_value(cases[i].v, out, sizeof(out));
        assert_string_equal(out, cases[i].want);
    }
    /* The smallest subnormal: not the shortest text, but it reads back. */
    char out[40];
    mw_format_value(5e-324, out, sizeof(out));
    assert_true(strtod(out, NULL) == 5e-324);
}

static void format_round_trip(void **state)
{
    (void)state;
    /* Random bit patterns cover every exponent, subnormals included; each
     * must read back bit for bit (strtod, as Prometheus' ParseFloat). */
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v;
        memcpy(&v, &x, sizeof(v));
        if (i % 4 == 1) v = (double)(int64_t)(x >> 11) / 1024.0; /* realistic magnitudes */
        if (i % 4 == 2) v = (double)(x >> 20);                   /* integers */
        if (isnan(v)) continue;
        char out[40];
        mw_format_value(v, out, sizeof(out));
        assert_true(strlen(out) <= 24);
        double back = strtod(out, NULL);
        if (memcmp(&back, &v, sizeof(v)) != 0) fail_msg("%a -> '%s' -> %a", v, out, back);
    }
}

static void negotiate(void **state)
{
    (void)state;
    const struct {
        const char *accept;
        mw_format want;
    } cases[] = {
        /* Prometheus 2.42's scrape Accept header. */
        {"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
         "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
         MW_FMT_OPENMETRICS},
        /* Prometheus with OpenMetrics off: text first. */
        {"text/plain;version=0.0.4;q=1,*/*;q=0.1", MW_FMT_TEXT},
        {"text/plain", MW_FMT_TEXT},
        {"*/*", MW_FMT_TEXT},
        {"", MW_FMT_TEXT},
        {NULL, MW_FMT_TEXT},
        {"garbage", MW_FMT_TEXT},
        {",,, ;;; q=", MW_FMT_TEXT},
        {"application/openmetrics-text", MW_FMT_OPENMETRICS},
        {"APPLICATION/OpenMetrics-Text; Version=1.0.0", MW_FMT_OPENMETRICS},
        {"application/openmetrics-text;version=0.0.1", MW_FMT_OPENMETRICS},
        {"application/openmetrics-text;version=\"1.0.0\"", MW_FMT_OPENMETRICS},
        /* Versions we do not speak fall back to text. */
        {"application/openmetrics-text; version=2.0.0", MW_FMT_TEXT},
        {"application/openmetrics-text;version=1.0.0.1", MW_FMT_TEXT},
        {"application/openmetrics-text;version=1.0.01", MW_FMT_TEXT},
        {"application/openmetrics-text;version=", MW_FMT_TEXT},
        {"application/openmetrics-text; version=2.0.0, text/plain;q=0.1", MW_FMT_TEXT},
        /* q-values: the highest wins, ties go to the earlier entry. */
        {"text/plain;q=0.5,application/openmetrics-text;q=0.6", MW_FMT_OPENMETRICS},
        {"application/openmetrics-text;q=0.5,text/plain;q=0.6", MW_FMT_TEXT},
        {"application/openmetrics-text;q=0.5,text/plain;q=0.5", MW_FMT_OPENMETRICS},
        {"text/plain;q=0.5,application/openmetrics-text;q=0.5", MW_FMT_TEXT},
        {"application/openmetrics-text;q=0", MW_FMT_TEXT},
        {"application/openmetrics-text;q=abc", MW_FMT_TEXT},
        {"application/openmetrics-text;q=-1", MW_FMT_TEXT},
        {"application/openmetrics-text;q=nan", MW_FMT_TEXT},
        {"application/openmetrics-text;q=5,text/plain", MW_FMT_OPENMETRICS},
        {"application/openmetrics-text;q=0.001", MW_FMT_OPENMETRICS},
        /* Whitespace (SP and HTAB) around elements and parameters. */
        {"  text/plain ; q=0.2 ,\tapplication/openmetrics-text\t;\tq=0.3", MW_FMT_OPENMETRICS},
        /* Look-alike types do not count. */
        {"application/openmetrics-textual", MW_FMT_TEXT},
        {"application/openmetrics", MW_FMT_TEXT},
        /* A "version=" in a later element belongs to that element. */
        {"application/openmetrics-text,text/plain;version=0.0.4", MW_FMT_OPENMETRICS},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mw_format got = mw_negotiate_format(cases[i].accept);
        if (got != cases[i].want)
            fail_msg("'%s': got %d, want %d", cases[i].accept ? cases[i].accept : "(null)", got,
                     cases[i].want);
    }
}

static void gzip_accepted(void **state)
{
    (void)state;
    const struct {
        const char *ae;
        int want;
    } cases[] = {
        {"gzip", 1},
        {"GZip", 1},
        {"gzip;q=0", 0},
        {"gzip; q=0.000", 0},
        {"gzip;q=0.001", 1},
        {"deflate, gzip", 1},
        {"deflate,gzip;q=0.5", 1},
        {"deflate;q=1, gzip;q=0", 0},
        {"identity", 0},
        {"*", 0}, /* only an explicit gzip is trusted */
        {"x-gzip", 0},
        {"gzipx", 0},
        {"br, zstd", 0},
        {"", 0},
        {NULL, 0},
        {"\tgzip\t", 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = mw_accepts_gzip(cases[i].ae);
        if (got != cases[i].want)
            fail_msg("'%s': got %d, want %d", cases[i].ae ? cases[i].ae : "(null)", got,
                     cases[i].want);
    }
}

/* A sink that appends every piece to a buffer, counts the pieces, and
 * fails on piece number fail_at (0: never). */
typedef struct pieces {
    mw_buf all;
    int n, fail_at;
    size_t largest;
} pieces;

static int collect(void *ctx, const char *data, size_t len)
{
    pieces *p = ctx;
    p->n++;
    if (len > p->largest) p->largest = len;
    if (p->fail_at && p->n == p->fail_at) return -1;
    mw_buf_append(&p->all, data, len);
    return 0;
}

static void render_in_pieces(void **state)
{
    (void)state;
    mw_snapshot *s = sample_snapshot();
    for (int i = 0; i < 200; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%d", i);
        mw_emit(s, &TASKS, i, "x", v, MW_END);
    }
    for (int fmt = MW_FMT_TEXT; fmt <= MW_FMT_OPENMETRICS; fmt++) {
        char *whole = render(s, (mw_format)fmt);
        size_t chunks[] = {1, 64, 1000, 1 << 20};
        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
            pieces p = {.n = 0};
            mw_buf_init(&p.all, 0);
            mw_buf out;
            mw_buf_init(&out, 0);
            assert_int_equal(mw_render_stream(s, (mw_format)fmt, &out, chunks[c], collect, &p), 0);
            /* Same bytes as one rendering; nothing left behind in out. */
            assert_string_equal(p.all.data, whole);
            assert_int_equal(out.len, 0);
            /* A piece is handed over once it reaches the chunk size: it is
             * at most a family's HELP and TYPE lines and one sample line
             * (< 200 bytes here) past it. */
            assert_true(p.largest < chunks[c] + 200);
            if (chunks[c] == 1 << 20) assert_int_equal(p.n, 1);
            mw_buf_free(&out);
            mw_buf_free(&p.all);
            /* The cursor behind it (what an uncompressed /metrics streams):
             * each step adds chunk bytes or more (the last: what is left),
             * says whether more follows, and adds nothing once done. */
            mw_render_cursor cur;
            mw_render_begin(&cur, s, (mw_format)fmt);
            mw_buf all;
            mw_buf_init(&all, 0);
            int more;
            do {
                size_t before = all.len;
                more = mw_render_next(&cur, &all, chunks[c]);
                assert_true(all.len - before < chunks[c] + 200);
                if (more) assert_true(all.len - before >= chunks[c]);
            } while (more);
            assert_string_equal(all.data, whole);
            size_t len = all.len;
            assert_int_equal(mw_render_next(&cur, &all, chunks[c]), 0);
            assert_int_equal(all.len, len);
            mw_buf_free(&all);
        }
        free(whole);
    }
    /* A failing sink stops the rendering at once. */
    pieces p = {.n = 0, .fail_at = 2};
    mw_buf_init(&p.all, 0);
    mw_buf out;
    mw_buf_init(&out, 0);
    assert_int_equal(mw_render_stream(s, MW_FMT_TEXT, &out, 64, collect, &p), -1);
    assert_int_equal(p.n, 2);
    mw_buf_free(&out);
    mw_buf_free(&p.all);
    mw_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(render_text),        cmocka_unit_test(render_in_pieces),
        cmocka_unit_test(render_openmetrics), cmocka_unit_test(render_empty_and_appends),
        cmocka_unit_test(format_values),      cmocka_unit_test(format_round_trip),
        cmocka_unit_test(negotiate),          cmocka_unit_test(gzip_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
