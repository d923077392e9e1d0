/* fuzz_relabel_config.c - the remote_write / write_relabel_configs config
 * parser (YAML -> endpoints, regex translation and compilation) on
 * arbitrary bytes, then the compiled rules applied to a fixed series. An
 * accepted file must build the same endpoints again from mw_config (what the
 * shipper does at start), and relabelling must keep a valid label set. */
#include "agent/agent.h"
#include "core/config.h"
#include "ship/relabel.h"
#include "ship/rw_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static mw_config c;
    mw_rw_forget_lists(); /* the previous input's, which c held */
    mw_options_register_all();
    mw_config_defaults(&c);
    char err[1024];
    if (mw_config_load_string(&c, "fuzz.yml", (const char *)data, size, err, sizeof(err)) < 0)
        return 0;
    mw_rw_config rc;
    if (mw_rw_config_build(&c, &rc, err, sizeof(err)) < 0) {
        /* Only an invalid --remote-write scalar may fail here: the list and
         * the labels were validated when the file was loaded. */
        if (!((const mw_rw_settings *)mw_config_group(&c, &mw_rw_options))->url[0]) abort();
        return 0;
    }
    mw_arena a;
    mw_arena_init(&a, 0);
    for (size_t i = 0; i < rc.n; i++) {
        mw_rl_labels ls = {.n = 0};
        mw_rl_set(&ls, "__name__", "mlwatch_cpu_seconds_total");
        mw_rl_set(&ls, "cpu", "3");
        mw_rl_set(&ls, "mode", "user");
        mw_rl_set(&ls, "node", "gpu-01");
        if (mw_relabel_apply(&rc.ep[i].relabel, &ls, &a)) {
            for (size_t k = 0; k < ls.n; k++)
                if (!ls.l[k].name || !ls.l[k].value || !ls.l[k].name[0]) abort();
        }
        mw_arena_reset(&a);
    }
    mw_arena_free(&a);
    mw_rw_config_free(&rc);
    return 0;
}
