/* fuzz_promql.c - the PromQL parser on arbitrary bytes, and the evaluator on
 * whatever parses (without a store: selectors are empty, so scalar
 * arithmetic, functions and aggregations over vector() run). Checks that
 * errors name a position, results have the right shape, nothing leaks. */
#include "query/promql.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *q = malloc(size + 1);
    memcpy(q, data, size);
    q[size] = '\0';
    char err[512] = "";
    pq_node *n = pq_parse(q, err, sizeof(err));
    if (!n) {
        /* "LINE:COL: parse error: ..." */
        check(err[0] >= '1' && err[0] <= '9' && strstr(err, ": parse error: ") != NULL);
        free(q);
        return 0;
    }
    pq_limits lim;
    pq_default_limits(&lim);
    lim.max_samples = 100000;
    lim.timeout_ms = 200;
    pq_result r;
    int rc = pq_eval(NULL, n, 0, 0, 0, &lim, &r, err, sizeof(err));
    if (rc == 0) {
        check(r.type == n->type || (n->type == PQ_T_VECTOR && r.type == PQ_T_VECTOR));
        pq_result_free(&r);
    } else {
        check(rc == PQ_ERR_BAD_DATA || rc == PQ_ERR_EXECUTION || rc == PQ_ERR_TIMEOUT);
    }
    if (n->type == PQ_T_SCALAR || n->type == PQ_T_VECTOR) {
        rc = pq_eval(NULL, n, 0, 600000, 60000, &lim, &r, err, sizeof(err));
        if (rc == 0) {
            check(r.type == PQ_T_MATRIX);
            pq_result_free(&r);
        }
    }
    pq_node_free(n);
    free(q);
    return 0;
}
