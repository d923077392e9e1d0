/* fuzz_store_block.c - the block reader (src/store/block.c) on arbitrary
 * files: a block that opens is walked completely (every series' labels and
 * samples, every label's values through the index, a selection by an
 * equality and a regex matcher, a downsampled block's aggregates as
 * selections read them); all of it must stay inside the bytes. */
#include "store/block.h"
#include "store/downsample.h"
#include "store/store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void count_ids(void *arg, const uint32_t *ids, size_t n)
{
    (void)ids;
    *(size_t *)arg += n;
}

static void count_values(void *arg, const char *value, const uint32_t *ids, size_t n)
{
    (void)ids;
    *(size_t *)arg += n + strlen(value) * 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    char err[256];
    mw_block *b = mw_block_open_mem(copy, size, err, sizeof(err));
    if (!b) {
        if (!err[0]) abort();
        free(copy);
        return 0;
    }
    const mw_block_meta *m = mw_block_get_meta(b);
    mw_samples sm = {0};
    sm.max = 1 << 20;
    for (uint64_t id = 0; id < m->nseries && id < 4096; id++) {
        mw_label lab[64];
        size_t nl;
        if (mw_block_labels(b, (uint32_t)id, lab, 64, &nl) == 0) {
            size_t k = 0;
            for (size_t i = 0; i < nl; i++) {
                mw_block_index_ops.values(b, lab[i].name, count_values, &k);
                mw_block_index_ops.lookup(b, lab[i].name, lab[i].value, count_ids, &k);
            }
        }
        sm.n = 0;
        mw_block_read(b, (uint32_t)id, INT64_MIN, INT64_MAX, &sm);
        /* A downsampled block's aggregates, as selections read them. */
        for (int what = MW_SEL_SAMPLES; m->resolution_ms && what <= MW_SEL_MAX; what++) {
            double *w = NULL;
            size_t wcap = 0;
            sm.n = 0;
            mw_ds_read(b, (uint32_t)id, what, INT64_MIN, INT64_MAX, &sm, &w, &wcap);
            free(w);
        }
    }
    mw_matcher ms[2];
    if (mw_matcher_init(&ms[0], MW_MATCH_EQ, "__name__", "up", err, sizeof(err)) == 0 &&
        mw_matcher_init(&ms[1], MW_MATCH_RE, "job", "a.*|b", err, sizeof(err)) == 0) {
        mw_ids ids = {0};
        mw_index_select(&mw_block_index_ops, b, ms, 2, &ids);
        mw_index_select(&mw_block_index_ops, b, ms + 1, 1, &ids);
        mw_ids_free(&ids);
        mw_matcher_free(&ms[0]);
        mw_matcher_free(&ms[1]);
    }
    free(sm.t);
    free(sm.v);
    mw_block_unref(b);
    free(copy);
    return 0;
}
