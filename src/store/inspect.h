/* inspect.h - `mlwatch store inspect DIR`: what a data folder holds. */
#ifndef MW_STORE_INSPECT_H
#define MW_STORE_INSPECT_H

#include "../core/config.h"

#include <stddef.h>
#include <stdio.h>

/* Print the blocks of the data folder dir (or of dir/data) and the head's
 * files to out. Returns 0, or 1 when dir is no data folder (a line on
 * errout) or a block or chunk does not read. */
int mw_store_inspect(const char *dir, FILE *out, FILE *errout);
/* `mlwatch store inspect DIR`: exit status as above, 2 for usage. */
int mw_store_command(const mw_config *cfg, char **rest, size_t nrest);

#endif
