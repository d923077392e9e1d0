/* fuzz_config.c - the YAML configuration loader (mw_config_load_string) on
 * arbitrary bytes. Besides crashes and sanitizer reports it checks the
 * loader's promises: an error is one line that starts with the file name and
 * leaves the settings untouched; a success leaves only valid settings.
 * Inputs starting with byte 0x01 go to the flag parser instead. */
#include "agent/agent.h"
#include "collect/collector.h"
#include "core/config.h"
#include "core/log.h"
#include "core/units.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int known(const char *name)
{
    return strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0 || strcmp(name, "loadavg") == 0;
}

static void check(int ok)
{
    if (!ok) abort();
}

static int terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

static void check_one_line(const char *err, size_t size)
{
    check(terminated(err, size) && err[0] != '\0');
    for (const char *p = err; *p; p++)
        check((unsigned char)*p >= 0x20 && *p != 0x7f);
}

static void check_valid(const mw_config *config, const mw_config *before)
{
    const mw_config *c = config;
    const mw_metrics_settings *m = mw_config_group(config, &mw_metrics_options);
    const mw_collector_set_settings *cs = mw_config_group(config, &mw_collector_set_options);
    check(terminated(c->root, sizeof(c->root)) && terminated(c->listen, sizeof(c->listen)));
    check(terminated(c->log_level, sizeof(c->log_level)));
    check(terminated(m->format, sizeof(m->format)));
    char host[256];
    uint16_t port;
    check(mw_parse_listen(c->listen, host, sizeof(host), &port) == 0);
    check(c->interval_ms > 0);
    mw_log_level level;
    check(mw_log_level_parse(c->log_level, &level) == 0);
    check(strcmp(m->format, "text") == 0 || strcmp(m->format, "openmetrics") == 0);
    check(cs->ncollectors <= MW_MAX_LIST && cs->ndisable_collectors <= MW_MAX_LIST);
    for (size_t i = 0; i < cs->ncollectors; i++)
        check(known(cs->collectors[i]));
    for (size_t i = 0; i < cs->ndisable_collectors; i++)
        check(known(cs->disable_collectors[i]));
    check(strcmp(c->config_path, before->config_path) == 0); /* only --config sets it */
}

/* The rest of the input is command-line arguments separated by NUL bytes,
 * for mw_config_from_args (any --config is left out: no file access). */
static void fuzz_args(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    memcpy(copy, data, size);
    copy[size] = '\0';
    char *argv[66] = {"mlwatch", "agent"};
    int argc = 2;
    for (char *p = copy; p <= copy + size && argc < 66; p += strlen(p) + 1) {
        if (strncmp(p, "--config", 8) == 0) continue;
        argv[argc++] = p;
    }
    mw_config c, before;
    mw_options_register_all();
    mw_config_defaults(&c);
    before = c;
    char *rest[4];
    size_t nrest = 99;
    char err[512];
    int rc = mw_config_from_args(&c, argc, argv, 2, rest, &nrest, 4, err, sizeof(err));
    if (rc != 0) {
        check(rc == -1);
        check_one_line(err, sizeof(err));
    } else {
        check(nrest <= 4);
        for (size_t i = 0; i < nrest; i++)
            check(rest[i] >= copy && rest[i] <= copy + size);
        check_valid(&c, &before);
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_collector_name_check = known;
    if (size && data[0] == 1) {
        fuzz_args(data + 1, size - 1);
        return 0;
    }
    mw_config c, before;
    mw_options_register_all();
    mw_config_defaults(&c);
    before = c;
    char err[512];
    memset(err, 'x', sizeof(err));
    int rc = mw_config_load_string(&c, "f.yaml", (const char *)data, size, err, sizeof(err));
    if (rc != 0) {
        check(rc == -1);
        check(memcmp(&c, &before, sizeof(c)) == 0);
        check_one_line(err, sizeof(err));
        check(strncmp(err, "f.yaml:", 7) == 0);
        return 0;
    }
    check_valid(&c, &before);
    return 0;
}
