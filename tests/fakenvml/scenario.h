/* scenario.h - the world a fake GPU library reports, read from a scenario
 * file (format: tests/fakenvml/README.md). Test code, shared by the fake
 * NVML and the fake ROCm SMI. */
#ifndef FK_SCENARIO_H
#define FK_SCENARIO_H

#include <stdint.h>

#define FK_MAX_GPUS 16
#define FK_MAX_PROCS 2048
#define FK_MAX_MIG 16
#define FK_MAX_LINKS 18
#define FK_MAX_EVENTS 256
#define FK_RAS_BLOCKS 14 /* rsmi_gpu_block_t: UMC (bit 0) .. FUSE (bit 13) */

/* Readings a scenario can make fail ("unsupported=" or "fail=NAME:CODE"). */
enum {
    FK_UTIL,
    FK_MEMORY,
    FK_POWER,
    FK_LIMIT,
    FK_ENERGY,
    FK_TEMP,
    FK_CLOCK,
    FK_MAXCLOCK,
    FK_REASONS,
    FK_PSTATE,
    FK_ECC,
    FK_REMAPPED,
    FK_RETIRED,
    FK_PCIE_GEN,
    FK_PCIE_GEN_MAX,
    FK_PCIE_WIDTH,
    FK_PCIE_WIDTH_MAX,
    FK_REPLAY,
    FK_NVLINK,
    FK_NUMA,
    FK_AFFINITY,
    FK_PROCS,
    FK_PROCUTIL,
    FK_MIG,
    FK_UUID,
    FK_NAME,
    FK_PCI,
    FK_EVENTS,
    FK_MIGMEMORY,
    FK_MIGUTIL,
    FK_GPM,    /* nvmlGpmSampleGet */
    FK_GPMMIG, /* nvmlGpmMigSampleGet */
    FK_NFIELDS
};
extern const char *const fk_field_names[FK_NFIELDS];
/* Scenario names of the RAS blocks, by bit: "umc", "sdma", "gfx", ... */
extern const char *const fk_ras_block_names[FK_RAS_BLOCKS];

typedef struct fk_proc {
    unsigned gpu, pid, gi, ci; /* gi/ci: 0xffffffff outside MIG */
    unsigned long long mem;    /* bytes; ULLONG_MAX: not available */
    int has_sm;
    unsigned sm; /* percent, one sample per query */
} fk_proc;

typedef struct fk_mig {
    int present;
    char uuid[96], name[96];
    unsigned gi, ci;
    unsigned long long memtotal, memused;
    int has_util;
    unsigned util;
    /* GPM of its GPU instance, percent: graphics, sm_occupancy, dram_bw
     * (the first line of a GPU instance counts); < 0: NOT_SUPPORTED. */
    double gpm[3];
} fk_mig;

typedef struct fk_link {
    int present, active;
    unsigned long long err[5]; /* replay recovery crc_flit crc_data ecc_data */
} fk_link;

typedef struct fk_gpu {
    int present;
    char name[96], uuid[96], bus[32];
    unsigned util, memutil;
    unsigned long long memtotal, memused;
    unsigned power_mw, limit_mw;
    unsigned long long energy_mj;
    int temp;
    unsigned sm_mhz, sm_max_mhz, mem_mhz, mem_max_mhz;
    unsigned long long reasons;
    unsigned pstate;
    unsigned long long ecc[2];
    unsigned remapped[4], retired[2];
    unsigned pcie_gen, pcie_gen_max, pcie_width, pcie_width_max, replay;
    int numa;
    uint64_t cpus[16];
    int lost, mig;
    unsigned procs_delay_ms;
    int gpm;         /* GPM supported (Hopper and newer) */
    double gpm_v[3]; /* the whole GPU's GPM, as fk_mig.gpm */
    /* ROCm SMI ECC counts per block (ras_BLOCK=CE,UE): ras_rc[b] is 0 for
     * counts, -1 when the block is not listed (NOT_SUPPORTED), else the
     * error that block answers (ras_BLOCK=CODE). */
    unsigned long long ras[FK_RAS_BLOCKS][2];
    int ras_rc[FK_RAS_BLOCKS];
    fk_link links[FK_MAX_LINKS];
    fk_mig migs[FK_MAX_MIG];
    int fail[FK_NFIELDS]; /* 0, or the error code that reading answers */
} fk_gpu;

typedef struct fk_event {
    unsigned id, gpu;
    unsigned long long xid;
} fk_event;

typedef struct fk_world {
    char driver[80];
    int init_rc; /* what init answers */
    unsigned ngpus;
    fk_gpu gpus[FK_MAX_GPUS];
    fk_proc procs[FK_MAX_PROCS];
    unsigned nprocs;
    fk_event events[FK_MAX_EVENTS];
    unsigned nevents;
} fk_world;

/* Parse a scenario; error codes are looked up by name with code_of (e.g.
 * "NOT_SUPPORTED" -> 3), numbers are taken as they are. Returns 0, or -1
 * with "LINE: problem" in err. */
int fk_parse(const char *text, fk_world *w, int (*code_of)(const char *name),
             int not_supported_code, char *err, unsigned errsize);

/* The current world, re-read from $FAKE_NVML_SCENARIO when the file
 * changes (unless FAKE_NVML_RELOAD=0). Aborts on a malformed scenario: a
 * test with a typo must fail loudly. Call with the library's lock held. */
const fk_world *fk_world_get(int (*code_of)(const char *name), int not_supported_code);
void fk_world_release(void);

#endif
