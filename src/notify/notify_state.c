/* notify_state.c - the table of idle episodes the notifier works from, and
 * its state file DATA_DIR/state/idle-notifications.json, written to a
 * temporary file, fsync'ed and renamed so that a crash leaves the old or
 * the new file, never half of one. */
#include "notify_state.h"
#include "../core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mw_notify_table_free(mw_notify_table *t)
{
    mw_alert_groups_free(&t->groups);
    free(t->e);
    memset(t, 0, sizeof(*t));
}

static mw_notify_entry *find(mw_notify_table *t, const char *key, int64_t since)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].ep.idle_since_ms == since && strcmp(t->e[i].ep.key, key) == 0) return &t->e[i];
    return NULL;
}

static void remove_at(mw_notify_table *t, size_t i)
{
    memmove(&t->e[i], &t->e[i + 1], (t->n - i - 1) * sizeof(t->e[0]));
    t->n--;
}

int mw_notify_table_upsert(mw_notify_table *t, const mw_notify_episode *ep)
{
    mw_notify_entry *e = find(t, ep->key, ep->idle_since_ms);
    if (e) {
        if (!e->ep.ended_ms) e->ep = *ep;
        return 0;
    }
    if (t->n >= MW_NOTIFY_MAX_EPISODES) {
        /* Make room from the oldest ended episode; open ones are kept. */
        size_t i = 0;
        while (i < t->n && !t->e[i].ep.ended_ms)
            i++;
        if (i == t->n) return -1;
        remove_at(t, i);
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->e = mw_xrealloc(t->e, t->cap * sizeof(t->e[0]));
    }
    memset(&t->e[t->n], 0, sizeof(t->e[0]));
    t->e[t->n].ep = *ep;
    t->n++;
    return 1;
}

void mw_notify_table_resolve(mw_notify_table *t, const mw_notify_episode *ep)
{
    mw_notify_entry *e = find(t, ep->key, ep->idle_since_ms);
    if (!e) return;
    e->ep = *ep;
    if (!e->ep.ended_ms) e->ep.ended_ms = 1;
}

int mw_notify_table_due(const mw_notify_table *t, int r, int64_t now_ms, int64_t repeat_ms,
                        mw_notify_episode *ep, mw_msg_kind *kind)
{
    unsigned bit = 1u << r;
    for (size_t i = 0; i < t->n; i++) {
        const mw_notify_entry *e = &t->e[i];
        if (e->ep.ended_ms) {
            if (e->resolved & bit) continue;
            *kind = MW_MSG_RESOLVED;
        } else if (!(e->fired & bit)) {
            *kind = MW_MSG_FIRING;
        } else if (repeat_ms > 0 && now_ms - e->last_sent_ms[r] >= repeat_ms) {
            *kind = MW_MSG_REPEAT;
        } else {
            continue;
        }
        *ep = e->ep;
        return (int)i;
    }
    return -1;
}

void mw_notify_table_delivered(mw_notify_table *t, const mw_notify_episode *ep, int r,
                               mw_msg_kind kind, int64_t now_ms)
{
    mw_notify_entry *e = find(t, ep->key, ep->idle_since_ms);
    if (!e) return;
    unsigned bit = 1u << r;
    e->fired |= bit;
    if (kind == MW_MSG_RESOLVED) e->resolved |= bit;
    e->last_sent_ms[r] = now_ms;
}

void mw_notify_table_gc(mw_notify_table *t, unsigned enabled)
{
    int64_t now = mw_now_ms();
    for (size_t i = t->n; i-- > 0;) {
        const mw_notify_entry *e = &t->e[i];
        if (!e->ep.ended_ms) continue;
        if ((e->resolved & enabled) == enabled || now - e->ep.ended_ms > MW_NOTIFY_KEEP_MS)
            remove_at(t, i);
    }
}

/* ---- state file ---- */

/* clang-format off */
#define STR_FIELDS(X) X(key) X(ns) X(pod) X(container) X(gpu) X(model) X(uuid) X(node) \
    X(workload_kind) X(workload) X(owner) X(end_reason)
#define NUM_FIELDS(X) X(memory_bytes) X(gpu_seconds) X(energy_joules) X(co2_grams) \
    X(threshold_ratio)
/* clang-format on */

static json_t *entry_json(const mw_notify_entry *e)
{
    json_t *o = json_object();
#define PUT_S(f) json_object_set_new(o, #f, json_string(e->ep.f));
#define PUT_N(f) json_object_set_new(o, #f, json_real(e->ep.f));
    STR_FIELDS(PUT_S)
    NUM_FIELDS(PUT_N)
    json_object_set_new(o, "idle_since_ms", json_integer(e->ep.idle_since_ms));
    json_object_set_new(o, "ended_ms", json_integer(e->ep.ended_ms));
    json_t *rx = json_object();
    for (int r = 0; r < (int)mw_nreceivers; r++) {
        unsigned bit = 1u << r;
        if (!(e->fired & bit)) continue;
        json_object_set_new(rx, mw_receivers[r]->name,
                            json_pack("{s:I, s:b}", "last_sent_ms", (json_int_t)e->last_sent_ms[r],
                                      "resolved", (e->resolved & bit) != 0));
    }
    json_object_set_new(o, "delivered", rx);
    return o;
}

char *mw_notify_table_encode(const mw_notify_table *t)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < t->n; i++)
        json_array_append_new(arr, entry_json(&t->e[i]));
    json_t *root = json_pack("{s:i, s:o, s:o}", "version", 1, "episodes", arr, "alert_groups",
                             mw_alert_groups_json(&t->groups));
    char *text = root ? json_dumps(root, JSON_INDENT(1)) : NULL;
    json_decref(root);
    return text;
}

int mw_notify_table_save(const mw_notify_table *t, const char *path, char *err, size_t errsize)
{
    char *text = mw_notify_table_encode(t);
    if (!text) {
        snprintf(err, errsize, "cannot encode the state");
        return -1;
    }
    int rc = mw_notify_state_write(path, text, err, errsize);
    free(text);
    return rc;
}

int mw_notify_state_write(const char *path, const char *text, char *err, size_t errsize)
{
    char tmp[PATH_MAX + 80];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errsize, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t len = strlen(text), off = 0;
    int rc = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rc = -1;
            break;
        }
        off += (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0) rc = -1;
    int saved = errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        saved = errno;
    }
    if (rc < 0) {
        unlink(tmp);
        snprintf(err, errsize, "%s: %s", path, strerror(saved));
        return -1;
    }
    /* The rename is durable once the folder is synced. */
    char dir[PATH_MAX + 80];
    mw_strlcpy(dir, path, sizeof(dir));
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        int dfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return 0;
}

static int bad(char *err, size_t errsize, size_t i, const char *field, const char *why)
{
    snprintf(err, errsize, "episodes[%zu].%s: %s", i, field, why);
    return -1;
}

static int parse_entry(json_t *o, size_t i, mw_notify_entry *e, char *err, size_t errsize)
{
    memset(e, 0, sizeof(*e));
    if (!json_is_object(o)) return bad(err, errsize, i, "", "expected an object");
    json_t *v;
#define GET_S(f)                                                                                   \
    v = json_object_get(o, #f);                                                                    \
    if (!json_is_string(v) || json_string_length(v) >= sizeof(e->ep.f) ||                          \
        strlen(json_string_value(v)) != json_string_length(v))                                     \
        return bad(err, errsize, i, #f, "expected a string without NUL, shorter than the limit");  \
    mw_strlcpy(e->ep.f, json_string_value(v), sizeof(e->ep.f));
#define GET_N(f)                                                                                   \
    v = json_object_get(o, #f);                                                                    \
    if (!json_is_number(v)) return bad(err, errsize, i, #f, "expected a number");                  \
    e->ep.f = json_number_value(v);
    STR_FIELDS(GET_S)
    NUM_FIELDS(GET_N)
    v = json_object_get(o, "idle_since_ms");
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return bad(err, errsize, i, "idle_since_ms", "expected a positive integer");
    e->ep.idle_since_ms = json_integer_value(v);
    v = json_object_get(o, "ended_ms");
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return bad(err, errsize, i, "ended_ms", "expected an integer >= 0");
    e->ep.ended_ms = json_integer_value(v);
    if (!e->ep.key[0]) return bad(err, errsize, i, "key", "empty");
    json_t *rx = json_object_get(o, "delivered");
    if (!json_is_object(rx)) return bad(err, errsize, i, "delivered", "expected an object");
    for (int r = 0; r < (int)mw_nreceivers; r++) {
        json_t *d = json_object_get(rx, mw_receivers[r]->name);
        if (!d) continue;
        json_t *ls = json_object_get(d, "last_sent_ms"), *res = json_object_get(d, "resolved");
        if (!json_is_integer(ls) || !json_is_boolean(res))
            return bad(err, errsize, i, "delivered",
                       "expected {last_sent_ms: integer, resolved: boolean} per receiver");
        e->fired |= 1u << r;
        if (json_is_true(res)) e->resolved |= 1u << r;
        e->last_sent_ms[r] = json_integer_value(ls);
    }
    return 0;
}

int mw_notify_table_parse(mw_notify_table *t, const char *text, size_t len, char *err,
                          size_t errsize)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errsize, "line %d: %s", je.line, je.text);
        return -1;
    }
    json_t *ver = json_object_get(root, "version"), *arr = json_object_get(root, "episodes");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1 || !json_is_array(arr)) {
        snprintf(err, errsize, "expected {\"version\": 1, \"episodes\": [...]}");
        json_decref(root);
        return -1;
    }
    size_t n = json_array_size(arr);
    if (n > MW_NOTIFY_MAX_EPISODES) {
        snprintf(err, errsize, "more than %d episodes", MW_NOTIFY_MAX_EPISODES);
        json_decref(root);
        return -1;
    }
    mw_notify_table nt = {0};
    nt.cap = n ? n : 1;
    nt.e = mw_xcalloc(nt.cap, sizeof(nt.e[0]));
    for (size_t i = 0; i < n; i++) {
        if (parse_entry(json_array_get(arr, i), i, &nt.e[i], err, errsize) < 0) {
            free(nt.e);
            json_decref(root);
            return -1;
        }
        nt.n++;
    }
    /* Rule alerts: absent from files written before them. */
    json_t *groups = json_object_get(root, "alert_groups");
    if (groups && mw_alert_groups_parse(&nt.groups, groups, mw_now_ms(), err, errsize) < 0) {
        free(nt.e);
        json_decref(root);
        return -1;
    }
    json_decref(root);
    mw_notify_table_free(t);
    *t = nt;
    return 0;
}

int mw_notify_table_load(mw_notify_table *t, const char *path, char *err, size_t errsize)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0; /* first start */
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t max = 8u << 20;
    char *text = mw_xmalloc(max);
    size_t len = fread(text, 1, max, f);
    fclose(f);
    if (len == max) {
        free(text);
        snprintf(err, errsize, "%s: larger than 8 MiB", path);
        return -1;
    }
    char why[256];
    int rc = mw_notify_table_parse(t, text, len, why, sizeof(why));
    free(text);
    if (rc < 0) snprintf(err, errsize, "%s: %s", path, why);
    return rc;
}

void mw_notify_state_path(const mw_config *cfg, char *out, size_t size)
{
    char dir[PATH_MAX + 8];
    mw_state_dir(cfg, dir, sizeof(dir));
    snprintf(out, size, "%.4000s/%s", dir, MW_NOTIFY_STATE_FILE);
}

int mw_notify_state_migrate(const mw_config *cfg, char *err, size_t errsize)
{
    char to[PATH_MAX + 64], from[PATH_MAX + 64], aside[PATH_MAX + 80];
    mw_notify_state_path(cfg, to, sizeof(to));
    snprintf(from, sizeof(from), "%.4000s/%s", mw_legacy_state_dir(cfg), MW_NOTIFY_STATE_FILE);
    if (strcmp(from, to) == 0 || access(to, F_OK) == 0 || access(from, F_OK) < 0) return 0;
    mw_notify_table t = {0};
    char why[512];
    int rc = mw_notify_table_load(&t, from, why, sizeof(why));
    if (rc == 0) {
        rc = mw_state_dir_make(cfg);
        if (rc < 0)
            snprintf(why, sizeof(why), "cannot create %.400s/state: %s", cfg->data_dir,
                     strerror(-rc));
        else
            rc = mw_notify_table_save(&t, to, why, sizeof(why));
    }
    mw_notify_table_free(&t);
    snprintf(aside, sizeof(aside), "%s.migrated", from);
    if (rc == 0 && rename(from, aside) < 0) {
        snprintf(why, sizeof(why), "renaming %.400s: %s", from, strerror(errno));
        rc = -1;
    }
    if (rc < 0) {
        snprintf(err, errsize, "notification state not migrated from %.4000s: %s", from, why);
        return -1;
    }
    snprintf(err, errsize, "notification state migrated from %s to %s (the old file is now %s)",
             from, to, aside);
    return 1;
}
