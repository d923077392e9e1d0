/* rocm.c - the AMD backend: librocm_smi64 loaded with dlopen, behind the
 * same interface as NVML (gpu.h). The declarations below are our own,
 * matching rocm_smi.h (ROCm SMI 5.x/6.x; Debian's librocm-smi-dev 5.2.3 for
 * reference): every function returns rsmi_status_t (an enum, int-sized) and
 * takes the device index first.
 *
 * It reports the core readings: utilization, memory, power, power cap,
 * energy, temperature, NUMA node and per-process memory, and ECC counts
 * (rsmi_dev_ecc_count_get per RAS block, summed: the same family and
 * health rule as NVML's volatile ECC). */
#include "gpu.h"
#include "../../core/util.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int rsmi_status_t;
#define RSMI_STATUS_SUCCESS 0
#define RSMI_STATUS_NOT_SUPPORTED 2
#define RSMI_STATUS_PERMISSION 4
#define RSMI_STATUS_NOT_YET_IMPLEMENTED 9
#define RSMI_STATUS_NOT_FOUND 10
#define RSMI_STATUS_INSUFFICIENT_SIZE 11
#define RSMI_MEM_TYPE_VRAM 0
#define RSMI_TEMP_TYPE_EDGE 0
#define RSMI_TEMP_TYPE_JUNCTION 1
#define RSMI_TEMP_CURRENT 0
#define RSMI_SW_COMP_DRIVER 0

/* rsmi_gpu_block_t: one bit per RAS block, UMC (1 << 0) to FUSE (1 << 13)
 * in every ROCm SMI release so far. The enum has a 64-bit enumerator
 * (RSMI_GPU_BLOCK_RESERVED = 1 << 63), so the compiler makes it 64 bits
 * wide and it is passed as a uint64_t. */
#define RSMI_GPU_BLOCKS 14

/* rsmi_error_count_t (rocm_smi.h): accumulated since the driver loaded. */
typedef struct {
    uint64_t correctable_err;
    uint64_t uncorrectable_err;
} rsmi_error_count_t;
_Static_assert(sizeof(rsmi_error_count_t) == 16, "rsmi_error_count_t layout");

/* rsmi_process_info_t (rocm_smi.h). */
typedef struct {
    uint32_t process_id;
    uint32_t pasid;
    uint64_t vram_usage; /* bytes */
    uint64_t sdma_usage; /* microseconds */
    uint32_t cu_occupancy;
} rsmi_process_info_t;
_Static_assert(sizeof(rsmi_process_info_t) == 32, "rsmi_process_info_t layout");

typedef struct rocm_fns {
    rsmi_status_t (*init)(uint64_t flags);
    rsmi_status_t (*shut_down)(void);
    rsmi_status_t (*num_devices)(uint32_t *n);
    rsmi_status_t (*status_string)(rsmi_status_t st, const char **s);
    rsmi_status_t (*version_str)(int component, char *buf, uint32_t len);
    rsmi_status_t (*name)(uint32_t dv, char *buf, size_t len);
    rsmi_status_t (*unique_id)(uint32_t dv, uint64_t *id);
    rsmi_status_t (*pci_id)(uint32_t dv, uint64_t *bdfid);
    rsmi_status_t (*busy)(uint32_t dv, uint32_t *pct);
    rsmi_status_t (*mem_busy)(uint32_t dv, uint32_t *pct);
    rsmi_status_t (*mem_total)(uint32_t dv, int type, uint64_t *bytes);
    rsmi_status_t (*mem_used)(uint32_t dv, int type, uint64_t *bytes);
    rsmi_status_t (*power_ave)(uint32_t dv, uint32_t sensor, uint64_t *uw);
    rsmi_status_t (*socket_power)(uint32_t dv, uint64_t *uw);
    rsmi_status_t (*power_cap)(uint32_t dv, uint32_t sensor, uint64_t *uw);
    rsmi_status_t (*energy)(uint32_t dv, uint64_t *count, float *resolution_uj, uint64_t *ts);
    rsmi_status_t (*temp)(uint32_t dv, uint32_t sensor, int metric, int64_t *millic);
    rsmi_status_t (*numa)(uint32_t dv, uint32_t *node);
    rsmi_status_t (*procs)(rsmi_process_info_t *procs, uint32_t *n);
    rsmi_status_t (*proc_gpus)(uint32_t pid, uint32_t *dv, uint32_t *n);
    rsmi_status_t (*proc_by_device)(uint32_t pid, uint32_t dv, rsmi_process_info_t *p);
    rsmi_status_t (*ecc_count)(uint32_t dv, uint64_t block, rsmi_error_count_t *ec);
} rocm_fns;

static const struct {
    size_t offset;
    const char *name;
    int required;
} syms[] = {
#define S(f, n, r)                                                                                 \
    {                                                                                              \
        offsetof(rocm_fns, f), n, r                                                                \
    }
    S(init, "rsmi_init", 1),
    S(shut_down, "rsmi_shut_down", 1),
    S(num_devices, "rsmi_num_monitor_devices", 1),
    S(status_string, "rsmi_status_string", 0),
    S(version_str, "rsmi_version_str_get", 0),
    S(name, "rsmi_dev_name_get", 0),
    S(unique_id, "rsmi_dev_unique_id_get", 0),
    S(pci_id, "rsmi_dev_pci_id_get", 0),
    S(busy, "rsmi_dev_busy_percent_get", 0),
    S(mem_busy, "rsmi_dev_memory_busy_percent_get", 0),
    S(mem_total, "rsmi_dev_memory_total_get", 0),
    S(mem_used, "rsmi_dev_memory_usage_get", 0),
    S(power_ave, "rsmi_dev_power_ave_get", 0),
    S(socket_power, "rsmi_dev_current_socket_power_get", 0),
    S(power_cap, "rsmi_dev_power_cap_get", 0),
    S(energy, "rsmi_dev_energy_count_get", 0),
    S(temp, "rsmi_dev_temp_metric_get", 0),
    S(numa, "rsmi_topo_get_numa_node_number", 0),
    S(procs, "rsmi_compute_process_info_get", 0),
    S(proc_gpus, "rsmi_compute_process_gpus_get", 0),
    S(proc_by_device, "rsmi_compute_process_info_by_device_get", 0),
    S(ecc_count, "rsmi_dev_ecc_count_get", 0),
#undef S
};

#define MAX_PROCS 1024

typedef struct rocm_dev {
    uint64_t unsupported;
    int use_socket_power;
    uint32_t temp_sensor;
    uint32_t ecc_off; /* RAS blocks that answered NOT_SUPPORTED: not asked again */
} rocm_dev;

typedef struct rocm {
    void *lib;
    rocm_fns f;
    unsigned n;
    rocm_dev devs[MW_GPU_MAX_DEVICES];
    rsmi_process_info_t procs[MAX_PROCS];
    uint32_t nprocs;
    int64_t procs_ns; /* when procs was listed (one listing serves every device) */
    int procs_ok;
} rocm;

static const char *status_text(rocm *x, rsmi_status_t st)
{
    const char *s = NULL;
    if (x->f.status_string && x->f.status_string(st, &s) != RSMI_STATUS_SUCCESS) s = NULL;
    return s ? s : "unknown ROCm SMI status";
}

static int check(rocm *x, unsigned i, rocm_dev *rd, int field, rsmi_status_t st, const char *call,
                 const mw_gpu_sink *sink)
{
    if (st == RSMI_STATUS_SUCCESS) return 1;
    if (st == RSMI_STATUS_NOT_SUPPORTED || st == RSMI_STATUS_NOT_YET_IMPLEMENTED ||
        st == RSMI_STATUS_PERMISSION) {
        if (field >= 0) rd->unsupported |= MW_GF_BIT(field);
        if (st == RSMI_STATUS_PERMISSION)
            sink->error(sink->ctx, i, call, "no permission (not asked again)");
        return 0;
    }
    char what[160];
    snprintf(what, sizeof(what), "%s (ROCm SMI status %d)", status_text(x, st), st);
    sink->error(sink->ctx, i, call, what);
    return 0;
}

#define ASK(rd, field) (!((rd)->unsupported & MW_GF_BIT(field)))

static void rocm_identify(void *impl, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    rocm *x = impl;
    rocm_dev *rd = &x->devs[i];
    snprintf(d->index, sizeof(d->index), "%u", i);
    char buf[128];
    memset(buf, 0, sizeof(buf));
    if (x->f.name &&
        check(x, i, rd, -1, x->f.name(i, buf, sizeof(buf) - 1), "rsmi_dev_name_get", sink))
        mw_gpu_clean_string(d->model, sizeof(d->model), buf, sizeof(buf));
    uint64_t v;
    if (x->f.unique_id && x->f.unique_id(i, &v) == RSMI_STATUS_SUCCESS)
        snprintf(d->uuid, sizeof(d->uuid), "%016" PRIx64, v);
    if (x->f.pci_id && check(x, i, rd, -1, x->f.pci_id(i, &v), "rsmi_dev_pci_id_get", sink)) {
        /* BDFID = domain << 32 | bus << 8 | device << 3 | function */
        char bus[40];
        snprintf(bus, sizeof(bus), "%x:%02x:%02x.%x", (unsigned)(v >> 32),
                 (unsigned)(v >> 8) & 0xff, (unsigned)(v >> 3) & 0x1f, (unsigned)v & 7);
        if (mw_gpu_parse_pci_bus_id(bus, d->pci_bus_id, sizeof(d->pci_bus_id)) < 0)
            d->pci_bus_id[0] = '\0';
    }
    uint32_t node;
    if (x->f.numa && x->f.numa(i, &node) == RSMI_STATUS_SUCCESS && node < 65536) {
        d->numa_node = (int32_t)node;
        d->have |= MW_GF_BIT(MW_GF_NUMA);
    }
    rd->temp_sensor = RSMI_TEMP_TYPE_EDGE;
}

static void list_procs(rocm *x, unsigned i, const mw_gpu_sink *sink)
{
    int64_t now = mw_mono_ns();
    if (x->procs_ns && now - x->procs_ns < 500000000) return; /* this round's listing */
    x->procs_ns = now;
    x->procs_ok = 0;
    uint32_t n = MAX_PROCS;
    rsmi_status_t st = x->f.procs(x->procs, &n);
    if (st == RSMI_STATUS_INSUFFICIENT_SIZE) {
        sink->error(sink->ctx, i, "rsmi_compute_process_info_get",
                    "more GPU processes than mlwatch lists (1024)");
        return;
    }
    if (!check(x, i, &x->devs[i], -1, st, "rsmi_compute_process_info_get", sink)) return;
    x->nprocs = n < MAX_PROCS ? n : MAX_PROCS;
    x->procs_ok = 1;
}

static void read_procs(rocm *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    d->nprocs = 0;
    if (!x->f.procs || !x->f.proc_gpus) return;
    list_procs(x, i, sink);
    if (!x->procs_ok) return;
    for (uint32_t k = 0; k < x->nprocs && d->nprocs < MW_GPU_MAX_PROCS; k++) {
        uint32_t gpus[MW_GPU_MAX_DEVICES], ng = MW_GPU_MAX_DEVICES, on = 0;
        if (x->f.proc_gpus(x->procs[k].process_id, gpus, &ng) != RSMI_STATUS_SUCCESS) continue;
        for (uint32_t g = 0; g < ng && g < MW_GPU_MAX_DEVICES; g++)
            on |= gpus[g] == i;
        if (!on) continue;
        mw_gpu_proc *p = &d->procs[d->nprocs++];
        memset(p, 0, sizeof(*p));
        p->pid = x->procs[k].process_id;
        p->gpu_instance = p->compute_instance = MW_GPU_NONE;
        rsmi_process_info_t one;
        if (x->f.proc_by_device && x->f.proc_by_device(p->pid, i, &one) == RSMI_STATUS_SUCCESS)
            p->mem_bytes = one.vram_usage;
        else /* the process's total is this GPU's only when it uses one GPU */
            p->mem_bytes = ng == 1 ? x->procs[k].vram_usage : UINT64_MAX;
    }
    d->have |= MW_GF_BIT(MW_GF_PROCS);
}

/* ECC counts: every RAS block's, summed (NVML's total is every memory
 * location's too). A block without RAS answers NOT_SUPPORTED once and is
 * not asked again; none left: the reading is off. Any other failure drops
 * this poll's reading (a partial sum would look like a counter reset). */
static void read_ecc(rocm *x, unsigned i, rocm_dev *rd, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    if (!ASK(rd, MW_GF_ECC) || !x->f.ecc_count) return;
    uint64_t ce = 0, ue = 0;
    int answered = 0;
    for (unsigned b = 0; b < RSMI_GPU_BLOCKS; b++) {
        if (rd->ecc_off & (1u << b)) continue;
        rsmi_error_count_t ec = {0, 0};
        rsmi_status_t st = x->f.ecc_count(i, (uint64_t)1 << b, &ec);
        if (st == RSMI_STATUS_SUCCESS) {
            ce += ec.correctable_err;
            ue += ec.uncorrectable_err;
            answered = 1;
        } else if (st == RSMI_STATUS_NOT_SUPPORTED || st == RSMI_STATUS_NOT_YET_IMPLEMENTED) {
            rd->ecc_off |= 1u << b;
        } else { /* no permission: off for good (said once); else counted, asked again */
            check(x, i, rd, MW_GF_ECC, st, "rsmi_dev_ecc_count_get", sink);
            return;
        }
    }
    if (rd->ecc_off == (1u << RSMI_GPU_BLOCKS) - 1) rd->unsupported |= MW_GF_BIT(MW_GF_ECC);
    if (!answered) return;
    d->ecc_corrected = ce;
    d->ecc_uncorrected = ue;
    d->have |= MW_GF_BIT(MW_GF_ECC);
}

static void rocm_poll(void *impl, unsigned i, mw_gpu_dev *d, unsigned what, const mw_gpu_sink *sink)
{
    rocm *x = impl;
    rocm_dev *rd = &x->devs[i];
    uint64_t slow = MW_GF_BIT(MW_GF_POWER_LIMIT) | MW_GF_BIT(MW_GF_PROCS) | MW_GF_BIT(MW_GF_ECC);
    uint64_t keep = MW_GF_BIT(MW_GF_NUMA) | (what & MW_GPU_SLOW ? 0 : slow);
    if (!(what & MW_GPU_FAST)) keep |= ~(slow | MW_GF_BIT(MW_GF_NUMA));
    d->have &= keep;
    uint32_t pct;
    uint64_t v, total;
    if (what & MW_GPU_FAST) {
        if (ASK(rd, MW_GF_UTIL) && x->f.busy &&
            check(x, i, rd, MW_GF_UTIL, x->f.busy(i, &pct), "rsmi_dev_busy_percent_get", sink)) {
            d->util_pct = pct > 100 ? 100 : pct;
            d->have |= MW_GF_BIT(MW_GF_UTIL);
        }
        if (ASK(rd, MW_GF_MEM_UTIL) && x->f.mem_busy &&
            check(x, i, rd, MW_GF_MEM_UTIL, x->f.mem_busy(i, &pct),
                  "rsmi_dev_memory_busy_percent_get", sink)) {
            d->mem_util_pct = pct > 100 ? 100 : pct;
            d->have |= MW_GF_BIT(MW_GF_MEM_UTIL);
        }
        if (ASK(rd, MW_GF_MEMORY) && x->f.mem_total && x->f.mem_used &&
            check(x, i, rd, MW_GF_MEMORY, x->f.mem_total(i, RSMI_MEM_TYPE_VRAM, &total),
                  "rsmi_dev_memory_total_get", sink) &&
            check(x, i, rd, MW_GF_MEMORY, x->f.mem_used(i, RSMI_MEM_TYPE_VRAM, &v),
                  "rsmi_dev_memory_usage_get", sink)) {
            d->mem_total = total;
            d->mem_used = v;
            d->have |= MW_GF_BIT(MW_GF_MEMORY);
        }
        if (ASK(rd, MW_GF_POWER)) {
            /* MI300 and newer report socket power only. */
            rsmi_status_t st = RSMI_STATUS_NOT_SUPPORTED;
            if (!rd->use_socket_power && x->f.power_ave) st = x->f.power_ave(i, 0, &v);
            if (st == RSMI_STATUS_NOT_SUPPORTED && x->f.socket_power) {
                st = x->f.socket_power(i, &v);
                rd->use_socket_power = st == RSMI_STATUS_SUCCESS;
            }
            if (check(x, i, rd, MW_GF_POWER, st, "rsmi_dev_power_ave_get", sink)) {
                d->power_mw = (uint32_t)(v / 1000);
                d->have |= MW_GF_BIT(MW_GF_POWER);
            }
        }
        float res = 0;
        uint64_t ts;
        if (ASK(rd, MW_GF_ENERGY) && x->f.energy &&
            check(x, i, rd, MW_GF_ENERGY, x->f.energy(i, &v, &res, &ts),
                  "rsmi_dev_energy_count_get", sink) &&
            res > 0) {
            d->energy_mj = (uint64_t)((double)v * (double)res / 1000.0 + 0.5);
            d->have |= MW_GF_BIT(MW_GF_ENERGY);
        }
        int64_t mc;
        if (ASK(rd, MW_GF_TEMP) && x->f.temp) {
            rsmi_status_t st = x->f.temp(i, rd->temp_sensor, RSMI_TEMP_CURRENT, &mc);
            if (st == RSMI_STATUS_NOT_SUPPORTED && rd->temp_sensor == RSMI_TEMP_TYPE_EDGE) {
                rd->temp_sensor = RSMI_TEMP_TYPE_JUNCTION; /* MI200/MI300 have no edge sensor */
                st = x->f.temp(i, rd->temp_sensor, RSMI_TEMP_CURRENT, &mc);
            }
            if (check(x, i, rd, MW_GF_TEMP, st, "rsmi_dev_temp_metric_get", sink)) {
                d->temp_c = (int32_t)(mc / 1000);
                d->have |= MW_GF_BIT(MW_GF_TEMP);
            }
        }
    }
    if (what & MW_GPU_SLOW) {
        if (ASK(rd, MW_GF_POWER_LIMIT) && x->f.power_cap &&
            check(x, i, rd, MW_GF_POWER_LIMIT, x->f.power_cap(i, 0, &v), "rsmi_dev_power_cap_get",
                  sink)) {
            d->power_limit_mw = (uint32_t)(v / 1000);
            d->have |= MW_GF_BIT(MW_GF_POWER_LIMIT);
        }
        read_procs(x, i, d, sink);
        read_ecc(x, i, rd, d, sink);
    }
}

static void rocm_events(void *impl, const mw_gpu_sink *sink)
{
    (void)impl;
    (void)sink;
}

static void rocm_close(void *impl)
{
    rocm *x = impl;
    if (!x) return;
    x->f.shut_down();
    dlclose(x->lib);
    free(x);
}

/* Names tried for "auto": AMD's ROCm 6.1+ (.so.7), 6.0, 5.x, Debian 12's
 * librocm-smi64-1 (.so.1), then the development link. */
static const char *const auto_names[] = {
    "librocm_smi64.so.7",
    "librocm_smi64.so.6",
    "librocm_smi64.so.5",
    "librocm_smi64.so.1",
    "/opt/rocm/lib/librocm_smi64.so",
    "librocm_smi64.so",
};

int mw_gpu_rocm_open(mw_gpu_backend *b, const char *lib, const mw_hostfs *host, char *why,
                     size_t whysize)
{
    memset(b, 0, sizeof(*b));
    if (!lib[0] || strcmp(lib, "none") == 0) {
        snprintf(why, whysize, "switched off (--rocm-library none)");
        return -1;
    }
    int autodetect = strcmp(lib, "auto") == 0;
    if (autodetect && host) {
        /* ROCm SMI prints to stderr when there is no AMD GPU: do not even
         * load it unless the amdgpu driver is there. */
        int fd = mw_hostfs_opendirfd(host, "sys/module/amdgpu");
        if (fd < 0) {
            snprintf(why, whysize, "no amdgpu kernel module");
            return -1;
        }
        close(fd);
    }
    void *h = NULL;
    const char *used = lib;
    if (autodetect) {
        for (size_t k = 0; k < MW_ARRAY_LEN(auto_names) && !h; k++)
            h = dlopen(used = auto_names[k], RTLD_NOW | RTLD_LOCAL);
    } else {
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whysize, "%s", autodetect ? "librocm_smi64.so not found" : e ? e : lib);
        return -1;
    }
    rocm *x = mw_xcalloc(1, sizeof(*x));
    x->lib = h;
    for (size_t k = 0; k < MW_ARRAY_LEN(syms); k++) {
        void *p = dlsym(h, syms[k].name);
        if (!p && syms[k].required) {
            snprintf(why, whysize, "%s: no symbol %s", used, syms[k].name);
            dlclose(h);
            free(x);
            return -1;
        }
        memcpy((char *)&x->f + syms[k].offset, &p, sizeof(p));
    }
    rsmi_status_t st = x->f.init(0);
    if (st != RSMI_STATUS_SUCCESS) {
        snprintf(why, whysize, "%s: rsmi_init failed: %s (status %d)", used, status_text(x, st),
                 st);
        dlclose(h);
        free(x);
        return -1;
    }
    uint32_t n = 0;
    st = x->f.num_devices(&n);
    if (st != RSMI_STATUS_SUCCESS) {
        snprintf(why, whysize, "%s: rsmi_num_monitor_devices failed: %s", used, status_text(x, st));
        rocm_close(x);
        return -1;
    }
    x->n = n < MW_GPU_MAX_DEVICES ? n : MW_GPU_MAX_DEVICES;
    char ver[64];
    memset(ver, 0, sizeof(ver));
    if (x->f.version_str &&
        x->f.version_str(RSMI_SW_COMP_DRIVER, ver, sizeof(ver) - 1) == RSMI_STATUS_SUCCESS)
        mw_gpu_clean_string(b->driver_version, sizeof(b->driver_version), ver, sizeof(ver));
    b->name = "rocm";
    b->impl = x;
    b->ndevices = x->n;
    b->identify = rocm_identify;
    b->poll = rocm_poll;
    b->events = rocm_events;
    b->close = rocm_close;
    return 0;
}
