/* alert.h - an alert as the rule evaluator hands it on to whoever sends it
 * (Alertmanager's v2 API, the built-in receivers): the one interface between
 * src/rules (producer) and src/notify (consumer), joined in src/agent. */
#ifndef MW_RULES_ALERT_H
#define MW_RULES_ALERT_H

#include <stddef.h>
#include <stdint.h>

typedef struct mw_alert_pair {
    const char *name;
    const char *value;
} mw_alert_pair;

/* One alert as Prometheus sends it (rules manager sendAlerts): labels hold
 * alertname, the series' labels and the rule's labels, sorted by name. */
typedef struct mw_alert {
    const mw_alert_pair *labels;
    size_t nlabels;
    const mw_alert_pair *annotations;
    size_t nannotations;
    int64_t starts_at_ms; /* when it fired (FiredAt) */
    int64_t ends_at_ms;   /* resolved: when; firing: valid until (now + 4 x max(resend delay,
                             interval)) */
    int resolved;         /* 1 once resolved */
    const char *generator_url;
} mw_alert;

/* Receives, after each evaluation of a group, the alerts due to be sent:
 * firing ones due for a (re)send and those resolved within the last 15
 * minutes, as Prometheus decides them (the evaluator owns resend timing).
 * Runs on the evaluator's thread: copy what you keep, never block (queue
 * and return). */
typedef struct mw_alert_sink {
    const char *name;
    void (*send)(void *ctx, const mw_alert *alerts, size_t n, int64_t now_ms);
    void *ctx;
} mw_alert_sink;

#define MW_ALERT_MAX_SINKS 8

/* Add a sink (any thread, any time; later batches reach it): 0, or -1
 * when MW_ALERT_MAX_SINKS are registered. */
int mw_alert_sink_add(const mw_alert_sink *sink);
/* Remove the sink with this ctx (a module's destroy). */
void mw_alert_sink_remove(void *ctx);
/* The evaluator's call: hands the batch to every sink in turn. */
void mw_alert_sinks_send(const mw_alert *alerts, size_t n, int64_t now_ms);

#endif
