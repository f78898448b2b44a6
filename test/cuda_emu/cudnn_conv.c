/* test/cuda_emu/cudnn_conv.c — the emulated cuDNN's convolutions: forward, backward data and
 * filter, bias gradient, workspace sizes and the algorithm search (see cudnn.c). */
#include "cudnn_internal.h"

/* ================= convolution ================= */

enum { KF, KD, KW };              /* forward, backward data, backward filter */

/* One convolution as the three descriptors and the convolution descriptor define it:
 * x = image (dx for backward data), w = filter (dw for backward filter), y = output (dy). */
typedef struct conv_geom {
    tens x, w, y;
    cudnnDataType_t dt;
    int ph, pw, sh, sw, dh, dw, groups;
    bool flip;                    /* CUDNN_CONVOLUTION: a true convolution, the filter mirrored */
    cudnnMathType_t math;
} conv_geom;

static st_t conv_setup(const char *fn, cudnnTensorDescriptor_t xd, const char *xname, cudnnFilterDescriptor_t wd,
                       const char *wname, cudnnConvolutionDescriptor_t cdd, cudnnTensorDescriptor_t yd,
                       const char *yname, conv_geom *g) {
    conv_desc cd;
    st_t rc = get_tensor(fn, xname, xd, &g->x);
    if (!rc) rc = get_filter(fn, wname, wd, &g->w);
    if (!rc) rc = get_conv(fn, cdd, &cd);
    if (!rc) rc = get_tensor(fn, yname, yd, &g->y);
    if (rc) return rc;
    const tens *x = &g->x, *w = &g->w, *y = &g->y;
    if (x->dt != w->dt || x->dt != y->dt)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "data types differ: %s %s, %s %s, %s %s", xname, dt_name(x->dt), wname,
                    dt_name(w->dt), yname, dt_name(y->dt));
    /* the configurations emulated: FLOAT_CONFIG, DOUBLE_CONFIG, and PSEUDO_HALF_CONFIG /
     * PSEUDO_BFLOAT16_CONFIG (half data, FLOAT compute: the sums are exact products
     * accumulated wider than f32 here, and each output is rounded once through f32) */
    if (!(is_fd(x->dt) && cd.ctype == x->dt) && !(is_half(x->dt) && cd.ctype == CUDNN_DATA_FLOAT))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data with %s compute type is not a supported configuration",
                    dt_name(x->dt), dt_name(cd.ctype));
    if (x->d[1] != w->d[1] * cd.groups)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s has %lld channels but %s has %lld per group x %d groups", xname,
                    (long long)x->d[1], wname, (long long)w->d[1], cd.groups);
    if (w->d[0] % cd.groups)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s has %lld output channels, not a multiple of %d groups", wname,
                    (long long)w->d[0], cd.groups);
    if (y->d[0] != x->d[0] || y->d[1] != w->d[0])
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is [%lld, %lld, ...] but %s has %lld images and %s %lld output channels",
                    yname, (long long)y->d[0], (long long)y->d[1], xname, (long long)x->d[0], wname, (long long)w->d[0]);
    int64_t oh, ow;
    if (!out_dim(x->d[2], cd.ph, w->d[2], cd.dh, cd.sh, &oh) || !out_dim(x->d[3], cd.pw, w->d[3], cd.dw, cd.sw, &ow))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the dilated %lldx%lld filter is larger than the padded %lldx%lld input",
                    (long long)w->d[2], (long long)w->d[3], (long long)x->d[2], (long long)x->d[3]);
    if (y->d[2] != oh || y->d[3] != ow)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s is %lldx%lld but this convolution produces %lldx%lld", yname,
                    (long long)y->d[2], (long long)y->d[3], (long long)oh, (long long)ow);
    g->dt = x->dt;
    g->ph = cd.ph; g->pw = cd.pw; g->sh = cd.sh; g->sw = cd.sw; g->dh = cd.dh; g->dw = cd.dw;
    g->groups = cd.groups;
    g->flip = cd.mode == CUDNN_CONVOLUTION;
    g->math = cd.math;
    return OK;
}

static double conv_flops(const conv_geom *g) {
    return 2.0 * (double)g->y.d[0] * (double)g->y.d[1] * (double)g->w.d[1] * (double)g->w.d[2] * (double)g->w.d[3] *
           (double)g->y.d[2] * (double)g->y.d[3];
}

static size_t pow2_at_least(int64_t v) {
    size_t p = 1;
    while ((int64_t)p < v) p <<= 1;
    return p;
}

/* One emulated algorithm on one geometry: whether it runs, its workspace, its determinism and a
 * made-up speed. The rules imitate cuDNN's familiar ones: the GEMM-style algorithms run
 * everything, FFT wants unit stride and dilation, fused Winograd 3x3 filters, both float only. */
typedef struct algo_spec {
    bool ok;
    size_t ws;
    bool det;
    double gflops;
} algo_spec;

static int algo_count(int kind) {
    return kind == KF ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
         : kind == KD ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static algo_spec algo_of(int kind, int a, const conv_geom *g) {
    size_t es = dt_size(g->dt);
    int64_t cg = g->w.d[1], k = g->w.d[0], kk = g->w.d[2] * g->w.d[3];
    size_t col = (size_t)(cg * kk * g->y.d[2] * g->y.d[3]) * es;          /* one image unfolded */
    bool plain = g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1;
    bool f32 = g->dt == CUDNN_DATA_FLOAT;
    bool fft = plain && f32;
    bool wino = plain && f32 && g->w.d[2] == 3 && g->w.d[3] == 3 && g->groups == 1;
    size_t fh = pow2_at_least(g->x.d[2] + 2 * g->ph), fw = pow2_at_least(g->x.d[3] + 2 * g->pw);
    size_t fft_ws = 2 * es * fh * (fw / 2 + 1) * (size_t)(g->x.d[0] * g->x.d[1] + k * cg + g->y.d[0] * k);
    algo_spec no = { false, 0, true, 0 };
    if (kind == KF) {
        switch (a) {
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return (algo_spec){ true, 0, true, 1500 };
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
            return (algo_spec){ true, (size_t)(cg * kk) * sizeof(int32_t), true, 3000 };
        case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return (algo_spec){ true, col, true, 2200 };
        case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return fft ? (algo_spec){ true, fft_ws, true, 2600 } : no;
        case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return wino ? (algo_spec){ true, 0, true, 4000 } : no;
        default: return no;
        }
    }
    if (kind == KD) {
        switch (a) {
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return (algo_spec){ true, 0, false, 1400 };
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return (algo_spec){ true, col, true, 2600 };
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return fft ? (algo_spec){ true, fft_ws, true, 2400 } : no;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return wino ? (algo_spec){ true, 0, true, 3600 } : no;
        default: return no;
        }
    }
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return (algo_spec){ true, 0, false, 1200 };
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return (algo_spec){ true, col, true, 2400 };
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return fft ? (algo_spec){ true, fft_ws, true, 2000 } : no;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return (algo_spec){ true, (size_t)(k * cg * kk) * es, false, 2800 };
    default: return no;
    }
}

/* The algorithm a call names, checked against the geometry and the workspace it is given. */
static st_t algo_for_call(const char *fn, int kind, int a, const conv_geom *g, void *ws, size_t wsz, size_t *need) {
    if (a < 0 || a >= algo_count(kind)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "algo %d is not a valid algorithm", a);
    algo_spec sp = algo_of(kind, a, g);
    if (!sp.ok) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "algo %d does not support this configuration", a);
    if (sp.ws > wsz)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "algo %d needs %zu workspace bytes, workSpaceSizeInBytes is %zu", a, sp.ws, wsz);
    if (sp.ws) {
        st_t rc = need_dev(fn, "workSpace", ws, sp.ws);
        if (rc) return rc;
    }
    if (ws && wsz && !dgemu_is_device(ws, wsz))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "workSpace (%p) is not device memory of the %zu bytes claimed", ws, wsz);
    *need = sp.ws;
    return OK;
}

typedef struct conv_work {
    conv_geom g;
    int kind, algo;
    bool scribble;                /* Find: overwrite the output with NaN instead of computing */
    const void *in1, *in2;        /* KF: x, w   KD: w, dy   KW: x, dy */
    void *out;                    /* KF: y      KD: dx      KW: dw */
    double alpha, beta;
    void *ws;
    size_t ws_bytes;
} conv_work;

/* A dense double copy of a strided operand (n, c, h, w order), or NULL after a fault. */
static double *dense_copy(const char *what, const void *p, const tens *t) {
    double *d = work_scratch(what, numel(t));
    if (!d) return NULL;
    int64_t i = 0;
    for (int64_t n = 0; n < t->d[0]; n++)
        for (int64_t c = 0; c < t->d[1]; c++)
            for (int64_t h = 0; h < t->d[2]; h++)
                for (int64_t w = 0; w < t->d[3]; w++) d[i++] = ld(p, t->dt, at(t, n, c, h, w));
    return d;
}

/* out = alpha * acc + beta * out over a strided operand, acc dense. */
static void blend_dense(void *p, const tens *t, const double *acc, double alpha, double beta) {
    int64_t i = 0;
    for (int64_t n = 0; n < t->d[0]; n++)
        for (int64_t c = 0; c < t->d[1]; c++)
            for (int64_t h = 0; h < t->d[2]; h++)
                for (int64_t w = 0; w < t->d[3]; w++) blend(p, t, at(t, n, c, h, w), acc[i++], alpha, beta);
}

/* The reference loop of all three kinds: every product x[n][ci][ih][iw] * w[k][c][r][s] of the
 * convolution (ci = the group's first channel + c; ih = oh*sh - ph + r*dh, likewise iw; taps
 * mirrored for a true convolution), accumulated into y (forward), x (backward data) or w
 * (backward filter). The operands are dense double copies, so the loop is pure arithmetic. */
static void conv_nk(int kind, const conv_geom *g, double *X, double *Wt, double *Y, int64_t n, int64_t k) {
    int64_t K = g->y.d[1], OH = g->y.d[2], OW = g->y.d[3];
    int64_t C = g->x.d[1], H = g->x.d[2], W = g->x.d[3];
    int64_t CG = g->w.d[1], KH = g->w.d[2], KW = g->w.d[3], KG = K / g->groups;
    int64_t c0 = (k / KG) * CG;
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t yi = ((n * K + k) * OH + oh) * OW + ow;
            double yv = kind == KF ? 0 : Y[yi];
            for (int64_t c = 0; c < CG; c++) {
                int64_t xb = (n * C + c0 + c) * H, wb = (k * CG + c) * KH;
                for (int64_t r = 0; r < KH; r++) {
                    int64_t ih = oh * g->sh - g->ph + r * g->dh;
                    if (ih < 0 || ih >= H) continue;
                    int64_t xr = (xb + ih) * W, wr = (wb + (g->flip ? KH - 1 - r : r)) * KW;
                    for (int64_t s = 0; s < KW; s++) {
                        int64_t iw = ow * g->sw - g->pw + s * g->dw;
                        if (iw < 0 || iw >= W) continue;
                        int64_t xi = xr + iw, wi = wr + (g->flip ? KW - 1 - s : s);
                        if (kind == KF) yv += X[xi] * Wt[wi];
                        else if (kind == KD) X[xi] += yv * Wt[wi];
                        else Wt[wi] += yv * X[xi];
                    }
                }
            }
            if (kind == KF) Y[yi] = yv;
        }
}

/* Spread over threads so that no two write one element (forward: each (n, k) its own outputs;
 * backward data: each image its own input gradient; backward filter: each filter its own
 * gradient), and every element still accumulates in the serial loop's order. */
static void conv_loop(int kind, const conv_geom *g, double *X, double *Wt, double *Y) {
    int64_t N = g->y.d[0], K = g->y.d[1];
    if (kind == KF) {
#pragma omp parallel for collapse(2) schedule(dynamic)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) conv_nk(kind, g, X, Wt, Y, n, k);
    } else if (kind == KD) {
#pragma omp parallel for schedule(dynamic)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) conv_nk(kind, g, X, Wt, Y, n, k);
    } else {
#pragma omp parallel for schedule(dynamic)
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++) conv_nk(kind, g, X, Wt, Y, n, k);
    }
}

/* Whether algorithm a of this kind transforms its operands (FFT, Winograd). */
static bool transformed(int kind, int a) {
    if (kind == KF)
        return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    if (kind == KD)
        return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

/* FFT and Winograd round in the transformed domain: their f32 error is spread over every output in
 * proportion to the largest one rather than to each output (on an H200, MNIST CNN outputs ~3e-4
 * of the largest off the CPU's). The emulator adds an error of that kind, up to 2^-12 of the
 * largest output, a fixed function of the position, so that code which must not depend on
 * such algorithms (dg_set_exact_gpu_conv) is seen to avoid them. */
static void transform_error(double *o, int64_t n) {
    double most = 0;
    for (int64_t i = 0; i < n; i++) most = fabs(o[i]) > most ? fabs(o[i]) : most;
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        o[i] += most * ldexp((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0, -12);
    }
}

/* The kind's two inputs copied dense, the third operand accumulated from zero, then blended. */
static void conv_compute(const conv_work *k) {
    static const char *const what[3] = { "cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                         "cudnnConvolutionBackwardFilter" };
    const conv_geom *g = &k->g;
    const char *fn = what[k->kind];
    double *X, *Wt, *Y;
    if (k->kind == KF) {
        X = dense_copy(fn, k->in1, &g->x);
        Wt = dense_copy(fn, k->in2, &g->w);
        Y = work_scratch(fn, numel(&g->y));
    } else if (k->kind == KD) {
        Wt = dense_copy(fn, k->in1, &g->w);
        Y = dense_copy(fn, k->in2, &g->y);
        X = work_scratch(fn, numel(&g->x));
    } else {
        X = dense_copy(fn, k->in1, &g->x);
        Y = dense_copy(fn, k->in2, &g->y);
        Wt = work_scratch(fn, numel(&g->w));
    }
    if (X && Wt && Y) {
        conv_loop(k->kind, g, X, Wt, Y);
        const tens *out = k->kind == KF ? &g->y : k->kind == KD ? &g->x : &g->w;
        if (g->dt == CUDNN_DATA_FLOAT && transformed(k->kind, k->algo))
            transform_error(k->kind == KF ? Y : k->kind == KD ? X : Wt, numel(out));
        blend_dense(k->out, out, k->kind == KF ? Y : k->kind == KD ? X : Wt, k->alpha, k->beta);
    }
    free(X);
    free(Wt);
    free(Y);
}

static void fill_nan(void *p, const tens *t) {
    for (int64_t n = 0; n < t->d[0]; n++)
        for (int64_t c = 0; c < t->d[1]; c++)
            for (int64_t h = 0; h < t->d[2]; h++)
                for (int64_t w = 0; w < t->d[3]; w++) stv(p, t->dt, at(t, n, c, h, w), NAN);
}

static int conv_run(void *arg) {
    conv_work *k = arg;
    /* an algorithm's scratch holds garbage afterwards; so does ours */
    if (k->ws_bytes) memset(k->ws, 0xA5, k->ws_bytes);
    const tens *out = k->kind == KF ? &k->g.y : k->kind == KD ? &k->g.x : &k->g.w;
    if (k->scribble) fill_nan(k->out, out);
    else conv_compute(k);
    return DGEMU_DONE;
}

/* The device operands of a kind, in its argument order, with the bytes each spans. */
static st_t conv_operands(const char *fn, int kind, const conv_geom *g, const void *in1, const void *in2, const void *out) {
    static const char *const names[3][3] = { { "x", "w", "y" }, { "w", "dy", "dx" }, { "x", "dy", "dw" } };
    const tens *t1 = kind == KD ? &g->w : &g->x, *t2 = kind == KF ? &g->w : &g->y;
    const tens *to = kind == KF ? &g->y : kind == KD ? &g->x : &g->w;
    st_t rc = need_dev(fn, names[kind][0], in1, bytes_of(t1));
    if (!rc) rc = need_dev(fn, names[kind][1], in2, bytes_of(t2));
    if (!rc) rc = need_dev(fn, names[kind][2], out, bytes_of(to));
    return rc;
}

/* The three compute entries after their descriptors are read: checks, snapshot, queue. */
static st_t conv_call(const char *fn, int kind, cudaStream_t s, const conv_geom *g, const void *alpha, const void *beta,
                      const void *in1, const void *in2, void *out, int algo, void *ws, size_t wsz) {
    size_t need = 0;
    st_t rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (!rc) rc = conv_operands(fn, kind, g, in1, in2, out);
    if (!rc) rc = algo_for_call(fn, kind, algo, g, ws, wsz, &need);
    if (!rc) rc = not_poisoned(fn);
    if (rc) return rc;
    conv_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (conv_work){ .g = *g, .kind = kind, .in1 = in1, .in2 = in2, .out = out, .alpha = scal(alpha, g->dt),
                      .beta = scal(beta, g->dt), .ws = ws, .ws_bytes = need, .algo = algo };
    return submit(fn, s, conv_run, k);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", wDesc, "wDesc", convDesc, yDesc, "yDesc", &g);
    if (rc) return rc;
    return conv_call(__func__, KF, s, &g, alpha, beta, x, w, y, (int)algo, workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha, const cudnnFilterDescriptor_t wDesc,
                                           const void *w, const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, dxDesc, "dxDesc", wDesc, "wDesc", convDesc, dyDesc, "dyDesc", &g);
    if (rc) return rc;
    return conv_call(__func__, KD, s, &g, alpha, beta, w, dy, dx, (int)algo, workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", dwDesc, "dwDesc", convDesc, dyDesc, "dyDesc", &g);
    if (rc) return rc;
    return conv_call(__func__, KW, s, &g, alpha, beta, x, dy, dw, (int)algo, workSpace, workSpaceSizeInBytes);
}

/* ---- workspace sizes ---- */

static st_t ws_size(const char *fn, int kind, const conv_geom *g, int algo, size_t *size) {
    if (!size) return fail(CUDNN_STATUS_BAD_PARAM, fn, "sizeInBytes is NULL");
    if (algo < 0 || algo >= algo_count(kind)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "algo %d is not a valid algorithm", algo);
    algo_spec sp = algo_of(kind, algo, g);
    if (!sp.ok) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "algo %d does not support this configuration", algo);
    *size = sp.ws;
    return OK;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    conv_geom g;
    st_t rc = get_handle(__func__, handle, NULL);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", wDesc, "wDesc", convDesc, yDesc, "yDesc", &g);
    return rc ? rc : ws_size(__func__, KF, &g, (int)algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *sizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    conv_geom g;
    st_t rc = get_handle(__func__, handle, NULL);
    if (!rc) rc = conv_setup(__func__, dxDesc, "dxDesc", wDesc, "wDesc", convDesc, dyDesc, "dyDesc", &g);
    return rc ? rc : ws_size(__func__, KD, &g, (int)algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                             const cudnnTensorDescriptor_t dyDesc,
                                                             const cudnnConvolutionDescriptor_t convDesc,
                                                             const cudnnFilterDescriptor_t gradDesc,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t *sizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    conv_geom g;
    st_t rc = get_handle(__func__, handle, NULL);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", gradDesc, "gradDesc", convDesc, dyDesc, "dyDesc", &g);
    return rc ? rc : ws_size(__func__, KW, &g, (int)algo, sizeInBytes);
}

/* ---- algorithm search ---- */

/* One perf result, before it is copied into the kind's struct. */
typedef struct perf {
    int algo;
    st_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} perf;

/* success first, fastest first; then allocation failures, then unsupported; ties by algo id */
static int perf_rank(const perf *p) {
    return p->status == OK ? 0 : p->status == CUDNN_STATUS_ALLOC_FAILED ? 1 : 2;
}
static int perf_cmp(const void *a_, const void *b_) {
    const perf *a = a_, *b = b_;
    int ra = perf_rank(a), rb = perf_rank(b);
    if (ra != rb) return ra - rb;
    if (ra == 0 && a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->algo != b->algo) return a->algo - b->algo;
    return (int)a->math - (int)b->math;
}

/* Made-up results: time from the flop count and each algorithm's nominal speed. Float data
 * under a math type that allows tensor cores also gets a faster tensor-op run of algorithm 1,
 * as cuDNN lists TF32 kernels as separate results. Returns how many were written to p. */
static int make_perfs(int kind, const conv_geom *g, size_t wsz, perf *p) {
    double flops = conv_flops(g);
    bool f32 = g->dt == CUDNN_DATA_FLOAT;
    cudnnMathType_t plain_math = g->math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    int n = 0;
    for (int a = 0; a < algo_count(kind); a++) {
        algo_spec sp = algo_of(kind, a, g);
        perf e = { a, OK, -1.0f, sp.ws, sp.det ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC, plain_math };
        if (!sp.ok) {
            e.status = CUDNN_STATUS_NOT_SUPPORTED;
            e.memory = 0;
        } else if (sp.ws > wsz) {
            e.status = CUDNN_STATUS_ALLOC_FAILED;
        } else {
            e.time = (float)(0.004 + flops / (sp.gflops * (f32 ? 1e6 : 1.25e5)));
        }
        p[n++] = e;
        if (a == 1 && sp.ok && f32 && g->math != CUDNN_FMA_MATH) {
            perf t = e;
            t.math = g->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                                       : CUDNN_TENSOR_OP_MATH;
            if (t.status == OK) t.time = (float)(0.003 + flops / (sp.gflops * 4e6));
            p[n++] = t;
        }
    }
    qsort(p, (size_t)n, sizeof *p, perf_cmp);
    return n;
}

/* What the three Find*Ex share once their descriptors are read: checks, the blocking run that
 * overwrites the output, and the sorted results (at most `req` of them in `out`). */
static st_t find_common(const char *fn, int kind, cudaStream_t s, const conv_geom *g, const void *in1, const void *in2,
                        void *outp, int req, int *returned, perf *out, void *ws, size_t wsz) {
    st_t rc = OK;
    if (req < 1) return fail(CUDNN_STATUS_BAD_PARAM, fn, "requestedAlgoCount %d must be positive", req);
    if (!returned) return fail(CUDNN_STATUS_BAD_PARAM, fn, "returnedAlgoCount is NULL");
    if (!out) return fail(CUDNN_STATUS_BAD_PARAM, fn, "perfResults is NULL");
    if ((rc = conv_operands(fn, kind, g, in1, in2, outp))) return rc;
    if (wsz && (rc = need_dev(fn, "workSpace", ws, wsz))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    conv_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (conv_work){ .g = *g, .kind = kind, .scribble = true, .in1 = in1, .in2 = in2, .out = outp, .ws = ws,
                      .ws_bytes = wsz };
    if ((rc = submit(fn, s, conv_run, k))) return rc;
    /* real cuDNN times every algorithm before returning */
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return fail(CUDNN_STATUS_EXECUTION_FAILED, fn, "the search's work failed: %s", cudaGetErrorName(e));
    perf all[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = make_perfs(kind, g, wsz, all);
    if (n > req) n = req;
    memcpy(out, all, (size_t)n * sizeof *out);
    *returned = n;
    return OK;
}

/* The kinds' perf structs share one layout but are distinct types: copy member by member. */
#define COPY_PERFS(dst, src, n, algo_t)                                       \
    for (int i_ = 0; i_ < (n); i_++) {                                        \
        memset(&(dst)[i_], 0, sizeof (dst)[i_]);                              \
        (dst)[i_].algo = (algo_t)(src)[i_].algo;                              \
        (dst)[i_].status = (src)[i_].status;                                  \
        (dst)[i_].time = (src)[i_].time;                                      \
        (dst)[i_].memory = (src)[i_].memory;                                  \
        (dst)[i_].determinism = (src)[i_].det;                                \
        (dst)[i_].mathType = (src)[i_].math;                                  \
    }

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                     const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t yDesc, void *y,
                                                     const int requestedAlgoCount, int *returnedAlgoCount,
                                                     cudnnConvolutionFwdAlgoPerf_t *perfResults, void *workSpace,
                                                     size_t workSpaceSizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    perf p[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", wDesc, "wDesc", convDesc, yDesc, "yDesc", &g);
    if (!rc) rc = find_common(__func__, KF, s, &g, x, w, y, requestedAlgoCount, returnedAlgoCount ? &n : NULL, perfResults ? p : NULL, workSpace,
                              workSpaceSizeInBytes);
    if (rc) return rc;
    COPY_PERFS(perfResults, p, n, cudnnConvolutionFwdAlgo_t);
    *returnedAlgoCount = n;
    return OK;
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                          const void *w, const cudnnTensorDescriptor_t dyDesc,
                                                          const void *dy, const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t dxDesc, void *dx,
                                                          const int requestedAlgoCount, int *returnedAlgoCount,
                                                          cudnnConvolutionBwdDataAlgoPerf_t *perfResults,
                                                          void *workSpace, size_t workSpaceSizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    perf p[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, dxDesc, "dxDesc", wDesc, "wDesc", convDesc, dyDesc, "dyDesc", &g);
    if (!rc) rc = find_common(__func__, KD, s, &g, w, dy, dx, requestedAlgoCount, returnedAlgoCount ? &n : NULL, perfResults ? p : NULL, workSpace,
                              workSpaceSizeInBytes);
    if (rc) return rc;
    COPY_PERFS(perfResults, p, n, cudnnConvolutionBwdDataAlgo_t);
    *returnedAlgoCount = n;
    return OK;
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                            const void *x, const cudnnTensorDescriptor_t dyDesc,
                                                            const void *y, const cudnnConvolutionDescriptor_t convDesc,
                                                            const cudnnFilterDescriptor_t dwDesc, void *dw,
                                                            const int requestedAlgoCount, int *returnedAlgoCount,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t *perfResults,
                                                            void *workSpace, size_t workSpaceSizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    perf p[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", dwDesc, "dwDesc", convDesc, dyDesc, "dyDesc", &g);
    if (!rc) rc = find_common(__func__, KW, s, &g, x, y, dw, requestedAlgoCount, returnedAlgoCount ? &n : NULL, perfResults ? p : NULL, workSpace,
                              workSpaceSizeInBytes);
    if (rc) return rc;
    COPY_PERFS(perfResults, p, n, cudnnConvolutionBwdFilterAlgo_t);
    *returnedAlgoCount = n;
    return OK;
}

/* ---- cudnnConvolutionBackwardBias: db[c] = alpha * sum over n, h, w of dy + beta * db[c] ---- */

typedef struct bias_work {
    tens dy, db;
    const void *src;
    void *dst;
    double alpha, beta;
} bias_work;

static int bias_run(void *arg) {
    bias_work *k = arg;
    for (int64_t c = 0; c < k->dy.d[1]; c++) {
        double sum = 0;
        for (int64_t n = 0; n < k->dy.d[0]; n++)
            for (int64_t h = 0; h < k->dy.d[2]; h++)
                for (int64_t w = 0; w < k->dy.d[3]; w++) sum += ld(k->src, k->dy.dt, at(&k->dy, n, c, h, w));
        blend(k->dst, &k->db, at(&k->db, 0, c, 0, 0), sum, k->alpha, k->beta);
    }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void *alpha,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy, const void *beta,
                                           const cudnnTensorDescriptor_t dbDesc, void *db) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    tens t, b;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_tensor(fn, "dyDesc", dyDesc, &t);
    if (!rc) rc = get_tensor(fn, "dbDesc", dbDesc, &b);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (b.d[0] != 1 || b.d[2] != 1 || b.d[3] != 1)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dbDesc must be 1xCx1x1, not [%lld, %lld, %lld, %lld]", (long long)b.d[0],
                    (long long)b.d[1], (long long)b.d[2], (long long)b.d[3]);
    if (b.d[1] != t.d[1])
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dy has %lld feature maps, db %lld", (long long)t.d[1], (long long)b.d[1]);
    if (b.dt != t.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dy is %s but db is %s", dt_name(t.dt), dt_name(b.dt));
    /* cuDNN 9.x on an H200 answers NOT_SUPPORTED for bfloat16 here (seen 2026-11-28) */
    if (t.dt == CUDNN_DATA_BFLOAT16) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "BFLOAT16 data is not supported (as cuDNN 9)");
    if (!is_fd(t.dt) && !is_half(t.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(t.dt));
    if ((rc = need_dev(fn, "dy", dy, bytes_of(&t))) || (rc = need_dev(fn, "db", db, bytes_of(&b)))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bias_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (bias_work){ t, b, dy, db, scal(alpha, t.dt), scal(beta, t.dt) };
    return submit(fn, s, bias_run, k);
}

