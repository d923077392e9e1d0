/* rw_encode.h - building Prometheus remote-write 1.0 request bodies.
 *
 * A WriteRequest is only a repeated field, and protobuf merges repeated
 * fields of concatenated messages, so the bytes of several WriteRequests
 * written one after the other are one valid WriteRequest holding all their
 * series. The shipper uses that to append series one at a time (no large
 * message tree in memory) and to batch queued records by concatenation. */
#ifndef MW_RW_ENCODE_H
#define MW_RW_ENCODE_H

#include "../core/buf.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mw_rw_label {
    const char *name;
    const char *value;
} mw_rw_label;

/* Append the encoding of WriteRequest{timeseries: [{labels, samples:
 * [{value, ts_ms}]}]} to out. Labels must already be sorted by name (the
 * protocol requires it). Returns 0, or -1 when out is full. */
int mw_rw_append_series(mw_buf *out, const mw_rw_label *labels, size_t nlabels, double value,
                        int64_t ts_ms);

/* Snappy block-compress in[0..n) into out (replacing its contents).
 * Returns 0 or -1. */
int mw_rw_snappy(const void *in, size_t n, mw_buf *out);

#endif
