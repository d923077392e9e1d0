/* config.h - the agent's settings, from flags and a YAML file.
 *
 * Every setting is a row of its owner's options table (options.h): its flag,
 * its YAML key, its type, its default and its help text. Flags and the file
 * are parsed against every registered table, `mlwatch help` prints them, and
 * docs/configuration.md documents them, so a flag can never lack a config
 * key. Flags override the file. Every error is one line naming the problem
 * and where it is. */
#ifndef MW_CONFIG_H
#define MW_CONFIG_H

#include <limits.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"

#define MW_DEFAULT_PORT 10230
#define MW_MAX_LIST 64

/* Room for every owner's settings, one slot each (see mw_config_group). */
#define MW_CONFIG_SETTINGS_MAX (160 * 1024)

/* The global settings, shared by every part; each owner's own settings lie
 * in settings[], one flat copyable value for all, so that a copy of the
 * configuration (a file loaded into a scratch copy, a test's variant) is an
 * assignment. Mostly zero: main()'s is a static whose untouched pages stay
 * off the resident set. */
typedef struct mw_config {
    char root[PATH_MAX];
    char listen[256];
    int64_t interval_ms;
    char config_path[PATH_MAX];
    char log_level[16];
    /* Data kept across restarts: the store, the remote-write queues. */
    char data_dir[PATH_MAX];
    /* Deprecated (--state-dir): where an older agent kept its state files,
     * read once to migrate them under DATA_DIR/state ("" = not given). */
    char state_dir[PATH_MAX];
    /* This node's name, for the Kubernetes watch and the notifications
     * ("" = $NODE_NAME, else the host name). */
    char node_name[256];
    /* JSON output of the one-shot commands (doctor, query, run). */
    int json;
    _Alignas(16) unsigned char settings[MW_CONFIG_SETTINGS_MAX];
} mw_config;

/* Register an owner's options (idempotent; before any mw_config_defaults).
 * Aborts on a name already taken or when settings[] is full: both are
 * mistakes in the code, found by the first test that runs. */
void mw_config_register_group(const mw_option_group *g);
/* The owner's settings in c; aborts when g was never registered. */
const void *mw_config_group(const mw_config *c, const mw_option_group *g);
void *mw_config_group_mut(mw_config *c, const mw_option_group *g);

/* The agent's one state folder, DATA_DIR/state: every state file (energy
 * and workload totals, notifications sent) lives there, so that two agents
 * with different --data-dir share nothing. */
void mw_state_dir(const mw_config *c, char *out, size_t size);
/* Create DATA_DIR and DATA_DIR/state (mode 0700): 0, or -errno. */
int mw_state_dir_make(const mw_config *c);
/* Where an older agent kept a state file: --state-dir when given, else
 * DATA_DIR itself (the old default of both was /var/lib/mlwatch). */
const char *mw_legacy_state_dir(const mw_config *c);

/* The body of a validator for a number from lo to hi (whole: an integer
 * only): 0, or -1 with why = "must be WHAT, got 'V'", where what names
 * the range ("a whole number from 1 to 64"). */
int mw_check_range(const char *v, double lo, double hi, int whole, const char *what, char *why,
                   size_t whysize);
/* A validator for rows that take a whole count (series, bytes, samples):
 * a whole number from 0 (no limit) to 1e15. */
int mw_check_count(const char *v, char *why, size_t whysize);

void mw_config_defaults(mw_config *c);

/* This node's name: --node-name, else $NODE_NAME, else the host name
 * (else "unknown"). The `node` label of every series the agent produces. */
void mw_node_name(const mw_config *c, char *out, size_t size);

/* Parse argv[first..argc) as flags. Non-flag arguments are collected into
 * rest (argv pointers) when rest is given, else they are errors; "--" ends
 * the flags and everything after it goes to rest. A --config flag is loaded
 * before the other flags are applied, so flags win. On error writes one line
 * to err and returns -1. */
int mw_config_from_args(mw_config *c, int argc, char **argv, int first, char **rest, size_t *nrest,
                        size_t rest_cap, char *err, size_t errsize);

/* Load a YAML file into c. Returns 0, or -1 with "FILE:LINE:COL: problem". */
int mw_config_load_file(mw_config *c, const char *path, char *err, size_t errsize);
/* Same, from a string (the name is used in messages); for tests and fuzzing. */
int mw_config_load_string(mw_config *c, const char *name, const char *yaml, size_t len, char *err,
                          size_t errsize);

/* Split "ADDR:PORT" ("[::1]:10230", ":10230", "0.0.0.0:1"); host may be
 * empty (all interfaces). Returns 0 or -1. */
int mw_parse_listen(const char *s, char *host, size_t hostsize, uint16_t *port);

/* The current value of the option named NAME (its flag name) as text:
 * strings as they are, durations in milliseconds ("1500"), numbers with
 * %.17g, sizes in bytes, booleans true/false, lists joined with ','.
 * Returns 0, or -1 for an unknown name or a config-file section. For
 * tests, and for owners whose settings are private to one file. */
int mw_config_format_value(const mw_config *c, const char *name, char *out, size_t outsize);

/* Print every group's options (for `mlwatch help`). */
void mw_config_print_help(FILE *out);
/* The flags that apply to one command: its own (their help names it) and
 * those of no command in particular. */
void mw_config_print_help_for(FILE *out, const char *command);
/* Print every group's options as one Markdown table (docs/configuration.md). */
void mw_config_print_markdown(FILE *out);

#endif
