/* eager/cuda/rnn.cu — one time step of a recurrent cell on the CUDA backend, forward and
 * backward (the GPU twin of eager/cpu/rnn.c, same formulas and gate order; the op in
 * eager/ops/rnn.c runs the GEMMs around it through cuBLAS). One thread per element of the
 * step's [n, h] state: it reads that element's gates, writes the new state, the output and
 * what backward needs, so a step is its recurrent GEMM and one kernel. */
#include "kernel_util.cuh"

template <typename T> __device__ __forceinline__ T rnn_sig(T v) { return (T)1 / ((T)1 + exp(-v)); }

template <typename T>
__global__ void rnn_cell_fwd_kernel(const dg_rnn_cell_args a, int64_t total) {
    const int64_t h = a.h;
    const int G = a.mode == DG_RNN_LSTM ? 4 : a.mode == DG_RNN_GRU ? 3 : 1;
    DGK_FOR(i, total) {
        int64_t b = i / h, j = i - b * h;
        const T *ar = (const T *)a.gi + b * G * h;
        T *hn = (T *)a.h_next, *y = (T *)a.y;
        const T hp = ((const T *)a.h_prev)[i];
        if (a.len && a.t >= a.len[b]) {   /* padding: the state passes through, y is 0 */
            hn[i] = hp;
            if (a.c_next) ((T *)a.c_next)[i] = ((const T *)a.c_prev)[i];
            y[i] = 0;
            continue;
        }
        if (a.mode == DG_RNN_TANH || a.mode == DG_RNN_RELU) {
            T v = ar[j];
            v = a.mode == DG_RNN_TANH ? tanh(v) : (v > 0 ? v : (T)0);
            hn[i] = v; y[i] = v; ((T *)a.ws)[i] = v;
        } else if (a.mode == DG_RNN_LSTM) {
            T *w = (T *)a.ws + b * 5 * h;
            T ig = rnn_sig(ar[j]), fg = rnn_sig(ar[h + j]), gg = tanh(ar[2 * h + j]), og = rnn_sig(ar[3 * h + j]);
            T c = fg * ((const T *)a.c_prev)[i] + ig * gg, tc = tanh(c), hv = og * tc;
            ((T *)a.c_next)[i] = c; hn[i] = hv; y[i] = hv;
            w[j] = ig; w[h + j] = fg; w[2 * h + j] = gg; w[3 * h + j] = og; w[4 * h + j] = tc;
        } else {
            const T *gr = (const T *)a.gh + b * 3 * h, *bh = (const T *)a.b_hh;
            T *w = (T *)a.ws + b * 4 * h;
            T br = bh ? bh[j] : (T)0, bz = bh ? bh[h + j] : (T)0, bn = bh ? bh[2 * h + j] : (T)0;
            T r = rnn_sig(ar[j] + gr[j] + br), z = rnn_sig(ar[h + j] + gr[h + j] + bz);
            T hnv = gr[2 * h + j] + bn, nv = tanh(ar[2 * h + j] + r * hnv);
            T hv = (1 - z) * nv + z * hp;
            hn[i] = hv; y[i] = hv;
            w[j] = r; w[h + j] = z; w[2 * h + j] = nv; w[3 * h + j] = hnv;
        }
    }
}

template <typename T>
__global__ void rnn_cell_bwd_kernel(const dg_rnn_cell_args a, int64_t total) {
    const int64_t h = a.h;
    const int G = a.mode == DG_RNN_LSTM ? 4 : a.mode == DG_RNN_GRU ? 3 : 1;
    DGK_FOR(i, total) {
        int64_t b = i / h, j = i - b * h;
        T *dh = (T *)a.dh, *dgr = (T *)a.dgi + b * G * h;
        T *dghr = a.dgh ? (T *)a.dgh + b * G * h : NULL;
        if (a.len && a.t >= a.len[b]) {   /* padding: dh, dc pass through; y was a constant 0 */
            for (int q = 0; q < G; q++) {
                dgr[q * h + j] = 0;
                if (dghr) dghr[q * h + j] = 0;
            }
            continue;
        }
        T g = dh[i] + (a.dy ? ((const T *)a.dy)[i] : (T)0);
        if (a.mode == DG_RNN_TANH || a.mode == DG_RNN_RELU) {
            T v = ((const T *)a.ws)[i];
            dgr[j] = a.mode == DG_RNN_TANH ? g * (1 - v * v) : (v > 0 ? g : (T)0);
            dh[i] = 0;
        } else if (a.mode == DG_RNN_LSTM) {
            const T *w = (const T *)a.ws + b * 5 * h;
            T *dc = (T *)a.dc;
            T ig = w[j], fg = w[h + j], gg = w[2 * h + j], og = w[3 * h + j], tc = w[4 * h + j];
            T dcv = dc[i] + g * og * (1 - tc * tc);
            dgr[j] = dcv * gg * ig * (1 - ig);
            dgr[h + j] = dcv * ((const T *)a.c_prev)[i] * fg * (1 - fg);
            dgr[2 * h + j] = dcv * ig * (1 - gg * gg);
            dgr[3 * h + j] = g * tc * og * (1 - og);
            dc[i] = dcv * fg;
            dh[i] = 0;
        } else {
            const T *w = (const T *)a.ws + b * 4 * h;
            T r = w[j], z = w[h + j], nv = w[2 * h + j], hnv = w[3 * h + j];
            T dn = g * (1 - z) * (1 - nv * nv);
            T dz = g * (((const T *)a.h_prev)[i] - nv) * z * (1 - z);
            T dr = dn * hnv * r * (1 - r);
            dgr[j] = dr; dgr[h + j] = dz; dgr[2 * h + j] = dn;
            dghr[j] = dr; dghr[h + j] = dz; dghr[2 * h + j] = dn * r;
            dh[i] = g * z;
        }
    }
}

static int rnn_check(const dg_rnn_cell_args *a, const char *what) {
    if (a->dt != DG_F32 && a->dt != DG_F64) {
        DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cuda (float32 and float64)", what, dg_dtype_name(a->dt));
        return DG_EUNSUPPORTED;
    }
    return 0;
}

#define RNN_LAUNCH(DT, N, KERNEL, ...)                                                                                 \
    do {                                                                                                               \
        if ((DT) == DG_F32) { typedef float T; DGK_LAUNCH(dgk_blocks(N), DGK_THREADS, 0, dg_cuda_stream(), KERNEL<T>)(__VA_ARGS__); } \
        else { typedef double T; DGK_LAUNCH(dgk_blocks(N), DGK_THREADS, 0, dg_cuda_stream(), KERNEL<T>)(__VA_ARGS__); }            \
    } while (0)

extern "C" int dg_cuda_rnn_cell(const dg_backend *be, const dg_rnn_cell_args *a) {
    DG_CUDA_ENTER(be);
    int rc = rnn_check(a, "rnn_cell");
    if (rc) return rc;
    int64_t total = a->n * a->h;
    if (total == 0) return 0;
    RNN_LAUNCH(a->dt, total, rnn_cell_fwd_kernel, *a, total);
    return DG_CUDA(cudaGetLastError());
}

extern "C" int dg_cuda_rnn_cell_backward(const dg_backend *be, const dg_rnn_cell_args *a) {
    DG_CUDA_ENTER(be);
    int rc = rnn_check(a, "rnn_cell_backward");
    if (rc) return rc;
    int64_t total = a->n * a->h;
    if (total == 0) return 0;
    RNN_LAUNCH(a->dt, total, rnn_cell_bwd_kernel, *a, total);
    return DG_CUDA(cudaGetLastError());
}
