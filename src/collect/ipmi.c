/* ipmi.c - the "ipmi" collector: node power from the BMC by IPMI DCMI Get
 * Power Reading, in-band through FreeIPMI (see ipmi.h).
 *
 * Absent (one info line, then off) where there is no IPMI device node, no
 * FreeIPMI library, no BMC answering, or a BMC without DCMI power readings:
 * most VMs and clouds. The reading is the BMC's whole-node input power,
 * which the energy model uses as the node total (component "other" is what
 * RAPL and the GPUs do not explain). */
#include "collector.h"
#include "ipmi.h"
#include "../core/log.h"
#include "../core/util.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* clang-format off */
MW_METRIC(POWER, MW_GAUGE, "mlwatch_ipmi_power_watts", "watts", "Node input power reported by the BMC (IPMI DCMI Get Power Reading, current power).");
/* clang-format on */

/* --- FreeIPMI through dlopen ------------------------------------------------ */

#define DCMI_MODE_SYSTEM_POWER_STATISTICS 0x01

typedef struct fipmi {
    void *dl;
    void *ctx; /* ipmi_ctx_t */
    void *(*ctx_create)(void);
    int (*find_inband)(void *, int *, int, uint16_t, uint8_t, const char *, unsigned, unsigned);
    void (*ctx_close)(void *);
    void (*ctx_destroy)(void *);
    char *(*ctx_errormsg)(void *);
    int (*get_power)(void *, uint8_t, uint8_t, void *);
    void *(*obj_create)(const void *);
    void (*obj_destroy)(void *);
    int (*obj_get)(void *, const char *, uint64_t *);
    const void *tmpl_rs;
} fipmi;

static void fipmi_close(void *h)
{
    fipmi *f = h;
    if (!f) return;
    if (f->ctx) {
        f->ctx_close(f->ctx);
        f->ctx_destroy(f->ctx);
    }
    if (f->dl) dlclose(f->dl);
    free(f);
}

static void *fipmi_open(void *unused, const char *library, char *err, size_t errsize)
{
    (void)unused;
    fipmi *f = mw_xcalloc(1, sizeof(*f));
    f->dl = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!f->dl) {
        snprintf(err, errsize, "cannot load %s (Debian package libfreeipmi17)", library);
        free(f);
        return NULL;
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)(&f->field) = dlsym(f->dl, name);                                                \
        if (!f->field) {                                                                           \
            snprintf(err, errsize, "%s lacks %s", library, name);                                  \
            fipmi_close(f);                                                                        \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)
    SYM(ctx_create, "ipmi_ctx_create");
    SYM(find_inband, "ipmi_ctx_find_inband");
    SYM(ctx_close, "ipmi_ctx_close");
    SYM(ctx_destroy, "ipmi_ctx_destroy");
    SYM(ctx_errormsg, "ipmi_ctx_errormsg");
    SYM(get_power, "ipmi_cmd_dcmi_get_power_reading");
    SYM(obj_create, "fiid_obj_create");
    SYM(obj_destroy, "fiid_obj_destroy");
    SYM(obj_get, "fiid_obj_get");
    SYM(tmpl_rs, "tmpl_cmd_dcmi_get_power_reading_rs");
#undef SYM
    f->ctx = f->ctx_create();
    if (!f->ctx) {
        snprintf(err, errsize, "ipmi_ctx_create failed");
        fipmi_close(f);
        return NULL;
    }
    int driver = 0;
    int rc = f->find_inband(f->ctx, &driver, 0, 0, 0, NULL, 0, 0);
    if (rc != 1) {
        snprintf(err, errsize, "no in-band IPMI interface answers (%s)",
                 rc < 0 ? f->ctx_errormsg(f->ctx) : "none found");
        f->ctx_destroy(f->ctx);
        f->ctx = NULL;
        fipmi_close(f);
        return NULL;
    }
    return f;
}

static int fipmi_power(void *h, double *watts, char *err, size_t errsize)
{
    fipmi *f = h;
    void *obj = f->obj_create(f->tmpl_rs);
    if (!obj) {
        snprintf(err, errsize, "fiid_obj_create failed");
        return -1;
    }
    int rc = -1;
    uint64_t power = 0, active = 0;
    if (f->get_power(f->ctx, DCMI_MODE_SYSTEM_POWER_STATISTICS, 0, obj) < 0) {
        snprintf(err, errsize, "DCMI Get Power Reading: %s", f->ctx_errormsg(f->ctx));
    } else if (f->obj_get(obj, "current_power", &power) < 0 ||
               f->obj_get(obj, "power_reading_state.power_measurement", &active) < 0) {
        snprintf(err, errsize, "DCMI Get Power Reading: malformed answer");
    } else {
        *watts = (double)power;
        rc = active ? 1 : 0;
    }
    f->obj_destroy(obj);
    return rc;
}

static const mw_ipmi_ops freeipmi_ops = {fipmi_open, fipmi_power, fipmi_close, NULL};
static const mw_ipmi_ops *override_ops;

void mw_ipmi_set_ops(const mw_ipmi_ops *ops)
{
    override_ops = ops;
}

/* --- the collector ---------------------------------------------------------- */

typedef struct ipmi_state {
    const mw_ipmi_ops *ops;
    void *h;
} ipmi_state;

static int have_device(void)
{
    static const char *const nodes[] = {"/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0"};
    for (size_t i = 0; i < MW_ARRAY_LEN(nodes); i++)
        if (access(nodes[i], F_OK) == 0) return 1;
    return 0;
}

static int ipmi_init(const mw_env *env, void **state)
{
    const mw_ipmi_ops *ops = override_ops ? override_ops : &freeipmi_ops;
    const char *lib =
        ((const mw_ipmi_settings *)mw_config_group(env->cfg, &mw_ipmi_options))->freeipmi_library;
    if (!override_ops && strcmp(lib, "none") == 0) return MW_COLLECTOR_ABSENT;
    /* Devices are the running kernel's, not under --root. */
    if (!override_ops && !have_device()) {
        mw_log(MW_LOG_INFO, "ipmi", "no /dev/ipmi0: no in-band BMC, node power from IPMI is off");
        return MW_COLLECTOR_ABSENT;
    }
    char err[256] = "";
    void *h = ops->open(ops->ctx, lib, err, sizeof(err));
    if (!h) {
        mw_log(MW_LOG_INFO, "ipmi", "node power from IPMI is off: %s", err);
        return MW_COLLECTOR_ABSENT;
    }
    double w;
    if (ops->power(h, &w, err, sizeof(err)) < 0) {
        mw_log(MW_LOG_INFO, "ipmi",
               "node power from IPMI is off: the BMC has no DCMI power "
               "reading (%s)",
               err);
        ops->close(h);
        return MW_COLLECTOR_ABSENT;
    }
    ipmi_state *st = mw_xcalloc(1, sizeof(*st));
    st->ops = ops;
    st->h = h;
    *state = st;
    return 0;
}

static void ipmi_collect(void *state, mw_collect_ctx *ctx)
{
    ipmi_state *st = state;
    double w = 0;
    char err[256] = "";
    int rc = st->ops->power(st->h, &w, err, sizeof(err));
    if (rc < 0) {
        mw_collect_error(ctx, "ipmi:dcmi-power-reading", 0, err);
        return;
    }
    if (rc == 0) return; /* no active measurement: nothing true to say */
    mw_emit(ctx->snap, &POWER, w, MW_END);
}

static void ipmi_destroy(void *state)
{
    ipmi_state *st = state;
    if (!st) return;
    st->ops->close(st->h);
    free(st);
}

/* clang-format off */
static const mw_option ipmi_rows[] = {
    MW_OPT(mw_ipmi_settings, "freeipmi-library", MW_OPT_PATH, freeipmi_library, "libfreeipmi.so.17", NULL, "FreeIPMI library for node power (IPMI DCMI, in-band /dev/ipmi0); none: off"),
};
/* clang-format on */
const mw_option_group mw_ipmi_options =
    MW_OPTION_GROUP("ipmi collector", "src/collect/ipmi.c", mw_ipmi_settings, ipmi_rows, NULL);

const mw_collector mw_collector_ipmi = {
    .name = "ipmi",
    .help = "Node input power from the BMC (IPMI DCMI, in-band through FreeIPMI)",
    .options = &mw_ipmi_options,
    .init = ipmi_init,
    .collect = ipmi_collect,
    .destroy = ipmi_destroy,
};
