/* test_notify_receivers.c - the notification receiver interface
 * (src/notify/receiver.h): the registry, each receiver's open/format, the
 * notifier's receivers from the settings, and the state file keyed by
 * receiver name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/util.h"
#include "notify/notify.h"
#include "notify/notify_state.h"
#include "notify/receiver.h"
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A state file as the agent writes it today (version 1): what each
 * receiver had is keyed by its name. "pager" is a receiver this build does
 * not have (one removed since): it is ignored. */
static const char *const STATE_V1 =
    "{\"version\": 1, \"episodes\": [{\"key\": \"shared/nb/main/0\", \"ns\": \"shared\", "
    "\"pod\": \"nb\", \"container\": \"main\", \"gpu\": \"0\", \"model\": \"NVIDIA H100 80GB "
    "HBM3\", \"uuid\": \"GPU-0\", \"node\": \"n1\", \"workload_kind\": \"Notebook\", "
    "\"workload\": \"nb\", \"owner\": \"alice\", \"end_reason\": \"\", \"memory_bytes\": "
    "1073741824.0, \"gpu_seconds\": 1900.0, \"energy_joules\": 120000.0, \"co2_grams\": 13.3, "
    "\"threshold_ratio\": 0.05, \"idle_since_ms\": 1700000000000, \"ended_ms\": 0, "
    "\"delivered\": {\"email\": {\"last_sent_ms\": 1700000002000, \"resolved\": false}, "
    "\"webhook\": {\"last_sent_ms\": 1700000001800, \"resolved\": true}, "
    "\"pager\": {\"last_sent_ms\": 5, \"resolved\": true}}}]}";

/* A fresh temporary folder, removed at the end (remove_dirs). */
static char dirs[8][64];
static int ndirs;

static const char *tmpdir(void)
{
    assert_true(ndirs < 8);
    char *d = dirs[ndirs++];
    snprintf(d, 64, "/tmp/mlwatch-rx-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void remove_dirs(void)
{
    for (int i = 0; i < ndirs; i++) {
        char cmd[320];
        snprintf(cmd, sizeof(cmd), "rm -rf '%.63s'", dirs[i]);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dirs[i]);
    }
}

static void registry(void **state)
{
    (void)state;
    assert_int_equal(mw_nreceivers, 3);
    assert_string_equal(mw_receivers[0]->name, "webhook");
    assert_string_equal(mw_receivers[1]->name, "alertmanager");
    assert_string_equal(mw_receivers[2]->name, "email");
    assert_string_equal(mw_receivers[1]->shown, "alertmanager-webhook");
    for (size_t i = 0; i < mw_nreceivers; i++) {
        const mw_receiver *r = mw_receivers[i];
        assert_non_null(r->options);
        assert_non_null(r->open);
        assert_non_null(r->format);
        assert_non_null(r->send);
        assert_non_null(r->close);
        assert_int_equal(mw_receiver_index(r->name), (int)i);
    }
    assert_int_equal(mw_receiver_index("pager"), -1);
}

/* Today's state file loads by name, whatever the receivers' order. */
static void state_file_keyed_by_name(void **state)
{
    (void)state;
    int webhook = mw_receiver_index("webhook"), email = mw_receiver_index("email");
    mw_notify_table t = {0};
    char err[256];
    assert_int_equal(mw_notify_table_parse(&t, STATE_V1, strlen(STATE_V1), err, sizeof(err)), 0);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.e[0].ep.key, "shared/nb/main/0");
    assert_string_equal(t.e[0].ep.owner, "alice");
    assert_true(t.e[0].ep.idle_since_ms == 1700000000000LL);
    assert_int_equal(t.e[0].fired, (1u << webhook) | (1u << email));
    assert_int_equal(t.e[0].resolved, 1u << webhook);
    assert_true(t.e[0].last_sent_ms[webhook] == 1700000001800LL);
    assert_true(t.e[0].last_sent_ms[email] == 1700000002000LL);
    assert_true(t.e[0].last_sent_ms[mw_receiver_index("alertmanager")] == 0);

    /* Saved again: the same names, the unknown one dropped. */
    const char *dir = tmpdir();
    char path[512];
    snprintf(path, sizeof(path), "%s/idle-notifications.json", dir);
    assert_int_equal(mw_notify_table_save(&t, path, err, sizeof(err)), 0);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    assert_non_null(root);
    json_t *d = json_object_get(json_array_get(json_object_get(root, "episodes"), 0), "delivered");
    assert_int_equal(json_object_size(d), 2);
    assert_true(json_integer_value(json_object_get(json_object_get(d, "webhook"),
                                                   "last_sent_ms")) == 1700000001800LL);
    assert_true(json_is_true(json_object_get(json_object_get(d, "webhook"), "resolved")));
    assert_true(json_integer_value(json_object_get(json_object_get(d, "email"), "last_sent_ms")) ==
                1700000002000LL);
    assert_true(json_is_false(json_object_get(json_object_get(d, "email"), "resolved")));
    json_decref(root);
    mw_notify_table_free(&t);
}

static void configure(mw_config *c, int argc, char **argv)
{
    char err[512];
    mw_options_register_all();
    mw_config_defaults(c);
    if (mw_config_from_args(c, argc, argv, 2, NULL, NULL, 0, err, sizeof(err)) < 0)
        fail_msg("flags: %s", err);
}

/* Each receiver opens from its own settings; errors name its flag. */
static void receivers_open(void **state)
{
    (void)state;
    static mw_config c;
    char err[512];
    mw_notifier *n = NULL;
    char *none[] = {"mlwatch", "agent"};
    configure(&c, MW_ARRAY_LEN(none), none);
    assert_int_equal(mw_notifier_new(&c, &n, err, sizeof(err)), 1);
    assert_null(n);

    char *unset[] = {"mlwatch", "agent", "--notify-alertmanager-webhook=env:MLWATCH_TEST_UNSET_RX"};
    configure(&c, MW_ARRAY_LEN(unset), unset);
    assert_int_equal(mw_notifier_new(&c, &n, err, sizeof(err)), -1);
    assert_string_equal(err, "--notify-alertmanager-webhook: environment variable "
                             "MLWATCH_TEST_UNSET_RX is not set");

    char *smtp[] = {"mlwatch", "agent", "--notify-webhook=http://127.0.0.1:1/hook",
                    "--notify-smtp-server=smtp://127.0.0.1:1", "--notify-smtp-from=a@b"};
    configure(&c, MW_ARRAY_LEN(smtp), smtp);
    assert_int_equal(mw_notifier_new(&c, &n, err, sizeof(err)), -1);
    assert_string_equal(err, "--notify-smtp-server needs --notify-smtp-from and --notify-smtp-to");

    /* The alertmanager receiver's payload links the agent by node name and
     * the port of --listen. */
    const mw_receiver *am = mw_receivers[mw_receiver_index("alertmanager")];
    char *amflags[] = {"mlwatch", "agent", "--notify-alertmanager-webhook=http://127.0.0.1:1/am"};
    configure(&c, MW_ARRAY_LEN(amflags), amflags);
    void *st = NULL;
    mw_receiver_ctx ctx = {"http://n1:10230"};
    assert_int_equal(am->open(mw_config_group(&c, am->options), &ctx, &st, err, sizeof(err)), 1);
    mw_notify_episode ep = {.idle_since_ms = 1700000000000LL, .co2_grams = -1};
    mw_strlcpy(ep.key, "ns/p/c/0", sizeof(ep.key));
    mw_buf got, want;
    mw_buf_init(&got, 1 << 20);
    mw_buf_init(&want, 1 << 20);
    am->format(st, &ep, MW_MSG_FIRING, 1700000600000LL, &got);
    mw_notify_alertmanager_json(&ep, MW_MSG_FIRING, 1700000600000LL, "http://n1:10230", &want);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, got.len);
    am->close(st);
    /* A receiver its settings do not name stays closed. */
    const mw_receiver *mail = mw_receivers[mw_receiver_index("email")];
    st = NULL;
    assert_int_equal(mail->open(mw_config_group(&c, mail->options), &ctx, &st, err, sizeof(err)),
                     0);
    assert_null(st);
    mw_buf_free(&got);
    mw_buf_free(&want);
}

/* A restarted notifier reads today's state file from DATA_DIR/state: the
 * open episode is back, and what the e-mail receiver (off in this run) had
 * is kept under its name when the state is written again. */
static void notifier_keeps_state_by_name(void **state)
{
    (void)state;
    const char *dir = tmpdir();
    tu_write(dir, "state/idle-notifications.json", STATE_V1);
    char statedir[600];
    snprintf(statedir, sizeof(statedir), "--data-dir=%s", dir);
    char *flags[] = {"mlwatch",
                     "agent",
                     "--notify-webhook=http://127.0.0.1:1/hook",
                     "--notify-smtp-server=smtp://127.0.0.1:1",
                     "--notify-smtp-from=a@example",
                     "--notify-smtp-to=b@example",
                     statedir,
                     "--node-name=n1"};
    static mw_config c;
    configure(&c, MW_ARRAY_LEN(flags), flags);
    mw_notifier *n = NULL;
    char err[512];
    /* The start line names the open receivers, in registry order. */
    char logpath[700];
    snprintf(logpath, sizeof(logpath), "%s/log", dir);
    fflush(stderr);
    int saved = dup(2);
    FILE *log = fopen(logpath, "w+");
    assert_non_null(log);
    dup2(fileno(log), 2);
    assert_int_equal(mw_notifier_new(&c, &n, err, sizeof(err)), 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char line[1024] = "";
    rewind(log);
    assert_non_null(fgets(line, sizeof(line), log));
    fclose(log);
    char want[1024];
    snprintf(want, sizeof(want),
             " info notify: idle GPU notifications to: webhook email (state in "
             "%s/state/idle-notifications.json)\n",
             dir);
    assert_non_null(strstr(line, want));
    mw_notify_episode open[4];
    assert_int_equal(mw_notifier_open_episodes(n, open, 4), 1);
    assert_string_equal(open[0].key, "shared/nb/main/0");
    mw_notifier_free(n);
    char path[700];
    snprintf(path, sizeof(path), "%s/state/idle-notifications.json", dir);
    mw_notify_table t = {0};
    assert_int_equal(mw_notify_table_load(&t, path, err, sizeof(err)), 0);
    assert_int_equal(t.n, 1);
    int email = mw_receiver_index("email");
    assert_true((t.e[0].fired & (1u << email)) != 0);
    assert_true(t.e[0].last_sent_ms[email] == 1700000002000LL);
    mw_notify_table_free(&t);
}

/* Open episodes of the notifier started with FLAG (a --data-dir, maybe a
 * --state-dir too). */
static size_t episodes_after_start(char *data_flag, char *state_flag, char *first_key)
{
    char *flags[] = {"mlwatch",        "agent",   "--notify-webhook=http://127.0.0.1:1/hook",
                     "--node-name=n1", data_flag, state_flag};
    static mw_config c;
    configure(&c, state_flag ? 6 : 5, flags);
    mw_notifier *n = NULL;
    char err[512];
    assert_int_equal(mw_notifier_new(&c, &n, err, sizeof(err)), 0);
    mw_notify_episode open[4];
    size_t got = mw_notifier_open_episodes(n, open, 4);
    if (got) strcpy(first_key, open[0].key);
    mw_notifier_free(n);
    return got;
}

static int exists(const char *dir, const char *rel)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    return access(path, F_OK) == 0;
}

/* An older agent's state file (in --state-dir, else in DATA_DIR itself) is
 * migrated once into DATA_DIR/state: its episodes are back, the old file is
 * renamed .migrated, and a file put there again later is not read. */
static void notifier_migrates_old_state(void **state)
{
    (void)state;
    const char *old = tmpdir(), *data = tmpdir(), *data2 = tmpdir();
    tu_write(old, "idle-notifications.json", STATE_V1);
    char df[600], sf[600], key[256] = "";
    snprintf(df, sizeof(df), "--data-dir=%s", data);
    snprintf(sf, sizeof(sf), "--state-dir=%s", old);
    assert_int_equal(episodes_after_start(df, sf, key), 1);
    assert_string_equal(key, "shared/nb/main/0");
    assert_true(exists(data, "state/idle-notifications.json"));
    assert_false(exists(old, "idle-notifications.json"));
    assert_true(exists(old, "idle-notifications.json.migrated"));
    /* Once: a file of another episode put back in the old place is left. */
    char other[4096];
    snprintf(other, sizeof(other), "%s", STATE_V1);
    memcpy(strstr(other, "shared/nb/main/0"), "shared/xx", 9);
    tu_write(old, "idle-notifications.json", other);
    assert_int_equal(episodes_after_start(df, sf, key), 1);
    assert_string_equal(key, "shared/nb/main/0");
    assert_true(exists(old, "idle-notifications.json"));
    /* Without --state-dir: DATA_DIR's own old file (the old default put
     * both in /var/lib/mlwatch); nothing is read from the other folder. */
    tu_write(data2, "idle-notifications.json", STATE_V1);
    snprintf(df, sizeof(df), "--data-dir=%s", data2);
    assert_int_equal(episodes_after_start(df, NULL, key), 1);
    assert_true(exists(data2, "state/idle-notifications.json"));
    assert_true(exists(data2, "idle-notifications.json.migrated"));
    assert_true(exists(old, "idle-notifications.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registry),
        cmocka_unit_test(state_file_keyed_by_name),
        cmocka_unit_test(receivers_open),
        cmocka_unit_test(notifier_keeps_state_by_name),
        cmocka_unit_test(notifier_migrates_old_state),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_dirs();
    return rc;
}
