/* eager/cuda/reduce.cu — sum/max/min/argmax/argmin over the axes where y has size 1 and x not
 * (the GPU twin of eager/cpu/reduce.c). Values accumulate in double (as on the CPU) together
 * with the index of the chosen element, combined by one rule that is associative and
 * order-independent: NaN beats everything, then the extreme value, ties go to the lower index.
 * That equals the CPU's left-to-right scan (first NaN, else first extreme), so max/min/arg
 * results match exactly whatever the tree shape. Four schedules:
 *   THREAD  one thread per output, the CPU's own loop (sums bit-identical): short reductions,
 *           or a reduction that is not innermost (neighbouring threads then read neighbouring
 *           memory) with enough outputs;
 *   BLOCK   one block per output, a tree over the block: enough outputs to fill the GPU;
 *   SPLIT   few outputs with long innermost reductions: S blocks per output write partials to
 *           a static device buffer, then one thread per output combines its S partials in order;
 *   COLUMNS the same two passes with one thread per (output, chunk) when the reduced axes are
 *           not innermost (sum over the batch of [N, C]): threads of a warp read along C.
 * Every schedule is deterministic: the same input gives the same bits on every run. */
#include "kernel_util.cuh"

#define RED_SCRATCH 8192          /* partials of SPLIT and COLUMNS (nout * S at most) */
#define RED_IDX_NONE 0x7fffffffffffffffLL

struct red_geom {
    int nk, nr;                   /* kept dims, reduced dims (size-1 dims of x dropped) */
    int64_t kshape[DG_MAX_DIMS], kstride[DG_MAX_DIMS], ystride[DG_MAX_DIMS];
    int64_t rshape[DG_MAX_DIMS], rstride[DG_MAX_DIMS];
    int64_t nout, nred;
};

struct red_acc { double v; long long i; };

/* partials live in device memory: all kernels run on the one compute stream, so the partial
 * writes and the combine of one call finish before the next call's kernels start */
__device__ red_acc g_red_part[RED_SCRATCH];

template <int OP> __device__ __forceinline__ red_acc red_identity() {
    red_acc a;
    a.v = OP == DG_RED_SUM ? 0.0 : (OP == DG_RED_MAX || OP == DG_RED_ARGMAX ? -INFINITY : INFINITY);
    a.i = RED_IDX_NONE;
    return a;
}

template <int OP> __device__ __forceinline__ red_acc red_combine(red_acc a, red_acc b) {
    if (OP == DG_RED_SUM) { a.v += b.v; return a; }
    bool an = isnan(a.v), bn = isnan(b.v);
    if (an || bn) return (an && bn) ? (a.i <= b.i ? a : b) : (an ? a : b);
    bool mx = OP == DG_RED_MAX || OP == DG_RED_ARGMAX;
    if (mx ? a.v > b.v : a.v < b.v) return a;
    if (mx ? b.v > a.v : b.v < a.v) return b;
    return a.i <= b.i ? a : b;
}

template <int OP> __device__ __forceinline__ red_acc warp_reduce(red_acc a) {
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
        red_acc b;
        b.v = __shfl_down_sync(0xffffffffu, a.v, s);
        b.i = __shfl_down_sync(0xffffffffu, a.i, s);
        a = red_combine<OP>(a, b);
    }
    return a;
}

/* The block's combined value, valid in thread 0. blockDim.x is a multiple of 32. */
template <int OP> __device__ __forceinline__ red_acc block_reduce(red_acc a) {
    __shared__ red_acc sh[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    a = warp_reduce<OP>(a);
    if (lane == 0) sh[w] = a;
    __syncthreads();
    if (w == 0) {
        a = lane < (int)(blockDim.x >> 5) ? sh[lane] : red_identity<OP>();
        a = warp_reduce<OP>(a);
    }
    __syncthreads();              /* sh is reused by the block's next output */
    return a;
}

/* x and y element offsets of output o */
__device__ __forceinline__ void red_out_offsets(const red_geom &g, int64_t o, int64_t &xo, int64_t &yo) {
    xo = 0; yo = 0;
#pragma unroll
    for (int d = DG_MAX_DIMS - 1; d >= 0; d--) {
        if (d >= g.nk) continue;
        int64_t i = dgk_divmod(o, g.kshape[d]);
        xo += i * g.kstride[d]; yo += i * g.ystride[d];
    }
}

/* x offset (relative to the output's) of reduced element r, r in the CPU's row-major order */
__device__ __forceinline__ int64_t red_in_offset(const red_geom &g, int64_t r) {
    int64_t off = 0;
#pragma unroll
    for (int d = DG_MAX_DIMS - 1; d >= 0; d--) {
        if (d >= g.nr) continue;
        off += dgk_divmod(r, g.rshape[d]) * g.rstride[d];
    }
    return off;
}

template <typename T, int OP> __device__ __forceinline__ void red_store(void *y, int64_t yo, red_acc a) {
    if (OP == DG_RED_ARGMAX || OP == DG_RED_ARGMIN) ((long long *)y)[yo] = a.i == RED_IDX_NONE ? 0 : a.i;
    else ((T *)y)[yo] = (T)a.v;
}

/* THREAD: the CPU's loop for one output per thread */
template <typename T, int OP>
__global__ void reduce_thread(const T *x, void *y, const __grid_constant__ red_geom g) {
    int64_t inner = g.nr ? g.rshape[g.nr - 1] : 1, ist = g.nr ? g.rstride[g.nr - 1] : 0;
    int64_t outer = inner ? g.nred / inner : 0;
    DGK_FOR(o, g.nout) {
        int64_t xo, yo;
        red_out_offsets(g, o, xo, yo);
        red_acc acc = red_identity<OP>();
        acc.i = 0;
        bool nan_seen = false;
        for (int64_t r = 0; r < outer; r++) {
            /* row start: decompose r over the reduced dims but the last */
            int64_t xr = xo, q = r;
            for (int d = g.nr - 2; d >= 0; d--) xr += dgk_divmod(q, g.rshape[d]) * g.rstride[d];
            const T *xp = x + xr;
            if (OP == DG_RED_SUM) {
                double s = 0;
                for (int64_t i = 0; i < inner; i++) s += (double)xp[i * ist];
                acc.v += s;
            } else {
                for (int64_t i = 0; i < inner; i++) {
                    double v = (double)xp[i * ist];
                    bool better = (OP == DG_RED_MAX || OP == DG_RED_ARGMAX) ? v > acc.v : v < acc.v;
                    if (isnan(v)) { if (!nan_seen) { nan_seen = true; acc.v = v; acc.i = r * inner + i; } }
                    else if (!nan_seen && better) { acc.v = v; acc.i = r * inner + i; }
                }
            }
        }
        red_store<T, OP>(y, yo, acc);
    }
}

/* BLOCK (splits == 1, writes y) and SPLIT (writes partial b of output o to g_red_part):
 * block b covers output b / splits and reduced elements [chunk * (b % splits), ... + chunk) */
template <typename T, int OP>
__global__ void reduce_block(const T *x, void *y, const __grid_constant__ red_geom g, int64_t splits, int64_t chunk) {
    for (int64_t b = blockIdx.x; b < g.nout * splits; b += gridDim.x) {
        int64_t o = b / splits, s = b % splits, xo, yo;
        red_out_offsets(g, o, xo, yo);
        int64_t lo = s * chunk, hi = lo + chunk < g.nred ? lo + chunk : g.nred;
        red_acc acc = red_identity<OP>();
        for (int64_t r = lo + threadIdx.x; r < hi; r += blockDim.x) {
            red_acc e;
            e.v = (double)x[xo + red_in_offset(g, r)];
            e.i = r;
            acc = red_combine<OP>(acc, e);
        }
        acc = block_reduce<OP>(acc);
        if (threadIdx.x == 0) {
            if (splits == 1) red_store<T, OP>(y, yo, acc);
            else g_red_part[b] = acc;
        }
    }
}

/* SPLIT, second pass: partials of output o combined in split order */
template <typename T, int OP>
__global__ void reduce_finish(void *y, const __grid_constant__ red_geom g, int64_t splits) {
    DGK_FOR(o, g.nout) {
        int64_t xo, yo;
        red_out_offsets(g, o, xo, yo);
        red_acc acc = g_red_part[o * splits];
        for (int64_t s = 1; s < splits; s++) acc = red_combine<OP>(acc, g_red_part[o * splits + s]);
        red_store<T, OP>(y, yo, acc);
    }
}

/* COLUMNS: reductions that are not innermost with too few outputs for THREAD. Thread t takes
 * output t % nout (neighbouring threads read neighbouring memory) and the reduced elements
 * [chunk * (t / nout), ... + chunk), and writes its partial for reduce_finish. */
template <typename T, int OP>
__global__ void reduce_columns(const T *x, const __grid_constant__ red_geom g, int64_t splits, int64_t chunk) {
    DGK_FOR(t, g.nout * splits) {
        int64_t o = t % g.nout, s = t / g.nout, xo, yo;
        red_out_offsets(g, o, xo, yo);
        int64_t lo = s * chunk, hi = lo + chunk < g.nred ? lo + chunk : g.nred;
        red_acc acc = red_identity<OP>();
        for (int64_t r = lo; r < hi; r++) {
            red_acc e;
            e.v = (double)x[xo + red_in_offset(g, r)];
            e.i = r;
            acc = red_combine<OP>(acc, e);
        }
        g_red_part[o * splits + s] = acc;
    }
}

static void plan(const dg_kview *x, const dg_kview *y, red_geom *p) {
    memset(p, 0, sizeof *p);
    p->nout = p->nred = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        if (y->shape[d] == 1) {
            p->rshape[p->nr] = x->shape[d]; p->rstride[p->nr++] = x->stride[d]; p->nred *= x->shape[d];
        } else if (p->nk > 0 && p->kstride[p->nk - 1] == x->stride[d] * x->shape[d] &&
                   p->ystride[p->nk - 1] == y->stride[d] * x->shape[d]) {
            /* kept dims that both tensors walk as one: merged (reduced dims are not, so THREAD
             * keeps the CPU's row grouping of the sum) */
            p->kshape[p->nk - 1] *= x->shape[d];
            p->kstride[p->nk - 1] = x->stride[d]; p->ystride[p->nk - 1] = y->stride[d];
            p->nout *= x->shape[d];
        } else {
            p->kshape[p->nk] = x->shape[d]; p->kstride[p->nk] = x->stride[d]; p->ystride[p->nk++] = y->stride[d];
            p->nout *= x->shape[d];
        }
    }
}

template <typename T, int OP>
static int launch(const dg_kview *x, dg_kview *y, const red_geom &g) {
    const T *xp = (const T *)x->data;
    void *yp = y->data;
    cudaStream_t st = dg_cuda_stream();
    bool inner_contig = g.nr > 0 && g.rstride[g.nr - 1] == 1;
    if (g.nred <= 16 || (!inner_contig && g.nout >= 2048) || (g.nout >= 65536 && g.nred < 64)) {
        DGK_LAUNCH(dgk_blocks(g.nout, 128), 128, 0, st, reduce_thread<T, OP>)(xp, yp, g);
        return DG_CUDA(cudaGetLastError());
    }
    if (!inner_contig) {          /* COLUMNS, then the in-order combine of each output's partials */
        int64_t splits = (g.nred + 255) / 256;                       /* >= 256 elements a thread */
        if (splits > RED_SCRATCH / g.nout) splits = RED_SCRATCH / g.nout;   /* nout < 2048 here */
        int64_t chunk = (g.nred + splits - 1) / splits;
        splits = (g.nred + chunk - 1) / chunk;
        DGK_LAUNCH(dgk_blocks(g.nout * splits, 128), 128, 0, st, reduce_columns<T, OP>)(xp, g, splits, chunk);
        int rc = DG_CUDA(cudaGetLastError());
        if (rc) return rc;
        DGK_LAUNCH(dgk_blocks(g.nout, 128), 128, 0, st, reduce_finish<T, OP>)(yp, g, splits);
        return DG_CUDA(cudaGetLastError());
    }
    int threads = g.nred >= 4096 ? 256 : (g.nred >= 512 ? 128 : 64);
    int64_t splits = 1, chunk = g.nred;
    if (g.nout < 256) {           /* too few outputs to fill the GPU: cut each reduction */
        int64_t want = (1024 + g.nout - 1) / g.nout;                 /* ~1024 blocks in all */
        int64_t most = (g.nred + 4095) / 4096;                       /* >= 4096 elements a block */
        splits = want < most ? want : most;
        if (splits * g.nout > RED_SCRATCH) splits = RED_SCRATCH / g.nout;
        if (splits < 1) splits = 1;
        chunk = (g.nred + splits - 1) / splits;
        splits = (g.nred + chunk - 1) / chunk;                       /* no empty trailing split */
    }
    int64_t nblocks = g.nout * splits;
    unsigned grid = (unsigned)(nblocks < 65535 ? nblocks : 65535);
    DGK_LAUNCH(grid, threads, 0, st, reduce_block<T, OP>)(xp, yp, g, splits, chunk);
    int rc = DG_CUDA(cudaGetLastError());
    if (rc || splits == 1) return rc;
    DGK_LAUNCH(dgk_blocks(g.nout, 128), 128, 0, st, reduce_finish<T, OP>)(yp, g, splits);
    return DG_CUDA(cudaGetLastError());
}

template <typename T>
static int reduce_t(dg_reduce_op op, const dg_kview *x, dg_kview *y, const red_geom &g) {
    switch (op) {
    case DG_RED_SUM: return launch<T, DG_RED_SUM>(x, y, g);
    case DG_RED_MAX: return launch<T, DG_RED_MAX>(x, y, g);
    case DG_RED_MIN: return launch<T, DG_RED_MIN>(x, y, g);
    case DG_RED_ARGMAX: return launch<T, DG_RED_ARGMAX>(x, y, g);
    case DG_RED_ARGMIN: return launch<T, DG_RED_ARGMIN>(x, y, g);
    }
    DG_ERR(DG_EUNSUPPORTED, "cuda reduce: op %d not supported", (int)op);
    return DG_EUNSUPPORTED;
}

extern "C" int dg_cuda_reduce(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y) {
    DG_CUDA_ENTER(be);
    if (x->dtype != DG_F32 && x->dtype != DG_F64) {
        DG_ERR(DG_EUNSUPPORTED, "cuda reduce: dtype %s not supported", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    red_geom g;
    plan(x, y, &g);
    if (g.nout == 0 || y->numel == 0) return 0;
    return x->dtype == DG_F32 ? reduce_t<float>(op, x, y, g) : reduce_t<double>(op, x, y, g);
}
