/* test_carbon.c - carbon intensity: the JSON path on the three documented
 * providers' answer shapes, schedule files, static values, and the API
 * poller against a local libmicrohttpd server answering good, slow, 500,
 * garbage and oversized bodies: the last good value is kept, each failure
 * is counted by reason, and reading the value never waits for the network. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/util.h"
#include "derive/carbon.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Answer shapes of the documented providers (trimmed real responses). */
static const char EMAPS[] =
    "{\"zone\":\"DE\",\"carbonIntensity\":302,\"datetime\":\"2024-05-01T12:00:00.000Z\","
    "\"updatedAt\":\"2024-05-01T11:50:12.000Z\",\"emissionFactorType\":\"lifecycle\","
    "\"isEstimated\":true,\"estimationMethod\":\"TIME_SLICER_AVERAGE\"}";
static const char UK[] =
    "{\"data\":[{\"from\":\"2024-05-01T11:30Z\",\"to\":\"2024-05-01T12:00Z\","
    "\"intensity\":{\"forecast\":266,\"actual\":263,\"index\":\"moderate\"}}]}";
static const char RTE[] =
    "{\"total_count\":96,\"results\":[{\"perimetre\":\"France\",\"nature\":\"Donn\\u00e9es temps "
    "r\\u00e9el\",\"date\":\"2024-05-01\",\"heure\":\"12:00\",\"date_heure\":\"2024-05-01T10:00:"
    "00+00:00\",\"consommation\":45123,\"taux_co2\":21}]}";

static void json_paths(void **state)
{
    (void)state;
    double v;
    char err[256];
    assert_int_equal(mw_carbon_json_value(EMAPS, strlen(EMAPS), "carbonIntensity", &v, err, 256),
                     0);
    assert_true(v == 302);
    assert_int_equal(mw_carbon_json_value(UK, strlen(UK), "data[0].intensity.actual", &v, err, 256),
                     0);
    assert_true(v == 263);
    assert_int_equal(mw_carbon_json_value(RTE, strlen(RTE), "$.results[0].taux_co2", &v, err, 256),
                     0);
    assert_true(v == 21);
    /* A numeric string counts. */
    assert_int_equal(mw_carbon_json_value("{\"a\":\"12.5\"}", 12, "a", &v, err, 256), 0);
    assert_true(v == 12.5);
    /* Errors say what is wrong. */
    assert_int_equal(mw_carbon_json_value(UK, strlen(UK), "data[1].intensity.actual", &v, err, 256),
                     -1);
    assert_string_equal(err, "no element [1] at data");
    assert_int_equal(mw_carbon_json_value("{\"taux_co2\":null}", 17, "taux_co2", &v, err, 256), -1);
    assert_string_equal(err, "value at 'taux_co2' is null, not a number");
    assert_int_equal(mw_carbon_json_value("{\"a\":-3}", 8, "a", &v, err, 256), -1);
    assert_int_equal(mw_carbon_json_value("<html>", 6, "a", &v, err, 256), -1);
    assert_int_equal(mw_carbon_json_value("{\"a\":1}", 7, "a[", &v, err, 256), -1);
    assert_int_equal(mw_carbon_json_value("{\"a\":{}}", 8, "a", &v, err, 256), -1);
}

static void schedules(void **state)
{
    (void)state;
    mw_carbon_schedule s;
    char err[256];
    const char daily[] = "time,gco2_per_kwh\n# night is nuclear\n00:00,40\n07:00,120\n"
                         "18:30,200\n22:00,60\n";
    assert_int_equal(mw_carbon_schedule_parse(daily, strlen(daily), &s, err, 256), 0);
    assert_int_equal(s.n, 4);
    int64_t day = 19000LL * 86400000, since = 0;
    assert_true(mw_carbon_schedule_at(&s, day + 8 * 3600000, &since) == 120);
    assert_true(since == day + 7 * 3600000);
    assert_true(mw_carbon_schedule_at(&s, day + 23 * 3600000, &since) == 60);
    mw_carbon_schedule_free(&s);
    const char abs[] = "2024-05-01T00:00:00Z,100\n2024-05-01T12:00Z,50\n";
    assert_int_equal(mw_carbon_schedule_parse(abs, strlen(abs), &s, err, 256), 0);
    assert_true(mw_carbon_schedule_at(&s, 1714521600000LL - 1, &since) < 0); /* before */
    assert_true(mw_carbon_schedule_at(&s, 1714521600000LL + 3600000, &since) == 100);
    assert_true(mw_carbon_schedule_at(&s, 1714521600000LL + 86400000, &since) == 50);
    /* An interval across the change at 12:00: 30 s at 100, 30 s at 50. */
    const int64_t noon = 1714521600000LL + 12 * 3600000;
    assert_true(mw_carbon_schedule_mean(&s, noon - 30000, noon + 30000) == 75);
    /* Half before the first row: that half counts 0 (never back-filled). */
    assert_true(mw_carbon_schedule_mean(&s, 1714521600000LL - 30000, 1714521600000LL + 30000) ==
                50);
    assert_true(mw_carbon_schedule_mean(&s, 1714521600000LL - 60000, 1714521600000LL) < 0);
    assert_true(mw_carbon_schedule_mean(&s, noon + 1000, noon + 2000) == 50);
    mw_carbon_schedule_free(&s);
    /* Daily rows: 06:59:00 to 07:01:00 is one minute at 40, one at 120, and
     * 21:59 to 00:01 the next day spans 22:00 (60) and midnight (40). */
    assert_int_equal(mw_carbon_schedule_parse(daily, strlen(daily), &s, err, 256), 0);
    assert_true(mw_carbon_schedule_mean(&s, day + 7 * 3600000 - 60000, day + 7 * 3600000 + 60000) ==
                80);
    double m = mw_carbon_schedule_mean(&s, day + 22 * 3600000 - 60000, day + 86400000 + 60000);
    double want = (60000.0 * 200 + 7200000.0 * 60 + 60000.0 * 40) / (7200000.0 + 120000.0);
    if (m != want) fail_msg("daily mean %.17g, want %.17g", m, want);
    mw_carbon_schedule_free(&s);
    const char *bad[] = {"00:00,40\n2024-05-01T00:00:00Z,1\n",
                         "07:00,40\n06:00,30\n",
                         "00:00,abc\n",
                         "00:00,-5\n",
                         "25:00,4\n",
                         "",
                         "00:00\n"};
    const char *why[] = {"line 2: mixes HH:MM and absolute times",
                         "line 2: times must increase",
                         "line 1: 'abc' is not an intensity (0 to 100000 gCO2eq/kWh)",
                         "line 1: '-5' is not an intensity (0 to 100000 gCO2eq/kWh)",
                         "no rows",
                         "no rows",
                         "line 1: expected TIME,GRAMS"};
    for (size_t i = 0; i < MW_ARRAY_LEN(bad); i++) {
        assert_int_equal(mw_carbon_schedule_parse(bad[i], strlen(bad[i]), &s, err, 256), -1);
        assert_string_equal(err, why[i]);
    }
}

static void static_and_file(void **state)
{
    (void)state;
    mw_carbon *c;
    char err[512];
    mw_carbon_opts o = {.spec = "123.5"};
    assert_int_equal(mw_carbon_open(&o, &c, err, sizeof(err)), 0);
    double age;
    assert_true(mw_carbon_now(c, 1000, &age) == 123.5);
    assert_true(age == 0);
    assert_true(mw_carbon_mean(c, 0, 1000) == 123.5);
    mw_snapshot *snap = mw_snapshot_new();
    mw_carbon_emit(c, snap, 1000);
    double v;
    assert_int_equal(mw_snapshot_get(snap, "mlwatch_carbon_intensity_grams_per_kwh", &v, "source",
                                     "constant", MW_END),
                     0);
    assert_true(v == 123.5);
    mw_snapshot_free(snap);
    mw_carbon_close(c);
    o.spec = "";
    assert_int_equal(mw_carbon_open(&o, &c, err, sizeof(err)), 0);
    assert_null(c);
    assert_true(mw_carbon_now(NULL, 0, NULL) < 0);
    o.spec = "/nonexistent/schedule.csv";
    assert_int_equal(mw_carbon_open(&o, &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not a number, a URL or a readable schedule file"));
    char path[] = "/tmp/mlwatch-carbon-XXXXXX";
    int fd = mkstemp(path);
    assert_true(write(fd, "00:00,80\n12:00,90\n", 18) == 18);
    close(fd);
    o.spec = path;
    assert_int_equal(mw_carbon_open(&o, &c, err, sizeof(err)), 0);
    assert_true(mw_carbon_now(c, 19000LL * 86400000 + 13 * 3600000, &age) == 90);
    assert_true(age == 3600);
    /* 11:59:00 to 12:01:00: a minute at 80, a minute at 90. */
    assert_true(mw_carbon_mean(c, 19000LL * 86400000 + 12 * 3600000 - 60000,
                               19000LL * 86400000 + 12 * 3600000 + 60000) == 85);
    assert_string_equal(mw_carbon_source(c), "schedule");
    mw_carbon_close(c);
    unlink(path);
}

/* --- the test server ------------------------------------------------------- */

static atomic_int mode; /* 0 good, 1 slow, 2 500, 3 garbage, 4 oversized */
static atomic_int good_value = 111;
static char last_auth[128];

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
    (void)con_cls;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "auth-token");
    mw_strlcpy(last_auth, auth ? auth : "", sizeof(last_auth));
    static char big[1 << 16];
    char body[256];
    int status = 200;
    const char *b = body;
    size_t len;
    switch (atomic_load(&mode)) {
    case 0:
        snprintf(body, sizeof(body), "{\"data\":[{\"intensity\":{\"actual\":%d}}]}",
                 atomic_load(&good_value));
        break;
    case 1:
        usleep(1500 * 1000);
        snprintf(body, sizeof(body), "{\"data\":[{\"intensity\":{\"actual\":999}}]}");
        break;
    case 2:
        status = 500;
        snprintf(body, sizeof(body), "{\"error\":\"internal\"}");
        break;
    case 3:
        snprintf(body, sizeof(body), "<html>502 Bad Gateway</html>");
        break;
    default:
        memset(big, ' ', sizeof(big));
        memcpy(big, "{\"data\":[{\"intensity\":{\"actual\":999}}]}", 40);
        b = big;
        break;
    }
    len = b == big ? sizeof(big) : strlen(body);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)b, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Wait (5 s at most) until the poller made one more request than before. */
static void await_requests(mw_carbon *c, uint64_t want_total)
{
    for (int i = 0; i < 500; i++) {
        uint64_t ok, f;
        mw_carbon_counts(c, &ok, &f);
        if (ok + f >= want_total) return;
        usleep(10000);
    }
    fail_msg("the poller made no request");
}

static void api_poller(void **state)
{
    (void)state;
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
                         NULL, answer, NULL, MHD_OPTION_SOCK_ADDR, NULL, MHD_OPTION_END);
    assert_non_null(d);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char url[128], tok[] = "/tmp/mlwatch-token-XXXXXX";
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/intensity", info->port);
    int fd = mkstemp(tok);
    assert_true(write(fd, "s3cret\n", 7) == 7);
    close(fd);
    mw_carbon_opts o = {.spec = url,
                        .json_path = "data[0].intensity.actual",
                        .auth_header = "auth-token",
                        .auth_file = tok,
                        .refresh_ms = 50,
                        .timeout_ms = 300,
                        .max_body = 4096};
    mw_carbon *c;
    char err[256];
    atomic_store(&mode, 0);
    assert_int_equal(mw_carbon_open(&o, &c, err, sizeof(err)), 0);
    await_requests(c, 1);
    assert_true(mw_carbon_now(c, mw_now_ms(), NULL) == 111);
    assert_string_equal(last_auth, "s3cret");
    uint64_t ok, f, total;
    /* Each bad answer: value kept, one failure more. */
    for (int m = 1; m <= 4; m++) {
        mw_carbon_counts(c, &ok, &f);
        total = ok + f;
        atomic_store(&mode, m);
        await_requests(c, total + 2); /* one full request in the new mode */
        int64_t t0 = mw_now_ms();
        double v = mw_carbon_now(c, mw_now_ms(), NULL);
        assert_true(mw_now_ms() - t0 < 50); /* never waits for the network */
        assert_true(v == 111);
    }
    mw_snapshot *snap = mw_snapshot_new();
    mw_carbon_emit(c, snap, mw_now_ms());
    const char *reasons[] = {"timeout", "http_status", "malformed", "oversized"};
    for (size_t i = 0; i < 4; i++) {
        double n = 0;
        assert_int_equal(mw_snapshot_get(snap, "mlwatch_carbon_fetch_failures_total", &n, "reason",
                                         reasons[i], MW_END),
                         0);
        if (n < 1) fail_msg("no %s failure counted", reasons[i]);
    }
    double v, age;
    assert_int_equal(mw_snapshot_get(snap, "mlwatch_carbon_intensity_grams_per_kwh", &v, MW_END),
                     0);
    assert_true(v == 111);
    assert_int_equal(mw_snapshot_get(snap, "mlwatch_carbon_intensity_age_seconds", &age, MW_END),
                     0);
    assert_true(age > 0.1); /* bad answers do not refresh the age */
    mw_snapshot_free(snap);
    /* Good again: the new value. */
    atomic_store(&good_value, 222);
    atomic_store(&mode, 0);
    mw_carbon_counts(c, &ok, &f);
    await_requests(c, ok + f + 2);
    assert_true(mw_carbon_now(c, mw_now_ms(), NULL) == 222);
    mw_carbon_close(c);
    MHD_stop_daemon(d);
    unlink(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_paths),
        cmocka_unit_test(schedules),
        cmocka_unit_test(static_and_file),
        cmocka_unit_test(api_poller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
