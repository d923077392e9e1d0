/* alert_feeder.c - `mlwatch agent` with a stand-in for the rule evaluator,
 * for the tests of the alert sinks (tests/integration/alert_send.sh):
 *
 *   alert_feeder FEED.json [AGENT FLAGS...]
 *
 * runs the agent with the flags given and, every 200 ms, reads FEED (a JSON
 * array of alerts: {"labels": {...}, "annotations": {...}, "startsAt": MS,
 * "endsAt": MS, "resolved": BOOL, "generatorURL": "..."}) and hands them to
 * mw_alert_sinks_send(), as the evaluator hands on each evaluation's alerts
 * (labels sorted by name; a firing alert's endsAt, when 0, is now + 60 s
 * as the evaluator's "valid until"). A missing FEED sends nothing: a test removes it
 * before stopping the agent, so that no batch meets a sink being removed.
 * Once the rules branch is in, the tests run `mlwatch agent --rule-file`
 * instead. */
#include "../../src/agent/agent.h"
#include "../../src/core/config.h"
#include "../../src/core/log.h"
#include "../../src/rules/alert.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static const char *feed_path;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const mw_alert_pair *)a)->name, ((const mw_alert_pair *)b)->name);
}

static size_t pairs(json_t *o, mw_alert_pair **out)
{
    size_t n = json_is_object(o) ? json_object_size(o) : 0, k = 0;
    *out = calloc(n ? n : 1, sizeof(**out));
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        (*out)[k].name = key;
        (*out)[k].value = json_is_string(v) ? json_string_value(v) : "";
        k++;
    }
    qsort(*out, k, sizeof(**out), by_name);
    return k;
}

static void feed_once(void)
{
    json_t *root = json_load_file(feed_path, 0, NULL);
    if (!json_is_array(root)) {
        json_decref(root);
        return;
    }
    size_t n = json_array_size(root);
    mw_alert *alerts = calloc(n ? n : 1, sizeof(*alerts));
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(root, i);
        mw_alert_pair *l, *an;
        alerts[i].nlabels = pairs(json_object_get(a, "labels"), &l);
        alerts[i].labels = l;
        alerts[i].nannotations = pairs(json_object_get(a, "annotations"), &an);
        alerts[i].annotations = an;
        alerts[i].starts_at_ms = json_integer_value(json_object_get(a, "startsAt"));
        alerts[i].ends_at_ms = json_integer_value(json_object_get(a, "endsAt"));
        alerts[i].resolved = json_is_true(json_object_get(a, "resolved"));
        alerts[i].generator_url = json_string_value(json_object_get(a, "generatorURL"));
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    for (size_t i = 0; i < n; i++)
        if (!alerts[i].resolved && !alerts[i].ends_at_ms) alerts[i].ends_at_ms = now + 60000;
    mw_alert_sinks_send(alerts, n, now);
    for (size_t i = 0; i < n; i++) {
        free((void *)alerts[i].labels);
        free((void *)alerts[i].annotations);
    }
    free(alerts);
    json_decref(root);
}

static void *feeder(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        feed_once();
        usleep(200 * 1000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: alert_feeder FEED.json [AGENT FLAGS...]\n");
        return 2;
    }
    feed_path = argv[1];
    mw_options_register_all();
    static mw_config cfg;
    mw_config_defaults(&cfg);
    char err[1024];
    size_t nrest = 0;
    if (mw_config_from_args(&cfg, argc, argv, 2, NULL, &nrest, 0, err, sizeof(err)) < 0) {
        fprintf(stderr, "alert_feeder: %s\n", err);
        return 2;
    }
    mw_log_level level;
    mw_log_level_parse(cfg.log_level, &level);
    mw_log_set_level(level);
    /* The agent takes its signals with sigtimedwait(): the feeder's thread
     * must not be the one they are delivered to. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_t t;
    pthread_create(&t, NULL, feeder, NULL);
    int rc = mw_agent_run(&cfg, 0);
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    return rc;
}
