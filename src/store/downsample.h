/* downsample.h - per-window aggregates of raw samples for long retention
 * (downsample.c; docs/store.md "Downsampling"). Internal to the store. */
#ifndef MW_DOWNSAMPLE_H
#define MW_DOWNSAMPLE_H

#include "block.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mw_store mw_store;

/* One series' aggregates at one resolution: per window (t in (k*res,
 * (k+1)*res]) with at least one sample that is not a staleness marker, at
 * the time of its last such sample: count, sum (compensated, as
 * sum_over_time), min and max (as min/max_over_time); and the subset of raw
 * samples that rate, increase, delta, last_over_time and plain selectors
 * need: each window's first and last, both samples around a drop (a counter
 * reset), NaNs, and a window's last sample when it is a
 * staleness marker. */
typedef struct mw_ds_series {
    int64_t *at;
    double *cnt, *sum, *min, *max;
    size_t na;
    int64_t *st;
    double *sv;
    size_t ns;
} mw_ds_series;
void mw_ds_compute(const int64_t *t, const double *v, size_t n, int64_t res, mw_ds_series *o);
void mw_ds_series_free(mw_ds_series *o);

/* Read series id of a downsampled block for a selection (what: MW_SEL_*)
 * in [mint, maxt] into out, with the weight of each sample appended to *w
 * (capacity *wcap, kept parallel to out). 0, -1 over the limit, -2 damaged. */
int mw_ds_read(const mw_block *b, uint32_t id, int what, int64_t mint, int64_t maxt,
               mw_samples *out, double **w, size_t *wcap);

/* Compaction's step (compact.c, under maint_mu): every raw block whose
 * samples are all older than the retention becomes a block at each
 * resolution (those its samples are not already too old for), then is
 * deleted. A block already made for a resolution (found by its sources) is
 * not made again, so a crash in between loses nothing and doubles nothing. */
int mw_downsample_expired(mw_store *s);

#endif
