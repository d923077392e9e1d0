/* template_internal.h - what template.c (parser, evaluator) and
 * template_funcs.c (the functions) share: values and the function table. */
#ifndef MW_RULES_TEMPLATE_INTERNAL_H
#define MW_RULES_TEMPLATE_INTERNAL_H

#include "template.h"

#include <stddef.h>

/* A value during expansion; strings and arrays live in the expansion's
 * arena. */
typedef enum {
    TV_NIL,
    TV_STR,
    TV_FLOAT,
    TV_INT,
    TV_BOOL,
    TV_MAP,     /* labels: kv sorted by name */
    TV_SAMPLES, /* query()'s answer */
    TV_SAMPLE,
    TV_DATA, /* the template's dot: .Labels, .Value ... */
} tv_kind;

typedef struct tv {
    tv_kind k;
    const char *s;
    double f;
    long long i;
    const mw_tpl_kv *kv;
    size_t n;
    const mw_tpl_sample *smp; /* TV_SAMPLES: n of them; TV_SAMPLE: one */
} tv;

typedef struct tpl_env {
    mw_arena *a;
    const mw_tpl_data *d;
    int queries; /* query() calls so far */
    char *err;
    size_t errsize;
} tpl_env;

/* A function: 0 with *out, or -1 with env->err set. */
typedef int (*tpl_fn)(tpl_env *env, const tv *args, size_t n, tv *out);

typedef struct tpl_func {
    const char *name;
    tpl_fn fn;
    int min_args, max_args; /* max -1: any */
    int lazy;               /* and, or: arguments evaluated by the caller in turn */
} tpl_func;

const tpl_func *tpl_func_lookup(const char *name);
/* Go's truth: false, 0, "", nil, empty map or list are false. */
int tv_truth(const tv *v);
/* The value as {{ . }} prints it. */
const char *tv_print(tpl_env *env, const tv *v);
int tpl_fail(tpl_env *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Go's fmt.Sprintf for the verbs rule files use. */
const char *tpl_sprintf(tpl_env *env, const char *fmt, const tv *args, size_t n);

#define TPL_MAX_QUERIES 16

#endif
