/* metadata.c - the metric metadata table behind /api/v1/metadata (see
 * metadata.h). A sorted array under a mutex: a few hundred names in
 * practice, looked up by binary search, so noting a snapshot every
 * interval costs a few microseconds and no allocation once known. */
#include "metadata.h"

#include "../core/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *name, *type, *help, *unit;
} entry;

struct mw_metadata {
    pthread_mutex_t mu;
    entry *e;
    size_t n, cap;
};

mw_metadata *mw_metadata_new(void)
{
    mw_metadata *m = mw_xcalloc(1, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

static void entry_free(entry *e)
{
    free(e->name);
    free(e->type);
    free(e->help);
    free(e->unit);
}

void mw_metadata_free(mw_metadata *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n; i++)
        entry_free(&m->e[i]);
    free(m->e);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* Index of name, or of where it would go (*found 0). */
static size_t find(const mw_metadata *m, const char *name, int *found)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(m->e[mid].name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

static char *dup_cut(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) /* not inside a UTF-8 character */
            n--;
    }
    char *r = mw_xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

static int same(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

static void set_locked(mw_metadata *m, const char *name, const char *type, const char *help,
                       const char *unit)
{
    int found;
    size_t i = find(m, name, &found);
    if (found) {
        entry *e = &m->e[i];
        if (same(e->type, type) && !strncmp(e->help, help, MW_METADATA_HELP_MAX) &&
            same(e->unit, unit))
            return; /* the usual case: nothing changed */
        free(e->type);
        free(e->help);
        free(e->unit);
        e->type = mw_xstrdup(type);
        e->help = dup_cut(help, MW_METADATA_HELP_MAX);
        e->unit = dup_cut(unit, 64);
        return;
    }
    if (m->n >= MW_METADATA_MAX) return;
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->e = mw_xrealloc(m->e, m->cap * sizeof(entry));
    }
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof(entry));
    m->e[i] = (entry){dup_cut(name, 256), mw_xstrdup(type), dup_cut(help, MW_METADATA_HELP_MAX),
                      dup_cut(unit, 64)};
    m->n++;
}

void mw_metadata_set(mw_metadata *m, const char *name, const char *type, const char *help,
                     const char *unit)
{
    if (!m || !name || !*name) return;
    pthread_mutex_lock(&m->mu);
    set_locked(m, name, type ? type : "unknown", help ? help : "", unit ? unit : "");
    pthread_mutex_unlock(&m->mu);
}

void mw_metadata_note_snapshot(mw_metadata *m, const mw_snapshot *snap)
{
    static const char *types[] = {"gauge", "counter", "info"};
    if (!m || !snap) return;
    pthread_mutex_lock(&m->mu);
    for (const mw_family *f = snap->first; f; f = f->next) {
        const mw_metric_desc *d = f->desc;
        set_locked(m, d->name, (unsigned)d->type < 3 ? types[d->type] : "unknown",
                   d->help ? d->help : "", d->unit ? d->unit : "");
    }
    pthread_mutex_unlock(&m->mu);
}

json_t *mw_metadata_json(mw_metadata *m, const char *metric, long limit)
{
    json_t *o = json_object();
    if (!m || limit == 0) return o;
    pthread_mutex_lock(&m->mu);
    size_t from = 0, to = m->n;
    if (metric && *metric) {
        int found;
        from = find(m, metric, &found);
        to = found ? from + 1 : from;
    }
    for (size_t i = from; i < to && (limit < 0 || (long)json_object_size(o) < limit); i++) {
        const entry *e = &m->e[i];
        /* NULL when a sender's text is not UTF-8: that name is left out */
        json_t *x = json_pack("{s:s, s:s, s:s}", "type", e->type, "help", e->help, "unit", e->unit);
        if (!x) continue;
        json_t *a = json_array();
        json_array_append_new(a, x);
        json_object_set_new(o, e->name, a);
    }
    pthread_mutex_unlock(&m->mu);
    return o;
}
