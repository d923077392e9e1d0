/* amdgpu_ras.c - the "amdgpu_ras" collector: AMD GPUs' RAS (reliability,
 * availability, serviceability) error counters from sysfs, which the
 * kernel's amdgpu driver keeps per hardware block whether or not ROCm is
 * installed (Documentation/gpu/amdgpu/ras.rst, "RAS Error Count sysfs
 * Interface"):
 *
 *   /sys/class/drm/cardN/device/ras/BLOCK_err_count   "ue: N\nce: M\n"[de: K\n]
 *
 * BLOCK is umc (the memory controller: HBM ECC), gfx, sdma, mmhub, athub,
 * pcie_bif, hdp, xgmi_wafl, df, smn, sem, mp0, mp1, fuse, ... (those the
 * GPU and kernel support). Exported as
 *
 *   mlwatch_gpu_ras_errors_total{card,pci_bus_id,block,type}
 *
 * type uncorrected (ue), corrected (ce), deferred (de, UMC only, newer
 * kernels). pci_bus_id (PCI_SLOT_NAME of the device's uevent) joins it to
 * mlwatch_gpu_info. The counts are the driver's since it loaded. Cards are
 * found at start (GPUs are not hot-plugged); a card without a ras folder
 * (RAS not supported or disabled: amdgpu.ras_enable=0) has no series. */
#include "amdgpu_ras.h"
#include "collector.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DRM_DIR "sys/class/drm"
#define MAX_CARDS 64
#define MAX_BLOCKS 32

/* clang-format off */
MW_METRIC(RAS_ERRORS, MW_COUNTER, "mlwatch_gpu_ras_errors_total", "", "AMD GPU RAS errors per hardware block since the driver loaded (amdgpu sysfs ras/BLOCK_err_count): uncorrected, corrected, deferred.");
/* clang-format on */

int mw_amdgpu_ras_parse(const char *text, mw_amdgpu_ras_count *out)
{
    memset(out, 0, sizeof(*out));
    int seen_ue = 0, seen_ce = 0;
    const char *p = text;
    while (*p) {
        uint64_t *dst;
        int *seen;
        if (strncmp(p, "ue:", 3) == 0) {
            dst = &out->ue;
            seen = &seen_ue;
        } else if (strncmp(p, "ce:", 3) == 0) {
            dst = &out->ce;
            seen = &seen_ce;
        } else if (strncmp(p, "de:", 3) == 0) {
            dst = &out->de;
            seen = &out->has_de;
        } else {
            return -1;
        }
        if (*seen) return -1;
        p += 3;
        mw_skip_blanks(&p);
        if (mw_parse_u64(&p, dst) < 0) return -1;
        mw_skip_blanks(&p);
        if (*p == '\n')
            p++;
        else if (*p)
            return -1;
        *seen = 1;
    }
    return seen_ue && seen_ce ? 0 : -1;
}

typedef struct ras_card {
    char card[16];       /* card0 */
    char pci_bus_id[32]; /* 0000:03:00.0 */
    int fd;              /* its ras folder */
    char blocks[MAX_BLOCKS][24];
    size_t nblocks;
} ras_card;

typedef struct ras_state {
    ras_card cards[MAX_CARDS];
    size_t n;
} ras_state;

static int cmp_block(const void *a, const void *b)
{
    return strcmp(a, b);
}

static int cmp_card(const void *a, const void *b)
{
    const ras_card *x = a, *y = b;
    size_t lx = strlen(x->card), ly = strlen(y->card);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->card, y->card);
}

/* "cardN" (not "card0-DP-1", a connector). */
static int is_card(const char *name)
{
    if (strncmp(name, "card", 4) != 0 || !name[4]) return 0;
    for (const char *c = name + 4; *c; c++)
        if (*c < '0' || *c > '9') return 0;
    return strlen(name) < 16;
}

/* The PCI address from the device's uevent (PCI_SLOT_NAME=...). */
static void pci_slot(const mw_env *env, const char *card, char *out, size_t n)
{
    char path[96];
    snprintf(path, sizeof(path), DRM_DIR "/%s/device/uevent", card);
    mw_buf b;
    mw_buf_init(&b, 1u << 16);
    out[0] = '\0';
    if (mw_hostfs_read(env->host, path, &b, 0) == 0 && b.data) {
        const char *s = strstr(b.data, "PCI_SLOT_NAME=");
        if (s) {
            s += 14;
            size_t k = strcspn(s, "\n");
            if (k < n) {
                memcpy(out, s, k);
                out[k] = '\0';
            }
        }
    }
    mw_buf_free(&b);
}

static void find_blocks(ras_card *c)
{
    DIR *d = mw_fdopendir_dup(c->fd);
    if (!d) return;
    const struct dirent *de;
    while ((de = readdir(d)) && c->nblocks < MAX_BLOCKS) {
        size_t l = strlen(de->d_name);
        if (l <= 10 || l - 10 >= sizeof(c->blocks[0]) ||
            strcmp(de->d_name + l - 10, "_err_count") != 0)
            continue;
        memcpy(c->blocks[c->nblocks], de->d_name, l - 10);
        c->blocks[c->nblocks++][l - 10] = '\0';
    }
    closedir(d);
    qsort(c->blocks, c->nblocks, sizeof(c->blocks[0]), cmp_block);
}

static int ras_init(const mw_env *env, void **state)
{
    int fd = mw_hostfs_opendirfd(env->host, DRM_DIR);
    if (fd < 0) return MW_COLLECTOR_ABSENT;
    DIR *d = mw_fdopendir_dup(fd);
    close(fd);
    if (!d) return MW_COLLECTOR_ABSENT;
    ras_state *st = mw_xcalloc(1, sizeof(*st));
    const struct dirent *de;
    while ((de = readdir(d)) && st->n < MAX_CARDS) {
        if (!is_card(de->d_name)) continue;
        char path[sizeof(DRM_DIR) + sizeof(de->d_name) + 16];
        snprintf(path, sizeof(path), DRM_DIR "/%s/device/ras", de->d_name);
        int rfd = mw_hostfs_opendirfd(env->host, path);
        if (rfd < 0) continue; /* not amdgpu, or RAS off */
        ras_card *c = &st->cards[st->n++];
        mw_strlcpy(c->card, de->d_name, sizeof(c->card));
        c->fd = rfd;
        pci_slot(env, c->card, c->pci_bus_id, sizeof(c->pci_bus_id));
        find_blocks(c);
    }
    closedir(d);
    if (!st->n) {
        free(st);
        return MW_COLLECTOR_ABSENT;
    }
    qsort(st->cards, st->n, sizeof(ras_card), cmp_card);
    mw_log(MW_LOG_INFO, "amdgpu_ras", "RAS error counters of %zu AMD GPU%s", st->n,
           st->n == 1 ? "" : "s");
    *state = st;
    return 0;
}

static void ras_collect(void *state, mw_collect_ctx *ctx)
{
    ras_state *st = state;
    mw_buf b;
    mw_buf_init(&b, 4096);
    for (size_t i = 0; i < st->n; i++) {
        const ras_card *c = &st->cards[i];
        for (size_t k = 0; k < c->nblocks; k++) {
            char name[48], path[128];
            snprintf(name, sizeof(name), "%s_err_count", c->blocks[k]);
            snprintf(path, sizeof(path), DRM_DIR "/%s/device/ras/%s", c->card, name);
            int rc = mw_readat(c->fd, name, &b, 4096);
            mw_amdgpu_ras_count n;
            if (rc < 0) {
                mw_collect_error(ctx, path, rc, NULL);
                continue;
            }
            if (mw_amdgpu_ras_parse(b.data ? b.data : "", &n) < 0) {
                mw_collect_error(ctx, path, 0, "not 'ue: N' and 'ce: M' lines");
                continue;
            }
            const char *blk = c->blocks[k];
            mw_emit(ctx->snap, &RAS_ERRORS, (double)n.ue, "card", c->card, "pci_bus_id",
                    c->pci_bus_id, "block", blk, "type", "uncorrected", MW_END);
            mw_emit(ctx->snap, &RAS_ERRORS, (double)n.ce, "card", c->card, "pci_bus_id",
                    c->pci_bus_id, "block", blk, "type", "corrected", MW_END);
            if (n.has_de)
                mw_emit(ctx->snap, &RAS_ERRORS, (double)n.de, "card", c->card, "pci_bus_id",
                        c->pci_bus_id, "block", blk, "type", "deferred", MW_END);
        }
    }
    mw_buf_free(&b);
}

static void ras_destroy(void *state)
{
    ras_state *st = state;
    if (!st) return;
    for (size_t i = 0; i < st->n; i++)
        close(st->cards[i].fd);
    free(st);
}

const mw_collector mw_collector_amdgpu_ras = {
    .name = "amdgpu_ras",
    .help = "AMD GPU RAS error counters per hardware block from amdgpu's sysfs",
    .init = ras_init,
    .collect = ras_collect,
    .destroy = ras_destroy,
};
