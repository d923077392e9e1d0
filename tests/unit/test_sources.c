/* test_sources.c - the table of what the agent sees (src/core/sources.c):
 * notes replace by name, the JSON answer is sorted and exact, a long detail
 * is cut to its buffer, a text that is not UTF-8 does not lose the other
 * entries, and the table holds at most MW_SOURCES_MAX names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/sources.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void assert_json(const char *want)
{
    char *got = mw_sources_json();
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void notes_and_json(void **state)
{
    (void)state;
    mw_sources_reset();
    assert_json("{}");
    mw_source_note("rapl", MW_SOURCE_ABSENT, "no RAPL energy counters (%s is missing)",
                   "sys/class/powercap");
    mw_source_note("gpu", MW_SOURCE_SEEN, "NVML, driver %s: %d GPUs", "550.54.15", 3);
    assert_json("{\"gpu\":{\"detail\":\"NVML, driver 550.54.15: 3 GPUs\",\"state\":\"seen\"},"
                "\"rapl\":{\"detail\":\"no RAPL energy counters "
                "(sys/class/powercap is missing)\",\"state\":\"absent\"}}");
    /* A second note of a name replaces the first. */
    mw_source_note("gpu", MW_SOURCE_ABSENT, "no GPU telemetry: %s", "NVML: \"quoted\"");
    assert_json("{\"gpu\":{\"detail\":\"no GPU telemetry: NVML: \\\"quoted\\\"\","
                "\"state\":\"absent\"},\"rapl\":{\"detail\":\"no RAPL energy counters "
                "(sys/class/powercap is missing)\",\"state\":\"absent\"}}");
    mw_source_note("kubernetes", MW_SOURCE_OFF, "off");
    assert_string_equal(mw_source_state_name(MW_SOURCE_OFF), "off");
    char *j = mw_sources_json();
    assert_non_null(strstr(j, "\"kubernetes\":{\"detail\":\"off\",\"state\":\"off\"}"));
    free(j);
}

static void bounds(void **state)
{
    (void)state;
    mw_sources_reset();
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    mw_source_note("long", MW_SOURCE_SEEN, "%s", big);
    char *j = mw_sources_json();
    /* 511 bytes of detail kept, the rest cut. */
    const char *d = strstr(j, "\"detail\":\"");
    assert_non_null(d);
    assert_int_equal(strspn(d + 10, "x"), 511);
    free(j);
    /* Not UTF-8: that entry is left out, the others stay. */
    mw_source_note("bad", MW_SOURCE_ABSENT, "\xff\xfe");
    j = mw_sources_json();
    assert_null(strstr(j, "\"bad\""));
    assert_non_null(strstr(j, "\"long\""));
    free(j);
    mw_sources_reset();
    for (int i = 0; i < MW_SOURCES_MAX + 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "s%02d", i);
        mw_source_note(name, MW_SOURCE_SEEN, "%d", i);
    }
    j = mw_sources_json();
    json_t *o = json_loads(j, 0, NULL);
    assert_non_null(o);
    assert_int_equal(json_object_size(o), MW_SOURCES_MAX);
    for (int i = 0; i < MW_SOURCES_MAX + 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "s%02d", i);
        json_t *e = json_object_get(o, name);
        if (i < MW_SOURCES_MAX) {
            char want[16];
            snprintf(want, sizeof(want), "%d", i);
            assert_non_null(e);
            assert_string_equal(json_string_value(json_object_get(e, "detail")), want);
        } else {
            assert_null(e);
        }
    }
    json_decref(o);
    free(j);
    mw_sources_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(notes_and_json),
        cmocka_unit_test(bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
