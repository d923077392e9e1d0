/* sender.h - one remote-write HTTP request, and the retry policy.
 *
 * Retry rules (Prometheus's): 5xx, 429 and transport errors (connection
 * refused, timeout) are retried with exponential backoff and jitter; any
 * other 4xx means the receiver will never take the batch: it is dropped,
 * counted and logged. A Retry-After header (seconds or an HTTP date) on a
 * retried answer replaces the computed backoff, capped at 5 minutes. */
#ifndef MW_RW_SENDER_H
#define MW_RW_SENDER_H

#include "rw_config.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { MW_RW_OK, MW_RW_RETRY, MW_RW_REJECTED } mw_rw_outcome;

typedef struct mw_rw_result {
    mw_rw_outcome outcome;
    long status;            /* HTTP status, 0 on a transport error */
    int64_t retry_after_ms; /* from Retry-After, -1 when absent */
    char detail[320];       /* curl's error or the start of the answer, one line */
} mw_rw_result;

typedef struct mw_rw_client mw_rw_client;

/* A client for one endpoint (one per shard: libcurl handles are not shared
 * between threads). stop is polled during transfers to abort them. */
mw_rw_client *mw_rw_client_new(const mw_rw_endpoint_cfg *ep, const volatile int *stop);
void mw_rw_client_free(mw_rw_client *c);
/* POST one snappy-compressed WriteRequest. Secrets are read from their files
 * for each request (rotated tokens work); they never reach the detail. */
void mw_rw_post(mw_rw_client *c, const void *body, size_t len, mw_rw_result *res);

/* What an HTTP status means for the batch. */
mw_rw_outcome mw_rw_classify(long status);
/* The wait before retry number attempt (0-based): min * 2^attempt capped at
 * max, then uniformly jittered into [d/2, d] by r in [0, 1); a Retry-After
 * (>= 0) wins, capped at 5 minutes. */
int64_t mw_rw_backoff_ms(unsigned attempt, int64_t min_ms, int64_t max_ms, int64_t retry_after_ms,
                         double r);
/* Parse a Retry-After value: delay-seconds or an IMF-fixdate relative to
 * now_s. Returns milliseconds, or -1. */
int64_t mw_rw_parse_retry_after(const char *v, int64_t now_s);

#endif
