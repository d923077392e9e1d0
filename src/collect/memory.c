/* memory.c - host memory usage from /proc/meminfo.
 *
 * A static table maps each known field to its metric. Sizes ("kB" in the
 * file, KiB in fact) are exported in bytes; the HugePages_* fields are page
 * counts and are exported as unitless gauges. HugePages_Total becomes
 * mlwatch_memory_huge_pages: a "_total" suffix would read as a counter and
 * "_count" as part of a histogram. SecPageTables is spelled out
 * (secondary_page_tables) since "sec" reads as an abbreviated unit. Fields
 * the table does not know are skipped. */
#include "collector.h"
#include "memory.h"
#include "../core/parse.h"

#include <string.h>

#define MEMINFO_MAX (64u << 10)

typedef struct field {
    const char *key;
    int kb; /* value in kB (exported in bytes); else a page count */
    mw_metric_desc desc;
} field;

#define KB(key, name, help)                                                                        \
    {                                                                                              \
        key, 1,                                                                                    \
        {                                                                                          \
            "mlwatch_memory_" name "_bytes", help, "bytes", MW_GAUGE                               \
        }                                                                                          \
    }
#define PAGES(key, name, help)                                                                     \
    {                                                                                              \
        key, 0,                                                                                    \
        {                                                                                          \
            "mlwatch_memory_" name, help, "", MW_GAUGE                                             \
        }                                                                                          \
    }

/* In the order of the kernel's fs/proc/meminfo.c, which the parser uses as a
 * hint to find each line's entry quickly. */
/* clang-format off */
static const field FIELDS[] = {
    KB("MemTotal", "total", "Usable RAM: physical memory less reserved (MemTotal)."),
    KB("MemFree", "free", "Unused RAM (MemFree)."),
    KB("MemAvailable", "available", "Estimate of memory available to start new applications without swapping (MemAvailable)."),
    KB("Buffers", "buffers", "Block device buffers (Buffers)."),
    KB("Cached", "cached", "Page cache, excluding swap cache (Cached)."),
    KB("SwapCached", "swap_cached", "Memory swapped out and back in, still in swap (SwapCached)."),
    KB("Active", "active", "Memory used recently, not reclaimed unless needed (Active)."),
    KB("Inactive", "inactive", "Memory not used recently, reclaimable first (Inactive)."),
    KB("Active(anon)", "active_anon", "Active anonymous and shmem memory (Active(anon))."),
    KB("Inactive(anon)", "inactive_anon", "Inactive anonymous and shmem memory (Inactive(anon))."),
    KB("Active(file)", "active_file", "Active file-backed page cache (Active(file))."),
    KB("Inactive(file)", "inactive_file", "Inactive file-backed page cache (Inactive(file))."),
    KB("Unevictable", "unevictable", "Memory that cannot be reclaimed (Unevictable)."),
    KB("Mlocked", "mlocked", "Memory locked with mlock() (Mlocked)."),
    KB("SwapTotal", "swap_total", "Swap space configured (SwapTotal)."),
    KB("SwapFree", "swap_free", "Unused swap space (SwapFree)."),
    KB("Zswap", "zswap", "Memory used by the zswap compressed cache (Zswap)."),
    KB("Zswapped", "zswapped", "Anonymous memory held compressed in zswap (Zswapped)."),
    KB("Dirty", "dirty", "Memory waiting to be written back to disk (Dirty)."),
    KB("Writeback", "writeback", "Memory being written back to disk (Writeback)."),
    KB("AnonPages", "anon_pages", "Anonymous memory mapped into page tables (AnonPages)."),
    KB("Mapped", "mapped", "Files mapped into memory (Mapped)."),
    KB("Shmem", "shmem", "Shared memory and tmpfs (Shmem)."),
    KB("KReclaimable", "kreclaimable", "Kernel memory the kernel can reclaim (KReclaimable)."),
    KB("Slab", "slab", "Kernel slab allocations (Slab)."),
    KB("SReclaimable", "sreclaimable", "Reclaimable slab memory (SReclaimable)."),
    KB("SUnreclaim", "sunreclaim", "Unreclaimable slab memory (SUnreclaim)."),
    KB("KernelStack", "kernel_stack", "Kernel stacks of all tasks (KernelStack)."),
    KB("PageTables", "page_tables", "Page tables (PageTables)."),
    KB("SecPageTables", "secondary_page_tables", "Secondary page tables, e.g. KVM and IOMMU (SecPageTables)."),
    KB("NFS_Unstable", "nfs_unstable", "NFS pages sent but not yet committed (NFS_Unstable)."),
    KB("Bounce", "bounce", "Block device bounce buffers (Bounce)."),
    KB("WritebackTmp", "writeback_tmp", "FUSE temporary writeback buffers (WritebackTmp)."),
    KB("CommitLimit", "commit_limit", "Total memory that can be committed (CommitLimit)."),
    KB("Committed_AS", "committed_as", "Memory committed to by allocations (Committed_AS)."),
    KB("VmallocTotal", "vmalloc_total", "Size of the vmalloc address space (VmallocTotal)."),
    KB("VmallocUsed", "vmalloc_used", "vmalloc memory in use (VmallocUsed)."),
    KB("VmallocChunk", "vmalloc_chunk", "Largest free vmalloc block (VmallocChunk)."),
    KB("Percpu", "percpu", "Per-CPU allocator memory (Percpu)."),
    KB("HardwareCorrupted", "hardware_corrupted", "Memory taken out of use by the kernel after hardware errors (HardwareCorrupted)."),
    KB("AnonHugePages", "anon_huge_pages", "Anonymous memory in transparent huge pages (AnonHugePages)."),
    KB("ShmemHugePages", "shmem_huge_pages", "Shared memory in transparent huge pages (ShmemHugePages)."),
    KB("ShmemPmdMapped", "shmem_pmd_mapped", "Shared memory mapped with huge pages (ShmemPmdMapped)."),
    KB("FileHugePages", "file_huge_pages", "Page cache in huge pages (FileHugePages)."),
    KB("FilePmdMapped", "file_pmd_mapped", "Page cache mapped with huge pages (FilePmdMapped)."),
    KB("CmaTotal", "cma_total", "Contiguous memory allocator area (CmaTotal)."),
    KB("CmaFree", "cma_free", "Free contiguous memory allocator memory (CmaFree)."),
    KB("Unaccepted", "unaccepted", "Memory not yet accepted by a confidential-computing guest (Unaccepted)."),
    KB("Balloon", "balloon", "Memory taken by the hypervisor's balloon driver (Balloon)."),
    PAGES("HugePages_Total", "huge_pages", "Size of the persistent huge page pool, in pages (HugePages_Total)."),
    PAGES("HugePages_Free", "huge_pages_free", "Huge pages in the pool not yet allocated, in pages (HugePages_Free)."),
    PAGES("HugePages_Rsvd", "huge_pages_reserved", "Huge pages reserved but not yet allocated, in pages (HugePages_Rsvd)."),
    PAGES("HugePages_Surp", "huge_pages_surplus", "Huge pages above the persistent pool size, in pages (HugePages_Surp)."),
    KB("Hugepagesize", "huge_page_size", "Default huge page size (Hugepagesize)."),
    KB("Hugetlb", "hugetlb", "Memory in huge pages of all sizes (Hugetlb)."),
    KB("DirectMap4k", "direct_map_4k", "Kernel direct map in 4 KiB pages (DirectMap4k)."),
    KB("DirectMap2M", "direct_map_2m", "Kernel direct map in 2 MiB pages (DirectMap2M)."),
    KB("DirectMap1G", "direct_map_1g", "Kernel direct map in 1 GiB pages (DirectMap1G)."),
};
/* clang-format on */
#define NFIELDS (sizeof(FIELDS) / sizeof(FIELDS[0]))
_Static_assert(NFIELDS <= MW_MEMINFO_MAXFIELDS, "mw_meminfo.present has one bit per field");

/* Find key[0..len) starting at *hint (the entry after the previous line's). */
static int lookup(const char *key, size_t len, size_t *hint)
{
    for (size_t k = 0; k < NFIELDS; k++) {
        size_t i = (*hint + k) % NFIELDS;
        if (strncmp(FIELDS[i].key, key, len) == 0 && FIELDS[i].key[len] == '\0') {
            *hint = i + 1;
            return (int)i;
        }
    }
    return -1;
}

int mw_meminfo_field(const char *key)
{
    size_t hint = 0;
    return lookup(key, strlen(key), &hint);
}

/* The value part of a known line: blanks, number, [" kB"], blanks, '\n'. */
static int parse_value(const char *p, int kb, uint64_t *out)
{
    mw_skip_blanks(&p);
    uint64_t v;
    if (mw_parse_u64(&p, &v) < 0) return -1;
    if (kb) {
        if (strncmp(p, " kB", 3) != 0 || v > UINT64_MAX / 1024) return -1;
        p += 3;
        v *= 1024;
    }
    mw_skip_blanks(&p);
    if (*p != '\n') return -1;
    *out = v;
    return 0;
}

int mw_parse_meminfo(const char *text, mw_meminfo *out)
{
    memset(out, 0, sizeof(*out));
    size_t hint = 0;
    const char *p = text, *line, *nl;
    while (mw_next_whole_line(&p, &line, &nl, &out->malformed)) {
        const char *colon = memchr(line, ':', (size_t)(nl - line));
        if (!colon || colon == line) {
            out->malformed++;
        } else {
            int i = lookup(line, (size_t)(colon - line), &hint);
            if (i >= 0) {
                uint64_t bit = 1ULL << i, v;
                if ((out->present & bit) || parse_value(colon + 1, FIELDS[i].kb, &v) < 0) {
                    out->malformed++;
                } else {
                    out->value[i] = v;
                    out->present |= bit;
                }
            }
        }
    }
    return (out->present & 1) ? 0 : -1; /* FIELDS[0] is MemTotal */
}

static void memory_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/meminfo";
    const char *text = mw_collect_read(ctx, path, MEMINFO_MAX);
    if (!text) return;
    mw_meminfo m;
    if (mw_parse_meminfo(text, &m) < 0) {
        mw_collect_error(ctx, path, 0, "malformed content: no MemTotal");
        return;
    }
    for (size_t i = 0; i < NFIELDS; i++)
        if (m.present & (1ULL << i))
            mw_emit(ctx->snap, &FIELDS[i].desc, (double)m.value[i], MW_END);
    if (m.malformed) mw_collect_error(ctx, path, 0, "malformed or truncated lines skipped");
}

const mw_collector mw_collector_memory = {
    .name = "memory",
    .help = "Host memory usage from /proc/meminfo",
    .collect = memory_collect,
};
