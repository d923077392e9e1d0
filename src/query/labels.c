/* labels.c - label sets, a string map and the vector builder for the
 * PromQL evaluator (value formatting: numfmt.c). */
#include "qinternal.h"

#include "../core/buf.h"
#include "../core/hash.h"
#include "../core/util.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qerr(qctx *c, int code, const char *fmt, ...)
{
    if (c->code) return;
    c->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errsize, fmt, ap);
    va_end(ap);
}

int qcharge(qctx *c, size_t n)
{
    if (c->code) return -1;
    c->samples += n;
    if (c->samples > c->peak) c->peak = c->samples;
    if (c->lim.max_samples && c->samples > c->lim.max_samples) {
        qerr(c, PQ_ERR_EXECUTION,
             "query processing would load too many samples into memory in query execution");
        return -1;
    }
    return qcheck_time(c);
}

int qcheck_series(qctx *c, size_t nseries)
{
    if (c->code) return -1;
    if (c->lim.max_series && nseries > c->lim.max_series) {
        qerr(c, PQ_ERR_EXECUTION,
             "query processing would load too many series into memory: a selector matches %zu "
             "series, more than the limit of %zu (--query-max-series)",
             nseries, c->lim.max_series);
        return -1;
    }
    return 0;
}

void qrelease(qctx *c, size_t n)
{
    c->samples = n > c->samples ? 0 : c->samples - n;
}

int qcheck_time(qctx *c)
{
    if (c->code) return -1;
    if (c->lim.cancel && *c->lim.cancel) {
        qerr(c, PQ_ERR_TIMEOUT, "query cancelled: the server is stopping");
        return -1;
    }
    if (c->deadline_ns && mw_mono_ns() > c->deadline_ns) {
        qerr(c, PQ_ERR_TIMEOUT, "query timed out in query execution");
        return -1;
    }
    return 0;
}

/* A label set's strings in one block (see pq_label): a range query copies
 * the labels of every series it selects, and two allocations per label
 * were a tenth of its time. refs counts the labels pointing into it; only
 * the query's own thread touches labels. */
typedef struct lblk {
    size_t refs;
    void *sel; /* or: strings of a store selection (lbl_share), freed with it */
    char data[];
} lblk;

/* n labels whose name and value pointers lie at name_off and value_off in
 * elements of stride bytes from src (pq_label or mw_label), copied into a
 * new array and one string block. */
static pq_label *pack(const void *src, size_t n, size_t stride, size_t name_off, size_t value_off)
{
    pq_label *r = mw_xcalloc(n ? n : 1, sizeof(*r));
    if (n == 0) return r;
    const char *base = src;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const char *nm, *vl;
        memcpy(&nm, base + i * stride + name_off, sizeof(nm));
        memcpy(&vl, base + i * stride + value_off, sizeof(vl));
        bytes += strlen(nm) + strlen(vl) + 2;
    }
    lblk *b = mw_xmalloc(sizeof(lblk) + bytes);
    b->refs = n;
    b->sel = NULL;
    char *w = b->data;
    for (size_t i = 0; i < n; i++) {
        const char *nm, *vl;
        memcpy(&nm, base + i * stride + name_off, sizeof(nm));
        memcpy(&vl, base + i * stride + value_off, sizeof(vl));
        size_t ln = strlen(nm) + 1, lv = strlen(vl) + 1;
        r[i].name = memcpy(w, nm, ln);
        w += ln;
        r[i].value = memcpy(w, vl, lv);
        w += lv;
        r[i].blk = b;
    }
    return r;
}

pq_label *lbl_copy(const pq_label *l, size_t n)
{
    return pack(l, n, sizeof(pq_label), offsetof(pq_label, name), offsetof(pq_label, value));
}

pq_label *lbl_from_store(const mw_label *l, size_t n)
{
    return pack(l, n, sizeof(mw_label), offsetof(mw_label, name), offsetof(mw_label, value));
}

static void blk_unref(lblk *b)
{
    if (--b->refs > 0) return;
    mw_select_labels_free(b->sel);
    free(b);
}

void *lbl_shared_new(mw_select_result *r)
{
    lblk *b = mw_xmalloc(sizeof(lblk));
    b->refs = 1;
    b->sel = mw_select_result_take_labels(r);
    return b;
}

void lbl_shared_drop(void *shared)
{
    blk_unref(shared);
}

pq_label *lbl_share(const mw_label *l, size_t n, void *shared)
{
    pq_label *r = mw_xmalloc((n ? n : 1) * sizeof(*r));
    for (size_t i = 0; i < n; i++)
        r[i] = (pq_label){(char *)l[i].name, (char *)l[i].value, shared};
    ((lblk *)shared)->refs += n;
    return r;
}

/* Release one label's strings (the label itself is not touched). */
static void lbl_release(pq_label *l)
{
    if (l->blk) {
        blk_unref(l->blk);
    } else {
        free(l->name);
        free(l->value);
    }
}

void lbl_free(pq_label *l, size_t n)
{
    if (!l) return;
    for (size_t i = 0; i < n; i++)
        lbl_release(&l[i]);
    free(l);
}

const char *lbl_get(const pq_label *l, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].name, name) == 0) return l[i].value;
    return "";
}

void lbl_desc(mw_buf *b, const pq_label *l, size_t n, int name_outside)
{
    if (name_outside) mw_buf_printf(b, "%s", lbl_get(l, n, "__name__"));
    mw_buf_putc(b, '{');
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (name_outside && !strcmp(l[i].name, "__name__")) continue;
        mw_buf_printf(b, "%s%s=\"%s\"", first ? "" : ", ", l[i].name, l[i].value);
        first = 0;
    }
    mw_buf_putc(b, '}');
}

void lbl_drop_metric_name(pq_label **l, size_t *n)
{
    lbl_del(l, n, "__name__");
    lbl_del(l, n, "__type__");
    lbl_del(l, n, "__unit__");
}

void lbl_del(pq_label **l, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*l)[i].name, name) == 0) {
            lbl_release(&(*l)[i]);
            memmove(&(*l)[i], &(*l)[i + 1], (*n - i - 1) * sizeof(pq_label));
            (*n)--;
            return;
        }
}

void lbl_set(pq_label **l, size_t *n, const char *name, const char *value)
{
    if (!value || !*value) {
        lbl_del(l, n, name);
        return;
    }
    size_t i = 0;
    while (i < *n && strcmp((*l)[i].name, name) < 0)
        i++;
    if (i < *n && strcmp((*l)[i].name, name) == 0) {
        pq_label x = {mw_xstrdup((*l)[i].name), mw_xstrdup(value), NULL};
        lbl_release(&(*l)[i]);
        (*l)[i] = x;
        return;
    }
    *l = mw_xrealloc(*l, (*n + 1) * sizeof(pq_label));
    memmove(&(*l)[i + 1], &(*l)[i], (*n - i) * sizeof(pq_label));
    (*l)[i] = (pq_label){mw_xstrdup(name), mw_xstrdup(value), NULL};
    (*n)++;
}

static int in_list(const char *s, char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return 1;
    return 0;
}

void lbl_filter(pq_label **l, size_t *n, char *const *names, size_t nnames, int keep)
{
    size_t o = 0;
    for (size_t i = 0; i < *n; i++) {
        if (in_list((*l)[i].name, names, nnames) == keep) {
            (*l)[o++] = (*l)[i];
        } else {
            lbl_release(&(*l)[i]);
        }
    }
    *n = o;
}

int lbl_cmp(const pq_label *a, size_t na, const pq_label *b, size_t nb)
{
    for (size_t i = 0; i < na && i < nb; i++) {
        int r = strcmp(a[i].name, b[i].name);
        if (r) return r;
        r = strcmp(a[i].value, b[i].value);
        if (r) return r;
    }
    return na < nb ? -1 : na > nb ? 1 : 0;
}

void lbl_key(const pq_label *l, size_t n, char *const *names, size_t nnames, int on, int use_names,
             mw_buf *buf)
{
    mw_buf_clear(buf);
    for (size_t i = 0; i < n; i++) {
        if (use_names) {
            int listed = in_list(l[i].name, names, nnames);
            if (on && !listed) continue;
            if (!on && (listed || strcmp(l[i].name, "__name__") == 0)) continue;
        }
        mw_buf_puts(buf, l[i].name);
        mw_buf_putc(buf, '\xff');
        mw_buf_puts(buf, l[i].value);
        mw_buf_putc(buf, '\xfe');
    }
    mw_buf_reserve(buf, 0);
}

static uint64_t hash_str(const char *s)
{
    return mw_fnv1a64_str(MW_FNV1A64_SEED, s);
}

void smap_init(smap *m)
{
    memset(m, 0, sizeof(*m));
}

void smap_free(smap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

size_t smap_get(const smap *m, const char *key)
{
    if (!m->cap) return (size_t)-1;
    for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return (size_t)-1;
        if (strcmp(m->keys[i], key) == 0) return m->vals[i];
    }
}

void smap_put(smap *m, const char *key, size_t v)
{
    if ((m->n + 1) * 2 > m->cap) {
        smap old = *m;
        m->cap = old.cap ? old.cap * 2 : 16;
        m->keys = mw_xcalloc(m->cap, sizeof(char *));
        m->vals = mw_xcalloc(m->cap, sizeof(size_t));
        m->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.keys[i]) {
                size_t j = hash_str(old.keys[i]) & (m->cap - 1);
                while (m->keys[j])
                    j = (j + 1) & (m->cap - 1);
                m->keys[j] = old.keys[i];
                m->vals[j] = old.vals[i];
                m->n++;
            }
        free(old.keys);
        free(old.vals);
    }
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i]) {
        if (strcmp(m->keys[i], key) == 0) {
            m->vals[i] = v;
            return;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = mw_xstrdup(key);
    m->vals[i] = v;
    m->n++;
}

sv *sv_new(qctx *c, val *out, pq_label *labels, size_t nlabels)
{
    if (qcharge(c, c->nsteps) < 0) {
        lbl_free(labels, nlabels);
        return NULL;
    }
    /* The array grows to powers of two (its size follows from n alone):
     * one realloc per series made a selection of N series cost O(N^2). */
    if (out->n == 0 || (out->n & (out->n - 1)) == 0)
        out->s = mw_xrealloc(out->s, (out->n ? 2 * out->n : 1) * sizeof(sv));
    sv *s = &out->s[out->n++];
    s->labels = labels;
    s->nlabels = nlabels;
    s->drop_name = 0;
    /* ok lies behind v in the same block: one allocation per series
     * (freed through v). */
    s->v = mw_xcalloc(1, c->nsteps * (sizeof(double) + 1));
    s->ok = (uint8_t *)(s->v + c->nsteps);
    return s;
}

void val_free(qctx *c, val *v)
{
    if (c && v->scalar) qrelease(c, c->nsteps);
    free(v->scalar);
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        lbl_free(v->s[i].labels, v->s[i].nlabels);
        free(v->s[i].v); /* and ok */
    }
    if (c) qrelease(c, v->n * c->nsteps);
    free(v->s);
    for (size_t i = 0; i < v->nms; i++) {
        lbl_free(v->ms[i].labels, v->ms[i].nlabels);
        free(v->ms[i].t);
        free(v->ms[i].v);
        if (c) qrelease(c, v->ms[i].n);
    }
    free(v->ms);
    memset(v, 0, sizeof(*v));
}

void vb_init(vbuild *b, qctx *c)
{
    memset(b, 0, sizeof(*b));
    b->c = c;
    smap_init(&b->idx);
    mw_buf_init(&b->key, 0);
}

size_t vb_series(vbuild *b, pq_label *labels, size_t nlabels)
{
    return vb_series_dn(b, labels, nlabels, 0);
}

size_t vb_series_dn(vbuild *b, pq_label *labels, size_t nlabels, int drop_name)
{
    lbl_key(labels, nlabels, NULL, 0, 0, 0, &b->key);
    /* A key ends with \xff: a marked series' own ending cannot collide. */
    if (drop_name) mw_buf_putc(&b->key, '\x01');
    size_t i = smap_get(&b->idx, b->key.data ? b->key.data : "");
    if (i != (size_t)-1) {
        lbl_free(labels, nlabels);
        return i;
    }
    val tmp = {.s = b->s, .n = b->n};
    if (!sv_new(b->c, &tmp, labels, nlabels)) return (size_t)-1;
    b->s = tmp.s;
    b->n = tmp.n;
    b->s[b->n - 1].drop_name = (uint8_t)(drop_name != 0);
    smap_put(&b->idx, b->key.data ? b->key.data : "", b->n - 1);
    return b->n - 1;
}

size_t vb_append(vbuild *b, pq_label *labels, size_t nlabels)
{
    val tmp = {.s = b->s, .n = b->n};
    if (!sv_new(b->c, &tmp, labels, nlabels)) return (size_t)-1;
    b->s = tmp.s;
    b->n = tmp.n;
    return b->n - 1;
}

int vb_set(vbuild *b, size_t si, size_t step, double v)
{
    if (b->s[si].ok[step]) {
        qerr(b->c, PQ_ERR_EXECUTION, "vector cannot contain metrics with the same labelset");
        return -1;
    }
    b->s[si].ok[step] = 1;
    b->s[si].v[step] = v;
    return 0;
}

int vb_add(vbuild *b, pq_label *labels, size_t nlabels, size_t step, double v)
{
    size_t i = vb_series(b, labels, nlabels);
    if (i == (size_t)-1) return -1;
    return vb_set(b, i, step, v);
}

void vb_free(vbuild *b)
{
    val tmp = {.s = b->s, .n = b->n};
    val_free(b->c, &tmp);
    smap_free(&b->idx);
    mw_buf_free(&b->key);
}

val vb_finish(vbuild *b)
{
    val out = {.type = PQ_T_VECTOR, .s = b->s, .n = b->n};
    b->s = NULL;
    b->n = 0;
    vb_free(b);
    return out;
}

int lbl_name_valid(const char *s)
{
    return s && mw_utf8_len(s) > 0;
}

int lbl_name_legacy(const char *s)
{
    if (!s || !*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

int q_remove_names(qctx *c, val *v)
{
    int any = 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->s[i].drop_name) {
            lbl_drop_metric_name(&v->s[i].labels, &v->s[i].nlabels);
            v->s[i].drop_name = 0;
            any = 1;
        }
    if (!any) return 0;
    smap seen;
    smap_init(&seen);
    mw_buf key;
    mw_buf_init(&key, 0);
    size_t o = 0;
    for (size_t i = 0; i < v->n; i++) {
        sv *s = &v->s[i];
        lbl_key(s->labels, s->nlabels, NULL, 0, 0, 0, &key);
        const char *k0 = key.data ? key.data : "";
        size_t j = smap_get(&seen, k0);
        if (j == (size_t)-1) {
            smap_put(&seen, k0, o);
            v->s[o++] = *s;
            continue;
        }
        sv *into = &v->s[j];
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!s->ok[k]) continue;
            if (into->ok[k] && !c->code)
                qerr(c, PQ_ERR_EXECUTION, "vector cannot contain metrics with the same labelset");
            into->ok[k] = 1;
            into->v[k] = s->v[k];
        }
        lbl_free(s->labels, s->nlabels);
        free(s->v);
        qrelease(c, c->nsteps);
    }
    v->n = o;
    smap_free(&seen);
    mw_buf_free(&key);
    return c->code ? -1 : 0;
}
