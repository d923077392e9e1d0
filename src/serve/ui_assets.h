/* ui_assets.h - the web UI's files, embedded at build time.
 *
 * ui/embed.c generates the table (BUILD/ui/ui_assets.c) from the files in ui/src,
 * ui/dashboards.json and uPlot's dist files; src/serve/ui.c serves it. */
#ifndef MW_UI_ASSETS_H
#define MW_UI_ASSETS_H

#include <stddef.h>

typedef struct mw_ui_asset {
    const char *path;         /* URL path, e.g. "/ui/index.html" */
    const char *content_type; /* from the file's extension */
    const unsigned char *data;
    size_t len;
    const unsigned char *gz; /* gzip of data */
    size_t gz_len;
    const char *etag, *gz_etag; /* quoted, strong */
} mw_ui_asset;

extern const mw_ui_asset mw_ui_assets[];
extern const size_t mw_ui_nassets;
/* NULL when the UI is built in; else why not and how to build it. */
extern const char *const mw_ui_missing;

#endif
