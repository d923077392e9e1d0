/* config.h - the agent's settings, from flags and a YAML file.
 *
 * One table (config.c: options[]) names every setting once: its flag, its
 * YAML key, its type, its default and its help text. Flags and the file are
 * parsed from that table, `mlwatch help` prints it, and docs/configuration.md
 * documents it, so a flag can never lack a config key. Flags override the
 * file. Every error is one line naming the problem and where it is. */
#ifndef MW_CONFIG_H
#define MW_CONFIG_H

#include <limits.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#define MW_DEFAULT_PORT 10230
#define MW_MAX_LIST 64

typedef struct mw_config {
    char root[PATH_MAX];
    char listen[256];
    int64_t interval_ms;
    char config_path[PATH_MAX];
    char log_level[16];
    char format[32]; /* `mlwatch metrics`: text or openmetrics */
    /* Enabled collectors; empty = all. */
    char collectors[MW_MAX_LIST][32];
    size_t ncollectors;
    /* Collectors switched off; applied after `collectors`. */
    char disable_collectors[MW_MAX_LIST][32];
    size_t ndisable_collectors;
    /* GPU libraries (dlopen'ed; "none" switches one off) and the interval of
     * slow GPU calls (process lists, MIG, ECC, NVLink). */
    char nvml_library[PATH_MAX];
    char rocm_library[PATH_MAX];
    int64_t gpu_process_interval_ms;
} mw_config;

void mw_config_defaults(mw_config *c);

/* Parse argv[first..argc) as flags. Non-flag arguments are collected into
 * rest (argv pointers) when rest is given, else they are errors; "--" ends
 * the flags and everything after it goes to rest. A --config flag is loaded
 * before the other flags are applied, so flags win. On error writes one line
 * to err and returns -1. */
int mw_config_from_args(mw_config *c, int argc, char **argv, int first, char **rest,
                        size_t *nrest, size_t rest_cap, char *err, size_t errsize);

/* Load a YAML file into c. Returns 0, or -1 with "FILE:LINE:COL: problem". */
int mw_config_load_file(mw_config *c, const char *path, char *err, size_t errsize);
/* Same, from a string (the name is used in messages); for tests and fuzzing. */
int mw_config_load_string(mw_config *c, const char *name, const char *yaml, size_t len, char *err,
                          size_t errsize);

/* Split "ADDR:PORT" ("[::1]:10230", ":10230", "0.0.0.0:1"); host may be
 * empty (all interfaces). Returns 0 or -1. */
int mw_parse_listen(const char *s, char *host, size_t hostsize, uint16_t *port);

/* Print the options table (for `mlwatch help`). */
void mw_config_print_help(FILE *out);
/* Print the options table as a Markdown table (docs/configuration.md). */
void mw_config_print_markdown(FILE *out);

/* Hook for validating collector names, set by the collector registry. */
extern int (*mw_config_collector_exists)(const char *name);

#endif
