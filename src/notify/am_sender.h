/* am_sender.h - rule alerts to one or more Alertmanagers through their API
 * v2 (POST /api/v2/alerts), as Prometheus's notifier sends them.
 *
 * The sender is an alert sink (rules/alert.h): its send() encodes each
 * alert as Alertmanager's PostableAlert JSON, copies it into every
 * Alertmanager's bounded queue (--alertmanager-queue-capacity, oldest
 * dropped and counted when full) and returns. Each Alertmanager has its own
 * thread (core/worker.h), so a slow or down one delays no other: it POSTs
 * batches of at most MW_AM_BATCH alerts, retries a batch that met a
 * timeout, a broken connection, a 5xx or a 429 with exponential backoff
 * (MW_AM_BACKOFF_MIN_MS doubling to MW_AM_BACKOFF_MAX_MS), keeping it at the
 * front of the queue, and drops (and counts) a batch the Alertmanager
 * rejected with another 4xx, which no retry would change. Credentials are
 * read from their files for each request (a rotated token is picked up) and
 * never logged; metrics name each Alertmanager by scheme://host:port only.
 * The resend interval is the evaluator's (rules/alert.h). */
#ifndef MW_AM_SENDER_H
#define MW_AM_SENDER_H

#include "../core/buf.h"
#include "../core/config.h"
#include "../core/snapshot.h"
#include "../rules/alert.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define MW_AM_MAX 8                        /* Alertmanagers in --alertmanager-url */
#define MW_AM_BATCH 64                     /* alerts per POST, as Prometheus's maxBatchSize */
#define MW_AM_MAX_ALERT_BYTES (256 * 1024) /* one alert's JSON; larger ones are dropped */
#define MW_AM_BACKOFF_MIN_MS 500
#define MW_AM_BACKOFF_MAX_MS 30000

typedef struct mw_am_settings {
    char urls[MW_AM_MAX * 512]; /* comma-separated base URLs */
    char ca_file[PATH_MAX];
    char cert_file[PATH_MAX];
    char key_file[PATH_MAX];
    char bearer_token_file[PATH_MAX];
    char basic_username[256];
    char basic_password_file[PATH_MAX];
    int64_t timeout_ms;
    double queue_capacity;
} mw_am_settings;
extern const mw_option_group mw_am_options;

/* ---- the parts, pure, for tests ---- */

/* One alert as Alertmanager's PostableAlert: {"labels", "annotations",
 * "startsAt", "endsAt", "generatorURL"}, times in RFC 3339 with
 * milliseconds (UTC); endsAt and generatorURL left out when 0 or empty.
 * Appends to out; invalid UTF-8 becomes U+FFFD. */
void mw_am_alert_json(const mw_alert *a, mw_buf *out);

/* "scheme://host:port" of a URL (the port filled in for http and https):
 * the Alertmanager's name in logs and metrics, without user, path, query. */
void mw_am_shown_url(const char *url, char *out, size_t size);

/* A bounded FIFO of encoded alerts. */
typedef struct mw_am_queue {
    char **items; /* ring of cap */
    size_t cap, head, n;
    uint64_t dropped; /* oldest items pushed out when full */
} mw_am_queue;
void mw_am_queue_init(mw_am_queue *q, size_t cap);
void mw_am_queue_free(mw_am_queue *q);
/* Append a copy of json; when full, the oldest is dropped (counted). */
void mw_am_queue_push(mw_am_queue *q, const char *json);
/* Move up to max items from the front into out[] (the caller owns them). */
size_t mw_am_queue_take(mw_am_queue *q, char **out, size_t max);
/* Put k taken items back at the front, in their order (a retry); when that
 * overflows, the oldest of them are dropped (counted, freed). */
void mw_am_queue_put_back(mw_am_queue *q, char **items, size_t k);
/* "[a,b,...]" of k encoded alerts. */
void mw_am_batch_json(char *const *items, size_t k, mw_buf *out);

/* One Alertmanager: its queue and counters (guarded by mu, which is its
 * worker's). */
typedef struct mw_am_target mw_am_target;
/* The POST of one batch; 0 with *status set when an answer came, -1 on a
 * timeout or connection failure (reason written). Replaceable for tests. */
typedef int (*mw_am_post_fn)(void *cls, const mw_am_target *t, const mw_buf *body, long *status,
                             char *reason, size_t reasonsize);
typedef struct mw_am_counts {
    uint64_t sent, errors, dropped;
    size_t queued; /* queue length, batch in flight included */
    int64_t backoff_ms;
} mw_am_counts;
mw_am_target *mw_am_target_new(const char *base_url, const mw_am_settings *s, size_t capacity,
                               mw_am_post_fn post, void *cls);
void mw_am_target_free(mw_am_target *t);
void mw_am_target_enqueue(mw_am_target *t, const char *json);
/* An alert that could not be queued (larger than MW_AM_MAX_ALERT_BYTES). */
void mw_am_target_drop(mw_am_target *t);
/* One attempt: POST the next batch if any. Returns how long to wait before
 * the next attempt: 0 when more is queued, the backoff after a failure,
 * -1 when the queue is empty. */
int64_t mw_am_target_step(mw_am_target *t);
void mw_am_target_counts(mw_am_target *t, mw_am_counts *out);
const char *mw_am_target_url(const mw_am_target *t);   /* .../api/v2/alerts */
const char *mw_am_target_shown(const mw_am_target *t); /* scheme://host:port */

/* ---- the sender ---- */

typedef struct mw_am_sender mw_am_sender;
/* Start one thread per Alertmanager of s: 0 with *out set, 1 when
 * --alertmanager-url is empty (nothing started), -1 with a message naming
 * the flag. */
int mw_am_sender_new(const mw_am_settings *s, mw_am_sender **out, char *err, size_t errsize);
/* The sink's send (rules/alert.h): copies, queues, returns at once. */
void mw_am_sender_send(void *sender, const mw_alert *alerts, size_t n, int64_t now_ms);
/* Self-metrics: mlwatch_alertmanager_* by alertmanager. */
void mw_am_sender_emit(mw_am_sender *s, mw_snapshot *snap);
/* Stops the threads (a POST in flight ends within --alertmanager-timeout). */
void mw_am_sender_free(mw_am_sender *s);

#endif
