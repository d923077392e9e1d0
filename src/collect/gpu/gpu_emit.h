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

/* The health families (docs/gpu.md "Health"): per GPU from the published
 * copy when fresh, else every GPU unknown; the node's; the event counts. */
void mw_gpu_emit_health(mw_collect_ctx *ctx, const mw_gpu_dev *devs, unsigned n, int fresh,
                        const mw_gpu_node_health *node, const mw_gpu_event_stats *st);

#endif
