/* gpu_emit.h - turning published GPU readings into samples, and splitting
 * device figures among the containers whose processes use the device. */
#ifndef MW_GPU_EMIT_H
#define MW_GPU_EMIT_H

#include "gpu.h"
#include "../collector.h"

typedef struct mw_gpu_emitter mw_gpu_emitter;

mw_gpu_emitter *mw_gpu_emitter_new(void);
void mw_gpu_emitter_free(mw_gpu_emitter *e);
/* Emit every GPU family for n devices into ctx->snap; processes are mapped
 * to containers with ctx->env->procmap. */
void mw_gpu_emit(mw_gpu_emitter *e, mw_collect_ctx *ctx, const mw_gpu_dev *devs, unsigned n);

#endif
