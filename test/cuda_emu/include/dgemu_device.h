/* test/cuda_emu/include/dgemu_device.h — the device side of CUDA C++ for the host compiler
 * (included by the emulator's cuda_runtime.h in C++ only). A kernel is an ordinary function; a
 * launch queues it on a stream, and when the stream runs, every thread of the grid calls it with
 * its own threadIdx/blockIdx (read through the current thread context). Blocks whose threads
 * meet at __syncthreads or exchange values with warp shuffles run cooperatively as fibers; the
 * rest of the grid runs as plain loops (see runtime.cc). __shared__ variables are per-OS-thread
 * statics: one OS thread runs one block at a time, so the block's fibers share them. */
#ifndef DGEMU_DEVICE_H
#define DGEMU_DEVICE_H

#include <math.h>
#include <string.h>
#include <stdint.h>
#include <tuple>
#include <type_traits>
#include <utility>

struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* the vector types the kernels use (CUDA aligns them to their size) */
struct __attribute__((aligned(16))) double2 { double x, y; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(8))) int2 { int x, y; };
static inline double2 make_double2(double x, double y) { return double2{ x, y }; }
static inline float2 make_float2(float x, float y) { return float2{ x, y }; }
static inline int2 make_int2(int x, int y) { return int2{ x, y }; }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __grid_constant__
#define __launch_bounds__(...)
#define __shared__ static thread_local
#ifndef __restrict__
#define __restrict__ __restrict
#endif
#define warpSize 32

/* the indices of the thread running now (fiber or plain loop) */
struct dgemu_thread {
    uint3 tid, bid;
    dim3 bdim, gdim;
    int linear;             /* thread number in its block */
};
extern thread_local dgemu_thread *dgemu_cur;

#ifndef DGEMU_NO_INDEX_MACROS
#define threadIdx (dgemu_cur->tid)
#define blockIdx (dgemu_cur->bid)
#define blockDim (dgemu_cur->bdim)
#define gridDim (dgemu_cur->gdim)
#endif

/* ---- barriers and warp exchange (runtime.cc) ---- */
void dgemu_syncthreads(void);
/* Deposits this lane's 8 bytes, waits for the lanes of `mask` in its warp, and returns in *out
 * the deposit of lane src (src outside the warp: this lane's own value). */
void dgemu_warp_exchange(unsigned mask, const void *mine, size_t n, int src, void *out);
static inline void __syncthreads(void) { dgemu_syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { uint64_t z = 0, o; dgemu_warp_exchange(mask, &z, 8, 0, &o); }

template <typename T> static inline T dgemu_shfl(unsigned mask, T v, int src) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    T out;
    dgemu_warp_exchange(mask, &v, sizeof v, src, &out);
    return out;
}
static inline int dgemu_lane(void) { return dgemu_cur->linear & 31; }
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    int lane = dgemu_lane();
    return dgemu_shfl(mask, v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    int lane = dgemu_lane(), seg = lane & ~(width - 1);
    int src = lane + (int)d;
    return dgemu_shfl(mask, v, src < seg + width ? src : lane);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    int lane = dgemu_lane(), seg = lane & ~(width - 1);
    int src = lane - (int)d;
    return dgemu_shfl(mask, v, src >= seg ? src : lane);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
    int lane = dgemu_lane(), seg = lane & ~(width - 1);
    int src = lane ^ m;
    return dgemu_shfl(mask, v, src < seg + width ? src : lane);
}

/* ---- atomics: blocks of one grid run on several OS threads ---- */
template <typename T> static inline T dgemu_atomic_rmw(T *p, T v, T (*f)(T, T)) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4 or 8 bytes");
    using U = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
    U *q = (U *)p;
    U old = __atomic_load_n(q, __ATOMIC_RELAXED), want;
    T o;
    do {
        memcpy(&o, &old, sizeof o);
        T n = f(o, v);
        memcpy(&want, &n, sizeof want);
    } while (!__atomic_compare_exchange_n(q, &old, want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return o;
}
template <typename T> static inline T atomicAdd(T *p, T v) { return dgemu_atomic_rmw<T>(p, v, [](T a, T b) { return (T)(a + b); }); }
template <typename T> static inline T atomicSub(T *p, T v) { return dgemu_atomic_rmw<T>(p, v, [](T a, T b) { return (T)(a - b); }); }
template <typename T> static inline T atomicMin(T *p, T v) { return dgemu_atomic_rmw<T>(p, v, [](T a, T b) { return b < a ? b : a; }); }
template <typename T> static inline T atomicMax(T *p, T v) { return dgemu_atomic_rmw<T>(p, v, [](T a, T b) { return b > a ? b : a; }); }
template <typename T> static inline T atomicExch(T *p, T v) { return dgemu_atomic_rmw<T>(p, v, [](T, T b) { return b; }); }
template <typename T> static inline T atomicCAS(T *p, T cmp, T v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}

/* ---- intrinsics: the _rn forms round once, which host arithmetic compiled with
 * -ffp-contract=off does ---- */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
static inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }

/* ---- launches ---- */
struct dgemu_kernel_task {
    virtual ~dgemu_kernel_task() {}
    virtual void run_thread() = 0;    /* the kernel body for dgemu_cur */
};
template <typename... P> struct dgemu_kernel_call final : dgemu_kernel_task {
    void (*k)(P...);
    std::tuple<typename std::decay<P>::type...> args;
    template <typename... A> dgemu_kernel_call(void (*k_)(P...), A &&...a) : k(k_), args(std::forward<A>(a)...) {}
    void run_thread() override { std::apply(k, args); }
};
/* Validates the configuration and queues the task (which it owns from here). Errors go to
 * cudaGetLastError as CUDA's launch errors do. */
void dgemu_submit(dim3 grid, dim3 block, size_t shmem, struct CUstream_st *stream, const void *kernel_id,
                  const char *name, const char *file, int line, dgemu_kernel_task *task);

/* Pointer arguments must point into device memory (or pinned host memory): a kernel handed a
 * pageable host pointer faults on a GPU. Returns false after reporting argument `index`. */
bool dgemu_check_kernel_arg(const void *p, int index, const char *name, const char *file, int line);
template <typename T> static inline bool dgemu_arg_ok(const T &a, int index, const char *name, const char *file, int line) {
    if constexpr (std::is_pointer<T>::value) return dgemu_check_kernel_arg((const void *)a, index, name, file, line);
    else return true;
}

template <typename... P> struct dgemu_bound_launch {
    dim3 grid, block; size_t shmem; struct CUstream_st *st; const char *name, *file; int line;
    void (*k)(P...);
    template <typename... A> void operator()(A &&...a) const {
        int i = 0;
        bool ok = true;
        ((ok = dgemu_arg_ok(a, i++, name, file, line) && ok), ...);
        if (!ok) return;
        dgemu_submit(grid, block, shmem, st, (const void *)k, name, file, line,
                     new dgemu_kernel_call<P...>(k, std::forward<A>(a)...));
    }
};
struct dgemu_launch {
    dim3 grid, block; size_t shmem; struct CUstream_st *st; const char *name, *file; int line;
    template <typename... P> dgemu_bound_launch<P...> with(void (*k)(P...)) const {
        return dgemu_bound_launch<P...>{ grid, block, shmem, st, name, file, line, k };
    }
};
/* eager/cuda/kernel_util.cuh's launch macro: nvcc spells it kernel<<<grid, block, shmem, stream>>> */
#define DGK_LAUNCH(grid, block, shmem, stream, ...) \
    (dgemu_launch{ dim3(grid), dim3(block), (size_t)(shmem), (stream), #__VA_ARGS__, __FILE__, __LINE__ }.with(__VA_ARGS__))

#endif
