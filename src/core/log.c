/* log.c - leveled, rate-limited logging to stderr, see log.h. */
#include "log.h"
#include "hash.h"
#include "util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static mw_log_level min_level = MW_LOG_INFO;
static int quiet_period_s = 600;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* Fixed-size table of recently logged keys (by hash). A collision can only
 * suppress or repeat a line, never grow memory. */
#define ONCE_SLOTS 1024
static struct {
    uint64_t hash;
    int64_t last_ns;
    uint64_t suppressed; /* lines of this key left out since it was last printed */
} once_table[ONCE_SLOTS];

static const char *level_names[] = {"debug", "info", "warn", "error"};

void mw_log_set_level(mw_log_level level)
{
    min_level = level;
}

void mw_log_set_quiet_period(int seconds)
{
    quiet_period_s = seconds;
}

int mw_log_level_parse(const char *s, mw_log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (mw_log_level)i;
            return 0;
        }
    }
    return -1;
}

static void vlog(mw_log_level level, const char *component, const char *fmt, va_list ap)
{
    char ts[40];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);

    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    /* One event, one line: a path or error text must not forge extra lines. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    flockfile(stderr);
    fprintf(stderr, "%s %s %s: %s\n", ts, level_names[level], component, msg);
    funlockfile(stderr);
}

void mw_log(mw_log_level level, const char *component, const char *fmt, ...)
{
    if (level < min_level) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, component, fmt, ap);
    va_end(ap);
}

static uint64_t fnv1a(const char *a, const char *b)
{
    uint64_t h = mw_fnv1a64_str(MW_FNV1A64_SEED, a);
    h = mw_fnv1a64_str(mw_fnv1a64_byte(h, 0xff), b);
    return h | 1; /* 0 marks an empty slot */
}

int mw_log_once(mw_log_level level, const char *component, const char *key, const char *fmt, ...)
{
    if (level < min_level) return 0;
    uint64_t h = fnv1a(component, key);
    int64_t now = mw_mono_ns();
    int print = 0;
    uint64_t left_out = 0;
    pthread_mutex_lock(&log_lock);
    size_t slot = h % ONCE_SLOTS;
    if (once_table[slot].hash != h) {
        once_table[slot].hash = h;
        once_table[slot].last_ns = now;
        once_table[slot].suppressed = 0;
        print = 1;
    } else if (now - once_table[slot].last_ns >= (int64_t)quiet_period_s * 1000000000) {
        once_table[slot].last_ns = now;
        left_out = once_table[slot].suppressed;
        once_table[slot].suppressed = 0;
        print = 1;
    } else {
        once_table[slot].suppressed++;
    }
    pthread_mutex_unlock(&log_lock);
    if (!print) return 0;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* The count says how often the cause recurred while it stayed quiet. */
    if (left_out)
        mw_log(level, component, "%s (%llu more like it since the last such line)", msg,
               (unsigned long long)left_out);
    else
        mw_log(level, component, "%s", msg);
    return 1;
}

int mw_fail(char *err, size_t errsize, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsize, fmt, ap);
    va_end(ap);
    return -1;
}
