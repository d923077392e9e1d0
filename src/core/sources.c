/* sources.c - the table of what the agent sees, see sources.h. A mutex
 * guards it: the GPU collector notes from its own thread. */
#include "sources.h"
#include "util.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[32];
    mw_source_state state;
    char detail[512];
} source;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static source table[MW_SOURCES_MAX];
static size_t ntable;

void mw_source_note(const char *name, mw_source_state state, const char *fmt, ...)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < ntable && strcmp(table[i].name, name) != 0)
        i++;
    if (i == ntable) {
        if (ntable == MW_SOURCES_MAX) {
            pthread_mutex_unlock(&lock);
            return;
        }
        ntable++;
        mw_strlcpy(table[i].name, name, sizeof(table[i].name));
    }
    table[i].state = state;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(table[i].detail, sizeof(table[i].detail), fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&lock);
}

const char *mw_source_state_name(mw_source_state state)
{
    switch (state) {
    case MW_SOURCE_SEEN:
        return "seen";
    case MW_SOURCE_ABSENT:
        return "absent";
    default:
        return "off";
    }
}

char *mw_sources_json(void)
{
    json_t *o = json_object();
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ntable; i++)
        json_object_set_new(o, table[i].name,
                            json_pack("{s:s, s:s}", "state", mw_source_state_name(table[i].state),
                                      "detail", table[i].detail));
    pthread_mutex_unlock(&lock);
    char *s = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(o);
    return s;
}

void mw_sources_reset(void)
{
    pthread_mutex_lock(&lock);
    ntable = 0;
    pthread_mutex_unlock(&lock);
}
