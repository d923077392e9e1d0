/* test_log.c - mw_log_once: one line per key per quiet period, and the
 * line that ends the quiet says how many were left out (docs/security.md
 * promises one line per cause per window, with a count). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Run fn with stderr going to a file; its text in out. */
static void capture(void (*fn)(void), char *out, size_t size)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *f = tmpfile();
    assert_non_null(f);
    dup2(fileno(f), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void repeated_causes(void)
{
    mw_log_set_quiet_period(1);
    for (int i = 0; i < 5; i++)
        mw_log_once(MW_LOG_WARN, "test", "cause A", "A happened (%d)", i);
    mw_log_once(MW_LOG_WARN, "test", "cause B", "B happened");
    sleep_ms(1100);
    mw_log_once(MW_LOG_WARN, "test", "cause A", "A happened again");
    mw_log_once(MW_LOG_WARN, "test", "cause B", "B happened again");
    mw_log_once(MW_LOG_WARN, "test", "cause A", "A once more");
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void one_line_per_cause_with_a_count(void **state)
{
    (void)state;
    char out[4096];
    capture(repeated_causes, out, sizeof(out));
    assert_int_equal(count(out, "\n"), 4);
    assert_int_equal(count(out, " warn test: A happened (0)\n"), 1);
    assert_int_equal(count(out, " warn test: B happened\n"), 1);
    assert_int_equal(count(out, " warn test: A happened again (4 more like it since the last "
                                "such line)\n"),
                     1);
    assert_int_equal(count(out, " warn test: B happened again\n"), 1);
    assert_int_equal(count(out, "A once more"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_line_per_cause_with_a_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
