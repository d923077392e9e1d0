/* nvml_gpm.h - NVML's GPU Performance Monitoring (GPM) for the NVIDIA
 * backend: per-GPU and per-MIG-GPU-instance activity (graphics engine
 * activity, SM occupancy, DRAM bandwidth), the only per-instance activity
 * NVML offers. Internal to nvml.c; implementation and rationale in
 * nvml_gpm.c. */
#ifndef MW_NVML_GPM_H
#define MW_NVML_GPM_H

#include "gpu.h"
#include "nvml_abi.h"

typedef struct mw_nvml_gpm mw_nvml_gpm;

/* Resolve the GPM functions in lib (dlopen handle). Never fails: without
 * them (drivers before R520) every poll is a no-op, logged once. */
mw_nvml_gpm *mw_nvml_gpm_open(void *lib, nvmlErrorString_fn error_string);
/* On a slow poll of device i (handle h, MIG instances already read into
 * d->mig): take a sample of the GPU and of each GPU instance and set
 * d->gpm / d->mig[k].gpm from the previous sample to this one (for a GPU
 * or instance sampled for the first time, from a sample 0.1 s earlier). */
void mw_nvml_gpm_poll(mw_nvml_gpm *g, unsigned i, nvmlDevice_t h, mw_gpu_dev *d,
                      const mw_gpu_sink *sink);
/* Device i was lost or reset: forget its samples and ask for support again. */
void mw_nvml_gpm_forget(mw_nvml_gpm *g, unsigned i);
void mw_nvml_gpm_close(mw_nvml_gpm *g);

#endif
