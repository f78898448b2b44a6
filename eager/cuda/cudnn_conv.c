/* eager/cuda/cudnn_conv.c — 2-D convolution on the CUDA backend through cuDNN's legacy API
 * (the GPU twin of eager/cpu/conv.c): forward with the bias added by cudnnAddTensor, backward
 * data, backward filter with the bias gradient from cudnnConvolutionBackwardBias (f32, f64) or
 * our channel sum (f16, bf16, which cuDNN 9 refuses there); f32, f64, f16 and bf16,
 * groups and dilation; contiguous NCHW as backend.h promises.
 *
 * Algorithms are chosen by benchmarking (cudnnFind*AlgorithmEx, like
 * torch.backends.cudnn.benchmark) once per key = (geometry with the batch of one cuDNN call,
 * dtype, TF32 flag, exact flag, pointer alignment) and kept, with that key's descriptors, in a table of
 * CONV_SLOTS slots. Alignment is in the key because some kernels need 16-byte aligned
 * operands, and a tensor that is a view into a larger storage may not be. When the table is
 * full the least recently used slot is re-keyed: its descriptors are set again, never
 * destroyed, so a steady training loop creates no descriptor and runs no search. The table
 * lock is held through the cuDNN calls themselves, since slots are not refcounted (a re-key by
 * another thread must not change descriptors under a running call) and the one cuDNN handle is
 * best not driven from two threads at once anyway.
 *
 * Math: f32 runs with CUDNN_FMA_MATH unless dg_set_allow_tf32(true) asked for TF32 (then
 * CUDNN_DEFAULT_MATH, which lets cuDNN use TF32 tensor cores), so products round as on the CPU;
 * with dg_set_exact_gpu_conv(true) only the summation order differs, since FFT and Winograd
 * algorithms are then left out (see transformed_algo). f64 uses CUDNN_DEFAULT_MATH (there is no
 * reduced-precision path for doubles). float16 / bfloat16 tensors (all operands of one half
 * type; the shared half wrappers widen anything else, cuda/half.c) use HALF / BFLOAT16 descriptors with a FLOAT
 * compute type in the convolution descriptor, so the sums accumulate in f32 and each output is
 * rounded once; CUDNN_DEFAULT_MATH lets cuDNN pick tensor-core kernels for them. A bias is added
 * by cudnnAddTensor after the convolution, a second rounding (the CPU adds it before its one).
 *
 * Workspaces come from the caching allocator: the search gets the largest any algorithm asks
 * for, capped at FIND_WS_CAP (smaller when memory is short; cuDNN then skips the algorithms
 * that need more), and returns it right after, segment and all (dg_cuda_pool_trim); each call gets the chosen algorithm's size and
 * returns it right after the call is queued. The allocator hands blocks out again in stream
 * order, and every kernel runs on the one compute stream, so no later work can overwrite a
 * workspace that a queued call still uses.
 *
 * The legacy API takes int dims and strides: a batch whose input or output passes INT_MAX
 * elements runs in chunks of whole images (the filter gradient accumulates over chunks). */
#include "cuda_internal.h"
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONV_SLOTS 64
#define FIND_WS_CAP ((size_t)256 << 20)

enum { K_FWD, K_BWD_DATA, K_BWD_FILTER, K_COUNT };

typedef struct conv_key {
    int64_t n, c, h, w, oc, kh, kw, oh, ow;
    int32_t sh, sw, ph, pw, dh, dw, groups, dtype, tf32, exact, align;
    int32_t device;               /* algorithms are chosen per GPU */
} conv_key;                       /* memset before filling: compared with memcmp */

typedef struct conv_algo {
    bool found;
    int algo;                     /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnMathType_t math;
    size_t ws;
} conv_algo;

typedef struct conv_slot {
    bool made, used;              /* descriptors created / slot holds a valid key */
    uint64_t last;                /* g_tick of the last use */
    conv_key key;
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    conv_algo algo[K_COUNT];
} conv_slot;

static conv_slot g_slots[CONV_SLOTS];
static uint64_t g_tick;
static pthread_mutex_t g_conv_lock = PTHREAD_MUTEX_INITIALIZER;

/* dg_shutdown: destroys every slot's descriptors and forgets the chosen algorithms. */
void dg_cuda_conv_release(void) {
    pthread_mutex_lock(&g_conv_lock);
    for (int i = 0; i < CONV_SLOTS; i++) {
        conv_slot *s = &g_slots[i];
        if (s->made) {
            cudnnDestroyConvolutionDescriptor(s->cd);
            cudnnDestroyFilterDescriptor(s->wd);
            cudnnDestroyTensorDescriptor(s->bd);
            cudnnDestroyTensorDescriptor(s->yd);
            cudnnDestroyTensorDescriptor(s->xd);
        }
        memset(s, 0, sizeof *s);
    }
    g_tick = 0;
    pthread_mutex_unlock(&g_conv_lock);
}

/* What an error message names: the op, its geometry and dtype. */
typedef struct conv_ctx {
    const char *op;
    const dg_conv2d_geom *g;
    dg_dtype dt;
} conv_ctx;

static void geom_str(const conv_ctx *cx, char *buf, size_t len) {
    const dg_conv2d_geom *g = cx->g;
    snprintf(buf, len,
             "input [%lld, %lld, %lld, %lld], weight [%lld, %lld, %lld, %lld], output [%lld, %lld, %lld, %lld], "
             "stride (%d,%d), padding (%d,%d), dilation (%d,%d), groups %d, %s",
             (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w, (long long)g->oc,
             (long long)(g->groups ? g->c / g->groups : g->c), (long long)g->kh, (long long)g->kw, (long long)g->n,
             (long long)g->oc, (long long)g->oh, (long long)g->ow, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->groups,
             dg_dtype_name(cx->dt));
}

static int dnn_check(cudnnStatus_t s, const char *fn, const conv_ctx *cx, int line) {
    if (s == CUDNN_STATUS_SUCCESS) return 0;
    char geo[320], what[400];
    geom_str(cx, geo, sizeof geo);
    snprintf(what, sizeof what, "%s (%s: %s)", fn, cx->op, geo);
    return dg_cuda_check_dnn(s, what, __FILE__, line);
}
/* a cuDNN call checked with the op and geometry in its message (needs `cx` in scope) */
#define DNN(fn, ...) dnn_check(fn(__VA_ARGS__), #fn, cx, __LINE__)

static const float k_one_f = 1.0f, k_zero_f = 0.0f;
static const double k_one_d = 1.0, k_zero_d = 0.0;
/* cuDNN's alpha/beta: host scalars of the compute type (double for f64, float for f32 and
 * for the half types, whose compute type is f32) */
static const void *scal(dg_dtype dt, bool one) {
    if (dt != DG_F64) return one ? (const void *)&k_one_f : (const void *)&k_zero_f;
    return one ? (const void *)&k_one_d : (const void *)&k_zero_d;
}

static int align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    return (a & 15) == 0 ? 16 : (a & 7) == 0 ? 8 : (a & 3) == 0 ? 4 : 1;
}
static int min_align(const void *a, const void *b, const void *c) {
    int x = align_of(a), y = align_of(b), z = align_of(c);
    int m = x < y ? x : y;
    return m < z ? m : z;
}

static cudnnDataType_t dnn_type(int32_t dt) {
    return dt == DG_F32 ? CUDNN_DATA_FLOAT : dt == DG_F16 ? CUDNN_DATA_HALF : dt == DG_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_DOUBLE;
}
/* The convolution descriptor's compute type: f16 / bf16 data accumulate in f32
 * (PSEUDO_HALF_CONFIG / PSEUDO_BFLOAT16_CONFIG, tensor cores where the GPU has them). */
static cudnnDataType_t dnn_compute(int32_t dt) { return dt == DG_F16 || dt == DG_BF16 ? CUDNN_DATA_FLOAT : dnn_type(dt); }

/* The math type searched with (see the top comment). */
static cudnnMathType_t base_math(const conv_key *k) {
    return (k->dtype == DG_F32 && !k->tf32) ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}
/* Whether a benchmarked result may be used: with TF32 off an f32 result must not come from
 * tensor-core kernels; a down-conversion to half is never acceptable. */
static bool math_ok(const conv_key *k, cudnnMathType_t m) {
    if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
    return !(k->dtype == DG_F32 && !k->tf32 && m == CUDNN_TENSOR_OP_MATH);
}

/* Algorithms that transform the operands (FFT, Winograd) round differently from a direct sum of
 * products: on an H200 they put f32 outputs of the MNIST CNN ~3e-4 of the largest one off the
 * CPU's, enough to move a ReLU or a max-pool decision and with it whole gradients. They are
 * also the fastest for many 3x3 layers (ResNet18 training 1.5x faster with them), so they run
 * by default; dg_set_exact_gpu_conv(true) keeps f32 to the direct ones (the key carries the
 * setting, so a slot searched under one never serves the other). */
static bool transformed_algo(int kind, int a) {
    if (kind == K_FWD)
        return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    if (kind == K_BWD_DATA)
        return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}
static int env_flag(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}
static bool algo_allowed(const conv_key *k, int kind, int a) { return !k->exact || !transformed_algo(kind, a); }

/* ---- the table ---- */

static int slot_make(conv_slot *s, const conv_ctx *cx) {
    int rc = DNN(cudnnCreateTensorDescriptor, &s->xd);
    if (rc) return rc;
    if ((rc = DNN(cudnnCreateTensorDescriptor, &s->yd))) goto no_y;
    if ((rc = DNN(cudnnCreateTensorDescriptor, &s->bd))) goto no_b;
    if ((rc = DNN(cudnnCreateFilterDescriptor, &s->wd))) goto no_w;
    if ((rc = DNN(cudnnCreateConvolutionDescriptor, &s->cd))) goto no_c;
    s->made = true;
    return 0;
no_c:
    cudnnDestroyFilterDescriptor(s->wd);
no_w:
    cudnnDestroyTensorDescriptor(s->bd);
no_b:
    cudnnDestroyTensorDescriptor(s->yd);
no_y:
    cudnnDestroyTensorDescriptor(s->xd);
    return rc;
}

/* Points slot s at key k: descriptors set, no algorithm known yet. */
static int slot_set(conv_slot *s, const conv_key *k, const conv_ctx *cx) {
    int rc = s->made ? 0 : slot_make(s, cx);
    if (rc) return rc;
    s->used = false;
    cudnnDataType_t dt = dnn_type(k->dtype);
    rc = DNN(cudnnSetTensor4dDescriptor, s->xd, CUDNN_TENSOR_NCHW, dt, (int)k->n, (int)k->c, (int)k->h, (int)k->w);
    if (!rc) rc = DNN(cudnnSetTensor4dDescriptor, s->yd, CUDNN_TENSOR_NCHW, dt, (int)k->n, (int)k->oc, (int)k->oh, (int)k->ow);
    if (!rc) rc = DNN(cudnnSetTensor4dDescriptor, s->bd, CUDNN_TENSOR_NCHW, dt, 1, (int)k->oc, 1, 1);
    if (!rc) rc = DNN(cudnnSetFilter4dDescriptor, s->wd, dt, CUDNN_TENSOR_NCHW, (int)k->oc, (int)(k->c / k->groups),
                      (int)k->kh, (int)k->kw);
    if (!rc) rc = DNN(cudnnSetConvolution2dDescriptor, s->cd, k->ph, k->pw, k->sh, k->sw, k->dh, k->dw,
                      CUDNN_CROSS_CORRELATION, dnn_compute(k->dtype));
    if (!rc) rc = DNN(cudnnSetConvolutionGroupCount, s->cd, k->groups);
    if (!rc) rc = DNN(cudnnSetConvolutionMathType, s->cd, base_math(k));
    if (rc) return rc;
    /* the op computed the output size itself: a disagreement would mean cuDNN reads the
     * geometry differently, and every result would be wrong */
    int on, oc, oh, ow;
    rc = DNN(cudnnGetConvolution2dForwardOutputDim, s->cd, s->xd, s->wd, &on, &oc, &oh, &ow);
    if (rc) return rc;
    if (on != k->n || oc != k->oc || oh != k->oh || ow != k->ow) {
        char geo[320];
        geom_str(cx, geo, sizeof geo);
        DG_ERR(DG_EINVAL, "%s: cuDNN computes output [%d, %d, %d, %d] per call of %lld images, the op expects [%lld, %lld, %lld, %lld] (%s)",
               cx->op, on, oc, oh, ow, (long long)k->n, (long long)k->n, (long long)k->oc, (long long)k->oh,
               (long long)k->ow, geo);
        return DG_EINVAL;
    }
    s->key = *k;
    memset(s->algo, 0, sizeof s->algo);
    s->used = true;
    return 0;
}

/* The slot for key k, re-keying the least recently used one (an unused one first) on a miss.
 * The caller holds g_conv_lock. */
static conv_slot *slot_get(const conv_key *k, const conv_ctx *cx, int *rc) {
    conv_slot *victim = NULL;
    for (int i = 0; i < CONV_SLOTS; i++) {
        conv_slot *s = &g_slots[i];
        if (s->used && memcmp(&s->key, k, sizeof *k) == 0) {
            s->last = ++g_tick;
            return s;
        }
        if (!s->used) { if (!victim || victim->used) victim = s; }
        else if (!victim || (victim->used && s->last < victim->last)) victim = s;
    }
    if ((*rc = slot_set(victim, k, cx))) return NULL;
    victim->last = ++g_tick;
    return victim;
}

static void make_key(conv_key *k, const dg_conv2d_geom *g, int64_t images, dg_dtype dt, int align) {
    memset(k, 0, sizeof *k);
    k->n = images; k->c = g->c; k->h = g->h; k->w = g->w;
    k->oc = g->oc; k->kh = g->kh; k->kw = g->kw; k->oh = g->oh; k->ow = g->ow;
    k->sh = g->sh; k->sw = g->sw; k->ph = g->ph; k->pw = g->pw; k->dh = g->dh; k->dw = g->dw;
    k->groups = g->groups;
    k->dtype = dt;
    k->tf32 = dt == DG_F32 && dg_get_allow_tf32();
    k->exact = dt == DG_F32 && !k->tf32 && dg_get_exact_gpu_conv();
    k->align = align;
    k->device = dg_cuda_device();
}

/* ---- algorithm search and calls ----
 * The three kinds take their operands in fixed roles: x = input image (dx for backward data),
 * w = filter (dw for backward filter), y = output (dy for the backward kinds). */

/* The largest workspace any algorithm of this kind asks for, capped. Algorithms that cannot
 * run this geometry fail their query and are skipped. */
static size_t search_ws(conv_slot *s, int kind) {
    cudnnHandle_t h = dg_cuda_cudnn();
    int count = kind == K_FWD ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
              : kind == K_BWD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    size_t most = 0;
    for (int a = 0; a < count; a++) {
        size_t sz = 0;
        cudnnStatus_t st;
        if (kind == K_FWD)
            st = cudnnGetConvolutionForwardWorkspaceSize(h, s->xd, s->wd, s->cd, s->yd, (cudnnConvolutionFwdAlgo_t)a, &sz);
        else if (kind == K_BWD_DATA)
            st = cudnnGetConvolutionBackwardDataWorkspaceSize(h, s->wd, s->yd, s->cd, s->xd, (cudnnConvolutionBwdDataAlgo_t)a, &sz);
        else
            st = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, s->xd, s->yd, s->cd, s->wd,
                                                                (cudnnConvolutionBwdFilterAlgo_t)a, &sz);
        if (st == CUDNN_STATUS_SUCCESS && sz > most) most = sz;
    }
    return most < FIND_WS_CAP ? most : FIND_WS_CAP;
}

/* Workspace of the algorithm a with math type already set on the descriptor. */
static int algo_ws(conv_slot *s, int kind, int a, size_t *sz, const conv_ctx *cx) {
    cudnnHandle_t h = dg_cuda_cudnn();
    if (kind == K_FWD)
        return DNN(cudnnGetConvolutionForwardWorkspaceSize, h, s->xd, s->wd, s->cd, s->yd, (cudnnConvolutionFwdAlgo_t)a, sz);
    if (kind == K_BWD_DATA)
        return DNN(cudnnGetConvolutionBackwardDataWorkspaceSize, h, s->wd, s->yd, s->cd, s->xd,
                   (cudnnConvolutionBwdDataAlgo_t)a, sz);
    return DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize, h, s->xd, s->yd, s->cd, s->wd,
               (cudnnConvolutionBwdFilterAlgo_t)a, sz);
}

/* Benchmarks every algorithm of this kind on the real operands (the output operand is
 * scribbled on; the caller's call overwrites it afterwards) and keeps the fastest that ran. */
static int find_algo(conv_slot *s, int kind, void *x, void *w, void *y, const conv_ctx *cx) {
    cudnnHandle_t h = dg_cuda_cudnn();
    const conv_key *k = &s->key;
    int rc = DNN(cudnnSetConvolutionMathType, s->cd, base_math(k));
    if (rc) return rc;
    size_t wsz = search_ws(s, kind);
    void *ws = NULL;
    dg_error_saved before;
    dg_error_save(&before);
    while (wsz > 0 && !(ws = dg_cuda_alloc(wsz))) {
        /* short of memory: search with less; the failed try is not this op's error */
        dg_error_restore(&before);
        wsz /= 4;
        if (wsz < ((size_t)1 << 20)) wsz = 0;
    }

    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int got = 0;
    if (kind == K_FWD)
        rc = DNN(cudnnFindConvolutionForwardAlgorithmEx, h, s->xd, x, s->wd, w, s->cd, s->yd, y,
                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf, ws, wsz);
    else if (kind == K_BWD_DATA)
        rc = DNN(cudnnFindConvolutionBackwardDataAlgorithmEx, h, s->wd, w, s->yd, y, s->cd, s->xd, x,
                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd, ws, wsz);
    else
        rc = DNN(cudnnFindConvolutionBackwardFilterAlgorithmEx, h, s->xd, x, s->yd, y, s->cd, s->wd, w,
                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pw, ws, wsz);
    dg_cuda_free(ws);
    /* The search's workspace (up to FIND_WS_CAP, far above what the chosen algorithm needs) is
     * a one-off: kept cached, its segment was later split by the steady loop's blocks and
     * ResNet18 held 1.38x-1.51x its live peak on an H200 (replays of the real allocation
     * traces, tools/pool_replay.c: 0.94x-1.07x with this). Searches happen in the first steps
     * only, so the steady loop never pays for the cudaFree. */
    if (ws) dg_cuda_pool_trim();
    if (rc) return rc;

    /* the results come sorted by time, but pick the minimum explicitly rather than rely on it */
    int best = -1;
    float best_t = 0;
    for (int i = 0; i < got; i++) {
        cudnnStatus_t st = kind == K_FWD ? pf[i].status : kind == K_BWD_DATA ? pd[i].status : pw[i].status;
        cudnnMathType_t m = kind == K_FWD ? pf[i].mathType : kind == K_BWD_DATA ? pd[i].mathType : pw[i].mathType;
        float t = kind == K_FWD ? pf[i].time : kind == K_BWD_DATA ? pd[i].time : pw[i].time;
        int al = kind == K_FWD ? (int)pf[i].algo : kind == K_BWD_DATA ? (int)pd[i].algo : (int)pw[i].algo;
        if (st != CUDNN_STATUS_SUCCESS || !math_ok(k, m) || !algo_allowed(k, kind, al)) continue;
        if (best < 0 || t < best_t) { best = i; best_t = t; }
    }
    if (env_flag("DG_CUDNN_LOG", "1")) {
        /* one line per search: what ran, how fast, and the pick (stderr, for people) */
        static const char *kinds[] = { "fwd", "bwd_data", "bwd_filter" };
        char geo[320];
        geom_str(cx, geo, sizeof geo);
        fprintf(stderr, "dygraph cudnn: %s %s [%s]:", cx->op, kinds[kind], geo);
        for (int i = 0; i < got; i++) {
            cudnnStatus_t st = kind == K_FWD ? pf[i].status : kind == K_BWD_DATA ? pd[i].status : pw[i].status;
            if (st != CUDNN_STATUS_SUCCESS) continue;
            int al = kind == K_FWD ? (int)pf[i].algo : kind == K_BWD_DATA ? (int)pd[i].algo : (int)pw[i].algo;
            float t = kind == K_FWD ? pf[i].time : kind == K_BWD_DATA ? pd[i].time : pw[i].time;
            int m = kind == K_FWD ? (int)pf[i].mathType : kind == K_BWD_DATA ? (int)pd[i].mathType : (int)pw[i].mathType;
            fprintf(stderr, " %s%d/m%d %.3fms", i == best ? "*" : "", al, m, t);
        }
        fprintf(stderr, "\n");
    }
    if (best < 0) {
        char geo[320];
        geom_str(cx, geo, sizeof geo);
        DG_ERR(DG_EUNSUPPORTED, "%s: cuDNN ran none of its %d algorithms for %s (search workspace %zu bytes)",
               cx->op, got, geo, wsz);
        return DG_EUNSUPPORTED;
    }
    conv_algo *a = &s->algo[kind];
    cudnnMathType_t m = kind == K_FWD ? pf[best].mathType : kind == K_BWD_DATA ? pd[best].mathType : pw[best].mathType;
    size_t mem = kind == K_FWD ? pf[best].memory : kind == K_BWD_DATA ? pd[best].memory : pw[best].memory;
    a->algo = kind == K_FWD ? (int)pf[best].algo : kind == K_BWD_DATA ? (int)pd[best].algo : (int)pw[best].algo;
    /* TF32 off keeps the FMA restriction whatever the result reports; otherwise run with the
     * math type the benchmark ran (as PyTorch does) */
    a->math = (k->dtype == DG_F32 && !k->tf32) ? CUDNN_FMA_MATH : m;
    rc = DNN(cudnnSetConvolutionMathType, s->cd, a->math);
    size_t need = 0;
    if (!rc) rc = algo_ws(s, kind, a->algo, &need, cx);
    if (rc) return rc;
    a->ws = need > mem ? need : mem;
    a->found = true;
    return 0;
}

/* One call of the chosen algorithm; beta 0 overwrites the output, 1 accumulates into it. */
static int run_algo(conv_slot *s, int kind, void *x, void *w, void *y, bool accumulate, const conv_ctx *cx) {
    cudnnHandle_t h = dg_cuda_cudnn();
    conv_algo *a = &s->algo[kind];
    int rc = DNN(cudnnSetConvolutionMathType, s->cd, a->math);
    if (rc) return rc;
    void *ws = NULL;
    if (a->ws && !(ws = dg_cuda_alloc(a->ws))) return DG_ENOMEM;
    const void *one = scal(cx->dt, true), *beta = scal(cx->dt, accumulate);
    if (kind == K_FWD)
        rc = DNN(cudnnConvolutionForward, h, one, s->xd, x, s->wd, w, s->cd, (cudnnConvolutionFwdAlgo_t)a->algo, ws, a->ws,
                 beta, s->yd, y);
    else if (kind == K_BWD_DATA)
        rc = DNN(cudnnConvolutionBackwardData, h, one, s->wd, w, s->yd, y, s->cd, (cudnnConvolutionBwdDataAlgo_t)a->algo, ws,
                 a->ws, beta, s->xd, x);
    else
        rc = DNN(cudnnConvolutionBackwardFilter, h, one, s->xd, x, s->yd, y, s->cd, (cudnnConvolutionBwdFilterAlgo_t)a->algo,
                 ws, a->ws, beta, s->wd, w);
    dg_cuda_free(ws);             /* reused only by work queued after this call (see the top comment) */
    return rc;
}

/* ---- entries ---- */

static int bad_dtype(const conv_ctx *cx) {
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cuda", cx->op, dg_dtype_name(cx->dt));
    return DG_EUNSUPPORTED;
}

/* Images per cuDNN call (see the top comment); 0 when one image or the filter is too big. */
static int64_t chunk_images(const dg_conv2d_geom *g, const conv_ctx *cx) {
    int64_t in = g->c * g->h * g->w, out = g->oc * g->oh * g->ow, per = in > out ? in : out;
    int64_t wn = g->oc * (g->c / g->groups) * g->kh * g->kw;
    if (per > INT_MAX || wn > INT_MAX) {
        char geo[320];
        geom_str(cx, geo, sizeof geo);
        DG_ERR(DG_EUNSUPPORTED, "%s: one image or the filter has more than %d elements, beyond cuDNN's int sizes (%s)",
               cx->op, INT_MAX, geo);
        return 0;
    }
    if (per < 1) per = 1;
    int64_t nb = INT_MAX / per;
    return nb < g->n ? nb : g->n;
}

/* The forward (bias b, when given, added to each chunk's output) or the backward-data pass over
 * the batch, a chunk of whole images per cuDNN call: x and y are the input-side and the
 * output-side buffers (gx and gy for backward data), each chunk overwritten. */
static int run_chunks(int kind, const dg_conv2d_geom *g, const conv_ctx *cx, char *x, char *w, char *y, const char *b) {
    int64_t nb = chunk_images(g, cx);
    if (!nb) return DG_EUNSUPPORTED;
    dg_dtype dt = cx->dt;
    size_t es = dg_dtype_size(dt);
    int64_t xs = g->c * g->h * g->w, ys = g->oc * g->oh * g->ow;
    int rc = 0;
    pthread_mutex_lock(&g_conv_lock);
    for (int64_t n0 = 0; n0 < g->n && !rc; n0 += nb) {
        int64_t cnt = g->n - n0 < nb ? g->n - n0 : nb;
        char *xc = x + (size_t)(n0 * xs) * es, *yc = y + (size_t)(n0 * ys) * es;
        conv_key k;
        make_key(&k, g, cnt, dt, min_align(xc, w, yc));
        conv_slot *s = slot_get(&k, cx, &rc);
        if (!s) break;
        if (!s->algo[kind].found) rc = find_algo(s, kind, xc, w, yc, cx);
        if (!rc) rc = run_algo(s, kind, xc, w, yc, false, cx);
        if (!rc && b) rc = DNN(cudnnAddTensor, dg_cuda_cudnn(), scal(dt, true), s->bd, b, scal(dt, true), s->yd, yc);
    }
    pthread_mutex_unlock(&g_conv_lock);
    return rc;
}

int dg_cuda_conv2d(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y) {
    DG_CUDA_ENTER(be);
    conv_ctx ctx = { "conv2d", g, x->dtype }, *cx = &ctx;
    dg_dtype dt = x->dtype;
    if (dt != DG_F32 && dt != DG_F64 && !dg_dtype_is_half(dt)) return bad_dtype(cx);
    if (y->numel == 0) return 0;
    char *xp = x->data, *wp = w->data, *yp = y->data, *bp = b ? b->data : NULL;
    /* an empty input plane with padding: every window sees only zeros */
    if (x->numel == 0) {
        int rc = dg_cuda_bias_fill_raw(yp, bp, dt, g->n, g->oc, g->oh * g->ow);
        return rc || !g->relu ? rc : be->unary(be, DG_UN_RELU, y, y, 0, 0);   /* the table's entry: half outputs too */
    }
    int rc = run_chunks(K_FWD, g, cx, xp, wp, yp, bp);
    if (!rc && g->relu) rc = be->unary(be, DG_UN_RELU, y, y, 0, 0);   /* in place, through the table: half outputs too */
    return rc;
}

int dg_cuda_conv2d_backward_data(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx) {
    DG_CUDA_ENTER(be);
    conv_ctx ctx = { "conv2d backward data", g, gy->dtype }, *cx = &ctx;
    dg_dtype dt = gy->dtype;
    if (dt != DG_F32 && dt != DG_F64 && !dg_dtype_is_half(dt)) return bad_dtype(cx);
    if (gx->numel == 0) return 0;
    size_t es = dg_dtype_size(dt);
    char *gyp = gy->data, *wp = w->data, *gxp = gx->data;
    if (gy->numel == 0) return DG_CUDA(cudaMemsetAsync(gxp, 0, (size_t)gx->numel * es, dg_cuda_stream()));
    return run_chunks(K_BWD_DATA, g, cx, gxp, wp, gyp, NULL);
}

int dg_cuda_conv2d_backward_filter(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb) {
    DG_CUDA_ENTER(be);
    conv_ctx ctx = { "conv2d backward filter", g, gy->dtype }, *cx = &ctx;
    dg_dtype dt = gy->dtype;
    if (dt != DG_F32 && dt != DG_F64 && !dg_dtype_is_half(dt)) return bad_dtype(cx);
    if (!gw && !gb) return 0;
    size_t es = dg_dtype_size(dt);
    cudaStream_t st = dg_cuda_stream();
    char *gyp = gy->data, *xp = x->data;
    char *gwp = gw ? gw->data : NULL, *gbp = gb ? gb->data : NULL;
    int rc = 0;
    if (gy->numel == 0 || x->numel == 0) {
        /* an empty batch has zero gradients; an empty input plane gives the filter nothing
         * to multiply, while the bias still collects every output */
        if (gw && gw->numel) rc = DG_CUDA(cudaMemsetAsync(gwp, 0, (size_t)gw->numel * es, st));
        if (!rc && gb && gb->numel) {
            if (gy->numel == 0) rc = DG_CUDA(cudaMemsetAsync(gbp, 0, (size_t)gb->numel * es, st));
            else rc = dg_cuda_channel_sum_raw(gyp, gbp, dt, g->n, g->oc, g->oh * g->ow);
        }
        return rc;
    }
    int64_t nb = chunk_images(g, cx);
    if (!nb) return DG_EUNSUPPORTED;
    int64_t xs = g->c * g->h * g->w, ys = g->oc * g->oh * g->ow;
    void *scratch = NULL;         /* the search's dw after the first chunk: gw holds the sum so far */
    pthread_mutex_lock(&g_conv_lock);
    for (int64_t n0 = 0; n0 < g->n && !rc; n0 += nb) {
        int64_t cnt = g->n - n0 < nb ? g->n - n0 : nb;
        char *xc = xp + (size_t)(n0 * xs) * es, *gyc = gyp + (size_t)(n0 * ys) * es;
        conv_key k;
        make_key(&k, g, cnt, dt, min_align(xc, gwp ? gwp : xc, gyc));
        conv_slot *s = slot_get(&k, cx, &rc);
        if (!s) break;
        if (gw) {
            if (!s->algo[K_BWD_FILTER].found) {
                void *dw = gwp;
                if (n0 > 0) {
                    if (!scratch && !(scratch = dg_cuda_alloc((size_t)gw->numel * es))) rc = DG_ENOMEM;
                    dw = scratch;
                }
                if (!rc) rc = find_algo(s, K_BWD_FILTER, xc, dw, gyc, cx);
            }
            if (!rc) rc = run_algo(s, K_BWD_FILTER, xc, gwp, gyc, n0 > 0, cx);
        }
        if (!rc && gb && !dg_dtype_is_half(dt))
            rc = DNN(cudnnConvolutionBackwardBias, dg_cuda_cudnn(), scal(dt, true), s->yd, gyc, scal(dt, n0 > 0), s->bd, gbp);
    }
    pthread_mutex_unlock(&g_conv_lock);
    dg_cuda_free(scratch);
    /* cuDNN 9 answers NOT_SUPPORTED to cudnnConvolutionBackwardBias on bfloat16 (seen on an H200),
     * so the half types sum the bias gradient themselves, in one pass over the whole batch */
    if (!rc && gb && dg_dtype_is_half(dt)) rc = dg_cuda_channel_sum_raw(gyp, gbp, dt, g->n, g->oc, g->oh * g->ow);
    return rc;
}
