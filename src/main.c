/* main.c - command-line entry point: picks the command and hands over.
 * Usage errors exit 2 with one line naming the problem. To add a command,
 * add a row to commands[]. */
#include "agent/agent.h"
#include "agent/doctor_cmd.h"
#include "agent/run.h"
#include "collect/collector.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "query/query_cmd.h"
#include "rules/rules_test_cmd.h"
#include "store/inspect.h"
#include "mlwatch.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    const char *usage; /* one line for `mlwatch help` */
    /* Runs with the flags already parsed into cfg; rest holds the positional
     * arguments (everything after "--" included) when accepts_args is set. */
    int (*run)(const mw_config *cfg, char **rest, size_t nrest);
    int accepts_args;
} command;

static int cmd_agent(const mw_config *cfg, char **rest, size_t nrest)
{
    (void)rest;
    (void)nrest;
    return mw_agent_run(cfg, 0);
}

static int cmd_hub(const mw_config *cfg, char **rest, size_t nrest)
{
    (void)rest;
    (void)nrest;
    return mw_agent_run(cfg, 1);
}

static int cmd_metrics(const mw_config *cfg, char **rest, size_t nrest)
{
    (void)rest;
    (void)nrest;
    return mw_metrics_once(cfg, stdout);
}

static int cmd_run(const mw_config *cfg, char **rest, size_t nrest)
{
    return mw_run_command(cfg, rest, nrest);
}

static const command commands[] = {
    {"agent", "mlwatch agent [FLAGS]     collect every interval; serve /metrics on --listen",
     cmd_agent, 0},
    {"hub",
     "mlwatch hub [FLAGS]       the cluster's view: store, query API and UI for what node\n"
     "                            agents remote-write to /api/v1/write; collects nothing",
     cmd_hub, 0},
    {"metrics", "mlwatch metrics [FLAGS]   collect once and print the exposition on stdout",
     cmd_metrics, 0},
    {"doctor",
     "mlwatch doctor [--namespace NS] [--pod POD] [--pid PID] [--json] [--window DURATION]\n"
     "               [--root DIR] [--url URL]\n"
     "                            why is my training slow? findings from the agent at --listen\n"
     "                            (or --url) watching the same root, else from sampling for the\n"
     "                            window (exit 1 when any)",
     mw_doctor_command, 0},
    {"run",
     "mlwatch run [--json] [--interval DURATION] [--work N --unit NAME] -- COMMAND [ARGS...]\n"
     "                            run COMMAND; report its energy, CO2, GPU use, J per unit\n"
     "mlwatch run --compare [--json] REPORT.json...\n"
     "                            --json reports side by side (per unit, per GPU-hour)",
     cmd_run, 1},
    {"query",
     "mlwatch query EXPR [--time T] [--start S --end E --step D] [--url URL] [--json]\n"
     "                            PromQL against the agent on --listen or a Prometheus URL",
     mw_query_command, 1},
    {"rules",
     "mlwatch rules test FILE...\n"
     "                            run promtool-style rule unit tests "
     "(tests/prometheus/*.test.yml)\n"
     "                            against mlwatch's own rule evaluator (docs/rules.md)",
     mw_rules_command, 1},
    {"store",
     "mlwatch store inspect DIR\n"
     "                            what a data folder holds: blocks, time ranges, series,\n"
     "                            samples, bytes per sample, chunk encodings (docs/store.md)",
     mw_store_command, 1},
};

static void usage(FILE *out)
{
    fprintf(out, "mlwatch %s - GPU, energy and container telemetry for shared machines\n\nUsage:\n",
            MLWATCH_VERSION);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %s\n", commands[i].usage);
    fprintf(out, "  mlwatch help              this text\n"
                 "  mlwatch --version         print the version\n\n"
                 "Flags (each also a key in the --config YAML file, with '-' written '_'):\n");
    mw_config_print_help(out);
    fprintf(out, "\nCollectors:\n");
    for (size_t i = 0; i < mw_ncollectors; i++)
        fprintf(out, "  %-12s %s\n", mw_collectors[i]->name, mw_collectors[i]->help);
}

static void command_usage(const command *cmd, FILE *out)
{
    fprintf(out, "Usage:\n  %s\n\nFlags (each also a key in the --config YAML file):\n",
            cmd->usage);
    mw_config_print_help_for(out, cmd->name);
}

int main(int argc, char **argv)
{
    mw_options_register_all();
    mw_tune_allocator();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("mlwatch %s (revision %s)\n", MLWATCH_VERSION, MLWATCH_REVISION);
        return 0;
    }
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc > 2 && strcmp(argv[2], "--markdown") == 0)
            mw_config_print_markdown(stdout);
        else
            usage(stdout);
        return 0;
    }
    const command *cmd = NULL;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(name, commands[i].name) == 0) cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr, "mlwatch: unknown command '%s' (see `mlwatch help`)\n", name);
        return 2;
    }
    /* `mlwatch CMD --help`: before "--", which starts a command's own
     * arguments (`mlwatch run -- tool --help`). */
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            command_usage(cmd, stdout);
            return 0;
        }
    static mw_config cfg; /* large (paths): not on the stack */
    mw_config_defaults(&cfg);
    char err[1024];
    char *rest[256] = {0};
    size_t nrest = 0;
    if (mw_config_from_args(&cfg, argc, argv, 2, cmd->accepts_args ? rest : NULL, &nrest,
                            cmd->accepts_args ? 256 : 0, err, sizeof(err)) < 0) {
        fprintf(stderr, "mlwatch %s: %s\n", name, err);
        return 2;
    }
    mw_log_level level;
    mw_log_level_parse(cfg.log_level, &level);
    mw_log_set_level(level);
    return cmd->run(&cfg, rest, nrest);
}
