/* config.c - settings from flags and YAML, driven by the options tables
 * that their owners register (options.h). Generic: it knows no owner. */
#include "config.h"
#include "log.h"
#include "units.h"
#include "util.h"
#include "yaml_text.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

static int check_listen(const char *v, char *why, size_t n)
{
    char host[256];
    uint16_t port;
    if (mw_parse_listen(v, host, sizeof(host), &port) == 0) return 0;
    snprintf(why, n, "must be ADDR:PORT with a port from 0 to 65535, like :%d or 127.0.0.1:%d",
             MW_DEFAULT_PORT, MW_DEFAULT_PORT);
    return -1;
}

static int check_log_level(const char *v, char *why, size_t n)
{
    mw_log_level l;
    if (mw_log_level_parse(v, &l) == 0) return 0;
    snprintf(why, n, "must be one of debug, info, warn, error");
    return -1;
}

int mw_check_range(const char *v, double lo, double hi, int whole, const char *what, char *why,
                   size_t n)
{
    char *end;
    double d = strtod(v, &end);
    if (end != v && !*end && d >= lo && d <= hi && (!whole || d == floor(d))) return 0;
    snprintf(why, n, "must be %s, got '%s'", what, v);
    return -1;
}

int mw_check_count(const char *v, char *why, size_t n)
{
    return mw_check_range(v, 0, 1e15, 1, "a whole number from 0 to 1e15", why, n);
}

/* The global settings: the fields of mw_config itself. */
#define OPT(n, t, f, d, v, h) MW_OPT(mw_config, n, t, f, d, v, h)
/* clang-format off */
static const mw_option global_rows[] = {
    OPT("root", MW_OPT_PATH, root, "/", NULL, "Host prefix under which /proc, /sys, /var/log/pods and /var/lib/kubelet are read"),
    OPT("listen", MW_OPT_STRING, listen, "127.0.0.1:10230", check_listen, "ADDR:PORT for /metrics and the API (empty ADDR = all interfaces; writes and admin there need token files, docs/security.md)"),
    OPT("interval", MW_OPT_DURATION, interval_ms, "1s", NULL, "Collection interval"),
    OPT("config", MW_OPT_PATH, config_path, "", NULL, "YAML configuration file"),
    OPT("log-level", MW_OPT_STRING, log_level, "info", check_log_level, "debug, info, warn or error"),
    OPT("data-dir", MW_OPT_PATH, data_dir, "/var/lib/mlwatch", NULL, "Folder for everything the agent keeps across restarts (the store; remote-write queues under remote-write/ENDPOINT/; energy, workload and notification state under state/)"),
    OPT("state-dir", MW_OPT_PATH, state_dir, "", NULL, "Deprecated: all state lives under --data-dir (DATA_DIR/state/). An older agent's state files here (energy-state.json, idle-notifications.json) are migrated there once; without it, those in DATA_DIR itself"),
    OPT("node-name", MW_OPT_STRING, node_name, "", NULL, "This node's name: the node label of every series, the pods --kubernetes watches (default: $NODE_NAME, else the host name)"),
    OPT("json", MW_OPT_BOOL, json, "false", NULL, "`mlwatch doctor`, `mlwatch run`, `mlwatch query`: print JSON"),
};
/* clang-format on */
#undef OPT

/* Its "settings" are mw_config itself (see group_base). */
static const mw_option_group global_options = {
    .owner = "global",
    .source = "src/core/config.c",
    .rows = global_rows,
    .nrows = MW_ARRAY_LEN(global_rows),
    .size = 0,
};

void mw_node_name(const mw_config *c, char *out, size_t size)
{
    const char *env = getenv("NODE_NAME");
    if (c->node_name[0])
        mw_strlcpy(out, c->node_name, size);
    else if (env && *env)
        mw_strlcpy(out, env, size);
    else if (gethostname(out, size) != 0 || !out[0])
        mw_strlcpy(out, "unknown", size);
    out[size - 1] = '\0'; /* gethostname may not terminate a truncated name */
}

/* ---- the registry of groups ---- */

#define MAX_GROUPS 64

/* The groups in registration order (the order of `mlwatch help`), and
 * where each one's settings lie in mw_config.settings. */
static const mw_option_group *groups[MAX_GROUPS] = {&global_options};
static size_t slot_offset[MAX_GROUPS];
static size_t ngroups = 1, settings_used;

/* An option row and the group it belongs to. */
typedef struct found_option {
    const mw_option_group *g;
    const mw_option *o;
    size_t index; /* among all rows of all groups, for duplicate keys */
} found_option;

static void yaml_key_of(const mw_option *o, char *out, size_t n)
{
    mw_strlcpy(out, o->name, n);
    for (char *p = out; *p; p++)
        if (*p == '-') *p = '_';
}

static int find_option(const char *name, int yaml, found_option *out)
{
    size_t index = 0;
    for (size_t gi = 0; gi < ngroups; gi++) {
        for (size_t i = 0; i < groups[gi]->nrows; i++, index++) {
            const mw_option *o = &groups[gi]->rows[i];
            char key[64];
            if (yaml)
                yaml_key_of(o, key, sizeof(key));
            else
                mw_strlcpy(key, o->name, sizeof(key));
            if (strcmp(key, name) == 0) {
                *out = (found_option){groups[gi], o, index};
                return 0;
            }
        }
    }
    return -1;
}

static size_t total_rows(void)
{
    size_t n = 0;
    for (size_t gi = 0; gi < ngroups; gi++)
        n += groups[gi]->nrows;
    return n;
}

void mw_config_register_group(const mw_option_group *g)
{
    for (size_t gi = 0; gi < ngroups; gi++)
        if (groups[gi] == g) return;
    found_option f;
    for (size_t i = 0; i < g->nrows; i++)
        if (find_option(g->rows[i].name, 0, &f) == 0) {
            fprintf(stderr, "mlwatch: option --%s of %s is also an option of %s\n", g->rows[i].name,
                    g->owner, f.g->owner);
            abort();
        }
    size_t at = (settings_used + 15) & ~(size_t)15;
    if (ngroups >= MAX_GROUPS || at + g->size > MW_CONFIG_SETTINGS_MAX) {
        fprintf(stderr, "mlwatch: no room for the settings of %s (MW_CONFIG_SETTINGS_MAX)\n",
                g->owner);
        abort();
    }
    slot_offset[ngroups] = at;
    groups[ngroups++] = g;
    settings_used = at + g->size;
}

static char *group_base(mw_config *c, size_t gi)
{
    return gi == 0 ? (char *)c : (char *)c->settings + slot_offset[gi];
}

static size_t group_index(const mw_option_group *g)
{
    for (size_t gi = 0; gi < ngroups; gi++)
        if (groups[gi] == g) return gi;
    fprintf(stderr, "mlwatch: the options of %s were never registered\n", g->owner);
    abort();
}

void *mw_config_group_mut(mw_config *c, const mw_option_group *g)
{
    return group_base(c, group_index(g));
}

const void *mw_config_group(const mw_config *c, const mw_option_group *g)
{
    return mw_config_group_mut((mw_config *)(uintptr_t)c, g);
}

static int set_value(char *base, const mw_option *o, const char *v, int append, char *why,
                     size_t whysize);

void mw_state_dir(const mw_config *c, char *out, size_t size)
{
    size_t n = mw_strlcpy(out, c->data_dir, size);
    if (n < size) mw_strlcpy(out + n, "/state", size - n);
}

int mw_state_dir_make(const mw_config *c)
{
    char dir[PATH_MAX + 8];
    mw_state_dir(c, dir, sizeof(dir));
    if (mkdir(c->data_dir, 0700) < 0 && errno != EEXIST) return -errno;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) return -errno;
    return 0;
}

const char *mw_legacy_state_dir(const mw_config *c)
{
    return c->state_dir[0] ? c->state_dir : c->data_dir;
}

void mw_config_defaults(mw_config *c)
{
    /* Made in a zeroed copy, then assigned sparsely: main()'s configuration
     * is a static whose untouched pages stay off the resident set, and the
     * result is the same bytes (padding included) from dirty memory. */
    mw_config *d = mw_xcalloc(1, sizeof(*d));
    for (size_t gi = 0; gi < ngroups; gi++) {
        char *base = group_base(d, gi);
        if (groups[gi]->defaults) groups[gi]->defaults(base);
        for (size_t i = 0; i < groups[gi]->nrows; i++) {
            const mw_option *o = &groups[gi]->rows[i];
            char why[256];
            if (o->type == MW_OPT_SECTION || !o->def || !o->def[0]) continue;
            if (set_value(base, o, o->def, 0, why, sizeof(why)) < 0) {
                fprintf(stderr, "mlwatch: default of --%s: %s\n", o->name, why);
                abort();
            }
        }
    }
    mw_assign_sparse(c, d, sizeof(*c));
    free(d);
}

int mw_parse_listen(const char *s, char *host, size_t hostsize, uint16_t *port)
{
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':') return -1;
        size_t n = (size_t)(close - s - 1);
        if (n == 0 || n >= hostsize) return -1;
        memcpy(host, s + 1, n);
        host[n] = '\0';
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) return -1;
        size_t n = (size_t)(colon - s);
        if (n >= hostsize || memchr(s, ':', n)) return -1;
        memcpy(host, s, n);
        host[n] = '\0';
    }
    const char *p = colon + 1;
    char *end;
    if (*p < '0' || *p > '9') return -1;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (*end || errno || v < 0 || v > 65535) return -1; /* 0: the kernel picks */
    *port = (uint16_t)v;
    return 0;
}

/* Set one scalar value (or one list element when append is set). */
static int set_value(char *base, const mw_option *o, const char *v, int append, char *why,
                     size_t whysize)
{
    char *field = base + o->offset;
    if (o->validate && o->type != MW_OPT_LIST && o->validate(v, why, whysize) < 0) return -1;
    switch (o->type) {
    case MW_OPT_STRING:
    case MW_OPT_PATH:
        if (o->repeat && append && field[0]) {
            size_t have = strlen(field);
            if (strchr(v, '\n') || have + 1 + strlen(v) >= o->size) {
                snprintf(why, whysize, "values are longer than %zu characters in all", o->size - 1);
                return -1;
            }
            field[have] = '\n';
            memcpy(field + have + 1, v, strlen(v) + 1);
            return 0;
        }
        if (strchr(v, '\n') && o->repeat) {
            snprintf(why, whysize, "value contains a newline");
            return -1;
        }
        if (strlen(v) >= o->size) {
            snprintf(why, whysize, "value is longer than %zu characters", o->size - 1);
            return -1;
        }
        mw_strlcpy(field, v, o->size);
        return 0;
    case MW_OPT_DURATION: {
        int64_t ms;
        if (mw_parse_duration_ms(v, &ms) < 0 || ms <= 0) {
            snprintf(why, whysize, "invalid duration '%s' (examples: 1s, 500ms, 1m30s)", v);
            return -1;
        }
        *(int64_t *)(void *)field = ms;
        return 0;
    }
    case MW_OPT_BOOL:
        if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
            *(int *)(void *)field = 1;
        else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
            *(int *)(void *)field = 0;
        else {
            snprintf(why, whysize, "must be true or false, got '%s'", v);
            return -1;
        }
        return 0;
    case MW_OPT_NUMBER: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (!*v || *end || errno || d != d) {
            snprintf(why, whysize, "must be a number, got '%s'", v);
            return -1;
        }
        *(double *)(void *)field = d;
        return 0;
    }
    case MW_OPT_SIZE: {
        uint64_t bytes;
        if (mw_parse_size(v, &bytes) < 0) {
            snprintf(why, whysize, "invalid size '%s' (examples: 512MiB, 1GB, 4096)", v);
            return -1;
        }
        *(uint64_t *)(void *)field = bytes;
        return 0;
    }
    case MW_OPT_SECTION:
        snprintf(why, whysize, "can only be set in the config file");
        return -1;
    case MW_OPT_LIST: {
        size_t *count = (size_t *)(void *)(base + o->count_offset);
        size_t elem = 32, cap = o->size / elem;
        if (!append) *count = 0;
        /* A flag value is comma-separated; a YAML sequence gives one item at a
         * time. An empty value (not an empty sequence item) means the default. */
        const char *p = v;
        if (!*p && !append) return 0;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char item[64];
            if (n == 0 || n >= elem) {
                snprintf(why, whysize, "invalid list item '%.*s'", (int)(n < 60 ? n : 60), p);
                return -1;
            }
            memcpy(item, p, n);
            item[n] = '\0';
            if (o->validate && o->validate(item, why, whysize) < 0) return -1;
            if (*count >= cap) {
                snprintf(why, whysize, "more than %zu items", cap);
                return -1;
            }
            mw_strlcpy(field + *count * elem, item, elem);
            (*count)++;
            p += n;
            if (*p != ',') return 0;
            p++; /* a trailing comma leaves an empty item: refused above */
        }
    }
    }
    return -1;
}

/* Errors are one line: a key, a value or an argument with a newline or other
 * control character in it must not break the message (or forge a log line). */
static int one_line(char *err)
{
    for (unsigned char *p = (unsigned char *)err; *p; p++)
        if (*p < 0x20 || *p == 0x7f) *p = '?';
    return -1;
}

/* ---- YAML ---- */

static int yaml_fail(char *err, size_t errsize, const char *name, const yaml_mark_t *m,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int yaml_fail(char *err, size_t errsize, const char *name, const yaml_mark_t *m,
                     const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(err, errsize, "%s:%zu:%zu: %s", name, m->line + 1, m->column + 1, msg);
    return -1;
}

/* The scalar's text, or NULL when it holds a NUL ("\0" escape), which C
 * strings would silently cut. */
static const char *scalar_text(const yaml_node_t *n)
{
    const char *t = (const char *)n->data.scalar.value;
    return strlen(t) == n->data.scalar.length ? t : NULL;
}

int mw_section_fail(char *err, size_t errsize, const char *file, const char *section,
                    const void *node, const char *fmt, ...)
{
    const yaml_node_t *n = node;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(err, errsize, "%s:%zu:%zu: %s: %s", file, n->start_mark.line + 1,
             n->start_mark.column + 1, section, msg);
    return -1;
}

const char *mw_section_text(const void *node)
{
    const yaml_node_t *n = node;
    return n && n->type == YAML_SCALAR_NODE ? scalar_text(n) : NULL;
}

static int is_empty_document(yaml_document_t *doc)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    return !root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0);
}

static int load_mapping(mw_config *c, const char *name, yaml_document_t *doc, yaml_node_t *root,
                        size_t *seen_line, char *err, size_t errsize);

static int load_document(mw_config *c, const char *name, yaml_document_t *doc, char *err,
                         size_t errsize)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (is_empty_document(doc)) return 0; /* empty file: all defaults */
    /* 1-based line of each key, 0 = unseen */
    size_t *seen_line = mw_xcalloc(total_rows(), sizeof(*seen_line));
    int rc = load_mapping(c, name, doc, root, seen_line, err, errsize);
    free(seen_line);
    return rc;
}

static int load_mapping(mw_config *c, const char *name, yaml_document_t *doc, yaml_node_t *root,
                        size_t *seen_line, char *err, size_t errsize)
{
    if (root->type != YAML_MAPPING_NODE)
        return yaml_fail(err, errsize, name, &root->start_mark,
                         "the top level must be a mapping of settings (key: value)");
    for (yaml_node_pair_t *pair = root->data.mapping.pairs.start;
         pair < root->data.mapping.pairs.top; pair++) {
        yaml_node_t *k = yaml_document_get_node(doc, pair->key);
        yaml_node_t *v = yaml_document_get_node(doc, pair->value);
        if (!k || !v) continue;
        if (k->type != YAML_SCALAR_NODE)
            return yaml_fail(err, errsize, name, &k->start_mark, "keys must be plain names");
        const char *key = scalar_text(k);
        if (!key) return yaml_fail(err, errsize, name, &k->start_mark, "keys must be plain names");
        found_option f;
        if (find_option(key, 1, &f) < 0 || strcmp(f.o->name, "config") == 0)
            return yaml_fail(err, errsize, name, &k->start_mark, "unknown key '%s'", key);
        const mw_option *o = f.o;
        char *base = group_base(c, group_index(f.g));
        size_t idx = f.index;
        if (seen_line[idx])
            return yaml_fail(err, errsize, name, &k->start_mark,
                             "duplicate key '%s' (first set on line %zu)", key, seen_line[idx]);
        seen_line[idx] = k->start_mark.line + 1;
        char why[256];
        if (o->type == MW_OPT_SECTION || (o->section && v->type != YAML_SCALAR_NODE)) {
            if (o->section(base, name, doc, v, err, errsize) < 0) return -1;
            continue;
        }
        if (o->repeat && v->type == YAML_SEQUENCE_NODE) {
            base[o->offset] = '\0';
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *item = yaml_document_get_node(doc, *it);
                if (!item || item->type != YAML_SCALAR_NODE || !scalar_text(item))
                    return yaml_fail(err, errsize, name, item ? &item->start_mark : &v->start_mark,
                                     "%s: list items must be paths", key);
                if (set_value(base, o, scalar_text(item), 1, why, sizeof(why)) < 0)
                    return yaml_fail(err, errsize, name, &item->start_mark, "%s: %s", key, why);
            }
            continue;
        }
        if (o->type == MW_OPT_LIST) {
            size_t *count = (size_t *)(void *)(base + o->count_offset);
            *count = 0;
            if (v->type == YAML_SCALAR_NODE) {
                if (!scalar_text(v))
                    return yaml_fail(err, errsize, name, &v->start_mark,
                                     "%s: value contains a NUL character", key);
                if (set_value(base, o, scalar_text(v), 0, why, sizeof(why)) < 0)
                    return yaml_fail(err, errsize, name, &v->start_mark, "%s: %s", key, why);
            } else if (v->type == YAML_SEQUENCE_NODE) {
                for (yaml_node_item_t *it = v->data.sequence.items.start;
                     it < v->data.sequence.items.top; it++) {
                    yaml_node_t *item = yaml_document_get_node(doc, *it);
                    if (!item || item->type != YAML_SCALAR_NODE)
                        return yaml_fail(err, errsize, name,
                                         item ? &item->start_mark : &v->start_mark,
                                         "%s: list items must be names", key);
                    if (!scalar_text(item))
                        return yaml_fail(err, errsize, name, &item->start_mark,
                                         "%s: value contains a NUL character", key);
                    if (set_value(base, o, scalar_text(item), 1, why, sizeof(why)) < 0)
                        return yaml_fail(err, errsize, name, &item->start_mark, "%s: %s", key, why);
                }
            } else {
                return yaml_fail(err, errsize, name, &v->start_mark, "%s: expected a list of names",
                                 key);
            }
            continue;
        }
        if (v->type != YAML_SCALAR_NODE)
            return yaml_fail(err, errsize, name, &v->start_mark,
                             "%s: expected a single value, got a %s", key,
                             v->type == YAML_MAPPING_NODE ? "mapping" : "list");
        if (!scalar_text(v))
            return yaml_fail(err, errsize, name, &v->start_mark,
                             "%s: value contains a NUL character", key);
        if (set_value(base, o, scalar_text(v), 0, why, sizeof(why)) < 0)
            return yaml_fail(err, errsize, name, &v->start_mark, "%s: %s", key, why);
    }
    return 0;
}

int mw_config_load_string(mw_config *c, const char *name, const char *text, size_t len, char *err,
                          size_t errsize)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (mw_yaml_begin(&parser, &doc, name, text, len, err, errsize) < 0) return one_line(err);
    /* Settings land in a copy: a file with an error changes nothing. */
    mw_config *tmp = mw_xmalloc(sizeof(*tmp));
    *tmp = *c;
    int rc = load_document(tmp, name, &doc, err, errsize);
    int had_root = yaml_document_get_root_node(&doc) != NULL;
    yaml_document_delete(&doc);
    /* One document per file: a second one ("---") would otherwise be ignored
     * without a word, syntax errors and all. */
    if (rc == 0 && had_root) {
        if (mw_yaml_next(&parser, &doc, name, err, errsize) < 0) {
            rc = -1;
        } else {
            if (!is_empty_document(&doc))
                rc = yaml_fail(err, errsize, name, &yaml_document_get_root_node(&doc)->start_mark,
                               "a second YAML document; the file must hold one mapping");
            yaml_document_delete(&doc);
        }
    }
    if (rc == 0) mw_assign_sparse(c, tmp, sizeof(*c));
    free(tmp);
    yaml_parser_delete(&parser);
    return rc == 0 ? 0 : one_line(err);
}

int mw_config_load_file(mw_config *c, const char *path, char *err, size_t errsize)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsize, "%s: cannot open config file: %s", path, strerror(errno));
        return one_line(err);
    }
    /* A configuration file is small; refuse anything absurd rather than read it. */
    char *text = mw_xmalloc(1 << 20);
    size_t len = fread(text, 1, 1 << 20, f);
    int toolong = len == (1 << 20);
    int rerr = ferror(f);
    fclose(f);
    if (rerr || toolong) {
        snprintf(err, errsize, "%s: %s", path,
                 rerr ? "cannot read config file" : "config file is larger than 1 MiB");
        free(text);
        return one_line(err);
    }
    int rc = mw_config_load_string(c, path, text, len, err, errsize);
    free(text);
    return rc;
}

/* ---- flags ---- */

static int from_args(mw_config *c, int argc, char **argv, int first, char **rest, size_t *nrest,
                     size_t rest_cap, char *err, size_t errsize)
{
    if (nrest) *nrest = 0;
    const mw_option *repeated[16]; /* repeatable flags seen so far */
    size_t nrepeated = 0;
    /* Pass 1: find --config so that the file is applied before other flags. */
    const char *config = NULL;
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        const char *a = argv[i];
        if (strncmp(a, "--config=", 9) == 0 || strcmp(a, "--config") == 0) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[i + 1] : NULL);
            if (!v || !*v) {
                snprintf(err, errsize, "--config: missing value");
                return -1;
            }
            /* Loading both would merge them silently; keeping one would drop
             * the other silently. Neither is what the user can expect. */
            if (config) {
                snprintf(err, errsize, "--config: given more than once");
                return -1;
            }
            config = v;
            if (a[8] != '=') i++; /* the value is not a flag */
        }
    }
    if (config) {
        if (mw_config_load_file(c, config, err, errsize) < 0) return -1;
        mw_strlcpy(c->config_path, config, sizeof(c->config_path));
    }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            for (i++; i < argc; i++) {
                if (!rest || *nrest >= rest_cap) {
                    snprintf(err, errsize, "unexpected argument '%s'", argv[i]);
                    return -1;
                }
                rest[(*nrest)++] = argv[i];
            }
            break;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (!rest || *nrest >= rest_cap) {
                snprintf(err, errsize, "unexpected argument '%s'", a);
                return -1;
            }
            rest[(*nrest)++] = argv[i];
            continue;
        }
        char name[64];
        const char *eq = strchr(a + 2, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof(name)) n = sizeof(name) - 1;
        memcpy(name, a + 2, n);
        name[n] = '\0';
        found_option f;
        if (find_option(name, 0, &f) < 0 || f.o->type == MW_OPT_SECTION) {
            snprintf(err, errsize, "unknown flag '--%s' (see `mlwatch help`)", name);
            return -1;
        }
        const mw_option *o = f.o;
        const char *v;
        if (eq)
            v = eq + 1;
        else if (o->type == MW_OPT_BOOL)
            v = "true"; /* a bare boolean flag switches it on */
        else if (i + 1 < argc)
            v = argv[++i];
        else {
            snprintf(err, errsize, "--%s: missing value", name);
            return -1;
        }
        if (strcmp(o->name, "config") == 0) continue; /* handled in pass 1 */
        char why[256];
        /* A repeatable flag's first use replaces what the file set. */
        int again = 0;
        if (o->repeat) {
            for (size_t k = 0; k < nrepeated; k++)
                if (repeated[k] == o) again = 1;
            if (!again && nrepeated < MW_ARRAY_LEN(repeated)) repeated[nrepeated++] = o;
        }
        if (set_value(group_base(c, group_index(f.g)), o, v, again, why, sizeof(why)) < 0) {
            snprintf(err, errsize, "--%s: %s", name, why);
            return -1;
        }
    }
    return 0;
}

int mw_config_from_args(mw_config *c, int argc, char **argv, int first, char **rest, size_t *nrest,
                        size_t rest_cap, char *err, size_t errsize)
{
    if (from_args(c, argc, argv, first, rest, nrest, rest_cap, err, errsize) < 0)
        return one_line(err);
    return 0;
}

int mw_config_format_value(const mw_config *c, const char *name, char *out, size_t outsize)
{
    found_option f;
    if (find_option(name, 0, &f) < 0 || f.o->type == MW_OPT_SECTION) return -1;
    const char *field = (const char *)mw_config_group(c, f.g) + f.o->offset;
    switch (f.o->type) {
    case MW_OPT_STRING:
    case MW_OPT_PATH:
        mw_strlcpy(out, field, outsize);
        return 0;
    case MW_OPT_DURATION:
        snprintf(out, outsize, "%lld", (long long)*(const int64_t *)(const void *)field);
        return 0;
    case MW_OPT_NUMBER:
        snprintf(out, outsize, "%.17g", *(const double *)(const void *)field);
        return 0;
    case MW_OPT_SIZE:
        snprintf(out, outsize, "%llu", (unsigned long long)*(const uint64_t *)(const void *)field);
        return 0;
    case MW_OPT_BOOL:
        mw_strlcpy(out, *(const int *)(const void *)field ? "true" : "false", outsize);
        return 0;
    case MW_OPT_LIST: {
        size_t count = *(const size_t *)(const void *)((const char *)mw_config_group(c, f.g) +
                                                       f.o->count_offset);
        out[0] = '\0';
        for (size_t i = 0; i < count; i++) {
            size_t len = strlen(out);
            snprintf(out + len, outsize - len, "%s%s", i ? "," : "", field + i * 32);
        }
        return 0;
    }
    case MW_OPT_SECTION:
        break;
    }
    return -1;
}

/* The default as documented, or "" when there is none. */
static const char *shown_default(const mw_option *o)
{
    const char *d = o->shown ? o->shown : o->def;
    return d ? d : "";
}

void mw_config_print_help(FILE *out)
{
    mw_config_print_help_for(out, NULL);
}

/* An option whose help names commands ("`mlwatch doctor`: ...") is theirs;
 * any other applies to every command. */
static int option_applies(const mw_option *o, const char *command)
{
    if (!command || strncmp(o->help, "`mlwatch ", 9) != 0) return 1;
    char tag[64];
    snprintf(tag, sizeof(tag), "`mlwatch %s`", command);
    const char *colon = strchr(o->help, ':');
    const char *at = strstr(o->help, tag);
    return at && (!colon || at < colon);
}

void mw_config_print_help_for(FILE *out, const char *command)
{
    for (size_t gi = 0; gi < ngroups; gi++) {
        int header = 0;
        for (size_t i = 0; i < groups[gi]->nrows; i++) {
            const mw_option *o = &groups[gi]->rows[i];
            if (o->type == MW_OPT_SECTION) continue; /* config-file only: docs/configuration.md */
            if (!option_applies(o, command)) continue;
            if (!header++) fprintf(out, "  %s (%s):\n", groups[gi]->owner, groups[gi]->source);
            char flag[80];
            snprintf(flag, sizeof(flag), "--%s %s", o->name,
                     o->type == MW_OPT_DURATION ? "DURATION"
                     : o->type == MW_OPT_LIST   ? "LIST"
                     : o->type == MW_OPT_PATH   ? "PATH"
                     : o->type == MW_OPT_BOOL   ? "[=BOOL]"
                     : o->type == MW_OPT_NUMBER ? "NUMBER"
                     : o->type == MW_OPT_SIZE   ? "SIZE"
                                                : "VALUE");
            const char *d = shown_default(o);
            fprintf(out, "  %-30s %s (default: %s)\n", flag, o->help, d[0] ? d : "none");
        }
    }
}

void mw_config_print_markdown(FILE *out)
{
    fprintf(out, "| flag | YAML key | default | meaning |\n|---|---|---|---|\n");
    for (size_t gi = 0; gi < ngroups; gi++) {
        for (size_t i = 0; i < groups[gi]->nrows; i++) {
            const mw_option *o = &groups[gi]->rows[i];
            char key[64];
            yaml_key_of(o, key, sizeof(key));
            char keycell[80], defcell[80];
            if (strcmp(o->name, "config") == 0)
                mw_strlcpy(keycell, "(flag only)", sizeof(keycell));
            else
                snprintf(keycell, sizeof(keycell), "`%s`", key);
            /* An empty code span (``) would show as two backticks. */
            const char *d = shown_default(o);
            if (d[0])
                snprintf(defcell, sizeof(defcell), "`%s`", d);
            else
                mw_strlcpy(defcell, "none", sizeof(defcell));
            char flagcell[80];
            if (o->type == MW_OPT_SECTION)
                mw_strlcpy(flagcell, "(config file only)", sizeof(flagcell));
            else
                snprintf(flagcell, sizeof(flagcell), "`--%s`", o->name);
            fprintf(out, "| %s | %s | %s | %s |\n", flagcell, keycell, defcell, o->help);
        }
    }
}
