/* fuzz_rule_file.c - the rule-file parser (rules/rulefile.c) on arbitrary
 * bytes. Besides crashes and sanitizer reports it checks its promises: an
 * error is one line starting "r.yml:" that leaves the set unchanged; a
 * success has named groups whose rules each have a name and an expression. */
#include "rules/rulefile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_rule_set set = {0};
    char err[1024] = "";
    if (mw_rule_set_parse(&set, "r.yml", (const char *)data, size, err, sizeof(err)) < 0) {
        check(strncmp(err, "r.yml", 5) == 0 && !strchr(err, '\n'));
        check(set.ngroups == 0 && set.groups == NULL);
        return 0;
    }
    for (size_t i = 0; i < set.ngroups; i++) {
        check(set.groups[i].name[0] != '\0');
        for (size_t j = 0; j < set.groups[i].nrules; j++)
            check(set.groups[i].rules[j].name && set.groups[i].rules[j].expr);
    }
    mw_rule_set_free(&set);
    return 0;
}
