/* fake_nvml_internal.h - what fake_nvml.c shares with the other parts of
 * the fake NVML library (fake_nvml_gpm.c). Test code. */
#ifndef FK_NVML_INTERNAL_H
#define FK_NVML_INTERNAL_H

#include "nvml_abi.h"
#include "scenario.h"

#define API __attribute__((visibility("default")))

struct nvmlDevice_st {
    unsigned gpu;
    int mig; /* -1: the GPU itself, else the MIG index */
};

/* Lock the library and count a call of fn; NVML_ERROR_UNINITIALIZED when
 * not initialised (the lock is held either way: release with fk_leave). */
nvmlReturn_t fk_enter_plain(const char *fn);
/* Lock, count, resolve the handle dev (see enter() in fake_nvml.c). */
nvmlReturn_t fk_enter(const char *fn, nvmlDevice_t dev, int field, const fk_gpu **g,
                      const fk_mig **m);
void fk_leave(void);
/* The current world (call with the lock held). */
const fk_world *fk_world_now(void);

#endif
