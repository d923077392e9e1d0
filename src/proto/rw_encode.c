/* rw_encode.c - remote-write request bodies (protobuf-c + snappy), see rw_encode.h. */
#include "rw_encode.h"
#include "remote.pb-c.h"

#include <snappy-c.h>

#define MW_RW_MAX_LABELS 128

int mw_rw_append_series(mw_buf *out, const mw_rw_label *labels, size_t nlabels, double value,
                        int64_t ts_ms)
{
    if (nlabels > MW_RW_MAX_LABELS) return -1;
    Prometheus__Label lab[MW_RW_MAX_LABELS];
    Prometheus__Label *labp[MW_RW_MAX_LABELS];
    for (size_t i = 0; i < nlabels; i++) {
        prometheus__label__init(&lab[i]);
        /* protobuf-c's string fields are char *, never written through. */
        lab[i].name = (char *)labels[i].name;
        lab[i].value = (char *)labels[i].value;
        labp[i] = &lab[i];
    }
    Prometheus__Sample sample = PROMETHEUS__SAMPLE__INIT;
    sample.value = value;
    sample.timestamp = ts_ms;
    Prometheus__Sample *samplep = &sample;
    Prometheus__TimeSeries ts = PROMETHEUS__TIME_SERIES__INIT;
    ts.n_labels = nlabels;
    ts.labels = labp;
    ts.n_samples = 1;
    ts.samples = &samplep;
    Prometheus__TimeSeries *tsp = &ts;
    Prometheus__WriteRequest req = PROMETHEUS__WRITE_REQUEST__INIT;
    req.n_timeseries = 1;
    req.timeseries = &tsp;
    size_t n = prometheus__write_request__get_packed_size(&req);
    if (mw_buf_reserve(out, n) < 0) return -1;
    prometheus__write_request__pack(&req, (uint8_t *)out->data + out->len);
    out->len += n;
    out->data[out->len] = '\0';
    return 0;
}

int mw_rw_snappy(const void *in, size_t n, mw_buf *out)
{
    size_t cap = snappy_max_compressed_length(n);
    mw_buf_clear(out);
    if (mw_buf_reserve(out, cap) < 0) return -1;
    size_t len = cap;
    if (snappy_compress(in, n, out->data, &len) != SNAPPY_OK) return -1;
    out->len = len;
    out->data[len] = '\0';
    return 0;
}
