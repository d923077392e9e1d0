/* relabel.h - Prometheus write_relabel_configs for the remote-write shipper.
 *
 * Semantics follow Prometheus's relabel package (2.42): actions replace
 * (default), keep, drop, hashmod, labelmap, labeldrop, labelkeep; defaults
 * separator ";", regex "(.*)", replacement "$1"; the regex is fully anchored;
 * $1, ${1} and $$ in target_label and replacement expand like Go's
 * regexp.Expand (so "$1_x" names group "1_x", which is empty, exactly as in
 * Prometheus); an empty replacement result deletes the target label; hashmod
 * is the last 8 bytes of the MD5 of the joined value, big-endian, modulo.
 *
 * Regexes are RE2 (core/regex.h), anchored with "." matching newlines as
 * Prometheus 3 compiles them ("^(?s:" + regex + ")$"); named groups expand
 * by name. */
#ifndef MW_RELABEL_H
#define MW_RELABEL_H

#include "../core/arena.h"
#include "../core/regex.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    MW_RL_REPLACE,
    MW_RL_KEEP,
    MW_RL_DROP,
    MW_RL_HASHMOD,
    MW_RL_LABELMAP,
    MW_RL_LABELDROP,
    MW_RL_LABELKEEP,
} mw_relabel_action;

#define MW_RL_MAX_SOURCES 16
#define MW_RL_MAX_RULES 64
#define MW_RL_MAX_TEXT 1024 /* regex, replacement, label names, separator */

typedef struct mw_relabel_rule {
    mw_relabel_action action;
    char *source_labels[MW_RL_MAX_SOURCES];
    size_t nsource;
    char *separator;
    char *regex; /* as written, for messages */
    char *target_label;
    char *replacement;
    uint64_t modulus;
    mw_regex *re;
} mw_relabel_rule;

typedef struct mw_relabel {
    mw_relabel_rule *rules;
    size_t n;
} mw_relabel;

/* One label of a series being relabelled; strings are borrowed (from the
 * snapshot) or live in the caller's scratch arena. */
typedef struct mw_rl_label {
    const char *name;
    const char *value;
} mw_rl_label;

#define MW_RL_MAX_LABELS 64

typedef struct mw_rl_labels {
    mw_rl_label l[MW_RL_MAX_LABELS];
    size_t n;
} mw_rl_labels;

/* Add one rule. Strings may be NULL for the default; action NULL = replace;
 * modulus 0 = unset. Returns 0 or -1 with the reason in why. */
typedef struct mw_relabel_spec {
    const char *action;
    const char *const *source_labels;
    size_t nsource;
    const char *separator;
    const char *regex;
    const char *target_label;
    const char *replacement;
    uint64_t modulus;
} mw_relabel_spec;

int mw_relabel_add(mw_relabel *r, const mw_relabel_spec *spec, char *why, size_t whysize);
/* dst = the rules of src, compiled again (dst owns its own). Returns 0, or
 * -1 with the reason in why (only when out of memory for a regex). */
int mw_relabel_copy(mw_relabel *dst, const mw_relabel *src, char *why, size_t whysize);
void mw_relabel_free(mw_relabel *r);

/* Apply the rules to ls in place. New strings go into scratch. Returns 1 to
 * keep the series, 0 when it is dropped (by keep/drop, or an empty result). */
int mw_relabel_apply(const mw_relabel *r, mw_rl_labels *ls, mw_arena *scratch);

/* Helpers on label sets. */
const char *mw_rl_get(const mw_rl_labels *ls, const char *name);
/* Returns 0, or -1 when the set is full (MW_RL_MAX_LABELS). */
int mw_rl_set(mw_rl_labels *ls, const char *name, const char *value);
void mw_rl_del(mw_rl_labels *ls, const char *name);
void mw_rl_sort(mw_rl_labels *ls);
/* A valid Prometheus label name: [a-zA-Z_][a-zA-Z0-9_]*. */
int mw_rl_valid_name(const char *s);

/* The hashmod value Prometheus computes for val (exposed for tests). */
uint64_t mw_relabel_hashmod(const char *val, uint64_t modulus);

#endif
