/* func_table.c - the PromQL functions: one row each, with the signature the
 * parser checks (argument types, required and optional counts, result
 * type) and the implementation the evaluator calls; pq_func_lookup for the
 * parser and eval_call, the one dispatch. Adding a function is a row here,
 * its implementation (declared in qinternal.h) and a test
 * (tests/promql/functions.test). */
#include "qinternal.h"

#include <math.h>
#include <string.h>

#define S PQ_T_SCALAR
#define V PQ_T_VECTOR
#define M PQ_T_MATRIX
#define STR PQ_T_STRING

/* Sorted by name. name, argument types, required, optional (-1 = any
 * number of the type after the required ones), result, implementation,
 * and for the families: the operation and flags. */
/* clang-format off */
static const pq_func funcs[] = {
    {"abs", {V}, 1, 0, V, .call = pq_call_math, .unary = fabs},
    {"absent", {V}, 1, 0, V, .call = pq_call_absent},
    {"absent_over_time", {M}, 1, 0, V, .call = pq_call_absent_over_time,
     .window = pq_window_present},
    {"acos", {V}, 1, 0, V, .call = pq_call_math, .unary = acos},
    {"acosh", {V}, 1, 0, V, .call = pq_call_math, .unary = acosh},
    {"asin", {V}, 1, 0, V, .call = pq_call_math, .unary = asin},
    {"asinh", {V}, 1, 0, V, .call = pq_call_math, .unary = asinh},
    {"atan", {V}, 1, 0, V, .call = pq_call_math, .unary = atan},
    {"atanh", {V}, 1, 0, V, .call = pq_call_math, .unary = atanh},
    {"avg_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_avg},
    {"ceil", {V}, 1, 0, V, .call = pq_call_math, .unary = ceil},
    {"changes", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_changes},
    {"clamp", {V, S, S}, 3, 0, V, .call = pq_call_math, .math = pq_math_clamp},
    {"clamp_max", {V, S}, 2, 0, V, .call = pq_call_math, .math = pq_math_clamp_max},
    {"clamp_min", {V, S}, 2, 0, V, .call = pq_call_math, .math = pq_math_clamp_min},
    {"cos", {V}, 1, 0, V, .call = pq_call_math, .unary = cos},
    {"cosh", {V}, 1, 0, V, .call = pq_call_math, .unary = cosh},
    {"count_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_count},
    {"day_of_month", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_day_of_month},
    {"day_of_week", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_day_of_week},
    {"day_of_year", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_day_of_year},
    {"days_in_month", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_days_in_month},
    {"deg", {V}, 1, 0, V, .call = pq_call_math, .unary = pq_math_deg},
    {"delta", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_delta},
    {"deriv", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_deriv},
    {"double_exponential_smoothing", {M, S, S}, 3, 0, V, .call = pq_call_range,
     .window = pq_window_smoothing, .flags = PQ_FN_FACTORS},
    {"end", {S}, 0, 0, S, .call = pq_call_end},
    {"exp", {V}, 1, 0, V, .call = pq_call_math, .unary = exp},
    {"first_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_first,
     .flags = PQ_FN_KEEP_NAME},
    {"floor", {V}, 1, 0, V, .call = pq_call_math, .unary = floor},
    {"histogram_avg", {V}, 1, 0, V, .call = pq_call_histogram_avg},
    {"histogram_count", {V}, 1, 0, V, .call = pq_call_histogram_count},
    {"histogram_fraction", {S, S, V}, 3, 0, V, .call = pq_call_histogram_fraction},
    {"histogram_quantile", {S, V}, 2, 0, V, .call = pq_call_histogram_quantile},
    {"histogram_quantiles", {V, STR, S}, 3, 9, V, .call = pq_call_histogram_quantiles},
    {"histogram_stddev", {V}, 1, 0, V, .call = pq_call_histogram_stddev},
    {"histogram_stdvar", {V}, 1, 0, V, .call = pq_call_histogram_stdvar},
    {"histogram_sum", {V}, 1, 0, V, .call = pq_call_histogram_sum},
    {"holt_winters", {M, S, S}, 3, 0, V, .call = pq_call_range,
     .window = pq_window_smoothing, .flags = PQ_FN_FACTORS},
    {"hour", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_hour},
    {"idelta", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_idelta},
    {"increase", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_increase,
     .flags = PQ_FN_COUNTER},
    {"info", {V, V}, 1, 1, V, .call = pq_call_info},
    {"irate", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_irate},
    {"label_join", {V, STR, STR, STR}, 3, -1, V, .call = pq_call_label_join},
    {"label_replace", {V, STR, STR, STR, STR}, 5, 0, V, .call = pq_call_label_replace},
    {"last_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_last,
     .flags = PQ_FN_KEEP_NAME},
    {"ln", {V}, 1, 0, V, .call = pq_call_math, .unary = log},
    {"log10", {V}, 1, 0, V, .call = pq_call_math, .unary = log10},
    {"log2", {V}, 1, 0, V, .call = pq_call_math, .unary = log2},
    {"mad_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_mad},
    {"max_of", {S, S}, 2, 0, S, .call = pq_call_max_of},
    {"max_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_max},
    {"min_of", {S, S}, 2, 0, S, .call = pq_call_min_of},
    {"min_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_min},
    {"minute", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_minute},
    {"month", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_month},
    {"pi", {S}, 0, 0, S, .call = pq_call_pi},
    {"predict_linear", {M, S}, 2, 0, V, .call = pq_call_range, .window = pq_window_predict_linear},
    {"present_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_present},
    {"quantile_over_time", {S, M}, 2, 0, V, .call = pq_call_range, .window = pq_window_quantile},
    {"rad", {V}, 1, 0, V, .call = pq_call_math, .unary = pq_math_rad},
    {"range", {S}, 0, 0, S, .call = pq_call_range_of_query},
    {"rate", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_rate, .flags = PQ_FN_COUNTER},
    {"resets", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_resets},
    {"round", {V, S}, 1, 1, V, .call = pq_call_math, .math = pq_math_round},
    {"scalar", {V}, 1, 0, S, .call = pq_call_scalar},
    {"sgn", {V}, 1, 0, V, .call = pq_call_math, .unary = pq_math_sgn},
    {"sin", {V}, 1, 0, V, .call = pq_call_math, .unary = sin},
    {"sinh", {V}, 1, 0, V, .call = pq_call_math, .unary = sinh},
    {"sort", {V}, 1, 0, V, .call = pq_call_sort},
    {"sort_by_label", {V, STR}, 1, -1, V, .call = pq_call_sort_by_label},
    {"sort_by_label_desc", {V, STR}, 1, -1, V, .call = pq_call_sort_by_label_desc},
    {"sort_desc", {V}, 1, 0, V, .call = pq_call_sort_desc},
    {"sqrt", {V}, 1, 0, V, .call = pq_call_math, .unary = sqrt},
    {"start", {S}, 0, 0, S, .call = pq_call_start},
    {"stddev_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_stddev},
    {"stdvar_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_stdvar},
    {"step", {S}, 0, 0, S, .call = pq_call_step},
    {"sum_over_time", {M}, 1, 0, V, .call = pq_call_range, .window = pq_window_sum},
    {"tan", {V}, 1, 0, V, .call = pq_call_math, .unary = tan},
    {"tanh", {V}, 1, 0, V, .call = pq_call_math, .unary = tanh},
    {"time", {S}, 0, 0, S, .call = pq_call_time},
    {"timestamp", {V}, 1, 0, V, .call = pq_call_timestamp},
    {"ts_of_first_over_time", {M}, 1, 0, V, .call = pq_call_range,
     .window = pq_window_ts_of_first},
    {"ts_of_last_over_time", {M}, 1, 0, V, .call = pq_call_range,
     .window = pq_window_ts_of_last},
    {"ts_of_max_over_time", {M}, 1, 0, V, .call = pq_call_range,
     .window = pq_window_ts_of_max},
    {"ts_of_min_over_time", {M}, 1, 0, V, .call = pq_call_range,
     .window = pq_window_ts_of_min},
    {"vector", {S}, 1, 0, V, .call = pq_call_vector},
    {"year", {V}, 0, 1, V, .call = pq_call_math, .unary = pq_date_year},
};
/* clang-format on */

const pq_func *pq_func_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++)
        if (strcmp(funcs[i].name, name) == 0) return &funcs[i];
    return NULL;
}

const pq_func *pq_func_at(size_t i)
{
    return i < sizeof(funcs) / sizeof(funcs[0]) ? &funcs[i] : NULL;
}

val eval_call(qctx *c, const pq_node *n)
{
    /* A range query's answer is ordered by labels whatever sort did; a
     * subquery's grid counts too, as Prometheus's evaluator of it. */
    if (c->start != c->end &&
        (n->func->call == pq_call_sort || n->func->call == pq_call_sort_desc ||
         n->func->call == pq_call_sort_by_label || n->func->call == pq_call_sort_by_label_desc))
        q_annot(c, 0, n->pos,
                "PromQL warning: sort is ineffective for range queries since results are always "
                "ordered by labels");
    return n->func->call(c, n);
}
