/* funcs_info.c - Prometheus 3's info(v [, {data label selector}]): each
 * series of v gains the data labels of the info series (target_info
 * unless the selector names others by __name__) that share its
 * identifying labels, instance and job, as Prometheus's promql/info.go.
 *
 * The info series are read at the time v's first selector reads (its @
 * and offset, or those of the subqueries around it), with the timestamp
 * of the sample found in the lookback: when two info series of one name
 * share identifying labels at a step, the newer sample wins and a tie is
 * an error. A series that no info series matches is kept as it is unless
 * the selector has a data-label matcher that the empty string fails. */
#include "qinternal.h"

#include "../core/buf.h"
#include "../core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const id_labels[] = {"instance", "job"};
#define N_ID (sizeof(id_labels) / sizeof(id_labels[0]))
#define MAX_DEPTH 64

/* When the info series are read: the @ time (has_at) or the step's own
 * time, less offset. */
typedef struct info_ref {
    int has_at;
    int64_t at, offset;
} info_ref;

static int64_t at_of(const qctx *c, const pq_node *n)
{
    return n->at_kind == 1 ? c->qstart : n->at_kind == 2 ? c->qend : n->at_ms;
}

/* The first vector selector of e (depth first): its @ and offset, then the
 * offsets of the subqueries around it, innermost first, up to the first
 * of them with an @ (which anchors the time; those further out do not
 * count). 1 when e has a selector. */
static int find_ref(const qctx *c, const pq_node *e, const pq_node **path, size_t depth,
                    info_ref *r)
{
    if (e->kind == PQ_VSEL) {
        r->has_at = e->has_at;
        r->at = e->has_at ? at_of(c, e) : 0;
        r->offset = q_offset(c, e);
        for (size_t i = depth; !r->has_at && i-- > 0;)
            if (path[i]->kind == PQ_SUBQ) {
                r->offset += q_offset(c, path[i]);
                if (path[i]->has_at) {
                    r->has_at = 1;
                    r->at = at_of(c, path[i]);
                }
            }
        return 1;
    }
    if (depth >= MAX_DEPTH) return 0;
    path[depth] = e;
    for (size_t i = 0; i < e->nargs; i++)
        if (find_ref(c, e->args[i], path, depth + 1, r)) return 1;
    return 0;
}

static int64_t ref_at(const qctx *c, const info_ref *r, size_t i)
{
    return (r->has_at ? r->at : qts(c, i)) - r->offset;
}

static int all_match(const mw_matcher *const *ms, size_t n, const char *value)
{
    for (size_t i = 0; i < n; i++)
        if (!mw_matcher_matches(ms[i], value)) return 0;
    return 1;
}

/* The join key of a series for the info metric `name`: the name and the
 * identifying labels the series has. */
static void sig_of(mw_buf *b, const char *name, const pq_label *l, size_t n)
{
    mw_buf_clear(b);
    mw_buf_append(b, name, strlen(name));
    for (size_t k = 0; k < N_ID; k++) {
        const char *v = lbl_get(l, n, id_labels[k]);
        if (!*v) continue;
        mw_buf_append(b, "\xfe", 1);
        mw_buf_append(b, id_labels[k], strlen(id_labels[k]));
        mw_buf_append(b, "\xff", 1);
        mw_buf_append(b, v, strlen(v));
    }
    mw_buf_append(b, "", 1); /* data is never NULL */
}

/* What the call works with. */
typedef struct info_job {
    qctx *c;
    const mw_matcher *names[MAX_DEPTH + 1]; /* the effective __name__ matchers */
    size_t nnames;
    const mw_matcher *data[MAX_DEPTH]; /* the selector's other matchers */
    size_t ndata;
    int data_need_value; /* a data matcher fails on "": unmatched series go */
    mw_select_result r;  /* the info series */
    int64_t *orig;       /* [series * nsteps]: their sample's time, or INT64_MIN */
    uint8_t *hist;       /* [series * nsteps]: that sample is a native histogram */
    size_t *sig;         /* [series]: join key id */
    smap sigs;           /* join key -> id */
    smap names_seen;     /* info metric names -> index */
    char **info_names;
    size_t ninfo_names;
} info_job;

/* The info series that may join v's: those with v's identifying values,
 * the data matchers and the names, read over the steps' times. */
static int select_info(info_job *j, const val *base, const uint8_t *ignored, const info_ref *ref)
{
    qctx *c = j->c;
    char **vals[N_ID] = {0};
    size_t nvals[N_ID] = {0};
    smap seen[N_ID];
    int any = 0, rc = -1;
    for (size_t k = 0; k < N_ID; k++) {
        smap_init(&seen[k]);
        for (size_t i = 0; i < base->n; i++) {
            if (ignored[i]) continue;
            const char *v = lbl_get(base->s[i].labels, base->s[i].nlabels, id_labels[k]);
            if (!*v || smap_get(&seen[k], v) != (size_t)-1) continue;
            smap_put(&seen[k], v, nvals[k]);
            vals[k] = mw_xrealloc(vals[k], (nvals[k] + 1) * sizeof(char *));
            vals[k][nvals[k]++] = (char *)v;
            any = 1;
        }
    }
    mw_matcher sets[N_ID];
    size_t nsets = 0;
    mw_matcher *ms = NULL;
    if (!any) {
        rc = 0;
        goto out;
    }
    char err[256];
    for (size_t k = 0; k < N_ID; k++) {
        if (!nvals[k]) continue;
        if (mw_matcher_init_set(&sets[nsets], id_labels[k], vals[k], nvals[k], 0, err,
                                sizeof(err)) < 0) {
            qerr(c, PQ_ERR_EXECUTION, "info: %s", err);
            goto out;
        }
        nsets++;
    }
    size_t nm = 0;
    ms = mw_xcalloc(nsets + j->ndata + j->nnames, sizeof(*ms));
    for (size_t k = 0; k < nsets; k++)
        ms[nm++] = sets[k];
    for (size_t k = 0; k < j->ndata; k++)
        ms[nm++] = *j->data[k];
    for (size_t k = 0; k < j->nnames; k++)
        ms[nm++] = *j->names[k];
    pq_node sel = {.kind = PQ_VSEL, .matchers = ms, .nmatchers = nm};
    int64_t lo = ref_at(c, ref, 0), hi = ref_at(c, ref, c->nsteps - 1);
    rc = q_store_select(c, &sel, lo - c->lim.lookback_ms, hi, &j->r);
out:
    free(ms);
    for (size_t k = 0; k < nsets; k++)
        mw_matcher_free(&sets[k]);
    for (size_t k = 0; k < N_ID; k++) {
        free(vals[k]);
        smap_free(&seen[k]);
    }
    return rc;
}

/* Each info series' sample time at each step (the lookback as a vector
 * selector's), its join key and its name's index. */
static void index_info(info_job *j, const info_ref *ref, mw_buf *key)
{
    qctx *c = j->c;
    size_t ns = j->r.nseries;
    j->orig = mw_xcalloc(ns * c->nsteps + 1, sizeof(int64_t));
    j->hist = mw_xcalloc(ns * c->nsteps + 1, 1);
    j->sig = mw_xcalloc(ns + 1, sizeof(size_t));
    for (size_t si = 0; si < ns; si++) {
        const mw_series_data *d = &j->r.series[si];
        pq_label *l = lbl_from_store(d->labels, d->nlabels);
        const char *name = lbl_get(l, d->nlabels, "__name__");
        if (smap_get(&j->names_seen, name) == (size_t)-1) {
            smap_put(&j->names_seen, name, j->ninfo_names);
            j->info_names = mw_xrealloc(j->info_names, (j->ninfo_names + 1) * sizeof(char *));
            j->info_names[j->ninfo_names++] = mw_xstrdup(name);
        }
        sig_of(key, name, l, d->nlabels);
        size_t id = smap_get(&j->sigs, key->data);
        if (id == (size_t)-1) {
            id = j->sigs.n;
            smap_put(&j->sigs, key->data, id);
        }
        j->sig[si] = id;
        lbl_free(l, d->nlabels);
        size_t k = 0;
        for (size_t i = 0; i < c->nsteps; i++) {
            int64_t t = ref_at(c, ref, i);
            if (ref->has_at) k = 0;
            while (k < d->n && d->t[k] <= t)
                k++;
            int64_t o = INT64_MIN;
            if (k > 0 && q_after_start(c, d->t[k - 1], t - c->lim.lookback_ms) &&
                !is_stale(d->v[k - 1])) {
                o = d->t[k - 1];
                j->hist[si * c->nsteps + i] = mw_hist_is_ref(d->v[k - 1]);
            }
            j->orig[si * c->nsteps + i] = o;
        }
    }
}

/* The labels series b takes from the info series chosen (combo[k] for
 * info name k, or SIZE_MAX), added to a copy of its own into *out; 0, 1
 * when the sample goes (no info series and a data matcher needs a value),
 * or -1 on a conflict (the context failed). */
static int enriched(info_job *j, const sv *b, const size_t *combo, pq_label **out, size_t *nout)
{
    pq_label *add = NULL;
    size_t nadd = 0, seen = 0;
    for (size_t k = 0; k < j->ninfo_names; k++) {
        if (combo[k] == SIZE_MAX) continue;
        seen++;
        const mw_series_data *d = &j->r.series[combo[k]];
        for (size_t i = 0; i < d->nlabels; i++) {
            const char *n = d->labels[i].name, *v = d->labels[i].value;
            if (!strcmp(n, "__name__")) continue;
            if (j->ndata) {
                int listed = 0;
                for (size_t m = 0; m < j->ndata && !listed; m++)
                    listed = !strcmp(j->data[m]->name, n);
                if (!listed) continue;
            }
            const char *had = lbl_get(add, nadd, n); /* "" when absent */
            if (*had && strcmp(had, v)) {
                qerr(j->c, PQ_ERR_EXECUTION, "conflicting label: %s", n);
                lbl_free(add, nadd);
                return -1;
            }
            if (*lbl_get(b->labels, b->nlabels, n)) continue;
            lbl_set(&add, &nadd, n, v);
        }
    }
    if (!seen && j->data_need_value) {
        lbl_free(add, nadd);
        return 1;
    }
    *nout = b->nlabels;
    *out = lbl_copy(b->labels, b->nlabels);
    for (size_t i = 0; i < nadd; i++)
        lbl_set(out, nout, add[i].name, add[i].value);
    lbl_free(add, nadd);
    return 0;
}

/* Per step: the newest info series of each join key, then each series of
 * v with its labels. */
static val combine(info_job *j, val *base, const uint8_t *ignored, mw_buf *key)
{
    qctx *c = j->c;
    size_t nb = base->n, nk = j->ninfo_names, nsig = j->sigs.n;
    /* Each series' join key per info name (SIZE_MAX: no info series has it). */
    size_t *bsig = mw_xcalloc(nb * nk + 1, sizeof(size_t));
    for (size_t b = 0; b < nb; b++)
        for (size_t k = 0; k < nk; k++) {
            sig_of(key, j->info_names[k], base->s[b].labels, base->s[b].nlabels);
            bsig[b * nk + k] = smap_get(&j->sigs, key->data);
        }
    size_t *best = mw_xcalloc(nsig + 1, sizeof(size_t));
    size_t *stamp = mw_xcalloc(nsig + 1, sizeof(size_t));
    size_t *combo = mw_xcalloc(nb * nk + 1, sizeof(size_t));
    size_t *cur = mw_xcalloc(nk + 1, sizeof(size_t));
    size_t *out_si = mw_xcalloc(nb + 1, sizeof(size_t));
    uint8_t *have = mw_xcalloc(nb + 1, 1); /* out_si[b] is for combo[b] */
    vbuild vb;
    vb_init(&vb, c);
    for (size_t i = 0; i < c->nsteps && !c->code; i++) {
        /* An info series' sample must be a float, where there is a base
         * sample at the step to join it to (Prometheus: an error). */
        int based = 0;
        for (size_t b = 0; b < nb && !based; b++)
            based = base->s[b].ok[i];
        for (size_t si = 0; si < j->r.nseries && !c->code; si++) {
            int64_t o = j->orig[si * c->nsteps + i];
            if (o == INT64_MIN) continue;
            if (based && j->hist[si * c->nsteps + i]) {
                qerr(c, PQ_ERR_EXECUTION, "info sample should be float");
                break;
            }
            size_t id = j->sig[si];
            if (stamp[id] != i + 1) {
                stamp[id] = i + 1;
                best[id] = si;
                continue;
            }
            int64_t e = j->orig[best[id] * c->nsteps + i];
            if (e < o) best[id] = si;
            if (e != o) continue;
            mw_buf a;
            mw_buf_init(&a, 1 << 16);
            const mw_series_data *x = &j->r.series[best[id]], *y = &j->r.series[si];
            pq_label *lx = lbl_from_store(x->labels, x->nlabels);
            pq_label *ly = lbl_from_store(y->labels, y->nlabels);
            mw_buf_clear(&a);
            lbl_desc(&a, lx, x->nlabels, 1);
            mw_buf_clear(key);
            lbl_desc(key, ly, y->nlabels, 1);
            qerr(c, PQ_ERR_EXECUTION,
                 "found duplicate series for info metric: existing %s @ %lld, new %s @ %lld",
                 a.data, (long long)e, key->data, (long long)o);
            lbl_free(lx, x->nlabels);
            lbl_free(ly, y->nlabels);
            mw_buf_free(&a);
            break;
        }
        for (size_t b = 0; b < nb && !c->code; b++) {
            const sv *s = &base->s[b];
            if (!s->ok[i]) continue;
            size_t osi;
            if (ignored[b]) {
                if (!have[b]) {
                    out_si[b] = vb_series_dn(&vb, lbl_copy(s->labels, s->nlabels), s->nlabels,
                                             s->drop_name);
                    have[b] = 1;
                }
                osi = out_si[b];
            } else {
                for (size_t k = 0; k < nk; k++) {
                    size_t id = bsig[b * nk + k];
                    cur[k] = id != (size_t)-1 && stamp[id] == i + 1 ? best[id] : SIZE_MAX;
                }
                if (!have[b] || memcmp(cur, &combo[b * nk], nk * sizeof(size_t))) {
                    memcpy(&combo[b * nk], cur, nk * sizeof(size_t));
                    pq_label *l = NULL;
                    size_t nl = 0;
                    int rc = enriched(j, s, cur, &l, &nl);
                    if (rc < 0) break;
                    out_si[b] = rc ? (size_t)-1 : vb_series_dn(&vb, l, nl, s->drop_name);
                    have[b] = 1;
                }
                osi = out_si[b];
            }
            if (osi == (size_t)-1) continue;
            if (vb_set(&vb, osi, i, s->v[i]) < 0) break;
        }
        if (qcheck_time(c) < 0) break;
    }
    free(bsig);
    free(best);
    free(stamp);
    free(combo);
    free(cur);
    free(out_si);
    free(have);
    if (c->code) {
        vb_free(&vb);
        return (val){.type = PQ_T_VECTOR};
    }
    return vb_finish(&vb);
}

val pq_call_info(qctx *c, const pq_node *n)
{
    info_ref ref = {0};
    const pq_node *path[MAX_DEPTH];
    find_ref(c, n->args[0], path, 0, &ref);
    val base = eval_node(c, n->args[0]);
    if (c->code) return base;

    char err[256];
    mw_matcher target, any_info;
    mw_matcher_init(&target, MW_MATCH_EQ, "__name__", "target_info", err, sizeof(err));
    mw_matcher_init(&any_info, MW_MATCH_RE, "__name__", ".+_info", err, sizeof(err));
    info_job j = {.c = c};
    smap_init(&j.sigs);
    smap_init(&j.names_seen);
    const pq_node *sel = n->nargs > 1 ? n->args[1] : NULL;
    const mw_matcher *given[MAX_DEPTH];
    size_t ngiven = 0;
    int positive = 0;
    for (size_t i = 0; sel && i < sel->nmatchers && i < MAX_DEPTH; i++) {
        const mw_matcher *m = &sel->matchers[i];
        if (strcmp(m->name, "__name__")) {
            j.data[j.ndata++] = m;
            if (!m->matches_empty) j.data_need_value = 1;
            continue;
        }
        given[ngiven++] = m;
        if (m->op == MW_MATCH_EQ || m->op == MW_MATCH_RE) positive = 1;
    }
    /* Prometheus's effectiveInfoNameMatchers: the names given when one of
     * them selects, ".+_info" before only negative ones, else target_info. */
    if (!ngiven) {
        j.names[j.nnames++] = &target;
    } else {
        if (!positive) j.names[j.nnames++] = &any_info;
        for (size_t i = 0; i < ngiven; i++)
            j.names[j.nnames++] = given[i];
    }
    /* Info series themselves are not enriched. */
    uint8_t *ignored = mw_xcalloc(base.n + 1, 1);
    for (size_t i = 0; i < base.n; i++) {
        const char *name = lbl_get(base.s[i].labels, base.s[i].nlabels, "__name__");
        ignored[i] = (uint8_t)all_match(j.names, j.nnames, name);
    }
    mw_buf key;
    mw_buf_init(&key, 1 << 20);
    val out = {.type = PQ_T_VECTOR};
    if (select_info(&j, &base, ignored, &ref) == 0) {
        index_info(&j, &ref, &key);
        out = combine(&j, &base, ignored, &key);
    }
    qrelease(c, j.r.nsamples);
    mw_select_result_free(&j.r);
    free(j.orig);
    free(j.hist);
    free(j.sig);
    for (size_t k = 0; k < j.ninfo_names; k++)
        free(j.info_names[k]);
    free(j.info_names);
    smap_free(&j.sigs);
    smap_free(&j.names_seen);
    mw_buf_free(&key);
    free(ignored);
    mw_matcher_free(&target);
    mw_matcher_free(&any_info);
    val_free(c, &base);
    return out;
}
