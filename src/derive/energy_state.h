/* energy_state.h - energy and CO2 totals kept across agent restarts.
 *
 * One JSON file, written atomically (temporary file, fsync, rename, fsync
 * of the folder) and read back at start. A file that does not parse, is not
 * ours, holds impossible values or belongs to another machine is reported
 * and renamed aside (".rejected"), never trusted. */
#ifndef MW_ENERGY_STATE_H
#define MW_ENERGY_STATE_H

#include "energy.h"

#include <jansson.h>
#include <stddef.h>

#define MW_ENERGY_STATE_FILE "energy-state.json"
#define MW_ENERGY_STATE_MAX (32u << 20)

/* Parse a state file's text into e (totals restored only when the whole
 * file is valid). identity names this machine; a file written on another is
 * refused. Returns 0 or -1 with the reason in err. */
int mw_energy_state_parse(mw_energy *e, const char *text, size_t len, const char *identity,
                          char *err, size_t errsize);
/* The file's text for e. Caller frees. */
char *mw_energy_state_dump(const mw_energy *e, const char *identity, int64_t now_ms);

/* Load DIR/energy-state.json: 0 restored, 1 no file, -1 rejected (the file
 * was renamed to DIR/energy-state.json.rejected; err says why). */
int mw_energy_state_load(mw_energy *e, const char *dir, const char *identity, char *err,
                         size_t errsize);
/* Save atomically; creates DIR (0700) when missing. Returns 0 or -errno. */
int mw_energy_state_save(const mw_energy *e, const char *dir, const char *identity, int64_t now_ms);

/* The shared file handling of the state folder's files. Write TEXT to
 * DIR/FILE atomically (creates DIR 0700); 0 or -errno. */
int mw_energy_state_write(const char *dir, const char *file, const char *text);
/* Read DIR/FILE and hand it to parse: 0 parsed, 1 no file, -1 rejected
 * (renamed to FILE.rejected; err says why). */
typedef int (*mw_state_parse_fn)(void *obj, const char *text, size_t len, const char *identity,
                                 char *err, size_t errsize);
int mw_energy_state_read(const char *dir, const char *file, mw_state_parse_fn parse, void *obj,
                         const char *identity, char *err, size_t errsize);

/* A state file's energy or CO2 total: a finite number from 0 to 1e18
 * into *out, else -1 (both state files read totals this way). */
int mw_energy_state_total(const json_t *v, double *out);

/* What a state file must say of itself ("format", "version", "identity"). */
typedef struct mw_state_kind {
    const char *format;   /* e.g. "mlwatch-energy-state" */
    const char *what;     /* "energy": "not an mlwatch energy state file" */
    int oldest, newest;   /* versions read */
    const char *versions; /* "versions 1 and 2": "this agent reads versions 1 and 2" */
    size_t identity_max;  /* longest identity read, bytes */
} mw_state_kind;
/* The root of a state file of that kind written on this machine
 * (identity), its version into *version; NULL with err ("not JSON (line N:
 * ...)", "not an mlwatch WHAT state file", "unsupported version (...)",
 * "written on another machine (...)"). The caller json_decref()s it. */
json_t *mw_energy_state_root(const char *text, size_t len, const mw_state_kind *kind,
                             const char *identity, json_int_t *version, char *err, size_t errsize);

#endif
