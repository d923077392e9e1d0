/* idle_config.h - the idle module's settings: the idle rule's flags and the
 * `idle:` section's per-namespace overrides (idle_config.c). */
#ifndef MW_IDLE_CONFIG_H
#define MW_IDLE_CONFIG_H

#include "../core/config.h"

#include <stddef.h>
#include <stdint.h>

/* The idle module's settings (idle_config.c): the rule, and per-namespace
 * overrides from the `idle:` section. */
typedef struct mw_idle_settings {
    double threshold; /* percent */
    int64_t window_ms;
    int64_t busy_period_ms;
    struct mw_idle_override {
        char ns[64];
        double threshold;                  /* < 0: inherit */
        int64_t window_ms, busy_period_ms; /* 0: inherit */
    } overrides[MW_MAX_LIST];
    size_t noverrides;
} mw_idle_settings;
extern const mw_option_group mw_idle_options;

#endif
