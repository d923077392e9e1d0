/* api_internal.h - what the query API's files share (api.c: queries,
 * series, labels, metadata; api_status.c: status, targets, features,
 * exemplars, format_query): request parameters and Prometheus-shaped
 * answers. */
#ifndef MW_API_INTERNAL_H
#define MW_API_INTERNAL_H

#include "../serve/http.h"
#include "api.h"

#include <jansson.h>
#include <stdint.h>

#define MAX_PARAMS 64

/* histogram_fmt.c: a series' points when some are native histograms (1),
 * as Prometheus's "histogram"/"histograms"; 0 (nothing written) for a
 * series of floats only. */
struct mw_buf;
int pq_hist_put_points(struct mw_buf *b, const pq_result *r, const pq_series *s);

/* The query string's and a form body's parameters, decoded. */
typedef struct params {
    char *k[MAX_PARAMS], *v[MAX_PARAMS];
    size_t vlen[MAX_PARAMS]; /* v may hold a NUL (%00): its true length */
    int n;
} params;
void api_params_load(params *p, const mw_http_request *req);
void api_params_free(params *p);
/* The first value of k, or NULL. */
const char *api_param(const params *p, const char *k);

/* Takes root. */
void api_respond_json(mw_http_response *resp, int status, json_t *root);
/* {"status":"error","errorType":T,"error":MSG}: T from the status (400
 * bad_data, 404 not_found, 503 timeout, else execution). */
void api_respond_error(mw_http_response *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* {"status":"success","data":DATA}; takes data. */
void api_respond_data(mw_http_response *resp, json_t *data);
/* Parameter name as a time (Prometheus' formats), def when absent; -1 after
 * answering 400. */
int api_time_param(mw_http_response *resp, const params *p, const char *name, int64_t def,
                   int64_t *out);

/* Gzip the answer when the request accepts it (every handler ends with
 * it). */
void api_gzip(const mw_http_request *req, mw_http_response *resp);

/* api_status.c: the routes of the status, targets, features, exemplars and
 * format_query endpoints. */
void api_register_status(mw_http_server *http, mw_query_api *api);

#endif
