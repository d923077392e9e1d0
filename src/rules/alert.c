/* alert.c - the registry of alert sinks (alert.h): the evaluator hands each
 * batch to every sink registered by the agent's wiring. */
#include "alert.h"

#include <pthread.h>

static pthread_mutex_t sinks_lock = PTHREAD_MUTEX_INITIALIZER;
static mw_alert_sink sinks[MW_ALERT_MAX_SINKS];
static size_t nsinks;

int mw_alert_sink_add(const mw_alert_sink *sink)
{
    int rc = -1;
    pthread_mutex_lock(&sinks_lock);
    if (nsinks < MW_ALERT_MAX_SINKS) {
        sinks[nsinks++] = *sink;
        rc = 0;
    }
    pthread_mutex_unlock(&sinks_lock);
    return rc;
}

void mw_alert_sink_remove(void *ctx)
{
    pthread_mutex_lock(&sinks_lock);
    for (size_t i = 0; i < nsinks; i++) {
        if (sinks[i].ctx == ctx) {
            sinks[i] = sinks[--nsinks];
            break;
        }
    }
    pthread_mutex_unlock(&sinks_lock);
}

void mw_alert_sinks_send(const mw_alert *alerts, size_t n, int64_t now_ms)
{
    mw_alert_sink copy[MW_ALERT_MAX_SINKS];
    pthread_mutex_lock(&sinks_lock);
    size_t count = nsinks;
    for (size_t i = 0; i < count; i++)
        copy[i] = sinks[i];
    pthread_mutex_unlock(&sinks_lock);
    for (size_t i = 0; i < count; i++)
        copy[i].send(copy[i].ctx, alerts, n, now_ms);
}
