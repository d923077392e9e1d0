/* nvml_abi.h - our own declarations of the part of the NVML ABI we use.
 *
 * mlwatch never includes nvml.h nor links libnvidia-ml: the library is
 * dlopen'ed at run time and these declarations must match its ABI exactly.
 * Layouts and values are those of NVIDIA's public nvml.h (API version 12,
 * e.g. the 12.2.140 header vendored by NVIDIA/go-nvml as gen/nvml/nvml.h)
 * and the NVML API reference (docs.nvidia.com/deploy/nvml-api). Every struct
 * below is checked for size and offsets with _Static_assert, so a typo that
 * changes a layout fails the build instead of corrupting memory.
 *
 * The fake library used by the tests (tests/fakenvml/fake_nvml.c) includes
 * this header too, so both sides of the test share these definitions; the
 * assertions are what tie them to the real library. */
#ifndef MW_NVML_ABI_H
#define MW_NVML_ABI_H

#include <stddef.h>

/* nvmlReturn_t (nvml.h "Return values for NVML API calls"). */
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25, /* a versioned struct of another version */
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

/* NVML_VALUE_NOT_AVAILABLE, as an unsigned long long (usedGpuMemory). */
#define MW_NVML_VALUE_NOT_AVAILABLE_ULL 0xffffffffffffffffULL
#define MW_NVML_NO_INSTANCE 0xffffffffu /* gpuInstanceId/computeInstanceId outside MIG */

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_DEVICE_MIG_ENABLE 1

/* nvmlPciInfo_t, filled by nvmlDeviceGetPciInfo_v3. */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:17:00.0" */
} nvmlPciInfo_t;

/* nvmlUtilization_t: percent over the last sample period (1/6 s to 1 s). */
typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

/* nvmlMemory_t (v1): bytes; used includes the driver's reserved memory. */
typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

/* nvmlProcessInfo_v2_t, which nvml.h also names nvmlProcessInfo_t: the
 * element type of nvmlDeviceGetComputeRunningProcesses_v2 and _v3. */
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
    unsigned int gpuInstanceId;       /* 0xFFFFFFFF outside MIG */
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/* nvmlProcessUtilizationSample_t (nvmlDeviceGetProcessUtilization). */
typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp; /* CPU timestamp, microseconds */
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlEventData_t as filled by nvmlEventSetWait_v2 (the MIG fields were
 * added with it; older drivers write only the first three). */
typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the XID for nvmlEventTypeXidCriticalError */
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

/* nvmlDeviceAttributes_t (nvmlDeviceGetAttributes_v2), for MIG devices. */
typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* Enumerations passed by value (C enums: int-sized in the platform ABI). */
typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 } nvmlClockType_t;
typedef enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;
typedef enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;
typedef enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
} nvmlPageRetirementCause_t;
typedef enum {
    NVML_NVLINK_ERROR_DL_REPLAY = 0,
    NVML_NVLINK_ERROR_DL_RECOVERY = 1,
    NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
    NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
    NVML_NVLINK_ERROR_DL_ECC_DATA = 4
} nvmlNvLinkErrorCounter_t;
typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;
typedef enum { NVML_PSTATE_0 = 0, NVML_PSTATE_15 = 15, NVML_PSTATE_UNKNOWN = 32 } nvmlPstates_t;

/* Event types (nvmlDeviceRegisterEvents). */
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL

/* Clock event reasons (nvmlDeviceGetCurrentClocksEventReasons, formerly
 * ...ThrottleReasons, same bits). */
#define nvmlClocksEventReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksEventReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksEventReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksEventReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x0000000000000100ULL

/* Layout checks (LP64: Linux on x86-64 and aarch64). */
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
_Static_assert(offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8, "nvmlProcessInfo_t.usedGpuMemory");
_Static_assert(offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16, "nvmlProcessInfo_t.gpuInstanceId");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16, "sample.smUtil");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");
_Static_assert(offsetof(nvmlEventData_t, eventData) == 16, "nvmlEventData_t.eventData");
_Static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t layout");
_Static_assert(sizeof(nvmlClockType_t) == 4 && sizeof(nvmlReturn_t) == 4, "enum size");

/* Signatures of the functions we resolve with dlsym, one typedef each. The
 * symbol names are the versioned ones nvml.h maps the plain names to. */
typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char *(*nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char *version, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int *count);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*nvmlDeviceGetStr_fn)(nvmlDevice_t device, char *buf, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t device, nvmlPciInfo_t *pci);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t device,
                                                         nvmlUtilization_t *utilization);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t device, nvmlMemory_t *memory);
typedef nvmlReturn_t (*nvmlDeviceGetUint_fn)(nvmlDevice_t device, unsigned int *value);
typedef nvmlReturn_t (*nvmlDeviceGetUll_fn)(nvmlDevice_t device, unsigned long long *value);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t device,
                                                    nvmlTemperatureSensors_t sensor,
                                                    unsigned int *temp);
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t device, nvmlClockType_t type,
                                                  unsigned int *mhz);
typedef nvmlReturn_t (*nvmlDeviceGetPerformanceState_fn)(nvmlDevice_t device,
                                                         nvmlPstates_t *pstate);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t device,
                                                       nvmlMemoryErrorType_t error_type,
                                                       nvmlEccCounterType_t counter_type,
                                                       unsigned long long *count);
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t device, unsigned int *corr,
                                                     unsigned int *unc, unsigned int *pending,
                                                     unsigned int *failure);
typedef nvmlReturn_t (*nvmlDeviceGetRetiredPages_fn)(nvmlDevice_t device,
                                                     nvmlPageRetirementCause_t cause,
                                                     unsigned int *count,
                                                     unsigned long long *addresses);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t device, unsigned int link,
                                                    nvmlEnableState_t *active);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkErrorCounter_fn)(nvmlDevice_t device, unsigned int link,
                                                           nvmlNvLinkErrorCounter_t counter,
                                                           unsigned long long *value);
typedef nvmlReturn_t (*nvmlDeviceGetCpuAffinity_fn)(nvmlDevice_t device, unsigned int size,
                                                    unsigned long *cpu_set);
typedef nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_fn)(nvmlDevice_t device,
                                                                unsigned int *count,
                                                                nvmlProcessInfo_t *infos);
typedef nvmlReturn_t (*nvmlDeviceGetProcessUtilization_fn)(nvmlDevice_t device,
                                                           nvmlProcessUtilizationSample_t *samples,
                                                           unsigned int *count,
                                                           unsigned long long last_seen_us);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t device, unsigned int *current,
                                                unsigned int *pending);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t device,
                                                               unsigned int index,
                                                               nvmlDevice_t *mig);
typedef nvmlReturn_t (*nvmlDeviceGetAttributes_v2_fn)(nvmlDevice_t device,
                                                      nvmlDeviceAttributes_t *attributes);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t *set);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t set);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t device,
                                                    unsigned long long event_types,
                                                    nvmlEventSet_t set);
typedef nvmlReturn_t (*nvmlEventSetWait_v2_fn)(nvmlEventSet_t set, nvmlEventData_t *data,
                                               unsigned int timeout_ms);

/* ---- GPM (GPU Performance Monitoring): Hopper and newer, driver R520+ ----
 * A GPM sample is an opaque snapshot of the GPU's (or one MIG GPU
 * instance's) performance counters; a metric is a rate between two samples
 * taken some time apart (nvmlGpmMetricsGet with sample1 the older). Layouts
 * from nvml.h's "GPM Structs" group. */
typedef struct {
    struct nvmlGpmSample_st *handle;
} nvmlGpmSample_t;

typedef enum {
    NVML_GPM_METRIC_GRAPHICS_UTIL = 1, /* % of time any compute/graphics app was active */
    NVML_GPM_METRIC_SM_UTIL = 2,       /* % of SMs that were busy */
    NVML_GPM_METRIC_SM_OCCUPANCY = 3,  /* % of warps active versus the theoretical maximum */
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10  /* % of DRAM bandwidth used versus the maximum */
} nvmlGpmMetricId_t;

/* One metric of nvmlGpmMetricsGet_t: metricId in, the rest out. */
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn; /* per metric; value is valid only on NVML_SUCCESS */
    double value;            /* percent (0.0 - 100.0) for the metrics above */
    struct {
        char *shortName;
        char *longName;
        char *unit;
    } metricInfo;
} nvmlGpmMetric_t;

/* NVML_GPM_METRIC_MAX grows with each header (98 in the first, 333 in
 * CUDA 13's) while NVML_GPM_METRICS_GET_VERSION stays 1: the library only
 * touches metrics[0 .. numMetrics-1], so the array size is ours to choose.
 * We take the largest published one so that no driver can write past it. */
#define NVML_GPM_METRIC_MAX 333
#define NVML_GPM_METRICS_GET_VERSION 1
typedef struct {
    unsigned int version;    /* NVML_GPM_METRICS_GET_VERSION */
    unsigned int numMetrics; /* entries of metrics[] to compute */
    nvmlGpmSample_t sample1; /* the older sample */
    nvmlGpmSample_t sample2; /* the newer sample */
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

#define NVML_GPM_SUPPORT_VERSION 1
typedef struct {
    unsigned int version;           /* NVML_GPM_SUPPORT_VERSION */
    unsigned int isSupportedDevice; /* 0 before Hopper */
} nvmlGpmSupport_t;

_Static_assert(sizeof(nvmlGpmSample_t) == 8, "nvmlGpmSample_t layout");
_Static_assert(sizeof(nvmlGpmMetric_t) == 40, "nvmlGpmMetric_t layout");
_Static_assert(offsetof(nvmlGpmMetric_t, value) == 8, "nvmlGpmMetric_t.value");
_Static_assert(offsetof(nvmlGpmMetric_t, metricInfo) == 16, "nvmlGpmMetric_t.metricInfo");
_Static_assert(offsetof(nvmlGpmMetricsGet_t, sample1) == 8, "nvmlGpmMetricsGet_t.sample1");
_Static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24, "nvmlGpmMetricsGet_t.metrics");
_Static_assert(sizeof(nvmlGpmSupport_t) == 8, "nvmlGpmSupport_t layout");

typedef nvmlReturn_t (*nvmlGpmQueryDeviceSupport_fn)(nvmlDevice_t device,
                                                     nvmlGpmSupport_t *support);
typedef nvmlReturn_t (*nvmlGpmSampleAlloc_fn)(nvmlGpmSample_t *sample);
typedef nvmlReturn_t (*nvmlGpmSampleFree_fn)(nvmlGpmSample_t sample);
typedef nvmlReturn_t (*nvmlGpmSampleGet_fn)(nvmlDevice_t device, nvmlGpmSample_t sample);
/* device is the parent GPU; the sample covers one GPU instance. */
typedef nvmlReturn_t (*nvmlGpmMigSampleGet_fn)(nvmlDevice_t device, unsigned int gpuInstanceId,
                                               nvmlGpmSample_t sample);
typedef nvmlReturn_t (*nvmlGpmMetricsGet_fn)(nvmlGpmMetricsGet_t *metrics);

#endif
