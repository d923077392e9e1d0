/* main.c - command-line entry point: picks the command, parses its flags,
 * and hands over. Usage errors exit 2 with one line naming the problem. */
#include "agent/agent.h"
#include "collect/collector.h"
#include "core/config.h"
#include "core/log.h"
#include "mlwatch.h"

#include <stdio.h>
#include <string.h>

static int collector_exists(const char *name)
{
    return mw_collector_find(name) != NULL;
}

static void usage(FILE *out)
{
    fprintf(out,
            "mlwatch %s - GPU, energy and container telemetry for shared machines\n\n"
            "Usage:\n"
            "  mlwatch agent [FLAGS]     collect every interval; serve /metrics on --listen\n"
            "  mlwatch metrics [FLAGS]   collect once and print the exposition on stdout\n"
            "  mlwatch help              this text\n"
            "  mlwatch --version         print the version\n\n"
            "Flags (each also a key in the --config YAML file, with '-' written '_'):\n",
            MLWATCH_VERSION);
    mw_config_print_help(out);
    fprintf(out, "\nCollectors:\n");
    for (size_t i = 0; i < mw_ncollectors; i++)
        fprintf(out, "  %-12s %s\n", mw_collectors[i]->name, mw_collectors[i]->help);
}

int main(int argc, char **argv)
{
    mw_config_collector_exists = collector_exists;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("mlwatch %s (revision %s)\n", MLWATCH_VERSION, MLWATCH_REVISION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc > 2 && strcmp(argv[2], "--markdown") == 0)
            mw_config_print_markdown(stdout);
        else
            usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "agent") != 0 && strcmp(cmd, "metrics") != 0) {
        fprintf(stderr, "mlwatch: unknown command '%s' (see `mlwatch help`)\n", cmd);
        return 2;
    }
    mw_config cfg;
    mw_config_defaults(&cfg);
    char err[1024];
    if (mw_config_from_args(&cfg, argc, argv, 2, NULL, NULL, 0, err, sizeof(err)) < 0) {
        fprintf(stderr, "mlwatch %s: %s\n", cmd, err);
        return 2;
    }
    mw_log_level level;
    mw_log_level_parse(cfg.log_level, &level);
    mw_log_set_level(level);
    if (strcmp(cmd, "agent") == 0) return mw_agent_run(&cfg);
    return mw_metrics_once(&cfg, stdout);
}
