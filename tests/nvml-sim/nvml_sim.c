/*
 * A simulated NVIDIA management library (libnvidia-ml) for infertop's tests: the NVML calls
 * infertop makes through nvml-wrapper, answered from a scripted machine instead of a driver,
 * in the way DCGM tests its NVML code against an injection library.
 *
 * The machine: two GPUs.
 *   0  "NVIDIA H200": every field infertop reads is supported.
 *   1  "NVIDIA A100-SXM4-80GB" with MIG mode on: utilisation and the energy counter answer
 *      NVML_ERROR_NOT_SUPPORTED (as NVML does on a MIG-partitioned GPU and on GPUs without
 *      the counter), and its processes' memory is NVML_VALUE_NOT_AVAILABLE, one entry per
 *      GPU instance.
 *
 * Time is counted in memory reads: each device counts its successful
 * nvmlDeviceGetMemoryInfo_v2 calls (a sampler reads memory once per sample, first), and every
 * figure is a fixed function of that count, so a test can compute what sample k saw:
 *   this process's memory  1024 MiB + k * 64 MiB, rising (to 96 GiB at most)
 *   utilisation            gpu 50 + (13k mod 50) %, memory 20 + (7k mod 60) %
 *   power                  250 + (17k mod 400) W, limit 700 W
 *   temperature            40 + (k mod 40) C
 *   SM clock               1755 + (k mod 4) * 75 MHz
 *   energy                 5,000,000 J + 45 J * k
 *   throttle reasons       power cap when k mod 10 = 9, else none
 * (those of GPU 0; GPU 1's are beside them in the functions below). Processes on GPU 0: this
 * one (getpid()), its parent (getppid(), 8 GiB) and PID 4194303 (2 GiB), which is no process
 * here, as one in another PID namespace is not; used memory is their sum. On GPU 1: this one
 * in GPU instances 1 and 2, and its parent in instance 1.
 *
 * Controlled from the environment, read when the library is loaded (INIT at each nvmlInit):
 *   INFERTOP_NVML_SIM_INIT=driver-not-loaded|no-permission  nvmlInit fails with that error
 *   INFERTOP_NVML_SIM_LOSE_GPU=INDEX                         the GPU that falls off the bus:
 *   INFERTOP_NVML_SIM_LOSE_AFTER=N      after N memory reads (0: lost from the start), or
 *   INFERTOP_NVML_SIM_LOSE_WHEN=PATH    at the first memory read once PATH exists;
 *   from then on every call on it answers NVML_ERROR_GPU_IS_LOST (its handle stays valid,
 *   the device count stays 2).
 *   INFERTOP_NVML_SIM_CALLS=PATH        the calls made on each GPU so far (a handle looked up
 *   by index or UUID, and every call given its handle, those answered GPU_IS_LOST included),
 *   rewritten in PATH after each: one line per GPU, "INDEX CALLS".
 *
 * The types below are written for this file from the NVML ABI as nvml-wrapper-sys binds it;
 * no NVIDIA header is used.
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

enum { CLOCK_GRAPHICS = 0, CLOCK_SM = 1, CLOCK_MEM = 2, CLOCK_VIDEO = 3 };
enum { TEMPERATURE_GPU = 0 };

#define VALUE_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFULL
#define NO_INSTANCE 0xFFFFFFFFu
#define MIB (1024ULL * 1024ULL)
#define REASON_SW_POWER_CAP 0x4ULL

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} Memory2;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} Memory1;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} Utilization;

typedef struct {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
} ProcessInfo;

#define MEMORY2_VERSION ((unsigned int)(sizeof(Memory2) | (2u << 24)))

typedef struct Device {
    unsigned int index;
    const char *name;
    const char *uuid;
    unsigned long long total_mib;
    int mig;
    int cc_major, cc_minor;
    unsigned int bus_width_bits;
    unsigned int max_sm_mhz, max_mem_mhz;
    unsigned int power_limit_mw;
    /* The script's state. */
    unsigned long long reads; /* successful memory reads: the device's clock */
    unsigned long long calls; /* calls made on it (INFERTOP_NVML_SIM_CALLS) */
    int lost;
    long lose_after; /* -1: never */
    const char *lose_when;
} Device;

static Device devices[2] = {
    {0, "NVIDIA H200", "GPU-5d3c9a1e-0b7f-4c2a-9e61-3f2a7b8c9d01", 143771, 0, 9, 0, 6144, 1980,
     3201, 700000, 0, 0, 0, -1, NULL},
    {1, "NVIDIA A100-SXM4-80GB", "GPU-a1b2c3d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d", 81920, 1, 8, 0,
     5120, 1410, 1593, 400000, 0, 0, 0, -1, NULL},
};

static int init_count; /* nvmlInit calls not yet matched by nvmlShutdown */
static int calls_fd = -1; /* INFERTOP_NVML_SIM_CALLS, when set */

/* Counts a call on `d` and rewrites the counts file (fixed-width lines, written at once). */
static void count_call(Device *d) {
    __atomic_add_fetch(&d->calls, 1, __ATOMIC_SEQ_CST);
    if (calls_fd < 0) {
        return;
    }
    char line[96];
    int n = snprintf(line, sizeof line, "0 %20llu\n1 %20llu\n",
                     __atomic_load_n(&devices[0].calls, __ATOMIC_SEQ_CST),
                     __atomic_load_n(&devices[1].calls, __ATOMIC_SEQ_CST));
    if (n > 0 && (size_t)n < sizeof line) {
        (void)!pwrite(calls_fd, line, (size_t)n, 0);
    }
}

/* The figures sample k (the device's k-th memory read) sees; k = 0 before the first read. */
static unsigned long long this_process_bytes(const Device *d, unsigned long long k) {
    unsigned long long cap = d->index == 0 ? 96 * 1024 * MIB : 64 * 1024 * MIB;
    unsigned long long bytes = d->index == 0 ? 1024 * MIB + k * 64 * MIB : 6144 * MIB + k * 16 * MIB;
    return bytes < cap ? bytes : cap;
}

static unsigned long long parent_bytes(const Device *d) {
    return d->index == 0 ? 8192 * MIB : 4096 * MIB;
}

#define FOREIGN_PID 4194303u
#define FOREIGN_BYTES (2048 * MIB)

static unsigned long long used_bytes(const Device *d, unsigned long long k) {
    unsigned long long used = this_process_bytes(d, k) + parent_bytes(d);
    return d->index == 0 ? used + FOREIGN_BYTES : used;
}

static unsigned int power_mw(const Device *d, unsigned long long k) {
    return d->index == 0 ? (unsigned int)(250 + (17 * k) % 400) * 1000
                         : (unsigned int)(120 + (11 * k) % 200) * 1000;
}

static int initialized(void) {
    return __atomic_load_n(&init_count, __ATOMIC_SEQ_CST) > 0;
}

static Device *device_of(void *handle) {
    for (unsigned i = 0; i < 2; i++) {
        if (handle == &devices[i]) {
            return &devices[i];
        }
    }
    return NULL;
}

/* Checks a device argument: NVML_SUCCESS, or the error every call on it answers. */
static nvmlReturn_t check(void *handle, Device **out) {
    if (!initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    Device *d = device_of(handle);
    if (d == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    count_call(d);
    if (__atomic_load_n(&d->lost, __ATOMIC_SEQ_CST)) {
        return NVML_ERROR_GPU_IS_LOST;
    }
    *out = d;
    return NVML_SUCCESS;
}

static unsigned long long now_of(const Device *d) {
    return __atomic_load_n(&d->reads, __ATOMIC_SEQ_CST);
}

static nvmlReturn_t copy_string(char *buf, unsigned int length, const char *s) {
    if (buf == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    size_t n = strlen(s);
    if (length <= n) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(buf, s, n + 1);
    return NVML_SUCCESS;
}

/* Runs when the library is loaded, before any call. */
__attribute__((constructor)) static void read_script(void) {
    const char *calls = getenv("INFERTOP_NVML_SIM_CALLS");
    if (calls != NULL && *calls != '\0') {
        calls_fd = open(calls, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    const char *gpu = getenv("INFERTOP_NVML_SIM_LOSE_GPU");
    const char *after = getenv("INFERTOP_NVML_SIM_LOSE_AFTER");
    const char *when = getenv("INFERTOP_NVML_SIM_LOSE_WHEN");
    if (gpu == NULL) {
        return;
    }
    unsigned long index = strtoul(gpu, NULL, 10);
    if (index >= 2) {
        return;
    }
    Device *d = &devices[index];
    if (after != NULL && *after != '\0') {
        d->lose_after = strtol(after, NULL, 10);
        if (d->lose_after == 0) {
            d->lost = 1;
        }
    }
    if (when != NULL && *when != '\0') {
        d->lose_when = when;
    }
}

/* ---- Initialisation and the system ---- */

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *mode = getenv("INFERTOP_NVML_SIM_INIT");
    if (mode != NULL && strcasecmp(mode, "driver-not-loaded") == 0) {
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (mode != NULL && strcasecmp(mode, "no-permission") == 0) {
        return NVML_ERROR_NO_PERMISSION;
    }
    __atomic_fetch_add(&init_count, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    int before = __atomic_load_n(&init_count, __ATOMIC_SEQ_CST);
    if (before <= 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    __atomic_fetch_sub(&init_count, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    return copy_string(version, length, "550.127.05");
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    if (!initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    return copy_string(version, length, "12.550.127.05");
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    if (!initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (version == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *version = 12040;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    return nvmlSystemGetCudaDriverVersion_v2(version);
}

/* ---- Devices ---- */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *count = 2;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
    if (!initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (device == NULL || index >= 2) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    count_call(&devices[index]);
    *device = &devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, void **device) {
    if (!initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (uuid == NULL || device == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (unsigned i = 0; i < 2; i++) {
        if (strcmp(uuid, devices[i].uuid) == 0) {
            count_call(&devices[i]);
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(void *device, unsigned int *index) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (index == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *index = d->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(void *device, char *name, unsigned int length) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    return r != NVML_SUCCESS ? r : copy_string(name, length, d->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    return r != NVML_SUCCESS ? r : copy_string(uuid, length, d->uuid);
}

/* One tick of the device's clock, or the moment it falls off the bus. */
static nvmlReturn_t memory_read(Device *d, unsigned long long *k) {
    unsigned long long before = now_of(d);
    int lose = d->lose_after >= 0 && (long long)before >= (long long)d->lose_after;
    if (!lose && d->lose_when != NULL && access(d->lose_when, F_OK) == 0) {
        lose = 1;
    }
    if (lose) {
        __atomic_store_n(&d->lost, 1, __ATOMIC_SEQ_CST);
        return NVML_ERROR_GPU_IS_LOST;
    }
    *k = __atomic_add_fetch(&d->reads, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *device, Memory2 *memory) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (memory->version != MEMORY2_VERSION) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    unsigned long long k;
    r = memory_read(d, &k);
    if (r != NVML_SUCCESS) {
        return r;
    }
    memory->total = d->total_mib * MIB;
    memory->reserved = 512 * MIB;
    memory->used = used_bytes(d, k);
    memory->free = memory->total - memory->reserved - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(void *device, Memory1 *memory) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned long long k;
    r = memory_read(d, &k);
    if (r != NVML_SUCCESS) {
        return r;
    }
    memory->total = d->total_mib * MIB;
    memory->used = used_bytes(d, k) + 512 * MIB;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count,
                                                            ProcessInfo *infos) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned long long k = now_of(d);
    ProcessInfo list[3];
    unsigned int n = 0;
    if (d->mig) {
        /* Under MIG one entry per GPU instance, and no per-process memory. */
        list[n++] = (ProcessInfo){(unsigned int)getpid(), VALUE_NOT_AVAILABLE, 1, 0};
        list[n++] = (ProcessInfo){(unsigned int)getpid(), VALUE_NOT_AVAILABLE, 2, 0};
        list[n++] = (ProcessInfo){(unsigned int)getppid(), VALUE_NOT_AVAILABLE, 1, 0};
    } else {
        list[n++] = (ProcessInfo){(unsigned int)getpid(), this_process_bytes(d, k), NO_INSTANCE,
                                  NO_INSTANCE};
        list[n++] = (ProcessInfo){(unsigned int)getppid(), parent_bytes(d), NO_INSTANCE,
                                  NO_INSTANCE};
        list[n++] = (ProcessInfo){FOREIGN_PID, FOREIGN_BYTES, NO_INSTANCE, NO_INSTANCE};
    }
    if (infos == NULL || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(infos, list, n * sizeof(ProcessInfo));
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(void *device, Utilization *utilization) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (d->mig) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (utilization == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned long long k = now_of(d);
    utilization->gpu = (unsigned int)(50 + (13 * k) % 50);
    utilization->memory = (unsigned int)(20 + (7 * k) % 60);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(void *device, unsigned int *power) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (power == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *power = power_mw(d, now_of(d));
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(void *device, unsigned int *limit) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (limit == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *limit = d->power_limit_mw;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(void *device, unsigned int *limit) {
    return nvmlDeviceGetEnforcedPowerLimit(device, limit);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(void *device, int sensor, unsigned int *temp) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (sensor != TEMPERATURE_GPU || temp == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned long long k = now_of(d);
    *temp = (unsigned int)(d->index == 0 ? 40 + k % 40 : 35 + k % 20);
    return NVML_SUCCESS;
}

static unsigned int clock_now(const Device *d, int type, unsigned long long k) {
    switch (type) {
    case CLOCK_GRAPHICS:
    case CLOCK_SM:
        return d->index == 0 ? (unsigned int)(1755 + (k % 4) * 75) : d->max_sm_mhz;
    case CLOCK_MEM:
        return d->max_mem_mhz;
    default:
        return 1500;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(void *device, int type, unsigned int *clock) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (clock == NULL || type < CLOCK_GRAPHICS || type > CLOCK_VIDEO) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *clock = clock_now(d, type, now_of(d));
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(void *device, int type, unsigned int *clock) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (clock == NULL || type < CLOCK_GRAPHICS || type > CLOCK_VIDEO) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *clock = type == CLOCK_MEM ? d->max_mem_mhz : type == CLOCK_VIDEO ? 1755 : d->max_sm_mhz;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(void *device,
                                                              unsigned long long *reasons) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (reasons == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    /* GPU 0 is held at its power cap every tenth sample. */
    *reasons = d->index == 0 && now_of(d) % 10 == 9 ? REASON_SW_POWER_CAP : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(void *device,
                                                           unsigned long long *reasons) {
    return nvmlDeviceGetCurrentClocksThrottleReasons(device, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(void *device,
                                                        unsigned long long *energy_mj) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (d->mig) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (energy_mj == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *energy_mj = 5000000000ULL + 45000ULL * now_of(d);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryBusWidth(void *device, unsigned int *bits) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (bits == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *bits = d->bus_width_bits;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void *device, int *major, int *minor) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (major == NULL || minor == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(void *device, unsigned int *current,
                                         unsigned int *pending) {
    Device *d;
    nvmlReturn_t r = check(device, &d);
    if (r != NVML_SUCCESS) {
        return r;
    }
    if (current == NULL || pending == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *current = (unsigned int)d->mig;
    *pending = (unsigned int)d->mig;
    return NVML_SUCCESS;
}
