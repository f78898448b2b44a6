/* eager/cuda/update.cu — the CUDA backend's fused optimizer step: the rules of
 * eager/update_rule.h applied to many parameters per launch (multi-tensor apply). Up to
 * UPD_MAX tensors travel by value in the kernel's parameters, each with the first block that
 * works on it, so a ResNet18 step is two launches and needs no device memory or copy of its
 * own. Built with -fmad=false (Makefile) so a step rounds like the CPU's, which does not fuse
 * multiply-adds either. */
#define DG_HOSTDEV __device__
#include "kernel_util.cuh"

#define UPD_MAX 40               /* 40 * 88 B of tensors + offsets + params stay under the 4 KiB parameter limit */
#define UPD_CHUNK 8192           /* elements per block */

struct upd_batch {
    dg_update_params u;
    int n;
    int first_block[UPD_MAX + 1];
    dg_update_tensor t[UPD_MAX];
};
static_assert(sizeof(upd_batch) <= 4096, "a batch travels as a kernel parameter (4 KiB at most)");

template <typename T>
__global__ void fused_update_kernel(const upd_batch b) {
    int blk = blockIdx.x, k = 0;
    while (k + 1 < b.n && b.first_block[k + 1] <= blk) k++;
    const dg_update_tensor *t = &b.t[k];
    int64_t start = (int64_t)(blk - b.first_block[k]) * UPD_CHUNK;
    int64_t end = start + UPD_CHUNK < t->n ? start + UPD_CHUNK : t->n;
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
        if (sizeof(T) == sizeof(float)) dg_update_elem_float(&b.u, t, i);
        else dg_update_elem_double(&b.u, t, i);
    }
}

static int launch(const upd_batch *b, dg_dtype dt) {
    if (b->n == 0 || b->first_block[b->n] == 0) return 0;
    if (dt == DG_F32) DGK_LAUNCH(b->first_block[b->n], DGK_THREADS, 0, dg_cuda_stream(), fused_update_kernel<float>)(*b);
    else DGK_LAUNCH(b->first_block[b->n], DGK_THREADS, 0, dg_cuda_stream(), fused_update_kernel<double>)(*b);
    return DG_CUDA(cudaGetLastError());
}

extern "C" int dg_cuda_fused_update(const dg_backend *be, const dg_update_params *u, dg_dtype dt, const dg_update_tensor *t, int n) {
    DG_CUDA_ENTER(be);
    if (dt != DG_F32 && dt != DG_F64) {
        DG_ERR(DG_EUNSUPPORTED, "cuda fused_update: dtype %s not supported", dg_dtype_name(dt));
        return DG_EUNSUPPORTED;
    }
    upd_batch b;
    b.u = *u;
    b.n = 0;
    b.first_block[0] = 0;
    for (int k = 0; k < n; k++) {
        int64_t blocks = (t[k].n + UPD_CHUNK - 1) / UPD_CHUNK;
        /* a batch is flushed when full or when its block count would leave int range */
        if (b.n == UPD_MAX || (int64_t)b.first_block[b.n] + blocks > (1ll << 30)) {
            int rc = launch(&b, dt);
            if (rc) return rc;
            b.n = 0;
        }
        if (blocks > (1ll << 30)) {
            DG_ERR(DG_EUNSUPPORTED, "cuda fused_update: parameter %d has %lld elements (too many for one launch)", k, (long long)t[k].n);
            return DG_EUNSUPPORTED;
        }
        b.t[b.n] = t[k];
        b.first_block[b.n + 1] = b.first_block[b.n] + (int)blocks;
        b.n++;
    }
    return launch(&b, dt);
}
