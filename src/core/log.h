/* log.h - the one logging convention.
 *
 * Lines go to stderr as "TIME LEVEL COMPONENT: message". Errors that repeat
 * every collection cycle (a file that is unreadable on this host) go through
 * mw_log_once(), which prints a given key at most once per quiet period and
 * keeps a bounded table of keys, so a broken host cannot flood the log or
 * grow memory. Never log secrets: callers pass paths and error texts only. */
#ifndef MW_LOG_H
#define MW_LOG_H

#include <stddef.h>

typedef enum { MW_LOG_DEBUG, MW_LOG_INFO, MW_LOG_WARN, MW_LOG_ERROR } mw_log_level;

void mw_log_set_level(mw_log_level level);
/* Parse "debug", "info", "warn", "error"; returns -1 if unknown. */
int mw_log_level_parse(const char *s, mw_log_level *out);
/* Seconds during which a repeated mw_log_once key stays quiet (default 600). */
void mw_log_set_quiet_period(int seconds);

void mw_log(mw_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Returns 1 if the line was printed, 0 if suppressed. A line printed again
 * after its quiet period ends with how many were suppressed meanwhile:
 * "... (N more like it since the last such line)". */
int mw_log_once(mw_log_level level, const char *component, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Write the reason into err and return -1: for functions that fail with
 * a reason in a caller's buffer. */
int mw_fail(char *err, size_t errsize, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
