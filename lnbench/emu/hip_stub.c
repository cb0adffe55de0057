/* Stand-in libamdhip64.so.7 for the emulated AMD GPU (built by lnbench/emu/hip.py with zig cc).
 *
 * Exports the 28 HIP symbols FlyDSL's JIT runtime imports (version hip_4.2) plus lnbench_* controls.
 * Device memory is host memory; streams and events are real handles but everything is synchronous:
 * a launch has completed when hipModuleLaunchKernel returns. Launches go to a callback set from
 * Python (mode 0) or are only counted (mode 1, the null device).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int hipError_t;
enum {
    hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2, hipErrorInvalidDevice = 101,
    hipErrorInvalidImage = 200, hipErrorInvalidHandle = 400, hipErrorNotFound = 500,
    hipErrorLaunchFailure = 719, hipErrorNotSupported = 801,
};

#define MAGIC_STREAM 0x5354524dU /* "STRM" */
#define MAGIC_EVENT  0x45564e54U /* "EVNT" */
#define MAGIC_MODULE 0x4d4f444cU /* "MODL" */
#define MAGIC_FUNC   0x46554e43U /* "FUNC" */
#define ALIGN 256

typedef int (*launch_cb)(const uint8_t *image, uint64_t image_size, const char *name,
                         uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                         uint32_t shared, void *stream, void **kernel_params);

struct stream { uint32_t magic; };
struct event  { uint32_t magic; int recorded; uint64_t seq; uint64_t ns; };
struct function;
struct module { uint32_t magic; uint8_t *image; uint64_t size; struct function *funcs; };
struct function { uint32_t magic; struct module *mod; char *name; struct function *next; };
struct alloc { uint64_t base, size; };

static __thread hipError_t last_error = hipSuccess;
static volatile launch_cb callback = 0;
static int mode = 0;                 /* 0: execute (callback), 1: null device (count only) */
static uint64_t launches = 0, event_seq = 0;
static struct alloc *allocs = 0;
static int n_allocs = 0, cap_allocs = 0;
static char alloc_lock = 0;

static hipError_t fail(hipError_t e) { last_error = e; return e; }
static void lock(void) { while (__atomic_test_and_set(&alloc_lock, __ATOMIC_ACQUIRE)) {} }
static void unlock(void) { __atomic_clear(&alloc_lock, __ATOMIC_RELEASE); }
static int ok_stream(void *s) { return s == 0 || ((struct stream *)s)->magic == MAGIC_STREAM; }
static int ok_event(void *e) { return e != 0 && ((struct event *)e)->magic == MAGIC_EVENT; }

/* ---- lnbench controls ---- */
void lnbench_emu_set_launch_callback(launch_cb cb) { callback = cb; }
void lnbench_emu_set_mode(int m) { __atomic_store_n(&mode, m, __ATOMIC_SEQ_CST); }
uint64_t lnbench_emu_launch_count(void) { return __atomic_load_n(&launches, __ATOMIC_SEQ_CST); }

int lnbench_emu_allocations(uint64_t *bases, uint64_t *sizes, int max) {
    lock();
    int n = n_allocs;
    for (int i = 0; i < n && i < max; i++) { bases[i] = allocs[i].base; sizes[i] = allocs[i].size; }
    unlock();
    return n;
}

/* Sequence number and CLOCK_MONOTONIC nanoseconds of the last hipEventRecord; 0 when recorded. */
int lnbench_emu_event_info(void *e, uint64_t *seq, uint64_t *ns) {
    if (!ok_event(e) || !((struct event *)e)->recorded) return 1;
    *seq = ((struct event *)e)->seq; *ns = ((struct event *)e)->ns;
    return 0;
}

/* ---- device and errors ---- */
hipError_t hipGetDevice(int *dev) { if (!dev) return fail(hipErrorInvalidValue); *dev = 0; return hipSuccess; }
hipError_t hipSetDevice(int dev) { return dev == 0 ? hipSuccess : fail(hipErrorInvalidDevice); }
hipError_t hipDeviceSynchronize(void) { return hipSuccess; }
hipError_t hipGetLastError(void) { hipError_t e = last_error; last_error = hipSuccess; return e; }

const char *hipGetErrorName(hipError_t e) {
    switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorInvalidImage: return "hipErrorInvalidImage";
    case hipErrorInvalidHandle: return "hipErrorInvalidHandle";
    case hipErrorNotFound: return "hipErrorNotFound";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
    case hipErrorNotSupported: return "hipErrorNotSupported";
    default: return "hipErrorUnknown";
    }
}

/* ---- memory: device memory is host memory ---- */
hipError_t hipMalloc(void **ptr, size_t size) {
    if (!ptr) return fail(hipErrorInvalidValue);
    *ptr = 0;
    if (size == 0) return hipSuccess;
    void *p = 0;
    if (posix_memalign(&p, ALIGN, (size + ALIGN - 1) / ALIGN * ALIGN) != 0) return fail(hipErrorOutOfMemory);
    lock();
    if (n_allocs == cap_allocs) {
        int cap = cap_allocs ? 2 * cap_allocs : 64;
        struct alloc *grown = realloc(allocs, cap * sizeof *allocs);
        if (!grown) { unlock(); free(p); return fail(hipErrorOutOfMemory); }
        allocs = grown; cap_allocs = cap;
    }
    allocs[n_allocs].base = (uint64_t)(uintptr_t)p; allocs[n_allocs].size = size; n_allocs++;
    unlock();
    *ptr = p;
    return hipSuccess;
}

hipError_t hipFree(void *p) {
    if (!p) return hipSuccess;
    lock();
    for (int i = 0; i < n_allocs; i++) {
        if (allocs[i].base == (uint64_t)(uintptr_t)p) {
            allocs[i] = allocs[--n_allocs];
            unlock();
            free(p);
            return hipSuccess;
        }
    }
    unlock();
    return fail(hipErrorInvalidValue);
}

hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) {
    (void)kind;
    if (n && (!dst || !src)) return fail(hipErrorInvalidValue);
    if (n) memmove(dst, src, n);
    return hipSuccess;
}
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *s) {
    return ok_stream(s) ? hipMemcpy(dst, src, n, kind) : fail(hipErrorInvalidHandle);
}
hipError_t hipMemset(void *dst, int value, size_t n) {
    if (n && !dst) return fail(hipErrorInvalidValue);
    if (n) memset(dst, value, n);
    return hipSuccess;
}
hipError_t hipMemsetD16Async(void *dst, unsigned short value, size_t count, void *s) {
    if (!ok_stream(s)) return fail(hipErrorInvalidHandle);
    if (count && !dst) return fail(hipErrorInvalidValue);
    for (size_t i = 0; i < count; i++) ((uint16_t *)dst)[i] = value;
    return hipSuccess;
}
hipError_t hipMemsetD32Async(void *dst, int value, size_t count, void *s) {
    if (!ok_stream(s)) return fail(hipErrorInvalidHandle);
    if (count && !dst) return fail(hipErrorInvalidValue);
    for (size_t i = 0; i < count; i++) ((int32_t *)dst)[i] = value;
    return hipSuccess;
}
hipError_t hipHostRegister(void *p, size_t n, unsigned flags) { (void)p; (void)n; (void)flags; return hipSuccess; }
hipError_t hipHostUnregister(void *p) { (void)p; return hipSuccess; }
hipError_t hipHostGetDevicePointer(void **dev, void *host, unsigned flags) {
    (void)flags;
    if (!dev) return fail(hipErrorInvalidValue);
    *dev = host;
    return hipSuccess;
}

/* ---- streams and events (synchronous: all work is done when it is issued) ---- */

/* A new stream or event: `size` zeroed bytes whose first field, the magic, is `magic`, handed out through *out. */
static hipError_t new_handle(void **out, size_t size, uint32_t magic) {
    if (!out) return fail(hipErrorInvalidValue);
    uint32_t *h = calloc(1, size);
    if (!h) return fail(hipErrorOutOfMemory);
    *h = magic; *out = h;
    return hipSuccess;
}
/* The end of a stream or event the caller checked: its magic cleared (a later use of the handle is refused). */
static hipError_t end_handle(void *h) {
    *(uint32_t *)h = 0; free(h);
    return hipSuccess;
}

hipError_t hipStreamCreate(void **s) { return new_handle(s, sizeof(struct stream), MAGIC_STREAM); }
hipError_t hipStreamDestroy(void *s) { return s && ok_stream(s) ? end_handle(s) : fail(hipErrorInvalidHandle); }
hipError_t hipStreamSynchronize(void *s) { return ok_stream(s) ? hipSuccess : fail(hipErrorInvalidHandle); }
hipError_t hipStreamWaitEvent(void *s, void *e, unsigned flags) {
    (void)flags;
    return ok_stream(s) && ok_event(e) ? hipSuccess : fail(hipErrorInvalidHandle);
}
hipError_t hipEventCreateWithFlags(void **e, unsigned flags) {
    (void)flags;
    return new_handle(e, sizeof(struct event), MAGIC_EVENT);
}
hipError_t hipEventDestroy(void *e) { return ok_event(e) ? end_handle(e) : fail(hipErrorInvalidHandle); }
hipError_t hipEventRecord(void *e, void *s) {
    if (!ok_event(e) || !ok_stream(s)) return fail(hipErrorInvalidHandle);
    struct event *ev = e;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ev->seq = __atomic_add_fetch(&event_seq, 1, __ATOMIC_SEQ_CST);
    ev->ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    ev->recorded = 1;
    return hipSuccess;
}
hipError_t hipEventSynchronize(void *e) { return ok_event(e) ? hipSuccess : fail(hipErrorInvalidHandle); }

/* ---- modules and launches ---- */

/* Bytes an ELF64 image occupies: the furthest of the section/program header tables and sections. */
static uint64_t elf_size(const uint8_t *im) {
    uint64_t shoff, phoff, end;
    uint16_t phentsize, phnum, shentsize, shnum;
    memcpy(&phoff, im + 0x20, 8); memcpy(&shoff, im + 0x28, 8);
    memcpy(&phentsize, im + 0x36, 2); memcpy(&phnum, im + 0x38, 2);
    memcpy(&shentsize, im + 0x3A, 2); memcpy(&shnum, im + 0x3C, 2);
    end = shoff + (uint64_t)shentsize * shnum;
    if (phoff + (uint64_t)phentsize * phnum > end) end = phoff + (uint64_t)phentsize * phnum;
    for (uint16_t i = 0; i < shnum && shentsize >= 64; i++) {
        const uint8_t *sh = im + shoff + (uint64_t)i * shentsize;
        uint32_t type; uint64_t off, size;
        memcpy(&type, sh + 4, 4); memcpy(&off, sh + 0x18, 8); memcpy(&size, sh + 0x20, 8);
        if (type != 8 /* SHT_NOBITS */ && off + size > end) end = off + size;
    }
    return end < 64 ? 64 : end;
}

hipError_t hipModuleLoadData(void **module, const void *image) {
    const uint8_t *im = image;
    if (!module || !im) return fail(hipErrorInvalidValue);
    if (memcmp(im, "\x7f" "ELF", 4) != 0 || im[4] != 2 /* ELFCLASS64 */) return fail(hipErrorInvalidImage);
    struct module *m = calloc(1, sizeof *m);
    if (!m) return fail(hipErrorOutOfMemory);
    m->size = elf_size(im);
    m->image = malloc(m->size);
    if (!m->image) { free(m); return fail(hipErrorOutOfMemory); }
    memcpy(m->image, im, m->size);
    m->magic = MAGIC_MODULE; *module = m;
    return hipSuccess;
}

hipError_t hipModuleUnload(void *module) {
    struct module *m = module;
    if (!m || m->magic != MAGIC_MODULE) return fail(hipErrorInvalidHandle);
    for (struct function *f = m->funcs, *next; f; f = next) {
        next = f->next; f->magic = 0; free(f->name); free(f);
    }
    m->magic = 0; free(m->image); free(m);
    return hipSuccess;
}

hipError_t hipModuleGetFunction(void **fn, void *module, const char *name) {
    struct module *m = module;
    if (!fn || !name) return fail(hipErrorInvalidValue);
    if (!m || m->magic != MAGIC_MODULE) return fail(hipErrorInvalidHandle);
    struct function *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name))) { free(f); return fail(hipErrorOutOfMemory); }
    f->magic = MAGIC_FUNC; f->mod = m; f->next = m->funcs; m->funcs = f;
    *fn = f;
    return hipSuccess;
}

/* CDNA3 CU: 4 SIMDs x 8 wave64 slots = 32 waves, 64 KiB LDS. Blocks = 32 / waves-per-block, limited
 * by the dynamic LDS (static LDS is not known here). 0 for a block larger than 1024 work-items. */
hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *fn, int block_size,
                                                              size_t dyn_lds) {
    struct function *f = fn;
    if (!blocks || block_size <= 0) return fail(hipErrorInvalidValue);
    if (!f || f->magic != MAGIC_FUNC) return fail(hipErrorInvalidHandle);
    int n = block_size > 1024 ? 0 : 32 / ((block_size + 63) / 64);
    if (dyn_lds > 0 && (size_t)n > 65536 / dyn_lds) n = (int)(65536 / dyn_lds);
    *blocks = n;
    return hipSuccess;
}

hipError_t hipModuleLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    struct function *f = fn;
    if (!f || f->magic != MAGIC_FUNC || !ok_stream(stream)) return fail(hipErrorInvalidHandle);
    if (extra && !params) return fail(hipErrorNotSupported);   /* only kernelParams are passed on */
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024) return fail(hipErrorInvalidValue);
    __atomic_add_fetch(&launches, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&mode, __ATOMIC_SEQ_CST) == 1) return hipSuccess;
    launch_cb cb = callback;
    if (!cb || cb(f->mod->image, f->mod->size, f->name, gx, gy, gz, bx, by, bz, shared, stream, params) != 0)
        return fail(hipErrorLaunchFailure);
    return hipSuccess;
}
