/* rules_test_cmd.h - `mlwatch rules test FILE...`: promtool's rule unit
 * tests run against mlwatch's evaluator (rules_test_cmd.c). */
#ifndef MW_RULES_TEST_CMD_H
#define MW_RULES_TEST_CMD_H

#include "../core/config.h"

#include <stddef.h>

/* rest: "test" and the files. 0 when every test passes, 1 when one fails,
 * 2 on a usage error. */
int mw_rules_command(const mw_config *cfg, char **rest, size_t nrest);

#endif
