/* promql_expect.h - the annotation lines of test_promql.c's evals, as
 * Prometheus's promqltest reads them:
 *
 *   expect warn msg: TEXT     a warning with exactly this text (position included)
 *   expect info msg: TEXT     an info, the same way
 *   expect warn / expect info at least one, any text
 *   expect no_warn / no_info  none
 *
 * With expected texts, every one must be in the answer and every one of
 * the answer's must be expected. An eval without such lines does not look
 * at annotations. Included by test_promql.c only. */
#ifndef MW_TEST_PROMQL_EXPECT_H
#define MW_TEST_PROMQL_EXPECT_H

#include "query/promql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXPECTS 16

/* Moves the "expect ..." lines out of lines (into exp); returns how many. */
static int take_expects(char lines[][1024], int *nlines, char exp[][1024])
{
    int ne = 0, kept = 0;
    for (int i = 0; i < *nlines; i++) {
        const char *s = lines[i] + strspn(lines[i], " \t");
        if (!strncmp(s, "expect ", 7) && ne < MAX_EXPECTS) {
            snprintf(exp[ne++], 1024, "%s", s + 7);
        } else if (kept != i) {
            memcpy(lines[kept++], lines[i], 1024);
        } else {
            kept++;
        }
    }
    *nlines = kept;
    return ne;
}

/* 0 when the result's annotations are what exp says, else -1 and why. */
static int expect_known(const char *e)
{
    if (!strncmp(e, "no_", 3)) return !strcmp(e + 3, "warn") || !strcmp(e + 3, "info");
    for (int k = 0; k < 2; k++) {
        const char *kind = k ? "info" : "warn";
        if (!strncmp(e, kind, 4) && (e[4] == '\0' || !strncmp(e + 4, " msg: ", 6))) return 1;
    }
    return 0;
}

static int check_expects(const pq_result *res, const char *query, char exp[][1024], int ne,
                         char *why, size_t size)
{
    for (int i = 0; i < ne; i++)
        if (!expect_known(exp[i])) {
            snprintf(why, size, "unreadable expect line: expect %s", exp[i]);
            return -1;
        }
    for (int info = 0; info < 2; info++) {
        const char *kind = info ? "info" : "warn";
        char *got[64];
        int ng = 0;
        for (size_t i = 0; i < res->nannots && ng < 64; i++)
            if (res->annots[i].info == info) got[ng++] = pq_annot_text(&res->annots[i], query);
        int any = 0, none = 0, nmsg = 0, bad = 0;
        const char *msgs[MAX_EXPECTS] = {0};
        for (int i = 0; i < ne; i++) {
            size_t kl = strlen(kind);
            if (!strncmp(exp[i], "no_", 3) && !strcmp(exp[i] + 3, kind)) {
                none = 1;
            } else if (!strncmp(exp[i], kind, kl) && exp[i][kl] == '\0') {
                any = 1;
            } else if (!strncmp(exp[i], kind, kl) && !strncmp(exp[i] + kl, " msg: ", 6)) {
                msgs[nmsg++] = exp[i] + kl + 6;
            }
        }
        if (!bad && none && ng) snprintf(why, size, "unexpected %s: %s", kind, got[0]), bad = 1;
        if (!bad && (any || nmsg) && !ng)
            snprintf(why, size, "expected %s, got none", kind), bad = 1;
        for (int i = 0; i < nmsg && !bad; i++) {
            int found = 0;
            for (int j = 0; j < ng; j++)
                found |= !strcmp(got[j], msgs[i]);
            if (!found)
                snprintf(why, size, "expected %s \"%s\", got \"%s\"", kind, msgs[i], got[0]),
                    bad = 1;
        }
        for (int j = 0; j < ng && nmsg && !bad; j++) {
            int found = 0;
            for (int i = 0; i < nmsg; i++)
                found |= !strcmp(got[j], msgs[i]);
            if (!found) snprintf(why, size, "unexpected %s \"%s\"", kind, got[j]), bad = 1;
        }
        for (int j = 0; j < ng; j++)
            free(got[j]);
        if (bad) return -1;
    }
    return 0;
}

#endif
