/* eager/cuda/random.cu — uniform / normal / Bernoulli-keep fills from Philox4x32-10, the GPU
 * twin of cpu_random in eager/cpu/cpu_backend.c. Element i depends only on (seed, counter, i):
 * counter + i/2 feeds one Philox block; element i takes words (2*(i%2), 2*(i%2)+1) for uniform
 * and Bernoulli, and the Box-Muller pair (cos for even i, sin for odd i) for normal. So a seed
 * gives the same numbers as the CPU: bit for bit for uniform and Bernoulli (pure integer and
 * exactly rounded double arithmetic), and for normal up to the last-ulp differences between
 * CUDA's and glibc's double log/sin/cos (invisible after rounding to f32 in almost every case). */
#include "kernel_util.cuh"

/* dg_philox4x32 (eager/rng.c), same rounds and word order */
__device__ __forceinline__ void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* 24 (f32) or 53 (f64) random bits to [0,1), as u01 in cpu_backend.c; exact in double */
__device__ __forceinline__ double u01(uint32_t a, uint32_t b, bool dbl) {
    if (!dbl) return (double)(a >> 8) * (1.0 / 16777216.0);
    return (double)((((uint64_t)a << 21) ^ (b >> 11)) & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* One thread per pair (2j, 2j+1): both elements share a Philox block, and for normal the
 * log/sqrt of one Box-Muller radius. The CPU computes each element on its own, with the same
 * operations in the same order, so sharing changes no result. */
template <typename T>
__global__ void random_kernel(int kind, T *y, int64_t n, double p0, double p1, uint64_t seed, uint64_t ctr, bool dbl) {
    int64_t pairs = (n + 1) / 2;
    DGK_FOR(j, pairs) {
        uint32_t o[4];
        philox4x32(seed, ctr + (uint64_t)j, o);
        int64_t i = 2 * j;
        if (kind == DG_RAND_NORMAL) {
            double u1 = u01(o[0], o[1], true), u2 = u01(o[2], o[3], true);
            if (u1 < 1e-300) u1 = 1e-300;
            double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
            double pr = dgk_mul(p1, r);   /* p0 + p1 * r * trig, left to right, unfused */
            y[i] = dgk_from_double<T>(dgk_add(p0, dgk_mul(pr, cos(th))));
            if (i + 1 < n) y[i + 1] = dgk_from_double<T>(dgk_add(p0, dgk_mul(pr, sin(th))));
        } else {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (i + h >= n) break;
                double u = u01(o[2 * h], o[2 * h + 1], dbl), v;
                if (kind == DG_RAND_UNIFORM) v = dgk_add(p0, dgk_mul(p1 - p0, u));
                else v = u < p0 ? p1 : 0.0;
                y[i + h] = dgk_from_double<T>(v);
            }
        }
    }
}

extern "C" int dg_cuda_random(const dg_backend *be, dg_random_kind kind, dg_kview *y, double p0, double p1, uint64_t seed, uint64_t counter) {
    DG_CUDA_ENTER(be);
    /* the ops draw random floats only (rand/randn/uniform/normal, dropout masks of float inputs) */
    if (y->dtype != DG_F32 && y->dtype != DG_F64) {
        DG_ERR(DG_EUNSUPPORTED, "cuda random: dtype %s not supported", dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    /* like the CPU, element i is written at y's data + i: the ops hand over contiguous tensors */
    int64_t n = y->numel;
    if (n == 0) return 0;
    bool dbl = y->dtype == DG_F64;
    int rc = 0;
#define F(T)                                                                                          \
    do {                                                                                              \
        DGK_LAUNCH(dgk_blocks((n + 1) / 2), DGK_THREADS, 0, dg_cuda_stream(), random_kernel<T>)(              \
            (int)kind, (T *)y->data, n, p0, p1, seed, counter, dbl);                         \
        rc = DG_CUDA(cudaGetLastError());                                                             \
    } while (0)
    if (y->dtype == DG_F32) F(float);
    else F(double);
#undef F
    return rc;
}
