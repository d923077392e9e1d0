/* test_hwmon.c - hwmon file names and values, and the collector on fixtures:
 * labelled coretemp sensors, a power meter, an old-style chip whose files
 * live in device/, negative and malformed values, a chip that vanishes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/hwmon.h"
#include "testutil.h"

#define CT0 "sys/devices/platform/coretemp.0/hwmon/hwmon0/"
#define CT1 "sys/devices/platform/coretemp.1"
#define PM "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI000D:00/power1/hwmon/hwmon2/"

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static double temp(const mw_snapshot *snap, const char *hwmon, const char *sensor)
{
    return tu_value(snap, "mlwatch_hwmon_temperature_celsius", "hwmon", hwmon, "sensor", sensor,
                    MW_END);
}

static void recognises_sensor_files(void **state)
{
    (void)state;
    mw_hwmon_kind k;
    unsigned i;
    int avg;
    assert_int_equal(mw_hwmon_parse_file("temp3_input", &k, &i, &avg), 0);
    assert_int_equal(k, MW_HWMON_TEMP);
    assert_int_equal(i, 3);
    assert_int_equal(avg, 0);
    assert_int_equal(mw_hwmon_parse_file("power1_average", &k, &i, &avg), 0);
    assert_int_equal(k, MW_HWMON_POWER);
    assert_int_equal(avg, 1);
    assert_int_equal(mw_hwmon_parse_file("power2_input", &k, &i, &avg), 0);
    assert_int_equal(avg, 0);
    assert_int_equal(mw_hwmon_parse_file("energy1_input", &k, &i, &avg), 0);
    assert_int_equal(k, MW_HWMON_ENERGY);
    assert_int_equal(mw_hwmon_parse_file("in0_input", &k, &i, &avg), 0);
    assert_int_equal(k, MW_HWMON_IN);
    assert_int_equal(i, 0);
    assert_int_equal(mw_hwmon_parse_file("temp1_max", &k, &i, &avg), -1);
    assert_int_equal(mw_hwmon_parse_file("temp1_label", &k, &i, &avg), -1);
    assert_int_equal(mw_hwmon_parse_file("temp_input", &k, &i, &avg), -1);
    assert_int_equal(mw_hwmon_parse_file("energy1_average", &k, &i, &avg), -1);
    assert_int_equal(mw_hwmon_parse_file("intrusion0_alarm", &k, &i, &avg), -1);
    assert_int_equal(mw_hwmon_parse_file("name", &k, &i, &avg), -1);
    assert_int_equal(mw_hwmon_parse_file("temp99999999_input", &k, &i, &avg), -1);
}

static void parses_values(void **state)
{
    (void)state;
    int64_t v;
    assert_int_equal(mw_hwmon_parse_value("45000\n", &v), 0);
    assert_int_equal(v, 45000);
    assert_int_equal(mw_hwmon_parse_value("-5500\n", &v), 0);
    assert_int_equal(v, -5500);
    assert_int_equal(mw_hwmon_parse_value("", &v), -1);
    assert_int_equal(mw_hwmon_parse_value("\n", &v), -1);
    assert_int_equal(mw_hwmon_parse_value("45x\n", &v), -1);
    assert_int_equal(mw_hwmon_parse_value("N/A\n", &v), -1);
}

static void collects_fixture_chips(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "hwmon");
    mw_snapshot *snap = tu_run(s);
    assert_value(temp(snap, "hwmon0", "temp1"), 45);
    assert_value(temp(snap, "hwmon0", "temp2"), 42);
    assert_value(temp(snap, "hwmon0", "temp3"), 43);
    assert_value(temp(snap, "hwmon1", "temp1"), 47);
    assert_value(tu_value(snap, "mlwatch_hwmon_temperature_celsius", "chip", "coretemp", "hwmon",
                          "hwmon1", "sensor", "temp2", "label", "Core 0", MW_END),
                 44);
    assert_true(tu_has(snap, "mlwatch_hwmon_temperature_celsius", "hwmon", "hwmon0", "sensor",
                       "temp1", "label", "Package id 0", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_hwmon_temperature_celsius"), 6);
    assert_value(tu_value(snap, "mlwatch_hwmon_temperature_max_celsius", "hwmon", "hwmon0",
                          "sensor", "temp2", MW_END),
                 80);
    assert_value(tu_value(snap, "mlwatch_hwmon_temperature_critical_celsius", "hwmon", "hwmon1",
                          "sensor", "temp1", MW_END),
                 100);
    assert_int_equal(tu_count(snap, "mlwatch_hwmon_temperature_max_celsius"), 6);
    assert_int_equal(tu_count(snap, "mlwatch_hwmon_temperature_critical_celsius"), 5);
    /* power_meter: power1_average in µW, energy1_input in µJ. */
    assert_value(tu_value(snap, "mlwatch_hwmon_power_watts", "chip", "power_meter", "sensor",
                          "power1", "label", "", MW_END),
                 312);
    assert_value(tu_value(snap, "mlwatch_hwmon_energy_joules_total", "chip", "power_meter",
                          "sensor", "energy1", MW_END),
                 987654321000 / 1e6);
    /* nct6775: old-style driver, name and values in hwmon3/device/. */
    assert_value(tu_value(snap, "mlwatch_hwmon_voltage_volts", "chip", "nct6775", "hwmon", "hwmon3",
                          "sensor", "in0", "label", "Vcore", MW_END),
                 1104 / 1000.0);
    assert_value(tu_value(snap, "mlwatch_hwmon_voltage_volts", "sensor", "in1", MW_END),
                 3344 / 1000.0);
    assert_value(tu_value(snap, "mlwatch_hwmon_temperature_celsius", "chip", "nct6775", MW_END),
                 38);
    assert_value(tu_value(snap, "mlwatch_hwmon_temperature_max_celsius", "chip", "nct6775", MW_END),
                 75);
    assert_int_equal(tu_errors(s, "hwmon"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void bad_values_and_vanished_chip(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    /* powerN_input wins over powerN_average when both exist. */
    tu_write(root, PM "power1_input", "250500000\n");
    tu_session *s = tu_open(root, "hwmon");
    mw_snapshot *snap = tu_run(s);
    assert_value(tu_value(snap, "mlwatch_hwmon_power_watts", "chip", "power_meter", MW_END), 250.5);
    assert_int_equal(tu_count(snap, "mlwatch_hwmon_power_watts"), 1);
    mw_snapshot_free(snap);

    /* Negative temperatures are valid; non-numeric and empty are errors. */
    tu_write(root, CT0 "temp2_input", "-5500\n");
    tu_write(root, CT0 "temp3_input", "N/A\n");
    tu_write(root, CT0 "temp1_input", "");
    snap = tu_run(s);
    assert_value(temp(snap, "hwmon0", "temp2"), -5.5);
    assert_false(tu_has(snap, "mlwatch_hwmon_temperature_celsius", "hwmon", "hwmon0", "sensor",
                        "temp3", MW_END));
    assert_false(tu_has(snap, "mlwatch_hwmon_temperature_celsius", "hwmon", "hwmon0", "sensor",
                        "temp1", MW_END));
    assert_int_equal(tu_errors(s, "hwmon"), 2);
    assert_value(temp(snap, "hwmon1", "temp1"), 47);
    mw_snapshot_free(snap);

    /* A sensor file removed: counted once, the chip's other sensors still
     * read; the chips are discovered again and the sensor is no longer
     * expected. */
    tu_write(root, CT0 "temp3_input", "43000\n");
    tu_write(root, CT0 "temp1_input", "45000\n");
    tu_remove(root, CT0 "temp2_input");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "hwmon"), 3);
    assert_value(temp(snap, "hwmon0", "temp3"), 43);
    assert_value(temp(snap, "hwmon0", "temp1"), 45);
    mw_snapshot_free(snap);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "hwmon"), 3);
    assert_int_equal(tu_count(snap, "mlwatch_hwmon_temperature_celsius"), 5);
    assert_value(temp(snap, "hwmon0", "temp1"), 45);
    mw_snapshot_free(snap);

    /* The second package's chip disappears: one error, others go on. */
    tu_remove(root, CT1);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "hwmon"), 4);
    assert_false(tu_has(snap, "mlwatch_hwmon_temperature_celsius", "hwmon", "hwmon1", MW_END));
    assert_value(temp(snap, "hwmon0", "temp1"), 45);
    assert_value(tu_value(snap, "mlwatch_hwmon_voltage_volts", "sensor", "in0", MW_END), 1.104);
    mw_snapshot_free(snap);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "hwmon"), 4);
    assert_false(tu_has(snap, "mlwatch_hwmon_temperature_celsius", "hwmon", "hwmon1", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_hwmon_temperature_celsius"), 3);
    assert_value(tu_value(snap, "mlwatch_collector_errors_total", "collector", "hwmon", MW_END), 4);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void absent_without_chips(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("bare-vm"), "hwmon");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_hwmon_temperature_celsius"), 0);
    assert_false(tu_has(snap, "mlwatch_collector_errors_total", "collector", "hwmon", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);

    /* A class folder whose only chip has no sensor files. */
    const char *root = tu_fixture_copy("bare-vm");
    tu_write(root, "sys/class/hwmon/hwmon0/name", "acpitz\n");
    s = tu_open(root, "hwmon");
    snap = tu_run(s);
    assert_false(tu_has(snap, "mlwatch_collector_errors_total", "collector", "hwmon", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recognises_sensor_files), cmocka_unit_test(parses_values),
        cmocka_unit_test(collects_fixture_chips),  cmocka_unit_test(bad_values_and_vanished_chip),
        cmocka_unit_test(absent_without_chips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
