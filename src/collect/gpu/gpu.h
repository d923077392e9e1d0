/* gpu.h - the internal GPU interface: what a vendor backend reports about
 * each device, and the small table of functions every backend provides.
 *
 * Like a rio in Redis, one struct of function pointers (mw_gpu_backend)
 * stands in front of several implementations: nvml.c (libnvidia-ml,
 * dlopen'ed) and rocm.c (librocm_smi64, dlopen'ed). The tests need no third
 * implementation: they point the real NVML backend at a fake
 * libnvidia-ml.so.1 (tests/fakenvml/).
 *
 * Backends are driven from the GPU collector's own thread (gpu_collector.c):
 * nothing here is called from the collection cycle or from a scrape. */
#ifndef MW_GPU_H
#define MW_GPU_H

#include "gpu_health.h"
#include "../../core/hostfs.h"
#include "../../core/options.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define MW_GPU_MAX_DEVICES 64
#define MW_GPU_MAX_PROCS 256 /* compute processes kept per device */
#define MW_GPU_MAX_MIG 8     /* MIG devices per GPU (A100, H100, H200, B200: at most 7) */
#define MW_GPU_MAX_LINKS 18  /* NVLinks per GPU */
#define MW_GPU_MAX_XIDS 32   /* distinct XID codes counted per GPU */
#define MW_GPU_NONE UINT32_MAX

/* One bit per reading; a bit set in mw_gpu_dev.have means "valid in this
 * reading"; in a backend's unsupported mask it means "never asked again". */
enum {
    MW_GF_UTIL,
    MW_GF_MEMORY,
    MW_GF_POWER,
    MW_GF_POWER_LIMIT,
    MW_GF_ENERGY,
    MW_GF_TEMP,
    MW_GF_SM_CLOCK,
    MW_GF_SM_CLOCK_MAX,
    MW_GF_MEM_CLOCK,
    MW_GF_MEM_CLOCK_MAX,
    MW_GF_CLOCK_EVENTS,
    MW_GF_PSTATE,
    MW_GF_ECC,
    MW_GF_REMAPPED,
    MW_GF_RETIRED,
    MW_GF_PCIE_GEN,
    MW_GF_PCIE_GEN_MAX,
    MW_GF_PCIE_WIDTH,
    MW_GF_PCIE_WIDTH_MAX,
    MW_GF_PCIE_REPLAY,
    MW_GF_NVLINK,
    MW_GF_NUMA,
    MW_GF_CPU_AFFINITY,
    MW_GF_PROCS,
    MW_GF_PROC_UTIL,
    MW_GF_MIG,
    MW_GF_MEM_UTIL,
    MW_GF_COUNT
};
#define MW_GF_BIT(f) (UINT64_C(1) << (f))

typedef struct mw_gpu_proc {
    uint64_t mem_bytes; /* UINT64_MAX: not available */
    uint32_t pid;
    uint32_t gpu_instance, compute_instance; /* MW_GPU_NONE outside MIG */
    uint16_t sm_permille;                    /* mean SM utilization, 0..1000 */
    uint8_t has_sm;                          /* sm_permille came from samples */
} mw_gpu_proc;

/* GPM readings (NVML's GPU Performance Monitoring, Hopper and newer; see
 * nvml_gpm.c): percent, the mean over the last slow interval. */
enum { MW_GPM_GRAPHICS, MW_GPM_SM_OCCUPANCY, MW_GPM_DRAM_BW, MW_GPM_COUNT };

typedef struct mw_gpu_mig {
    char uuid[96];
    char profile[32]; /* "1g.10gb" */
    uint32_t gpu_instance, compute_instance;
    uint64_t have; /* MW_GF_MEMORY, MW_GF_UTIL */
    uint64_t mem_used, mem_total;
    uint32_t util_pct;
    double gpm[MW_GPM_COUNT]; /* of its GPU instance */
    uint8_t gpm_have;         /* bit per MW_GPM_* */
} mw_gpu_mig;

typedef struct mw_gpu_link {
    uint32_t link;
    uint64_t errors[5]; /* replay, recovery, crc_flit, crc_data, ecc_data */
    uint8_t have;       /* bit per counter */
} mw_gpu_link;

typedef struct mw_gpu_xid {
    uint32_t xid;
    uint64_t count;
} mw_gpu_xid;

/* Everything known about one device after a poll. Identity fields are set
 * at discovery; readings carry a bit in `have`. */
typedef struct mw_gpu_dev {
    char index[12]; /* the `gpu` label: the backend's device index */
    char uuid[96];
    char model[96];
    char pci_bus_id[32]; /* canonical "0000:17:00.0" */
    char cpu_affinity[256];
    int lost;
    uint64_t have;
    uint32_t util_pct, mem_util_pct;
    uint64_t mem_used, mem_total;
    uint32_t power_mw, power_limit_mw;
    uint64_t energy_mj; /* raw counter as the driver reports it */
    double energy_j;    /* monotonic across counter resets (set by the collector) */
    int32_t temp_c;
    uint32_t sm_mhz, sm_max_mhz, mem_mhz, mem_max_mhz;
    uint64_t clock_events;
    uint32_t pstate;
    uint64_t ecc_corrected, ecc_uncorrected;
    uint32_t remapped[4]; /* correctable, uncorrectable, pending, failure */
    uint32_t retired[2];  /* multiple single-bit, double-bit */
    uint32_t pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
    uint64_t pcie_replay;
    int32_t numa_node;
    int mig_enabled;
    uint32_t nlinks, nmig, nprocs, nxids;
    mw_gpu_link links[MW_GPU_MAX_LINKS];
    mw_gpu_mig mig[MW_GPU_MAX_MIG];
    mw_gpu_proc procs[MW_GPU_MAX_PROCS];
    mw_gpu_xid xids[MW_GPU_MAX_XIDS];
    double gpm[MW_GPM_COUNT];   /* the whole GPU */
    mw_gpu_health health;       /* set by the collector after each poll */
    uint8_t gpm_have;           /* bit per MW_GPM_* */
    int64_t poll_ns;            /* time the last poll of this device took */
    const char *driver_version; /* the backend's (set by the collector) */
} mw_gpu_dev;

/* What a poll reads. Slow reads (process listing, MIG, ECC, NVLink, PCIe)
 * run at --gpu-process-interval; fast ones every collection interval. */
#define MW_GPU_FAST 1
#define MW_GPU_SLOW 2

/* Where a backend reports what went wrong; called on the GPU thread. */
typedef struct mw_gpu_sink {
    void *ctx;
    /* A failed call (not NOT_SUPPORTED): "gpu0/nvmlDeviceGetPowerUsage". */
    void (*error)(void *ctx, unsigned dev, const char *call, const char *what);
    /* An XID event for device dev. */
    void (*xid)(void *ctx, unsigned dev, uint64_t xid);
} mw_gpu_sink;

typedef struct mw_gpu_backend {
    const char *name; /* "nvml", "rocm" */
    void *impl;
    unsigned ndevices;
    char driver_version[80];
    /* Fill identity (index, uuid, model, bus id, NUMA, affinity) of dev. */
    void (*identify)(void *impl, unsigned dev, mw_gpu_dev *d, const mw_gpu_sink *sink);
    /* Read the fields selected by what (MW_GPU_FAST|MW_GPU_SLOW) into d,
     * setting d->have for each; slow-read parts of d are left as they were
     * when MW_GPU_SLOW is not asked. Sets d->lost. */
    void (*poll)(void *impl, unsigned dev, mw_gpu_dev *d, unsigned what, const mw_gpu_sink *sink);
    /* Deliver pending events (XIDs) without waiting. */
    void (*events)(void *impl, const mw_gpu_sink *sink);
    void (*close)(void *impl);
} mw_gpu_backend;

/* Load and initialise a backend. lib is a file name or path; "" or "none"
 * switches the backend off. host is the --root tree (sysfs fallbacks).
 * Returns 0 with *b filled (ndevices may be 0), or -1 with one line in why. */
int mw_gpu_nvml_open(mw_gpu_backend *b, const char *lib, const mw_hostfs *host, char *why,
                     size_t whysize);
int mw_gpu_rocm_open(mw_gpu_backend *b, const char *lib, const mw_hostfs *host, char *why,
                     size_t whysize);

/* ---- parsers and formatters (gpu_parse.c; unit-tested and fuzzed) ---- */

/* Parse a PCI bus ID as NVML ("00000000:17:00.0", "0000:17:00.0") or sysfs
 * writes it, any case, into its canonical sysfs form "0000:17:00.0" (domain
 * as 4 hex digits when it fits, else 8). Returns 0, or -1 if malformed. */
int mw_gpu_parse_pci_bus_id(const char *s, char *out, size_t size);
/* The MIG profile ("1g.10gb", "3g.40gb", "1g.10gb+me") from a MIG device
 * name ("NVIDIA A100-SXM4-80GB MIG 1g.10gb"). Returns 0 or -1. */
int mw_gpu_parse_mig_profile(const char *name, char *out, size_t size);
/* A driver version "550.54.15" or "535.104.05" or "6.7.0": up to three
 * numbers. Returns 0 or -1. */
int mw_gpu_parse_driver_version(const char *s, unsigned *major, unsigned *minor, unsigned *patch);
/* Format a CPU bitmap (words of 64 bits) as a Linux CPU list "0-3,8". */
void mw_gpu_format_cpulist(const uint64_t *bits, size_t nwords, char *out, size_t size);
/* Copy a string from a library into a label value: printable ASCII only
 * (anything else becomes '?'), trimmed, always terminated. */
void mw_gpu_clean_string(char *dst, size_t size, const char *src, size_t srclen);

/* ---- attribution (gpu_share.c) ---- */

/* Split total into n integer parts proportional to w (largest remainder;
 * leftover units go to the largest fractional remainders, ties to the lower
 * index). All weights 0: equal split, leftovers to the lowest indexes. The
 * parts always sum to total. */
void mw_gpu_split(uint64_t total, const uint64_t *w, size_t n, uint64_t *out);

/* Test and benchmark hook: have every running GPU poller do a full (fast
 * and slow) poll now and wait until it has been published. Returns 0, or -1
 * on timeout. No effect when no GPU collector runs. */
int mw_gpu_collector_sync(void);

/* The GPU collector's settings (gpu_collector.c): the libraries to load
 * ("none" switches a vendor off) and the interval of slow GPU calls. */
typedef struct mw_gpu_settings {
    char nvml_library[PATH_MAX];
    char rocm_library[PATH_MAX];
    int64_t gpu_process_interval_ms;
    char kernel_log[PATH_MAX];  /* "/dev/kmsg" under --root; "none": not read */
    char xid_catalog[PATH_MAX]; /* merged over the built-in catalog; "": none */
} mw_gpu_settings;
extern const mw_option_group mw_gpu_options;

#endif
