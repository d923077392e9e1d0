/* options.h - how a part of mlwatch declares its own settings.
 *
 * Each owner (a collector, a module, a notification receiver, a command)
 * keeps its settings in a struct of its own and describes them in a table
 * of mw_option rows next to its code:
 *
 *   typedef struct { int64_t retention_ms; } mw_store_settings;
 *   static const mw_option rows[] = {
 *       MW_OPT(mw_store_settings, "retention", MW_OPT_DURATION, retention_ms, "15d", NULL,
 *              "How long the store keeps samples"),
 *   };
 *   const mw_option_group mw_store_options = MW_OPTION_GROUP(
 *       "store", "src/store/store_module.c", mw_store_settings, rows, NULL);
 *
 * The collector, module or receiver points at its group (.options), the
 * agent's wiring registers every group (mw_config_register_group), and
 * core/config.c parses flags and YAML against all of them, prints
 * `mlwatch help` and docs/configuration.md. The owner reads its settings with
 * mw_config_group(cfg, &mw_store_options). Core knows no owner. */
#ifndef MW_OPTIONS_H
#define MW_OPTIONS_H

#include <stddef.h>

typedef enum {
    MW_OPT_STRING,
    MW_OPT_PATH,
    MW_OPT_DURATION, /* int64_t milliseconds, > 0 */
    MW_OPT_LIST,     /* char[N][32] with a size_t count */
    MW_OPT_BOOL,     /* int 0/1; a flag without "=VALUE" means true */
    MW_OPT_NUMBER,   /* double */
    MW_OPT_SIZE,     /* uint64_t bytes ("512MiB") */
    MW_OPT_SECTION,  /* YAML-only nested settings, parsed by the row's section() */
} mw_option_type;

/* Parse a YAML node (a yaml_node_t * of document doc, a yaml_document_t *)
 * into the owner's settings; on error write "FILE:LINE:COL: problem" into
 * err and return -1. */
typedef int (*mw_option_section_fn)(void *settings, const char *file, void *doc, void *node,
                                    char *err, size_t errsize);

/* For section parsers: write "FILE:LINE:COL: SECTION: message" for node (a
 * yaml_node_t *) into err; returns -1. */
int mw_section_fail(char *err, size_t errsize, const char *file, const char *section,
                    const void *node, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The text of node (a yaml_node_t *, may be NULL), or NULL when it is not a
 * scalar or holds a NUL ("\0" escape), which C strings would silently cut. */
const char *mw_section_text(const void *node);

typedef struct mw_option {
    const char *name; /* flag "--name"; YAML key is name with '-' as '_' */
    mw_option_type type;
    size_t offset, size; /* field in the owner's settings; for lists the array */
    size_t count_offset; /* MW_OPT_LIST: its size_t count */
    /* The default, parsed like a flag's value when the settings are made;
     * "" (or NULL) leaves the field zero/empty. */
    const char *def;
    /* The default as documented when it is not def itself ("auto", "all",
     * "see docs/doctor.md"); NULL: def. */
    const char *shown;
    const char *help;
    /* Extra validation; writes the reason into why. */
    int (*validate)(const char *value, char *why, size_t whysize);
    /* MW_OPT_SECTION (or a scalar row whose YAML value may also be a list or
     * mapping, such as remote_write): parses the node. */
    mw_option_section_fn section;
    /* MW_OPT_PATH only: the flag may be repeated and the YAML value may be a
     * list; the values are kept one per line ("a\nb"). A command line's first
     * use replaces the default and the file's value, later ones add a line. */
    int repeat;
} mw_option;

typedef struct mw_option_group {
    const char *owner;  /* what the settings are for, in `mlwatch help` */
    const char *source; /* the owner's file, for the docs */
    const mw_option *rows;
    size_t nrows;
    size_t size; /* of the owner's settings struct */
    /* Optional: defaults of a section's inner keys (which have no rows of
     * their own); runs before the rows' defaults. */
    void (*defaults)(void *settings);
} mw_option_group;

#define MW_OPT(T, n, t, f, d, v, h)                                                                \
    {                                                                                              \
        .name = n, .type = t, .offset = offsetof(T, f), .size = sizeof(((T *)0)->f), .def = d,     \
        .help = h, .validate = v                                                                   \
    }
/* A row whose documented default differs from the value it starts with. */
#define MW_OPT_SHOWN(T, n, t, f, d, shown_, v, h)                                                  \
    {                                                                                              \
        .name = n, .type = t, .offset = offsetof(T, f), .size = sizeof(((T *)0)->f), .def = d,     \
        .shown = shown_, .help = h, .validate = v                                                  \
    }
#define MW_OPT_LIST_OF(T, n, f, cnt, shown_, v, h)                                                 \
    {                                                                                              \
        .name = n, .type = MW_OPT_LIST, .offset = offsetof(T, f), .size = sizeof(((T *)0)->f),     \
        .count_offset = offsetof(T, cnt), .def = "", .shown = shown_, .help = h, .validate = v     \
    }
#define MW_OPT_SECTION_OF(n, shown_, fn, h)                                                        \
    {                                                                                              \
        .name = n, .type = MW_OPT_SECTION, .shown = shown_, .help = h, .section = fn               \
    }
#define MW_OPTION_GROUP(owner_, source_, T, rows_, defaults_)                                      \
    {                                                                                              \
        .owner = owner_, .source = source_, .rows = rows_,                                         \
        .nrows = sizeof(rows_) / sizeof((rows_)[0]), .size = sizeof(T), .defaults = defaults_      \
    }

#endif
