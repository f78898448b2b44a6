/* test/cuda_emu/runtime.cc — the emulated CUDA runtime: devices, device memory, streams, events,
 * pinned host memory, kernel execution and the detectors. It exists so that the CUDA backend's
 * own sources run, unchanged, on machines without a GPU; what it proves and what it cannot is
 * listed in README.md's GPU section.
 *
 * Device memory. Each emulated device has an arena of address space; every allocation gets its
 * own pages, ends at a page boundary (rounded to 256 bytes, CUDA's alignment) and is followed by
 * a guard page. Outside device work the pages are PROT_NONE, so a host dereference of a device
 * pointer faults and is reported as such; inside device work (which opens only the arenas that
 * work may reach: see "Several devices" below), a kernel that runs past its allocation hits the
 * guard and is reported as compute-sanitizer reports an invalid access, and the error is sticky
 * as on a GPU. DGEMU_MEMORY_MB bounds each device (default 4096), so the out-of-memory paths can
 * be reached.
 *
 * Streams are queues executed lazily: only a synchronise, a query, an event or a blocking copy
 * runs queued work, so a host read that lacks its synchronise sees stale data, and a stream
 * whose work needs another stream's result but lacks the event runs before that result exists.
 * DGEMU_INTERLEAVE=random (DGEMU_SEED=n) runs every stream's queued work in a random interleaving
 * that honours only events. DGEMU_DRY_RUN=1 drops queued work instead of running it: values are
 * meaningless then, but allocations, launches and synchronisations happen as in a real run (the
 * GPU bench uses it to read the allocator's figures for loops too big to compute here). Pageable host-to-device copies read their source at call time (the
 * driver stages them); copies from pinned memory read it when they run, as DMA does.
 *
 * Kernels. A launch is checked against the device limits (1024 threads per block, block z <= 64,
 * grid y/z <= 65535, 48 KiB of shared memory) and queued. When it runs, its first block runs as
 * fibers (one per thread, switched at __syncthreads and warp shuffles); if no thread of it met
 * a barrier or shuffle, the other blocks run as plain loops over their threads, else as fibers
 * too. Blocks run in parallel on DGEMU_THREADS OS threads (default: all cores). A barrier that
 * not every thread of a block reaches, or a shuffle that not every lane of the mask reaches, is
 * a reported error.
 *
 * Several devices. DGEMU_DEVICES devices (default 2) share the process, each with its own arena,
 * legacy default stream and live allocations; the runtime holds CUDA's multi-device rules:
 *  - memory: while a work item runs, only what its device may touch is open: a kernel, memset or
 *    library call sees the arena of its stream's device and of the devices that device enabled
 *    peer access to (cudaDeviceEnablePeerAccess; one-way, per pair, revoked by
 *    cudaDeviceDisablePeerAccess); a copy sees every arena (the copy engine moves data between
 *    any two devices, peer access or not). A kernel that touches another device's memory is an
 *    illegal address, reported and sticky like any other fault;
 *  - launches: a kernel, a memset or a library call queued on a stream of a device other than
 *    the calling thread's current one fails with cudaErrorInvalidResourceHandle; copies
 *    (cudaMemcpyAsync, cudaMemcpyPeerAsync) may use any device's stream;
 *  - streams and events belong to the device current when they are made (the legacy default
 *    stream, NULL, to the current device at each call); cudaEventRecord of an event onto a
 *    stream of another device, and cudaEventElapsedTime of two devices' events, fail with
 *    cudaErrorInvalidResourceHandle; cudaStreamWaitEvent across devices is allowed;
 *  - pointers: copies of kind DeviceToDevice or Default between two devices work (unified
 *    addressing), as do cudaMemcpyPeer(Async); cudaFree of another device's pointer frees it;
 *    cudaPointerGetAttributes names a pointer's device.
 * cuBLAS and cuDNN handles belong to the device current at their creation (cublas.c, cudnn.c).
 * A sticky error stays process-wide, as CUDA's documentation says of a fault: every later call
 * on any device returns it. */
#define DGEMU_NO_INDEX_MACROS
#include "emu_internal.h"
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

thread_local dgemu_thread *dgemu_cur;

extern "C" void dgemu_fiber_switch(void **save_sp, void *load_sp);
extern "C" void dgemu_fiber_entry(void);

/* ---------------------------------------------------------------- configuration */

static const size_t PAGE = 4096;
static const size_t ARENA_SPAN = (size_t)64 << 30;      /* address space per device */

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end) {
        fprintf(stderr, "dgemu: %s=%s is not a number; using %ld\n", name, v, dflt);
        return dflt;
    }
    return x;
}

struct config {
    bool dry;           /* DGEMU_DRY_RUN=1: queued device work is dropped, not run */
    int devices;
    size_t memory;
    bool random_interleave;
    uint64_t seed;
    int threads;
};
static config g_cfg;
static std::once_flag g_cfg_once;
static const config &cfg() {
    std::call_once(g_cfg_once, [] {
        g_cfg.devices = (int)env_long("DGEMU_DEVICES", 2);
        g_cfg.dry = env_long("DGEMU_DRY_RUN", 0) != 0;
        g_cfg.memory = (size_t)env_long("DGEMU_MEMORY_MB", 4096) << 20;
        const char *il = getenv("DGEMU_INTERLEAVE");
        g_cfg.random_interleave = il && strcmp(il, "random") == 0;
        g_cfg.seed = (uint64_t)env_long("DGEMU_SEED", (long)getpid());
        long th = env_long("DGEMU_THREADS", 0);
        g_cfg.threads = th > 0 ? (int)th : omp_get_num_procs();
        if (g_cfg.random_interleave)
            fprintf(stderr, "dgemu: streams interleaved at random (DGEMU_SEED=%llu)\n", (unsigned long long)g_cfg.seed);
    });
    return g_cfg;
}

/* ---------------------------------------------------------------- errors */

static std::atomic<int> g_sticky{ cudaSuccess };
static thread_local cudaError_t t_last = cudaSuccess;

static cudaError_t fail(cudaError_t e) {
    if (e != cudaSuccess) t_last = e;
    return e;
}

extern "C" void dgemu_fault(cudaError_t e, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "========= dgemu: %s\n", msg);
    int none = cudaSuccess;
    g_sticky.compare_exchange_strong(none, (int)e);
}
extern "C" cudaError_t dgemu_sticky_error(void) { return (cudaError_t)g_sticky.load(); }
#define STICKY() do { if (g_sticky.load() != cudaSuccess) return fail((cudaError_t)g_sticky.load()); } while (0)

extern "C" const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
#define N(x) case x: return #x;
    N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation) N(cudaErrorInitializationError)
    N(cudaErrorInvalidConfiguration) N(cudaErrorInvalidSymbol) N(cudaErrorInvalidDevicePointer)
    N(cudaErrorInvalidMemcpyDirection) N(cudaErrorInsufficientDriver) N(cudaErrorNoDevice) N(cudaErrorInvalidDevice)
    N(cudaErrorInvalidResourceHandle) N(cudaErrorNotReady) N(cudaErrorIllegalAddress) N(cudaErrorLaunchOutOfResources)
    N(cudaErrorPeerAccessAlreadyEnabled) N(cudaErrorPeerAccessNotEnabled)
    N(cudaErrorIllegalInstruction) N(cudaErrorLaunchFailure) N(cudaErrorUnknown)
#undef N
    }
    return "cudaErrorUnknown";
}
extern "C" const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
    }
}
extern "C" cudaError_t cudaGetLastError(void) {
    if (g_sticky.load() != cudaSuccess) return (cudaError_t)g_sticky.load();
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}
extern "C" cudaError_t cudaPeekAtLastError(void) {
    return g_sticky.load() != cudaSuccess ? (cudaError_t)g_sticky.load() : t_last;
}

/* ---------------------------------------------------------------- state */

/* Everything below is guarded by g_mu, except what kernel blocks touch on worker threads. */
static std::recursive_mutex g_mu;
typedef std::lock_guard<std::recursive_mutex> guard;

struct allocation {
    char *base;        /* first page */
    size_t pages;      /* accessible pages; a guard page follows */
    char *user;        /* what cudaMalloc returned (ends at base + pages * PAGE) */
    size_t size;
    int device;
};

struct device_state {
    char *arena = nullptr;
    size_t committed = 0;
    std::map<char *, size_t> free_ranges;          /* start -> length, address order */
    std::map<char *, allocation> live;             /* user pointer -> allocation */
    CUstream_st *null_stream = nullptr;
    std::set<int> peers;                           /* devices whose memory this one's kernels may touch */
    bool open = false;                             /* its live pages are readable and writable now */
};
static std::vector<device_state> g_dev;
static std::map<const char *, size_t> g_symbols;   /* __device__ variables: address -> size */
struct pinned_block { size_t size; int device; };   /* device: current at cudaHostAlloc */
static std::map<char *, pinned_block> g_pinned;     /* cudaHostAlloc'ed host memory */
static thread_local int t_device = 0;
static int g_open = 0;                              /* memory windows open (nested) */
static std::atomic<bool> g_work_running{ false };
/* The work item running now and its device, for the report of a fault outside a kernel (any
 * thread of the process may be the one that faults: the libraries' work runs on OpenMP threads). */
static std::atomic<const char *> g_work_what{ nullptr };
static std::atomic<int> g_work_device{ -1 };

struct work_item {
    enum kind_t { FN, RECORD, WAIT } kind;
    dgemu_work_fn fn;
    void *arg;
    void (*free_arg)(void *);
    const char *what;
    CUevent_st *ev;
    CUstream_st *src;   /* WAIT: the stream holding the awaited record */
    uint64_t gen;
    bool copy;          /* FN: a copy, which may touch every device's memory */
};
struct CUstream_st {
    int device;
    unsigned flags;
    std::deque<work_item> q;
};
/* An event's records are numbered; a wait captures the number of the latest record, and is
 * satisfied once that record has run (a later record elsewhere does not release it). The object
 * lives while its handle does or queued records/waits still name it. */
struct CUevent_st {
    int device;
    uint64_t recorded = 0;             /* records queued so far */
    std::set<uint64_t> pending;        /* record numbers queued and not yet run */
    CUstream_st *st = nullptr;         /* the stream of the latest record */
    struct timespec when = {};
    int refs = 0;                      /* queued records and waits naming it */
    bool handle = true;                /* not yet cudaEventDestroy'ed */
    bool done(uint64_t gen) const { return !pending.count(gen); }
};
static void event_unref(CUevent_st *e) {
    if (--e->refs == 0 && !e->handle) delete e;
}
static std::set<CUstream_st *> g_streams;
static std::set<CUevent_st *> g_events;

static dgemu_stats g_stats;
static std::set<std::string> g_called;

static void write_called(void) {
    const char *path = getenv("DGEMU_CALLS_FILE");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    flock(fileno(f), LOCK_EX);
    for (const std::string &s : g_called) fprintf(f, "%s\n", s.c_str());
    fflush(f);
    flock(fileno(f), LOCK_UN);
    fclose(f);
}

extern "C" void dgemu_called(const char *entry) {
    guard l(g_mu);
    static bool hooked = false;
    if (!hooked) { atexit(write_called); hooked = true; }
    g_called.insert(entry);
}

extern "C" bool dgemu_injected(const char *entry) {
    const char *v = getenv("DGEMU_FAIL");
    if (!v || !*v) return false;
    size_t n = strlen(entry);
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, entry, n) == 0) return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

static void install_fault_handler(void);

static device_state &dev(int d) {
    if (g_dev.empty()) {
        g_dev.resize((size_t)(cfg().devices > 0 ? cfg().devices : 0));
        install_fault_handler();
    }
    device_state &s = g_dev[(size_t)d];
    if (!s.arena) {
        void *p = mmap(nullptr, ARENA_SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "dgemu: cannot reserve %zu GiB of address space for gpu:%d: %s\n", ARENA_SPAN >> 30, d, strerror(errno));
            abort();
        }
        s.arena = (char *)p;
        s.free_ranges[s.arena] = ARENA_SPAN;
    }
    return s;
}

/* ---------------------------------------------------------------- device memory visibility */

/* Opens or closes the live pages of device d. */
static void show(int d, bool open) {
    device_state &s = g_dev[(size_t)d];
    if (s.open == open) return;
    for (auto &kv : s.live) mprotect(kv.second.base, kv.second.pages * PAGE, open ? PROT_READ | PROT_WRITE : PROT_NONE);
    s.open = open;
}
/* What work of `device` may touch: its own memory and that of the devices it enabled peer access
 * to; a copy (the copy engine) any device's. Only one work item runs at a time (its caller holds
 * g_mu), so one process-wide view is enough, but it must be set again before every item: two
 * devices' items interleave (a wait followed into another device's stream, random interleaving),
 * and the previous item's view must not leak into the next. */
static void view_for(int device, bool copy) {
    const std::set<int> &peers = g_dev[(size_t)device].peers;
    for (size_t d = 0; d < g_dev.size(); d++) show((int)d, copy || (int)d == device || peers.count((int)d));
}
/* Device work runs between open_memory() and close_memory(); nothing is open outside it. */
static void open_memory(void) {
    if (g_open++ == 0) g_work_running = true;
}
static void close_memory(void) {
    if (--g_open == 0) {
        g_work_running = false;
        for (size_t d = 0; d < g_dev.size(); d++) show((int)d, false);
    }
}
struct memory_window {
    bool opened = false;
    /* a work item of `device` runs next */
    void open(int device, bool copy) {
        if (!opened) { open_memory(); opened = true; }
        view_for(device, copy);
    }
    ~memory_window() { if (opened) close_memory(); }
};

static const allocation *find_allocation(const void *p, bool *freed_or_guard) {
    for (device_state &d : g_dev) {
        if (!d.arena || (const char *)p < d.arena || (const char *)p >= d.arena + ARENA_SPAN) continue;
        auto it = d.live.upper_bound((char *)p);
        if (it != d.live.begin()) {
            --it;
            const allocation &a = it->second;
            if ((const char *)p >= a.base && (const char *)p < a.base + (a.pages + 1) * PAGE) {
                if (freed_or_guard) *freed_or_guard = (const char *)p >= a.user + a.size;
                return &a;
            }
        }
        if (freed_or_guard) *freed_or_guard = true;
        return nullptr;
    }
    return nullptr;
}
static bool in_arena(const void *p) {
    for (device_state &d : g_dev)
        if (d.arena && (const char *)p >= d.arena && (const char *)p < d.arena + ARENA_SPAN) return true;
    return false;
}

static bool is_symbol(const void *p, size_t n) {
    auto s = g_symbols.upper_bound((const char *)p);
    if (s == g_symbols.begin()) return false;
    --s;
    return (const char *)p >= s->first && (const char *)p + n <= s->first + s->second;
}
/* Whether [p, p + n) lies inside one live allocation of device d. */
static bool on_device(int d, const void *p, size_t n) {
    const device_state &s = g_dev[(size_t)d];
    auto it = s.live.upper_bound((char *)p);
    if (it == s.live.begin()) return false;
    --it;
    const allocation &a = it->second;
    return (const char *)p >= a.user && (const char *)p + n <= a.user + a.size;
}
/* The device whose live allocation holds all of [p, p + n) (unified addressing: a pointer names
 * its device); the current device for a __device__ variable (every device has its own copy on a
 * GPU); -1 when it is not device memory. */
static int device_of(const void *p, size_t n) {
    if (!p) return -1;
    if (is_symbol(p, n)) return t_device;
    for (size_t d = 0; d < g_dev.size(); d++)
        if (on_device((int)d, p, n)) return (int)d;
    return -1;
}
/* Whether work of `device` may touch device d's memory. */
static bool reaches(int device, int d) { return d == device || g_dev[(size_t)device].peers.count(d); }

/* Device memory the current device reaches: its own and its peers' (a library's kernels run on
 * the current device). */
extern "C" bool dgemu_is_device(const void *p, size_t n) {
    guard l(g_mu);
    if (g_dev.empty()) return p && is_symbol(p, n);
    int d = device_of(p, n);
    return d >= 0 && reaches(t_device, d);
}

static const pinned_block *pinned_at(const void *p, size_t n) {
    auto it = g_pinned.upper_bound((char *)p);
    if (it == g_pinned.begin()) return nullptr;
    --it;
    return (const char *)p >= it->first && (const char *)p + n <= it->first + it->second.size ? &it->second : nullptr;
}
static bool is_pinned(const void *p, size_t n) { return pinned_at(p, n) != nullptr; }

/* ---------------------------------------------------------------- faults */

/* A kernel (or queued copy) that faults jumps back to its block's start here. */
static thread_local sigjmp_buf *t_recover;
static thread_local const void *t_fault_addr;
static thread_local bool t_altstack;
static struct sigaction g_old_segv, g_old_bus;

/* What addr is, for a report; `from` is the device whose kernel touched it (-1: the host). */
static void describe(const void *addr, int from, char *out, size_t n) {
    bool past = false;
    const allocation *a = find_allocation(addr, &past);
    if (a && !past && from >= 0 && !reaches(from, a->device))
        snprintf(out, n, "inside a live allocation of %zu bytes at %p (offset %td) on gpu:%d, which gpu:%d cannot reach: "
                 "peer access from gpu:%d to gpu:%d is not enabled (cudaDeviceEnablePeerAccess), or copy the data over",
                 a->size, (void *)a->user, (const char *)addr - a->user, a->device, from, from, a->device);
    else if (a && !past)
        snprintf(out, n, "inside a live allocation of %zu bytes at %p (offset %td)", a->size, (void *)a->user,
                 (const char *)addr - a->user);
    else if (a)
        snprintf(out, n, "%td bytes past the end of the allocation of %zu bytes at %p", (const char *)addr - (a->user + a->size),
                 a->size, (void *)a->user);
    else if (in_arena(addr))
        snprintf(out, n, "in device memory that is not allocated (freed, or never allocated)");
    else
        snprintf(out, n, "outside device memory");
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    if (t_recover && g_work_running) {
        t_fault_addr = si->si_addr;
        siglongjmp(*t_recover, 1);
    }
    if (in_arena(si->si_addr)) {
        char what[384], msg[768];
        const char *work = g_work_what.load();
        int n;
        if (work) {   /* a copy or a library's work (kernels recover above): it reached past its device's view */
            describe(si->si_addr, g_work_device.load(), what, sizeof what);
            n = snprintf(msg, sizeof msg, "========= dgemu: %s on gpu:%d touched device memory at %p (%s)\n", work,
                         g_work_device.load(), si->si_addr, what);
        } else {
            describe(si->si_addr, -1, what, sizeof what);
            n = snprintf(msg, sizeof msg,
                         "========= dgemu: the host dereferenced device memory at %p (%s): device pointers are only valid "
                         "in kernels and CUDA calls; copy the data to the host first\n", si->si_addr, what);
        }
        if (n > 0) { ssize_t w = write(2, msg, (size_t)n); (void)w; }
    }
    /* let the fault happen again with the previous disposition (a core dump, a test failure) */
    struct sigaction *old = sig == SIGBUS ? &g_old_bus : &g_old_segv;
    sigaction(sig, old, nullptr);
}

static void install_fault_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
}

/* fiber stacks overflow into a guard page: the handler needs a stack of its own */
static void ensure_altstack(void) {
    if (t_altstack) return;
    stack_t ss;
    ss.ss_sp = malloc(1 << 16);
    ss.ss_size = 1 << 16;
    ss.ss_flags = 0;
    if (ss.ss_sp) sigaltstack(&ss, nullptr);
    t_altstack = true;
}

/* ---------------------------------------------------------------- devices */

extern "C" int dgemu_device(void) { return t_device; }
extern "C" int dgemu_device_count(void) { return cfg().devices; }

extern "C" cudaError_t cudaGetDeviceCount(int *n) {
    if (!n) return fail(cudaErrorInvalidValue);
    if (cfg().devices <= 0) return fail(cudaErrorNoDevice);   /* like CUDA: *n untouched */
    *n = cfg().devices;
    return cudaSuccess;
}
extern "C" cudaError_t cudaSetDevice(int d) {
    STICKY();
    if (d < 0 || d >= cfg().devices) return fail(cudaErrorInvalidDevice);
    guard l(g_mu);
    dev(d);
    t_device = d;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetDevice(int *d) {
    if (!d) return fail(cudaErrorInvalidValue);
    *d = t_device;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    STICKY();
    guard l(g_mu);
    device_state &d = dev(t_device);
    if (free_bytes) *free_bytes = cfg().memory - d.committed;
    if (total_bytes) *total_bytes = cfg().memory;
    return cudaSuccess;
}

/* Peer access: any two distinct emulated devices can reach each other's memory once the device
 * that runs the kernels enables it (one way; the other direction needs its own call). */
static bool valid_device(int d) { return d >= 0 && d < cfg().devices; }
extern "C" cudaError_t cudaDeviceCanAccessPeer(int *can_access, int device, int peer_device) {
    if (!can_access) return fail(cudaErrorInvalidValue);
    if (!valid_device(device) || !valid_device(peer_device)) return fail(cudaErrorInvalidDevice);
    *can_access = device != peer_device;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceEnablePeerAccess(int peer_device, unsigned flags) {
    STICKY();
    if (flags != 0) return fail(cudaErrorInvalidValue);
    if (!valid_device(peer_device) || peer_device == t_device) return fail(cudaErrorInvalidDevice);
    guard l(g_mu);
    dev(peer_device);
    if (!dev(t_device).peers.insert(peer_device).second) return fail(cudaErrorPeerAccessAlreadyEnabled);
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceDisablePeerAccess(int peer_device) {
    STICKY();
    if (!valid_device(peer_device) || peer_device == t_device) return fail(cudaErrorInvalidDevice);
    guard l(g_mu);
    if (!dev(t_device).peers.erase(peer_device)) return fail(cudaErrorPeerAccessNotEnabled);
    return cudaSuccess;
}

/* ---------------------------------------------------------------- allocation */

/* Fault injection into device allocations: an item `cudaMalloc:N` of DGEMU_FAIL (emu_internal.h)
 * makes the Nth cudaMalloc counted from when the variable took its value, and every one after it,
 * fail with cudaErrorMemoryAllocation, as a full device would (a caching allocator's retry after
 * emptying its cache fails too); a plain `cudaMalloc` item fails every call. The value is read at
 * each call, so a test arms and disarms it with setenv/unsetenv around the code under test
 * (test/gpu/test_gpu_backward_faults.c). Called with g_mu held. */
static bool injected_malloc_failure() {
    static std::string seen;
    static long long count, at;
    const char *e = getenv("DGEMU_FAIL");
    std::string v = e ? e : "";
    if (v != seen) {
        seen = v;
        count = 0;
        at = 0;
        size_t pos = 0;
        while (pos <= v.size()) {   /* the comma-separated items */
            size_t end = v.find(',', pos);
            std::string item = v.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
            if (item == "cudaMalloc") at = 1;
            else if (item.rfind("cudaMalloc:", 0) == 0) at = atoll(item.c_str() + 11);
            if (end == std::string::npos) break;
            pos = end + 1;
        }
    }
    return at > 0 && ++count >= at;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t n) {
    STICKY();
    if (!p) return fail(cudaErrorInvalidValue);
    guard l(g_mu);
    if (cfg().devices <= 0) return fail(cudaErrorNoDevice);
    if (injected_malloc_failure()) { *p = nullptr; return fail(cudaErrorMemoryAllocation); }
    device_state &d = dev(t_device);
    size_t size = n ? (n + 255) / 256 * 256 : 256;
    size_t pages = (size + PAGE - 1) / PAGE;
    if (d.committed + pages * PAGE > cfg().memory) { *p = nullptr; return fail(cudaErrorMemoryAllocation); }
    /* big page-multiple blocks start 2 MiB-aligned, as the driver's large pages do */
    size_t align = (size >= (1u << 20) && size % PAGE == 0) ? ((size_t)2 << 20) : PAGE;
    size_t span = (pages + 1) * PAGE;
    for (auto it = d.free_ranges.begin(); it != d.free_ranges.end(); ++it) {
        char *a = it->first, *start = (char *)(((uintptr_t)a + align - 1) / align * align);
        size_t len = it->second;
        if (start + span > a + len) continue;
        d.free_ranges.erase(it);
        if (start > a) d.free_ranges[a] = (size_t)(start - a);
        if (start + span < a + len) d.free_ranges[start + span] = (size_t)(a + len - (start + span));
        allocation al{ start, pages, start + pages * PAGE - size, n, t_device };
        al.size = n ? n : 1;
        al.user = start + pages * PAGE - size;
        d.live[al.user] = al;
        d.committed += pages * PAGE;
        if (g_open && d.open) mprotect(start, pages * PAGE, PROT_READ | PROT_WRITE);
        g_stats.device_mallocs++;
        g_stats.device_bytes += pages * PAGE;
        *p = al.user;
        return cudaSuccess;
    }
    *p = nullptr;
    return fail(cudaErrorMemoryAllocation);
}

static cudaError_t wait_done(CUstream_st *s);

extern "C" cudaError_t cudaFree(void *p) {
    STICKY();
    if (!p) return cudaSuccess;
    guard l(g_mu);
    for (device_state &d : g_dev) {
        auto it = d.live.find((char *)p);
        if (it == d.live.end()) continue;
        /* cudaFree waits for the device: queued work that uses the block runs first */
        int dv = it->second.device;
        std::vector<CUstream_st *> mine;
        for (CUstream_st *s : g_streams) if (s->device == dv && !s->q.empty()) mine.push_back(s);
        for (CUstream_st *s : mine) if (g_streams.count(s)) wait_done(s);
        it = d.live.find((char *)p);
        if (it == d.live.end()) return fail(cudaErrorInvalidDevicePointer);
        allocation a = it->second;
        d.live.erase(it);
        mprotect(a.base, a.pages * PAGE, PROT_NONE);
        madvise(a.base, a.pages * PAGE, MADV_DONTNEED);
        d.committed -= a.pages * PAGE;
        g_stats.device_bytes -= a.pages * PAGE;
        g_stats.device_frees++;
        /* give the span back, merged with its free neighbours */
        char *start = a.base;
        size_t len = (a.pages + 1) * PAGE;
        auto nx = d.free_ranges.lower_bound(start);
        if (nx != d.free_ranges.end() && nx->first == start + len) { len += nx->second; d.free_ranges.erase(nx); }
        auto pv = d.free_ranges.lower_bound(start);
        if (pv != d.free_ranges.begin()) {
            --pv;
            if (pv->first + pv->second == start) { start = pv->first; len += pv->second; d.free_ranges.erase(pv); }
        }
        d.free_ranges[start] = len;
        return cudaSuccess;
    }
    return fail(cudaErrorInvalidDevicePointer);
}

extern "C" cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) {
    STICKY();
    if (!p) return fail(cudaErrorInvalidValue);
    guard l(g_mu);
    void *q = nullptr;
    if (posix_memalign(&q, PAGE, n ? n : 1)) return fail(cudaErrorMemoryAllocation);
    g_pinned[(char *)q] = pinned_block{ n ? n : 1, t_device };
    g_stats.pinned_bytes += n ? n : 1;
    *p = q;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMallocHost(void **p, size_t n) { return cudaHostAlloc(p, n, 0); }
extern "C" cudaError_t cudaFreeHost(void *p) {
    STICKY();
    if (!p) return cudaSuccess;
    guard l(g_mu);
    auto it = g_pinned.find((char *)p);
    if (it == g_pinned.end()) return fail(cudaErrorInvalidValue);
    /* like cudaFree it waits for the device: a queued copy may still read the buffer */
    std::vector<CUstream_st *> busy;
    for (CUstream_st *s : g_streams) if (!s->q.empty()) busy.push_back(s);
    for (CUstream_st *s : busy) if (g_streams.count(s)) wait_done(s);
    it = g_pinned.find((char *)p);
    if (it == g_pinned.end()) return fail(cudaErrorInvalidValue);
    g_stats.pinned_bytes -= it->second.size;
    g_pinned.erase(it);
    free(p);
    return cudaSuccess;
}

extern "C" cudaError_t dgemu_get_symbol_address(void **p, const void *symbol, size_t size) {
    if (!p || !symbol) return fail(cudaErrorInvalidSymbol);
    guard l(g_mu);
    g_symbols[(const char *)symbol] = size;
    *p = (void *)symbol;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- streams and events */

static CUstream_st *null_stream(int d) {
    device_state &s = dev(d);
    if (!s.null_stream) {
        s.null_stream = new CUstream_st{ d, 0, {} };
        g_streams.insert(s.null_stream);
    }
    return s.null_stream;
}
static CUstream_st *resolve(cudaStream_t s) { return s ? s : null_stream(t_device); }
static bool stream_ok(cudaStream_t s) { return !s || g_streams.count(s); }

static void order_with_legacy(CUstream_st *s);

/* Queues fn on s; `copy` work may use another device's stream, everything else (kernels, memsets,
 * the libraries' work) only the current device's, as a kernel launch on a GPU. */
static cudaError_t enqueue(cudaStream_t s, const char *what, dgemu_work_fn fn, void *arg, void (*free_arg)(void *), bool copy) {
    guard l(g_mu);
    cudaError_t e = (cudaError_t)g_sticky.load();
    if (e == cudaSuccess && !stream_ok(s)) e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess && !copy && resolve(s)->device != t_device) {
        fprintf(stderr, "dgemu: %s queued on a stream of gpu:%d while gpu:%d is current: kernels run only on streams of "
                "the current device (cudaSetDevice first)\n", what, resolve(s)->device, t_device);
        e = cudaErrorInvalidResourceHandle;
    }
    if (e != cudaSuccess) {
        if (free_arg) free_arg(arg);
        return fail(e);
    }
    CUstream_st *st = resolve(s);
    order_with_legacy(st);
    st->q.push_back(work_item{ work_item::FN, fn, arg, free_arg, what, nullptr, nullptr, 0, copy });
    return cudaSuccess;
}
extern "C" cudaError_t dgemu_enqueue(cudaStream_t s, const char *what, dgemu_work_fn fn, void *arg, void (*free_arg)(void *)) {
    return enqueue(s, what, fn, arg, free_arg, false);
}
extern "C" int dgemu_stream_device(cudaStream_t s) {
    guard l(g_mu);
    if (!stream_ok(s)) return -1;
    return s ? s->device : t_device;
}

static void push_record(CUevent_st *e, CUstream_st *st) {
    e->recorded++;
    e->pending.insert(e->recorded);
    e->st = st;
    e->refs++;
    st->q.push_back(work_item{ work_item::RECORD, nullptr, nullptr, nullptr, "cudaEventRecord", e, st, e->recorded, false });
}
static void push_wait(CUstream_st *s, CUevent_st *e) {
    if (e->recorded == 0 || e->done(e->recorded)) return;   /* nothing outstanding to wait for */
    e->refs++;
    s->q.push_back(work_item{ work_item::WAIT, nullptr, nullptr, nullptr, "cudaStreamWaitEvent", e, e->st, e->recorded, false });
}
/* dst's next work runs after what src holds now (an event of the runtime's own) */
static void order_after(CUstream_st *dst, CUstream_st *src) {
    if (src == dst || src->q.empty()) return;
    CUevent_st *e = new CUevent_st();
    e->device = src->device;
    e->handle = false;
    push_record(e, src);
    push_wait(dst, e);
}
/* The legacy default stream: work queued on it waits for every blocking stream of its device,
 * and work queued on a blocking stream waits for it (streams made cudaStreamNonBlocking do not
 * take part). */
static void order_with_legacy(CUstream_st *s) {
    device_state &d = dev(s->device);
    if (s == d.null_stream) {
        for (CUstream_st *o : g_streams)
            if (o != s && o->device == s->device && !(o->flags & cudaStreamNonBlocking)) order_after(s, o);
    } else if (!(s->flags & cudaStreamNonBlocking) && d.null_stream) {
        order_after(s, d.null_stream);
    }
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    STICKY();
    if (!s) return fail(cudaErrorInvalidValue);
    guard l(g_mu);
    dev(t_device);
    *s = new CUstream_st{ t_device, flags, {} };
    g_streams.insert(*s);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

static int drain(CUstream_st *s, memory_window &w, int depth);
static cudaError_t wait_done(CUstream_st *s);
static void pop(CUstream_st *s);

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s) {
    guard l(g_mu);
    if (!s || !g_streams.count(s)) return fail(cudaErrorInvalidResourceHandle);
    /* CUDA lets queued work finish after a destroy: run it now */
    wait_done(s);
    while (!s->q.empty()) pop(s);   /* only left after a sticky error */
    g_streams.erase(s);
    delete s;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    STICKY();
    if (!e) return fail(cudaErrorInvalidValue);
    guard l(g_mu);
    *e = new CUevent_st();
    (*e)->device = t_device;
    g_events.insert(*e);
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e) {
    guard l(g_mu);
    if (!e || !g_events.count(e)) return fail(cudaErrorInvalidResourceHandle);
    /* queued records and waits may still name it: the last of them deletes it */
    g_events.erase(e);
    e->handle = false;
    if (e->refs == 0) delete e;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    STICKY();
    guard l(g_mu);
    if (!e || !g_events.count(e) || !stream_ok(s)) return fail(cudaErrorInvalidResourceHandle);
    CUstream_st *st = resolve(s);
    if (st->device != e->device) {   /* CUDA: the event and the stream must be on the same device */
        fprintf(stderr, "dgemu: cudaEventRecord of an event made on gpu:%d onto a stream of gpu:%d\n", e->device, st->device);
        return fail(cudaErrorInvalidResourceHandle);
    }
    push_record(e, st);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    STICKY();
    guard l(g_mu);
    if (!e || !g_events.count(e) || !stream_ok(s)) return fail(cudaErrorInvalidResourceHandle);
    push_wait(resolve(s), e);
    return cudaSuccess;
}

/* ---- execution ---- */

static uint64_t g_rng;
static uint64_t rnd(void) {
    if (!g_rng) g_rng = cfg().seed * 0x9E3779B97F4A7C15ull + 1;
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return g_rng;
}

static void pop(CUstream_st *s) {
    work_item w = s->q.front();
    s->q.pop_front();
    if (w.kind == work_item::FN && w.free_arg) w.free_arg(w.arg);
    if (w.kind != work_item::FN) event_unref(w.ev);
}

/* Runs the head of s. Returns DGEMU_DONE when it finished (and was popped), DGEMU_AGAIN when it
 * cannot finish now. With follow, a wait on another stream's event runs that stream first. */
static int step(CUstream_st *s, memory_window &win, int depth, bool follow) {
    work_item &w = s->q.front();
    switch (w.kind) {
    case work_item::RECORD:
        w.ev->pending.erase(w.gen);
        clock_gettime(CLOCK_MONOTONIC, &w.ev->when);
        pop(s);
        return DGEMU_DONE;
    case work_item::WAIT: {
        if (!w.ev->done(w.gen) && follow && depth < 16 && w.src != s) {
            CUstream_st *src = w.src;
            CUevent_st *ev = w.ev;
            uint64_t gen = w.gen;
            while (!ev->done(gen) && !src->q.empty())
                if (step(src, win, depth + 1, true) == DGEMU_AGAIN) break;
        }
        if (!w.ev->done(w.gen)) return DGEMU_AGAIN;
        pop(s);
        return DGEMU_DONE;
    }
    case work_item::FN: {
        g_stats.work_items++;
        /* dry runs, and everything queued behind a sticky error, are dropped unrun */
        if (cfg().dry || g_sticky.load() != cudaSuccess) { pop(s); return DGEMU_DONE; }
        win.open(s->device, w.copy);
        g_work_what = w.what;
        g_work_device = s->device;
        int r = w.fn(w.arg);
        g_work_what = nullptr;
        if (r == DGEMU_AGAIN) return DGEMU_AGAIN;
        pop(s);
        return DGEMU_DONE;
    }
    }
    return DGEMU_DONE;
}

/* One step of some stream chosen at random among those that can move (random interleaving). */
static int random_step(int device, memory_window &win) {
    std::vector<CUstream_st *> ready;
    for (CUstream_st *s : g_streams)   /* all devices: a wait may name another device's event */
        if (!s->q.empty()) ready.push_back(s);
    while (!ready.empty()) {
        size_t i = (size_t)(rnd() % ready.size());
        if (step(ready[i], win, 0, false) == DGEMU_DONE) return DGEMU_DONE;
        ready.erase(ready.begin() + (long)i);
    }
    return DGEMU_AGAIN;
}

/* Runs s until it is empty (DONE) or blocked (AGAIN). */
static int drain(CUstream_st *s, memory_window &win, int depth) {
    while (!s->q.empty()) {
        if (cfg().random_interleave) {
            if (random_step(s->device, win) == DGEMU_AGAIN) return DGEMU_AGAIN;
        } else if (step(s, win, depth, true) == DGEMU_AGAIN) {
            return DGEMU_AGAIN;
        }
    }
    return DGEMU_DONE;
}

/* One step of every stream that can move; whether any did. */
static bool sweep(void) {
    memory_window win;
    std::vector<CUstream_st *> all(g_streams.begin(), g_streams.end());
    bool moved = false;
    for (CUstream_st *s : all)
        if (g_streams.count(s) && !s->q.empty() && step(s, win, 0, true) == DGEMU_DONE) moved = true;
    return moved;
}

/* Blocks until s is empty, sleeping while its head waits for something outside this process
 * (a collective's peers). The caller holds g_mu once; it is released while sleeping. */
static cudaError_t wait_done(CUstream_st *s) {
    g_stats.syncs++;
    for (;;) {
        int r;
        {
            memory_window win;
            r = drain(s, win, 0);
        }
        if (r == DGEMU_DONE || g_sticky.load() != cudaSuccess) break;
        if (sweep()) continue;   /* a wait chain deeper than step() follows: move every stream once */
        g_mu.unlock();
        usleep(100);
        g_mu.lock();
    }
    return g_sticky.load() != cudaSuccess ? fail((cudaError_t)g_sticky.load()) : cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    STICKY();
    guard l(g_mu);
    if (!stream_ok(s)) return fail(cudaErrorInvalidResourceHandle);
    return wait_done(resolve(s));
}
/* Runs every stream of device d to its end. The caller holds g_mu. */
static cudaError_t synchronize_device(int d) {
    dev(d);
    std::vector<CUstream_st *> all;
    for (CUstream_st *s : g_streams) if (s->device == d) all.push_back(s);
    for (CUstream_st *s : all) { cudaError_t e = wait_done(s); if (e) return e; }
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceSynchronize(void) {
    STICKY();
    guard l(g_mu);
    return synchronize_device(t_device);
}
/* A query moves the stream one step: pollers see cudaErrorNotReady while work remains. */
extern "C" cudaError_t cudaStreamQuery(cudaStream_t s) {
    STICKY();
    guard l(g_mu);
    if (!stream_ok(s)) return fail(cudaErrorInvalidResourceHandle);
    CUstream_st *st = resolve(s);
    g_stats.queries++;
    if (!st->q.empty()) {
        memory_window win;
        if (cfg().random_interleave) random_step(st->device, win);
        else step(st, win, 0, true);
    }
    STICKY();
    return st->q.empty() ? cudaSuccess : cudaErrorNotReady;
}
static int run_to_event(CUevent_st *e, memory_window &win) {
    while (!e->done(e->recorded) && e->st && !e->st->q.empty()) {
        int r = cfg().random_interleave ? random_step(e->st->device, win) : step(e->st, win, 0, true);
        if (r == DGEMU_AGAIN) return DGEMU_AGAIN;
    }
    return DGEMU_DONE;
}
extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    STICKY();
    guard l(g_mu);
    if (!e || !g_events.count(e)) return fail(cudaErrorInvalidResourceHandle);
    g_stats.syncs++;
    for (;;) {
        { memory_window win; run_to_event(e, win); }
        if (e->done(e->recorded) || g_sticky.load() != cudaSuccess) break;
        if (sweep()) continue;
        g_mu.unlock();
        usleep(100);
        g_mu.lock();
    }
    STICKY();
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventQuery(cudaEvent_t e) {
    STICKY();
    guard l(g_mu);
    if (!e || !g_events.count(e)) return fail(cudaErrorInvalidResourceHandle);
    if (!e->done(e->recorded) && e->st && !e->st->q.empty()) {
        memory_window win;
        step(e->st, win, 0, true);
    }
    STICKY();
    return e->done(e->recorded) ? cudaSuccess : cudaErrorNotReady;
}
extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!ms || !a || !b) return fail(cudaErrorInvalidValue);
    if (a->device != b->device) return fail(cudaErrorInvalidResourceHandle);   /* two devices' clocks */
    if (!a->done(a->recorded) || !b->done(b->recorded)) return fail(cudaErrorNotReady);
    *ms = (float)((b->when.tv_sec - a->when.tv_sec) * 1e3 + (b->when.tv_nsec - a->when.tv_nsec) * 1e-6);
    return cudaSuccess;
}

/* ---------------------------------------------------------------- copies and fills */

struct copy_work { void *dst; const void *src; size_t n; void *owned; };
static int run_copy(void *arg) {
    copy_work *c = (copy_work *)arg;
    memcpy(c->dst, c->owned ? c->owned : c->src, c->n);
    return DGEMU_DONE;
}
static void free_copy(void *arg) {
    copy_work *c = (copy_work *)arg;
    free(c->owned);
    free(c);
}

static cudaError_t queue_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    STICKY();
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return fail(cudaErrorInvalidValue);
    guard l(g_mu);
    if (!stream_ok(s)) return fail(cudaErrorInvalidResourceHandle);
    /* unified addressing: device memory of any device, whichever is current and whoever owns the stream */
    bool dd = device_of(dst, n) >= 0, sd = device_of(src, n) >= 0;
    if (kind == cudaMemcpyDefault) kind = sd ? (dd ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                             : (dd ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    bool want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dd != want_dd || sd != want_sd) {
        fprintf(stderr, "dgemu: cudaMemcpy of %zu bytes, kind %d: destination %p is %s memory, source %p is %s memory\n", n,
                (int)kind, dst, dd ? "device" : "host", src, sd ? "device" : "host");
        return fail(cudaErrorInvalidValue);
    }
    copy_work *c = (copy_work *)calloc(1, sizeof *c);
    if (!c) return fail(cudaErrorMemoryAllocation);
    *c = copy_work{ dst, src, n, nullptr };
    if (kind == cudaMemcpyHostToDevice && !is_pinned(src, n)) {
        /* the driver stages pageable memory before returning: the caller may reuse it at once */
        c->owned = malloc(n);
        if (!c->owned) { free(c); return fail(cudaErrorMemoryAllocation); }
        memcpy(c->owned, src, n);
        g_stats.pageable_uploads++;
    }
    if (kind == cudaMemcpyHostToHost) { memcpy(dst, src, n); free_copy(c); return cudaSuccess; }
    return enqueue(s, "cudaMemcpyAsync", run_copy, c, free_copy, true);
}
extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    return queue_copy(dst, src, n, kind, s);
}
extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    cudaError_t e = queue_copy(dst, src, n, kind, nullptr);
    return e ? e : cudaStreamSynchronize(nullptr);
}

/* A peer copy's devices must be those its pointers live on. On a GPU the driver takes them as
 * given (with unified addressing the pointers already say it), so a wrong one is at best
 * undefined; here it is refused with cudaErrorInvalidValue and a message. */
static cudaError_t check_peer(void *dst, int dst_device, const void *src, int src_device, size_t n) {
    if (!valid_device(dst_device) || !valid_device(src_device)) return cudaErrorInvalidDevice;
    int dd = device_of(dst, n), sd = device_of(src, n);
    if (dd == dst_device && sd == src_device) return cudaSuccess;
    char sw[32] = "not device memory", dw[32] = "not device memory";
    if (sd >= 0) snprintf(sw, sizeof sw, "on gpu:%d", sd);
    if (dd >= 0) snprintf(dw, sizeof dw, "on gpu:%d", dd);
    fprintf(stderr, "dgemu: cudaMemcpyPeer of %zu bytes from gpu:%d to gpu:%d: the source %p is %s, the destination %p is %s\n",
            n, src_device, dst_device, src, sw, dst, dw);
    return cudaErrorInvalidValue;
}
extern "C" cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t n, cudaStream_t s) {
    STICKY();
    if (n == 0) return cudaSuccess;
    guard l(g_mu);
    cudaError_t e = check_peer(dst, dst_device, src, src_device, n);
    return e ? fail(e) : queue_copy(dst, src, n, cudaMemcpyDeviceToDevice, s);
}
static cudaError_t synchronize_device(int d);
/* CUDA serialises it with all work, queued or to come, of the current device and both devices
 * named (while leaving the host free to go on): here that work runs first, and the copy is done
 * when the call returns, which no program can tell from CUDA's order. */
extern "C" cudaError_t cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device, size_t n) {
    STICKY();
    if (n == 0) return cudaSuccess;
    guard l(g_mu);
    cudaError_t e = check_peer(dst, dst_device, src, src_device, n);
    if (e != cudaSuccess) return fail(e);
    for (int d : { t_device, src_device, dst_device })
        if ((e = synchronize_device(d)) != cudaSuccess) return e;
    e = queue_copy(dst, src, n, cudaMemcpyDeviceToDevice, nullptr);
    return e ? e : cudaStreamSynchronize(nullptr);
}

/* What a pointer is and which device it belongs to (unified addressing). */
extern "C" cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    STICKY();
    if (!a) return fail(cudaErrorInvalidValue);
    guard l(g_mu);
    int d = device_of(p, 1);
    const pinned_block *pb = p ? pinned_at(p, 1) : nullptr;
    if (d >= 0) *a = cudaPointerAttributes{ cudaMemoryTypeDevice, d, (void *)p, nullptr };
    else if (pb) *a = cudaPointerAttributes{ cudaMemoryTypeHost, pb->device, (void *)p, (void *)p };
    else *a = cudaPointerAttributes{ cudaMemoryTypeUnregistered, -2, nullptr, (void *)p };   /* CUDA 11+: not an error; no device */
    return cudaSuccess;
}

struct fill_work { void *p; int v; size_t n; };
static int run_fill(void *arg) {
    fill_work *f = (fill_work *)arg;
    memset(f->p, f->v, f->n);
    return DGEMU_DONE;
}
extern "C" cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    STICKY();
    if (n == 0) return cudaSuccess;
    if (!dgemu_is_device(p, n)) {
        guard l(g_mu);
        int d = device_of(p, n);
        if (d >= 0)   /* a memset is a kernel of the current device: another device's memory needs peer access */
            fprintf(stderr, "dgemu: cudaMemsetAsync of %zu bytes at %p: memory of gpu:%d, which gpu:%d has no peer access to\n", n,
                    p, d, t_device);
        return fail(cudaErrorInvalidValue);
    }
    fill_work *f = (fill_work *)malloc(sizeof *f);
    if (!f) return fail(cudaErrorMemoryAllocation);
    *f = fill_work{ p, v, n };
    return dgemu_enqueue(s, "cudaMemsetAsync", run_fill, f, free);
}
extern "C" cudaError_t cudaMemset(void *p, int v, size_t n) {
    cudaError_t e = cudaMemsetAsync(p, v, n, nullptr);
    return e ? e : cudaStreamSynchronize(nullptr);
}

/* ---------------------------------------------------------------- kernels */

struct launch_work {
    dim3 grid, block;
    const void *kernel;
    const char *name, *file;
    int line;
    dgemu_kernel_task *task;
    int device;          /* the device it runs on (its stream's) */
};

struct kernel_info { bool cooperative = false; };
static std::unordered_map<const void *, kernel_info> g_kernels;   /* under g_mu */

enum fiber_state { F_RUN, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE };
struct fiber {
    void *sp;
    fiber_state state;
    dgemu_thread ctx;
};
static const size_t FIBER_STACK = 64 * 1024;
static const int MAX_THREADS = 1024;

/* One block running as fibers on this OS thread. */
/* Warp shuffles: a lane deposits its value in one of two slots (alternating per lane), and waits
 * with its mask; a group of lanes is released when every present lane its mask names waits with
 * that same mask (halves of a warp may shuffle separately). At release each lane's slot is
 * remembered, so a reader gets the value of that exchange even if its source has already
 * deposited its next one in the other slot. */
struct block_run {
    const launch_work *L;
    int n;
    fiber *f;
    int n_done, n_wait_block;
    bool met_sync;
    unsigned wait_mask[MAX_THREADS];   /* the mask a lane waits with */
    uint8_t next_slot[MAX_THREADS], dep_slot[MAX_THREADS], rel_slot[MAX_THREADS];
    uint64_t xbuf[2][MAX_THREADS];
};
struct fiber_pool {
    char *stacks = nullptr;
    fiber f[MAX_THREADS];
    void *sched_sp = nullptr;
};
static thread_local fiber_pool *t_pool;
static thread_local block_run *t_block;
static thread_local fiber *t_fiber;
static thread_local bool t_plain;    /* running a block as a plain loop */
static thread_local const launch_work *t_launch;

static fiber_pool *pool(void) {
    if (t_pool) return t_pool;
    fiber_pool *p = new fiber_pool();
    size_t one = FIBER_STACK + PAGE;
    void *m = mmap(nullptr, one * MAX_THREADS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { fprintf(stderr, "dgemu: no memory for fiber stacks\n"); abort(); }
    p->stacks = (char *)m;
    for (int i = 0; i < MAX_THREADS; i++) mprotect(p->stacks + one * (size_t)i, PAGE, PROT_NONE);   /* overflow guard */
    t_pool = p;
    return p;
}

static void thread_fault(const char *what, cudaError_t e);

static void fiber_main(void *arg) {
    fiber *f = (fiber *)arg;
    t_block->L->task->run_thread();
    f->state = F_DONE;
    t_block->n_done++;
    dgemu_fiber_switch(&f->sp, t_pool->sched_sp);
    __builtin_unreachable();
}

static void *fresh_stack(fiber_pool *p, int i, fiber *f) {
    size_t one = FIBER_STACK + PAGE;
    char *top = p->stacks + one * (size_t)(i + 1);
    uint64_t *sp = (uint64_t *)(top - 80);
    uint32_t mx;
    uint16_t cw;
    __asm__ volatile("stmxcsr %0" : "=m"(mx));
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    memset(sp, 0, 64);
    memcpy(&sp[0], &mx, 4);
    memcpy((char *)&sp[0] + 4, &cw, 2);
    sp[3] = (uint64_t)(uintptr_t)f;              /* r13: the argument */
    sp[4] = (uint64_t)(uintptr_t)fiber_main;     /* r12: the function */
    sp[7] = (uint64_t)(uintptr_t)dgemu_fiber_entry;
    return sp;
}

static void set_ctx(dgemu_thread *c, const launch_work *L, uint64_t b, int t) {
    c->gdim = L->grid;
    c->bdim = L->block;
    c->bid.x = (unsigned)(b % L->grid.x);
    c->bid.y = (unsigned)((b / L->grid.x) % L->grid.y);
    c->bid.z = (unsigned)(b / ((uint64_t)L->grid.x * L->grid.y));
    c->tid.x = (unsigned)t % L->block.x;
    c->tid.y = ((unsigned)t / L->block.x) % L->block.y;
    c->tid.z = (unsigned)t / (L->block.x * L->block.y);
    c->linear = t;
}

static const char *state_counts(const block_run &B, char *buf, size_t n) {
    int wb = 0, ww = 0, dn = 0;
    for (int i = 0; i < B.n; i++) {
        if (B.f[i].state == F_WAIT_BLOCK) wb++;
        else if (B.f[i].state == F_WAIT_WARP) ww++;
        else if (B.f[i].state == F_DONE) dn++;
    }
    snprintf(buf, n, "%d of %d threads wait at __syncthreads, %d at a warp shuffle, %d have exited", wb, B.n, ww, dn);
    return buf;
}

/* Releases the shuffle groups of warp w whose lanes have all arrived; whether any was. */
static bool release_warp(block_run &B, int w) {
    int lanes = B.n - w * 32 < 32 ? B.n - w * 32 : 32;
    unsigned present = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    bool released = false;
    for (int l = 0; l < lanes; l++) {
        int t = w * 32 + l;
        if (B.f[t].state != F_WAIT_WARP) continue;
        unsigned m = B.wait_mask[t] & present;
        bool all = true;
        for (int k = 0; k < lanes && all; k++)
            if (m >> k & 1u) all = B.f[w * 32 + k].state == F_WAIT_WARP && B.wait_mask[w * 32 + k] == B.wait_mask[t];
        if (!all) continue;
        for (int k = 0; k < lanes; k++)
            if (m >> k & 1u) {
                B.rel_slot[w * 32 + k] = B.dep_slot[w * 32 + k];
                B.f[w * 32 + k].state = F_RUN;
            }
        released = true;
    }
    return released;
}

/* Runs block b as fibers; returns whether any thread met a barrier or shuffle. */
static bool run_block_fibers(const launch_work *L, uint64_t b) {
    fiber_pool *p = pool();
    block_run B;
    memset(&B, 0, offsetof(block_run, wait_mask));
    memset(B.next_slot, 0, sizeof B.next_slot);
    B.L = L;
    B.n = (int)(L->block.x * L->block.y * L->block.z);
    B.f = p->f;
    t_block = &B;
    for (int i = 0; i < B.n; i++) {
        set_ctx(&B.f[i].ctx, L, b, i);
        B.f[i].state = F_RUN;
        B.f[i].sp = fresh_stack(p, i, &B.f[i]);
    }
    for (;;) {
        for (int i = 0; i < B.n; i++) {
            if (B.f[i].state != F_RUN) continue;
            t_fiber = &B.f[i];
            dgemu_cur = &B.f[i].ctx;
            dgemu_fiber_switch(&p->sched_sp, B.f[i].sp);
        }
        if (B.n_done == B.n) break;
        bool released = false;
        for (int w = 0; w * 32 < B.n; w++) released |= release_warp(B, w);
        if (released) continue;
        char buf[160];
        if (B.n_wait_block > 0 && B.n_wait_block == B.n - B.n_done) {
            if (B.n_done == 0) {
                for (int i = 0; i < B.n; i++) B.f[i].state = F_RUN;
                B.n_wait_block = 0;
                continue;
            }
            snprintf(buf, sizeof buf, "__syncthreads not reached by every thread of the block: %d of %d threads exited before it",
                     B.n_done, B.n);
            thread_fault(buf, cudaErrorLaunchFailure);
        }
        char why[400];
        snprintf(why, sizeof why, "a barrier or shuffle no thread can pass: %s", state_counts(B, buf, sizeof buf));
        thread_fault(why, cudaErrorLaunchFailure);
    }
    t_block = nullptr;
    return B.met_sync;
}

static void run_block_plain(const launch_work *L, uint64_t b) {
    dgemu_thread c;
    int n = (int)(L->block.x * L->block.y * L->block.z);
    t_plain = true;
    dgemu_cur = &c;
    for (int i = 0; i < n; i++) {
        set_ctx(&c, L, b, i);
        L->task->run_thread();
    }
    t_plain = false;
    dgemu_cur = nullptr;
}

static void yield_to_scheduler(fiber_state st) {
    t_fiber->state = st;
    dgemu_fiber_switch(&t_fiber->sp, t_pool->sched_sp);
}

void dgemu_syncthreads(void) {
    if (!t_block) {
        thread_fault("__syncthreads reached in a block the emulator ran as a plain loop (no block of this kernel's first "
                     "launch met a barrier): barrier use that differs between launches", cudaErrorLaunchFailure);
        return;
    }
    t_block->met_sync = true;
    t_block->n_wait_block++;
    yield_to_scheduler(F_WAIT_BLOCK);
}

void dgemu_warp_exchange(unsigned mask, const void *mine, size_t n, int src, void *out) {
    if (!t_block) {
        thread_fault("warp shuffle reached in a block the emulator ran as a plain loop (no block of this kernel's first "
                     "launch met one)", cudaErrorLaunchFailure);
        memcpy(out, mine, n);
        return;
    }
    block_run *B = t_block;
    dgemu_thread *c = &t_fiber->ctx;
    int t = c->linear, w = t / 32, lane = t & 31;
    if (!(mask >> lane & 1u)) {
        thread_fault("a warp shuffle by a lane its mask does not name", cudaErrorIllegalInstruction);
        memcpy(out, mine, n);
        return;
    }
    int slot = B->next_slot[t];
    B->next_slot[t] ^= 1;
    uint64_t v = 0;
    memcpy(&v, mine, n);
    B->xbuf[slot][t] = v;
    B->dep_slot[t] = (uint8_t)slot;
    B->wait_mask[t] = mask;
    B->met_sync = true;
    yield_to_scheduler(F_WAIT_WARP);
    int lanes = B->n - w * 32 < 32 ? B->n - w * 32 : 32;
    if (src < 0 || src >= lanes || !(mask >> src & 1u)) { memcpy(out, mine, n); return; }
    int s = w * 32 + src;
    memcpy(out, &B->xbuf[B->rel_slot[s]][s], n);
}

/* A device-side error in the thread running now: reported with the kernel and the thread, the
 * launch is abandoned (the rest of its blocks do not run) and the error becomes sticky. */
static void thread_fault(const char *what, cudaError_t e) {
    const launch_work *L = t_launch;
    dgemu_thread *c = dgemu_cur;
    if (L && c)
        dgemu_fault(e, "%s\n=========     in kernel %s (%s:%d) on gpu:%d, block (%u,%u,%u), thread (%u,%u,%u)", what, L->name,
                    L->file, L->line, L->device, c->bid.x, c->bid.y, c->bid.z, c->tid.x, c->tid.y, c->tid.z);
    else
        dgemu_fault(e, "%s", what);
    if (t_recover) siglongjmp(*t_recover, 2);
}

static int run_launch(void *arg) {
    launch_work *L = (launch_work *)arg;
    uint64_t nblocks = (uint64_t)L->grid.x * L->grid.y * L->grid.z;
    bool first = !g_kernels.count(L->kernel);
    kernel_info &ki = g_kernels[L->kernel];
    std::atomic<bool> failed{ false }, met{ false };
    /* a kernel's first launch runs every block as fibers and tells whether its threads meet */
    bool cooperative = first || ki.cooperative;
    g_stats.launches++;

    auto run_one = [&](uint64_t b, bool fibers) -> bool {
        ensure_altstack();
        sigjmp_buf jb;
        t_launch = L;
        t_recover = &jb;
        bool met = false;
        int how = sigsetjmp(jb, 0);
        if (how == 0) {
            if (fibers) met = run_block_fibers(L, b);
            else run_block_plain(L, b);
        } else {
            if (how == 1) {
                char where[256];
                describe(t_fault_addr, L->device, where, sizeof where);
                const dgemu_thread *c = dgemu_cur;
                dgemu_fault(cudaErrorIllegalAddress,
                            "Invalid __global__ access at %p: %s\n=========     in kernel %s (%s:%d) on gpu:%d, block (%u,%u,%u), "
                            "thread (%u,%u,%u)", t_fault_addr, where, L->name, L->file, L->line, L->device, c ? c->bid.x : 0,
                            c ? c->bid.y : 0, c ? c->bid.z : 0, c ? c->tid.x : 0, c ? c->tid.y : 0, c ? c->tid.z : 0);
            }
            failed = true;
            t_block = nullptr;
            t_plain = false;
        }
        t_recover = nullptr;
        t_launch = nullptr;
        dgemu_cur = nullptr;
        return met;
    };

    long threads = (long)L->block.x * L->block.y * L->block.z;
    int workers = cfg().threads;
    if ((long long)nblocks * threads < 4096) workers = 1;
    long long chunk = (long long)nblocks / (workers * 8) + 1;
#pragma omp parallel for num_threads(workers) schedule(dynamic, chunk)
    for (long long b = 0; b < (long long)nblocks; b++) {
        if (failed) continue;
        if (run_one((uint64_t)b, cooperative)) met = true;
    }
    if (first) ki.cooperative = met;
    if (cooperative) g_stats.fiber_blocks += nblocks;
    else g_stats.plain_blocks += nblocks;
    return DGEMU_DONE;
}
static void free_launch(void *arg) {
    launch_work *L = (launch_work *)arg;
    delete L->task;
    delete L;
}

void dgemu_submit(dim3 grid, dim3 block, size_t shmem, CUstream_st *stream, const void *kernel, const char *name,
                  const char *file, int line, dgemu_kernel_task *task) {
    const char *bad = nullptr;
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z) bad = "a grid dimension is 0";
    else if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) bad = "grid beyond (2^31-1, 65535, 65535)";
    else if (!block.x || !block.y || !block.z) bad = "a block dimension is 0";
    else if (block.x > 1024 || block.y > 1024 || block.z > 64) bad = "block beyond (1024, 1024, 64)";
    else if (threads > 1024) bad = "more than 1024 threads per block";
    else if (shmem > 48 * 1024) bad = "more than 48 KiB of dynamic shared memory";
    if (bad || g_sticky.load() != cudaSuccess) {
        if (bad)
            fprintf(stderr, "dgemu: launch of %s (%s:%d) with grid (%u,%u,%u), block (%u,%u,%u), %zu B shared: %s\n", name, file,
                    line, grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem, bad);
        fail(bad ? cudaErrorInvalidConfiguration : (cudaError_t)g_sticky.load());
        delete task;
        return;
    }
    guard l(g_mu);
    if (!stream_ok(stream)) { fail(cudaErrorInvalidResourceHandle); delete task; return; }
    if (resolve(stream)->device != t_device) {
        fprintf(stderr, "dgemu: launch of %s (%s:%d) on a stream of gpu:%d while gpu:%d is current\n", name, file, line,
                resolve(stream)->device, t_device);
        fail(cudaErrorInvalidResourceHandle);
        delete task;
        return;
    }
    launch_work *L = new launch_work{ grid, block, kernel, name, file, line, task, t_device };
    dgemu_enqueue(stream, name, run_launch, L, free_launch);
}

/* Any device's memory passes: whether the kernel may touch it is decided when it does (a pointer
 * to another device's memory is fine until dereferenced without peer access). */
bool dgemu_check_kernel_arg(const void *p, int index, const char *name, const char *file, int line) {
    if (!p) return true;
    {
        guard l(g_mu);
        if (device_of(p, 1) >= 0 || is_pinned(p, 1)) return true;
    }
    dgemu_fault(cudaErrorIllegalAddress, "launch of %s (%s:%d): pointer argument %d (%p) is not device memory: a kernel "
                "cannot read pageable host memory", name, file, line, index, p);
    return false;
}

/* ---------------------------------------------------------------- statistics */

extern "C" void dgemu_get_stats(dgemu_stats *out) {
    guard l(g_mu);
    *out = g_stats;
}
