/* test/cuda_emu/test_cudnn_emu.c — the emulated cuDNN (test/cuda_emu/cudnn.c) checked against
 * hand-computed and independently computed results: small convolutions worked out by hand, a
 * grouped, dilated, strided, padded convolution on a strided input against a naive loop written
 * here, the backward passes through the adjoint identity <conv(x,w), g> = <x, bwd_data(g,w)> =
 * <w, bwd_filter(x,g)>, batch norm statistics and a finite-difference gradient, pooling windows
 * by hand, the Find*Ex results, the BAD_PARAM / NOT_SUPPORTED rules, and the call-time snapshot
 * of descriptors and scalars. A plain program: prints each failure and exits non-zero if any. */
#include <cudnn.h>
#include <cuda_runtime.h>

#include "emu_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures, g_checks;

static void check_at(bool ok, const char *file, int line, const char *fmt, ...) {
    g_checks++;
    if (ok) return;
    g_failures++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
#define CHECK(cond, ...) check_at((cond), __FILE__, __LINE__, __VA_ARGS__)
/* a call expected to return status `want` */
#define EXPECT(want, call)                                                                                          \
    do {                                                                                                            \
        cudnnStatus_t st_ = (call);                                                                                 \
        CHECK(st_ == (want), "%s returned %s (%d), expected %s", #call, cudnnGetErrorString(st_), (int)st_, #want); \
    } while (0)
#define OK(call) EXPECT(CUDNN_STATUS_SUCCESS, call)

static bool close_to(double a, double b, double tol) { return fabs(a - b) <= tol * (1 + fabs(b)); }

/* deterministic values in [-1, 1) */
static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static double rnd(void) {
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(g_rng >> 11) / (double)(1ULL << 53) * 2 - 1;
}

static void *dev_copy(const void *host, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes);
        exit(2);
    }
    if (host) cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    return p;
}
static void host_copy(void *host, const void *dev, size_t bytes) {
    cudaDeviceSynchronize();
    cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
}

static cudnnHandle_t H;

static cudnnTensorDescriptor_t tdesc(cudnnDataType_t dt, int n, int c, int h, int w) {
    cudnnTensorDescriptor_t d;
    OK(cudnnCreateTensorDescriptor(&d));
    OK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, dt, n, c, h, w));
    return d;
}
static cudnnFilterDescriptor_t fdesc(cudnnDataType_t dt, int k, int c, int h, int w) {
    cudnnFilterDescriptor_t d;
    OK(cudnnCreateFilterDescriptor(&d));
    OK(cudnnSetFilter4dDescriptor(d, dt, CUDNN_TENSOR_NCHW, k, c, h, w));
    return d;
}
static cudnnConvolutionDescriptor_t cdesc(int ph, int pw, int sh, int sw, int dh, int dw, int groups,
                                          cudnnConvolutionMode_t mode, cudnnDataType_t dt) {
    cudnnConvolutionDescriptor_t d;
    OK(cudnnCreateConvolutionDescriptor(&d));
    OK(cudnnSetConvolution2dDescriptor(d, ph, pw, sh, sw, dh, dw, mode, dt));
    OK(cudnnSetConvolutionGroupCount(d, groups));
    return d;
}

/* ---- 1. a 1x1x3x3 image and a 2x2 filter, by hand ---- */

static void test_hand_conv(void) {
    const float x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, w[4] = { 1, 2, 3, 4 };
    float y[4];
    void *dx = dev_copy(x, sizeof x), *dw = dev_copy(w, sizeof w), *dy = dev_copy(NULL, sizeof y);
    cudnnTensorDescriptor_t xd = tdesc(CUDNN_DATA_FLOAT, 1, 1, 3, 3), yd = tdesc(CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cudnnFilterDescriptor_t wd = fdesc(CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cudnnConvolutionDescriptor_t cc = cdesc(0, 0, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    cudnnConvolutionDescriptor_t cv = cdesc(0, 0, 1, 1, 1, 1, 1, CUDNN_CONVOLUTION, CUDNN_DATA_FLOAT);
    int n, c, h, wo;
    OK(cudnnGetConvolution2dForwardOutputDim(cc, xd, wd, &n, &c, &h, &wo));
    CHECK(n == 1 && c == 1 && h == 2 && wo == 2, "output dim [%d, %d, %d, %d]", n, c, h, wo);

    float one = 1, zero = 0, two = 2, three = 3;
    /* beta 0 must not read y: fill it with NaN first */
    float nans[4] = { NAN, NAN, NAN, NAN };
    cudaMemcpy(dy, nans, sizeof nans, cudaMemcpyHostToDevice);
    OK(cudnnConvolutionForward(H, &one, xd, dx, wd, dw, cc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, yd, dy));
    host_copy(y, dy, sizeof y);
    const float want_cc[4] = { 37, 47, 67, 77 };
    for (int i = 0; i < 4; i++) CHECK(y[i] == want_cc[i], "cross-correlation y[%d] = %g, want %g", i, y[i], want_cc[i]);

    /* a true convolution mirrors the filter */
    OK(cudnnConvolutionForward(H, &one, xd, dx, wd, dw, cv, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, yd, dy));
    host_copy(y, dy, sizeof y);
    const float want_cv[4] = { 23, 33, 53, 63 };
    for (int i = 0; i < 4; i++) CHECK(y[i] == want_cv[i], "convolution y[%d] = %g, want %g", i, y[i], want_cv[i]);

    /* y = 2 * conv + 3 * y */
    OK(cudnnConvolutionForward(H, &two, xd, dx, wd, dw, cc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &three, yd, dy));
    host_copy(y, dy, sizeof y);
    for (int i = 0; i < 4; i++)
        CHECK(y[i] == 2 * want_cc[i] + 3 * want_cv[i], "blended y[%d] = %g, want %g", i, y[i], 2 * want_cc[i] + 3 * want_cv[i]);

    /* pad 1, stride 2: each window partly in the padding */
    cudnnConvolutionDescriptor_t cp = cdesc(1, 1, 2, 2, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    OK(cudnnGetConvolution2dForwardOutputDim(cp, xd, wd, &n, &c, &h, &wo));
    CHECK(h == 2 && wo == 2, "padded output %dx%d", h, wo);
    OK(cudnnConvolutionForward(H, &one, xd, dx, wd, dw, cp, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, yd, dy));
    host_copy(y, dy, sizeof y);
    const float want_p[4] = { 4, 18, 36, 77 };
    for (int i = 0; i < 4; i++) CHECK(y[i] == want_p[i], "padded y[%d] = %g, want %g", i, y[i], want_p[i]);

    cudnnDestroyConvolutionDescriptor(cp);
    cudnnDestroyConvolutionDescriptor(cc);
    cudnnDestroyConvolutionDescriptor(cv);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudaFree(dx); cudaFree(dw); cudaFree(dy);
}

/* ---- 2. grouped + dilated + strided + padded, strided input, every algorithm ---- */

typedef struct geo { int n, c, h, w, k, kh, kw, ph, pw, sh, sw, dh, dw, g; } geo;

static int outsz(int in, int p, int k, int d, int s) { return (in + 2 * p - (k - 1) * d - 1) / s + 1; }

/* naive cross-correlation on a zero-padded copy of x (packed NCHW in and out) */
static void naive_conv(const geo *q, const double *x, const double *w, double *y) {
    int oh = outsz(q->h, q->ph, q->kh, q->dh, q->sh), ow = outsz(q->w, q->pw, q->kw, q->dw, q->sw);
    int hp = q->h + 2 * q->ph, wp = q->w + 2 * q->pw, cg = q->c / q->g, kg = q->k / q->g;
    double *xp = calloc((size_t)q->n * q->c * hp * wp, sizeof *xp);
    for (int n = 0; n < q->n; n++)
        for (int c = 0; c < q->c; c++)
            for (int i = 0; i < q->h; i++)
                for (int j = 0; j < q->w; j++)
                    xp[(((size_t)n * q->c + c) * hp + i + q->ph) * wp + j + q->pw] = x[(((size_t)n * q->c + c) * q->h + i) * q->w + j];
    for (int n = 0; n < q->n; n++)
        for (int o = 0; o < q->k; o++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    double s = 0;
                    int grp = o / kg;
                    for (int cc = 0; cc < cg; cc++)
                        for (int a = 0; a < q->kh; a++)
                            for (int b = 0; b < q->kw; b++)
                                s += xp[(((size_t)n * q->c + grp * cg + cc) * hp + i * q->sh + a * q->dh) * wp + j * q->sw + b * q->dw] *
                                     w[(((size_t)o * cg + cc) * q->kh + a) * q->kw + b];
                    y[(((size_t)n * q->k + o) * oh + i) * ow + j] = s;
                }
    free(xp);
}

static void test_general_conv(cudnnDataType_t dt) {
    const geo q = { 2, 4, 7, 6, 6, 3, 2, 1, 2, 2, 1, 2, 3, 2 };
    size_t es = dt == CUDNN_DATA_DOUBLE ? 8 : 4;
    int oh = outsz(q.h, q.ph, q.kh, q.dh, q.sh), ow = outsz(q.w, q.pw, q.kw, q.dw, q.sw);
    size_t nx = (size_t)q.n * q.c * q.h * q.w, nw = (size_t)q.k * (q.c / q.g) * q.kh * q.kw, ny = (size_t)q.n * q.k * oh * ow;
    double *x = malloc(nx * 8), *w = malloc(nw * 8), *yref = malloc(ny * 8);
    for (size_t i = 0; i < nx; i++) x[i] = rnd();
    for (size_t i = 0; i < nw; i++) w[i] = rnd();
    naive_conv(&q, x, w, yref);

    /* x stored with a row stride of w + 3 and an image stride with a gap: cuDNN must follow the
     * descriptor's strides, not assume packing */
    int ws_ = q.w + 3, hs = q.h * ws_, cs = hs + 5, ns = q.c * cs + 7;
    size_t xspan = (size_t)(q.n - 1) * ns + (size_t)(q.c - 1) * cs + (size_t)(q.h - 1) * ws_ + q.w;
    char *xs = calloc(xspan, es), *wh = malloc(nw * es);
    for (int n = 0; n < q.n; n++)
        for (int c = 0; c < q.c; c++)
            for (int i = 0; i < q.h; i++)
                for (int j = 0; j < q.w; j++) {
                    size_t o = (size_t)n * ns + (size_t)c * cs + (size_t)i * ws_ + j;
                    double v = x[(((size_t)n * q.c + c) * q.h + i) * q.w + j];
                    if (es == 8) ((double *)xs)[o] = v; else ((float *)xs)[o] = (float)v;
                }
    for (size_t i = 0; i < nw; i++) {
        if (es == 8) ((double *)wh)[i] = w[i]; else ((float *)wh)[i] = (float)w[i];
    }
    void *dx = dev_copy(xs, xspan * es), *dw = dev_copy(wh, nw * es), *dy = dev_copy(NULL, ny * es);
    cudnnTensorDescriptor_t xd;
    OK(cudnnCreateTensorDescriptor(&xd));
    OK(cudnnSetTensor4dDescriptorEx(xd, dt, q.n, q.c, q.h, q.w, ns, cs, ws_, 1));
    cudnnFilterDescriptor_t wd = fdesc(dt, q.k, q.c / q.g, q.kh, q.kw);
    cudnnConvolutionDescriptor_t cd = cdesc(q.ph, q.pw, q.sh, q.sw, q.dh, q.dw, q.g, CUDNN_CROSS_CORRELATION, dt);
    OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    int n, c, h, wo;
    OK(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &h, &wo));
    CHECK(n == q.n && c == q.k && h == oh && wo == ow, "output dim [%d, %d, %d, %d], want [%d, %d, %d, %d]", n, c, h, wo,
          q.n, q.k, oh, ow);
    cudnnTensorDescriptor_t yd = tdesc(dt, q.n, q.k, oh, ow);

    /* every algorithm that accepts this geometry gives the reference result */
    double one_d = 1, zero_d = 0;
    float one_f = 1, zero_f = 0;
    const void *one = es == 8 ? (const void *)&one_d : (const void *)&one_f;
    const void *zero = es == 8 ? (const void *)&zero_d : (const void *)&zero_f;
    char *yh = malloc(ny * es);
    int ran = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; a++) {
        size_t need = 0;
        cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(H, xd, wd, cd, yd, (cudnnConvolutionFwdAlgo_t)a, &need);
        if (st == CUDNN_STATUS_NOT_SUPPORTED) continue;
        CHECK(st == CUDNN_STATUS_SUCCESS, "workspace size of algo %d: %s", a, cudnnGetErrorString(st));
        void *ws = need ? dev_copy(NULL, need) : NULL;
        OK(cudnnConvolutionForward(H, one, xd, dx, wd, dw, cd, (cudnnConvolutionFwdAlgo_t)a, ws, need, zero, yd, dy));
        host_copy(yh, dy, ny * es);
        double worst = 0;
        for (size_t i = 0; i < ny; i++) {
            double v = es == 8 ? ((double *)yh)[i] : ((float *)yh)[i];
            double e = fabs(v - yref[i]) / (1 + fabs(yref[i]));
            if (e > worst) worst = e;
        }
        CHECK(worst < (es == 8 ? 1e-13 : 1e-6), "%s algo %d: worst relative error %g", es == 8 ? "double" : "float", a, worst);
        if (ws) cudaFree(ws);
        ran++;
    }
    CHECK(ran >= 3, "only %d forward algorithms accept a strided dilated grouped convolution", ran);

    free(x); free(w); free(yref); free(xs); free(wh); free(yh);
    cudaFree(dx); cudaFree(dw); cudaFree(dy);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyConvolutionDescriptor(cd);
}

/* ---- 3. backward passes through the adjoint identity (double) ---- */

static double dot_dev(const void *a, const void *b, size_t n) {
    double *ha = malloc(n * 8), *hb = malloc(n * 8);
    host_copy(ha, a, n * 8);
    host_copy(hb, b, n * 8);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += ha[i] * hb[i];
    free(ha); free(hb);
    return s;
}

static void *dev_random(size_t n) {
    double *h = malloc(n * 8);
    for (size_t i = 0; i < n; i++) h[i] = rnd();
    void *d = dev_copy(h, n * 8);
    free(h);
    return d;
}

static void test_adjoint(cudnnConvolutionMode_t mode) {
    const geo q = { 3, 6, 9, 8, 4, 3, 3, 2, 1, 2, 3, 2, 1, 2 };
    const cudnnDataType_t dt = CUDNN_DATA_DOUBLE;
    int oh = outsz(q.h, q.ph, q.kh, q.dh, q.sh), ow = outsz(q.w, q.pw, q.kw, q.dw, q.sw);
    size_t nx = (size_t)q.n * q.c * q.h * q.w, nw = (size_t)q.k * (q.c / q.g) * q.kh * q.kw, ny = (size_t)q.n * q.k * oh * ow;
    void *x = dev_random(nx), *w = dev_random(nw), *g = dev_random(ny);
    void *y = dev_copy(NULL, ny * 8), *gx = dev_copy(NULL, nx * 8), *gw = dev_copy(NULL, nw * 8);
    cudnnTensorDescriptor_t xd = tdesc(dt, q.n, q.c, q.h, q.w), yd = tdesc(dt, q.n, q.k, oh, ow);
    cudnnFilterDescriptor_t wd = fdesc(dt, q.k, q.c / q.g, q.kh, q.kw);
    cudnnConvolutionDescriptor_t cd = cdesc(q.ph, q.pw, q.sh, q.sw, q.dh, q.dw, q.g, mode, dt);
    double one = 1, zero = 0;
    OK(cudnnConvolutionForward(H, &one, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, yd, y));
    OK(cudnnConvolutionBackwardData(H, &one, wd, w, yd, g, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, NULL, 0, &zero, xd, gx));
    OK(cudnnConvolutionBackwardFilter(H, &one, xd, x, yd, g, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, NULL, 0, &zero, wd, gw));
    double a = dot_dev(y, g, ny), b = dot_dev(x, gx, nx), c = dot_dev(w, gw, nw);
    CHECK(close_to(b, a, 1e-12), "<conv(x,w), g> = %.17g but <x, bwd_data(g,w)> = %.17g", a, b);
    CHECK(close_to(c, a, 1e-12), "<conv(x,w), g> = %.17g but <w, bwd_filter(x,g)> = %.17g", a, c);
    CHECK(fabs(a) > 1e-3, "the identity is vacuous: <y, g> = %g", a);

    /* beta 1 accumulates: a second backward filter pass doubles gw */
    size_t need = 0;
    OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(H, xd, yd, cd, wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &need));
    CHECK(need > 0, "ALGO_1 of backward filter should want a workspace");
    void *ws = dev_copy(NULL, need);
    OK(cudnnConvolutionBackwardFilter(H, &one, xd, x, yd, g, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, ws, need, &one, wd, gw));
    double c2 = dot_dev(w, gw, nw);
    CHECK(close_to(c2, 2 * a, 1e-12), "accumulated <w, gw> = %.17g, want %.17g", c2, 2 * a);
    /* the algorithm's scratch is clobbered when it runs, as a real kernel's would be */
    unsigned char *wsh = malloc(need);
    host_copy(wsh, ws, need);
    size_t marked = 0;
    for (size_t i = 0; i < need; i++) marked += wsh[i] == 0xA5;
    CHECK(marked == need, "the workspace should have been scribbled on (%zu of %zu bytes)", marked, need);
    /* and one byte short of it is refused */
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionBackwardFilter(H, &one, xd, x, yd, g, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                                                  ws, need - 1, &one, wd, gw));

    /* bias gradient: the sum of g over n, h, w per channel, with beta accumulating */
    cudnnTensorDescriptor_t bd = tdesc(dt, 1, q.k, 1, 1);
    double *bh = malloc(q.k * 8), *gh = malloc(ny * 8);
    for (int i = 0; i < q.k; i++) bh[i] = 10;
    void *db = dev_copy(bh, q.k * 8);
    double half = 0.5;
    OK(cudnnConvolutionBackwardBias(H, &one, yd, g, &half, bd, db));
    host_copy(bh, db, q.k * 8);
    host_copy(gh, g, ny * 8);
    for (int k = 0; k < q.k; k++) {
        double s = 0;
        for (int n = 0; n < q.n; n++)
            for (int i = 0; i < oh * ow; i++) s += gh[((size_t)n * q.k + k) * oh * ow + i];
        CHECK(close_to(bh[k], s + 5, 1e-13), "db[%d] = %g, want %g", k, bh[k], s + 5);
    }
    free(bh); free(gh); free(wsh);
    cudaFree(db); cudaFree(ws);
    cudaFree(x); cudaFree(w); cudaFree(g); cudaFree(y); cudaFree(gx); cudaFree(gw);
    cudnnDestroyTensorDescriptor(xd); cudnnDestroyTensorDescriptor(yd); cudnnDestroyTensorDescriptor(bd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyConvolutionDescriptor(cd);
}

/* ---- 4. Find*Ex ---- */

static void test_find(void) {
    /* 3x3, stride 1: the FFT and Winograd algorithms join the GEMM ones */
    const cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    int N = 2, C = 3, Hh = 10, W = 10, K = 4;
    cudnnTensorDescriptor_t xd = tdesc(dt, N, C, Hh, W), yd = tdesc(dt, N, K, Hh, W);
    cudnnFilterDescriptor_t wd = fdesc(dt, K, C, 3, 3);
    cudnnConvolutionDescriptor_t cd = cdesc(1, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, dt);
    void *x = dev_copy(NULL, (size_t)N * C * Hh * W * 4), *w = dev_copy(NULL, (size_t)K * C * 9 * 4);
    void *y = dev_copy(NULL, (size_t)N * K * Hh * W * 4);
    cudaMemset(x, 0, (size_t)N * C * Hh * W * 4);
    cudaMemset(w, 0, (size_t)K * C * 9 * 4);
    cudaMemset(y, 0, (size_t)N * K * Hh * W * 4);
    size_t big = 64 << 20;
    void *ws = dev_copy(NULL, big);

    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    OK(cudnnFindConvolutionForwardAlgorithmEx(H, xd, x, wd, w, cd, yd, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf, ws, big));
    int ok = 0, with_ws = 0;
    bool distinct = true, sorted = true;
    for (int i = 0; i < got; i++) {
        if (pf[i].status != CUDNN_STATUS_SUCCESS) continue;
        ok++;
        with_ws += pf[i].memory > 0;
        CHECK(pf[i].time > 0, "algo %d time %g", (int)pf[i].algo, pf[i].time);
        CHECK(pf[i].mathType == CUDNN_FMA_MATH, "FMA math requested, algo %d reports %d", (int)pf[i].algo, (int)pf[i].mathType);
        if (i && pf[i - 1].status == CUDNN_STATUS_SUCCESS && pf[i - 1].time > pf[i].time) sorted = false;
        for (int j = 0; j < i; j++) distinct &= pf[j].algo != pf[i].algo;
    }
    CHECK(ok >= 3, "Find returned %d successful forward algorithms", ok);
    CHECK(with_ws >= 1, "no forward algorithm needed a workspace");
    CHECK(distinct && sorted, "forward results must be distinct and sorted by time");
    /* the output holds arbitrary values afterwards: here NaN */
    float y0;
    host_copy(&y0, y, 4);
    CHECK(isnan(y0), "Find left y[0] = %g; the emulation overwrites it with NaN", y0);

    /* without a workspace, the algorithms that need one report ALLOC_FAILED */
    OK(cudnnFindConvolutionForwardAlgorithmEx(H, xd, x, wd, w, cd, yd, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf, NULL, 0));
    int alloc_failed = 0;
    for (int i = 0; i < got; i++) {
        if (pf[i].status == CUDNN_STATUS_ALLOC_FAILED) alloc_failed++;
        if (pf[i].status == CUDNN_STATUS_SUCCESS) CHECK(pf[i].memory == 0, "algo %d needs %zu bytes but succeeded without",
                                                         (int)pf[i].algo, pf[i].memory);
    }
    CHECK(alloc_failed >= 1, "no algorithm reported ALLOC_FAILED without a workspace");
    /* requestedAlgoCount caps the answer */
    OK(cudnnFindConvolutionForwardAlgorithmEx(H, xd, x, wd, w, cd, yd, y, 2, &got, pf, ws, big));
    CHECK(got == 2, "requested 2 results, got %d", got);

    /* TF32 allowed: a tensor-op result joins, and is the fastest */
    OK(cudnnSetConvolutionMathType(cd, CUDNN_DEFAULT_MATH));
    OK(cudnnFindConvolutionForwardAlgorithmEx(H, xd, x, wd, w, cd, yd, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf, ws, big));
    CHECK(got > 0 && pf[0].mathType == CUDNN_TENSOR_OP_MATH, "default math: first result has math type %d",
          got > 0 ? (int)pf[0].mathType : -1);

    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    OK(cudnnFindConvolutionBackwardDataAlgorithmEx(H, wd, w, yd, y, cd, xd, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd,
                                                   ws, big));
    ok = 0;
    for (int i = 0; i < got; i++) ok += pd[i].status == CUDNN_STATUS_SUCCESS;
    CHECK(ok >= 3, "Find returned %d successful backward-data algorithms", ok);
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    OK(cudnnFindConvolutionBackwardFilterAlgorithmEx(H, xd, x, yd, y, cd, wd, w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                     pw, ws, big));
    ok = 0;
    bool nondet = false;
    for (int i = 0; i < got; i++) {
        ok += pw[i].status == CUDNN_STATUS_SUCCESS;
        nondet |= pw[i].determinism == CUDNN_NON_DETERMINISTIC;
    }
    CHECK(ok >= 3, "Find returned %d successful backward-filter algorithms", ok);
    CHECK(nondet, "backward filter ALGO_0 / ALGO_3 are non-deterministic in cuDNN");

    /* a workspace claimed larger than its allocation is refused */
    fprintf(stderr, "(one 'not device memory' message expected next)\n");
    void *small = dev_copy(NULL, 256);
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnFindConvolutionForwardAlgorithmEx(H, xd, x, wd, w, cd, yd, y, 4, &got, pf, small, 4096));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnFindConvolutionForwardAlgorithmEx(H, xd, x, wd, w, cd, yd, y, 0, &got, pf, ws, big));
    cudaFree(small);
    cudaFree(ws); cudaFree(x); cudaFree(w); cudaFree(y);
    cudnnDestroyTensorDescriptor(xd); cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyConvolutionDescriptor(cd);
}

/* ---- 5. batch norm ---- */

enum { BN_N = 3, BN_C = 2, BN_H = 2, BN_W = 3, BN_E = BN_N * BN_C * BN_H * BN_W };

/* y = BN_train(x) for the fixed scale/bias below, returned on the host */
static void bn_forward_host(cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t pd, const double *xh, void *scale, void *bias,
                            double eps, double *yh) {
    void *x = dev_copy(xh, BN_E * 8), *y = dev_copy(NULL, BN_E * 8);
    double one = 1, zero = 0;
    OK(cudnnBatchNormalizationForwardTraining(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y, pd, scale, bias, 0.0,
                                              NULL, NULL, eps, NULL, NULL));
    host_copy(yh, y, BN_E * 8);
    cudaFree(x);
    cudaFree(y);
}

static void test_batch_norm(void) {
    const cudnnDataType_t dt = CUDNN_DATA_DOUBLE;
    const int M = BN_N * BN_H * BN_W;
    double xh[BN_E], sc[BN_C] = { 1.5, -0.5 }, bi[BN_C] = { 0.25, 2 }, rm[BN_C] = { 0, 0 }, rv[BN_C] = { 1, 1 };
    for (int i = 0; i < BN_E; i++) xh[i] = rnd() * 3 + (i % 5);
    cudnnTensorDescriptor_t xd = tdesc(dt, BN_N, BN_C, BN_H, BN_W), pd, pa;
    OK(cudnnCreateTensorDescriptor(&pd));
    OK(cudnnCreateTensorDescriptor(&pa));
    OK(cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL));
    OK(cudnnDeriveBNTensorDescriptor(pa, xd, CUDNN_BATCHNORM_PER_ACTIVATION));
    cudnnDataType_t t;
    int d[8];
    OK(cudnnGetTensor4dDescriptor(pd, &t, &d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &d[6], &d[7]));
    CHECK(t == dt && d[0] == 1 && d[1] == BN_C && d[2] == 1 && d[3] == 1, "spatial BN descriptor [%d, %d, %d, %d]", d[0], d[1], d[2], d[3]);
    OK(cudnnGetTensor4dDescriptor(pa, &t, &d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &d[6], &d[7]));
    CHECK(d[0] == 1 && d[1] == BN_C && d[2] == BN_H && d[3] == BN_W, "per-activation BN descriptor [%d, %d, %d, %d]", d[0], d[1], d[2], d[3]);

    void *x = dev_copy(xh, sizeof xh), *y = dev_copy(NULL, sizeof xh), *s = dev_copy(sc, sizeof sc), *b = dev_copy(bi, sizeof bi);
    void *m = dev_copy(rm, sizeof rm), *v = dev_copy(rv, sizeof rv), *sm = dev_copy(NULL, sizeof rm), *si = dev_copy(NULL, sizeof rm);
    double one = 1, zero = 0, eps = 1e-3, f = 0.1;
    OK(cudnnBatchNormalizationForwardTraining(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y, pd, s, b, f, m, v, eps, sm, si));
    double yh[BN_E], smh[BN_C], sih[BN_C], rmh[BN_C], rvh[BN_C];
    host_copy(yh, y, sizeof yh);
    host_copy(smh, sm, sizeof smh);
    host_copy(sih, si, sizeof sih);
    host_copy(rmh, m, sizeof rmh);
    host_copy(rvh, v, sizeof rvh);
    for (int c = 0; c < BN_C; c++) {
        double mu = 0, var = 0;
        for (int n = 0; n < BN_N; n++)
            for (int i = 0; i < BN_H * BN_W; i++) mu += xh[(n * BN_C + c) * BN_H * BN_W + i];
        mu /= M;
        for (int n = 0; n < BN_N; n++)
            for (int i = 0; i < BN_H * BN_W; i++) var += pow(xh[(n * BN_C + c) * BN_H * BN_W + i] - mu, 2);
        var /= M;
        CHECK(close_to(smh[c], mu, 1e-14), "saved mean[%d] = %.17g, want %.17g", c, smh[c], mu);
        CHECK(close_to(sih[c], 1 / sqrt(var + eps), 1e-14), "saved inverse std[%d] = %.17g, want 1/sqrt(biased var + eps) = %.17g",
              c, sih[c], 1 / sqrt(var + eps));
        CHECK(close_to(rmh[c], 0.9 * 0 + 0.1 * mu, 1e-14), "running mean[%d] = %.17g", c, rmh[c]);
        CHECK(close_to(rvh[c], 0.9 * 1 + 0.1 * var * M / (M - 1), 1e-14), "running var[%d] = %.17g, want the unbiased update %.17g",
              c, rvh[c], 0.9 + 0.1 * var * M / (M - 1));
        for (int n = 0; n < BN_N; n++)
            for (int i = 0; i < BN_H * BN_W; i++) {
                int e = (n * BN_C + c) * BN_H * BN_W + i;
                double want = sc[c] * (xh[e] - mu) / sqrt(var + eps) + bi[c];
                CHECK(close_to(yh[e], want, 1e-13), "y[%d] = %.17g, want %.17g", e, yh[e], want);
            }
    }

    /* inference on given statistics */
    double em[BN_C] = { 0.5, -1 }, ev[BN_C] = { 2, 0.25 };
    void *emd = dev_copy(em, sizeof em), *evd = dev_copy(ev, sizeof ev);
    OK(cudnnBatchNormalizationForwardInference(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y, pd, s, b, emd, evd, eps));
    host_copy(yh, y, sizeof yh);
    for (int e = 0; e < BN_E; e++) {
        int c = (e / (BN_H * BN_W)) % BN_C;
        double want = sc[c] * (xh[e] - em[c]) / sqrt(ev[c] + eps) + bi[c];
        CHECK(close_to(yh[e], want, 1e-14), "inference y[%d] = %.17g, want %.17g", e, yh[e], want);
    }

    /* backward against central differences of L(x) = <dy, BN_train(x)> */
    double dyh[BN_E], dxh[BN_E], dsh[BN_C], dbh[BN_C];
    for (int i = 0; i < BN_E; i++) dyh[i] = rnd();
    void *dy = dev_copy(dyh, sizeof dyh), *dx = dev_copy(NULL, sizeof dxh), *ds = dev_copy(NULL, sizeof dsh), *db = dev_copy(NULL, sizeof dbh);
    OK(cudnnBatchNormalizationForwardTraining(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y, pd, s, b, 1.0, NULL, NULL,
                                              eps, sm, si));
    OK(cudnnBatchNormalizationBackward(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd, x, xd, dy, xd, dx, pd, s, ds, db,
                                       eps, sm, si));
    host_copy(dxh, dx, sizeof dxh);
    host_copy(dsh, ds, sizeof dsh);
    host_copy(dbh, db, sizeof dbh);
    double worst = 0;
    for (int i = 0; i < BN_E; i++) {
        double xp[BN_E], yp[BN_E], ym[BN_E], h = 1e-5, lp = 0, lm = 0;
        memcpy(xp, xh, sizeof xp);
        xp[i] += h;
        bn_forward_host(xd, pd, xp, s, b, eps, yp);
        xp[i] -= 2 * h;
        bn_forward_host(xd, pd, xp, s, b, eps, ym);
        for (int j = 0; j < BN_E; j++) {
            lp += dyh[j] * yp[j];
            lm += dyh[j] * ym[j];
        }
        double e = fabs((lp - lm) / (2 * h) - dxh[i]);
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-6, "batch norm dx differs from central differences by %g", worst);
    for (int c = 0; c < BN_C; c++) {
        double sdy = 0, sdyx = 0;
        for (int n = 0; n < BN_N; n++)
            for (int i = 0; i < BN_H * BN_W; i++) {
                int e = (n * BN_C + c) * BN_H * BN_W + i;
                sdy += dyh[e];
                sdyx += dyh[e] * (xh[e] - smh[c]) * sih[c];
            }
        CHECK(close_to(dbh[c], sdy, 1e-13), "dbias[%d] = %g, want %g", c, dbh[c], sdy);
        CHECK(close_to(dsh[c], sdyx, 1e-12), "dscale[%d] = %g, want %g", c, dsh[c], sdyx);
    }
    /* without saved statistics the backward recomputes them from x and epsilon */
    double dx2[BN_E];
    OK(cudnnBatchNormalizationBackward(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd, x, xd, dy, xd, dx, pd, s, ds, db,
                                       eps, NULL, NULL));
    host_copy(dx2, dx, sizeof dx2);
    for (int i = 0; i < BN_E; i++) CHECK(close_to(dx2[i], dxh[i], 1e-12), "recomputed-stats dx[%d] %g vs %g", i, dx2[i], dxh[i]);

    /* the documented parameter rules */
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnBatchNormalizationForwardTraining(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y,
                                                                          pd, s, b, f, m, v, -1e-5, sm, si));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnBatchNormalizationForwardTraining(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y,
                                                                          pd, s, b, f, m, v, eps, sm, NULL));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnBatchNormalizationForwardTraining(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y,
                                                                          pd, s, b, f, m, NULL, eps, sm, si));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnBatchNormalizationForwardTraining(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y,
                                                                          pa, s, b, f, m, v, eps, sm, si));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnBatchNormalizationBackward(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd, x,
                                                                   xd, dy, xd, dx, pd, s, ds, db, eps, sm, NULL));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnDeriveBNTensorDescriptor(pa, xd, (cudnnBatchNormMode_t)7));
    /* a float parameter descriptor with double data */
    cudnnTensorDescriptor_t pf = tdesc(CUDNN_DATA_FLOAT, 1, BN_C, 1, 1);
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnBatchNormalizationForwardInference(H, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y,
                                                                           pf, s, b, emd, evd, eps));
    cudnnDestroyTensorDescriptor(pf);

    cudaFree(x); cudaFree(y); cudaFree(s); cudaFree(b); cudaFree(m); cudaFree(v); cudaFree(sm); cudaFree(si);
    cudaFree(emd); cudaFree(evd); cudaFree(dy); cudaFree(dx); cudaFree(ds); cudaFree(db);
    cudnnDestroyTensorDescriptor(xd); cudnnDestroyTensorDescriptor(pd); cudnnDestroyTensorDescriptor(pa);
}

/* ---- 6. pooling ---- */

static void test_pooling(void) {
    const float x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    float y[4], dx[9];
    void *xd_ = dev_copy(x, sizeof x), *yd_ = dev_copy(NULL, sizeof y), *dyd = dev_copy(NULL, sizeof y), *dxd = dev_copy(NULL, sizeof dx);
    cudnnTensorDescriptor_t xd = tdesc(CUDNN_DATA_FLOAT, 1, 1, 3, 3), yd = tdesc(CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cudnnPoolingDescriptor_t pd;
    OK(cudnnCreatePoolingDescriptor(&pd));
    float one = 1, zero = 0;
    /* 2x2 windows, pad 1, stride 2: the windows hold {1}, {2,3}, {4,7}, {5,6,8,9} */
    const cudnnPoolingMode_t modes[3] = { CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
                                          CUDNN_POOLING_MAX };
    const float want[3][4] = { { 0.25f, 1.25f, 2.75f, 7 }, { 1, 2.5f, 5.5f, 7 }, { 1, 3, 7, 9 } };
    for (int m = 0; m < 3; m++) {
        OK(cudnnSetPooling2dDescriptor(pd, modes[m], CUDNN_PROPAGATE_NAN, 2, 2, 1, 1, 2, 2));
        int n, c, h, w;
        OK(cudnnGetPooling2dForwardOutputDim(pd, xd, &n, &c, &h, &w));
        CHECK(n == 1 && c == 1 && h == 2 && w == 2, "pooling output [%d, %d, %d, %d]", n, c, h, w);
        OK(cudnnPoolingForward(H, pd, &one, xd, xd_, &zero, yd, yd_));
        host_copy(y, yd_, sizeof y);
        for (int i = 0; i < 4; i++) CHECK(y[i] == want[m][i], "pool mode %d y[%d] = %g, want %g", (int)modes[m], i, y[i], want[m][i]);
    }
    /* backward: average-include spreads dy/4 over the image elements of each window; max routes
     * dy to the max */
    const float dy[4] = { 4, 8, 12, 16 };
    cudaMemcpy(dyd, dy, sizeof dy, cudaMemcpyHostToDevice);
    OK(cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_PROPAGATE_NAN, 2, 2, 1, 1, 2, 2));
    OK(cudnnPoolingForward(H, pd, &one, xd, xd_, &zero, yd, yd_));
    OK(cudnnPoolingBackward(H, pd, &one, yd, yd_, yd, dyd, xd, xd_, &zero, xd, dxd));
    host_copy(dx, dxd, sizeof dx);
    const float want_avg[9] = { 1, 2, 2, 3, 4, 4, 3, 4, 4 };
    for (int i = 0; i < 9; i++) CHECK(dx[i] == want_avg[i], "avg dx[%d] = %g, want %g", i, dx[i], want_avg[i]);
    OK(cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2, 2, 1, 1, 2, 2));
    OK(cudnnPoolingForward(H, pd, &one, xd, xd_, &zero, yd, yd_));
    OK(cudnnPoolingBackward(H, pd, &one, yd, yd_, yd, dyd, xd, xd_, &zero, xd, dxd));
    host_copy(dx, dxd, sizeof dx);
    const float want_max[9] = { 4, 0, 8, 0, 0, 0, 12, 0, 16 };
    for (int i = 0; i < 9; i++) CHECK(dx[i] == want_max[i], "max dx[%d] = %g, want %g", i, dx[i], want_max[i]);

    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 0, 2, 0, 0, 1, 1));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2, 2, -1, 0, 1, 1));
    cudnnTensorDescriptor_t yb = tdesc(CUDNN_DATA_FLOAT, 1, 2, 2, 2);
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnPoolingForward(H, pd, &one, xd, xd_, &zero, yb, yd_));
    cudnnDestroyTensorDescriptor(yb);
    cudnnDestroyPoolingDescriptor(pd);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudaFree(xd_); cudaFree(yd_); cudaFree(dyd); cudaFree(dxd);
}

/* ---- 7. cudnnAddTensor broadcasting ---- */

static void test_add_tensor(void) {
    const int N = 2, C = 3, Hh = 2, W = 2, E = N * C * Hh * W;
    double b[3] = { 1, 10, 100 }, c[E], out[E];
    for (int i = 0; i < E; i++) c[i] = i;
    void *bd_ = dev_copy(b, sizeof b), *cd_ = dev_copy(c, sizeof c);
    cudnnTensorDescriptor_t bd = tdesc(CUDNN_DATA_DOUBLE, 1, C, 1, 1), cd = tdesc(CUDNN_DATA_DOUBLE, N, C, Hh, W);
    double two = 2, half = 0.5;
    OK(cudnnAddTensor(H, &two, bd, bd_, &half, cd, cd_));
    host_copy(out, cd_, sizeof out);
    for (int i = 0; i < E; i++) {
        double want = 2 * b[(i / (Hh * W)) % C] + 0.5 * i;
        CHECK(out[i] == want, "add y[%d] = %g, want %g", i, out[i], want);
    }
    cudnnTensorDescriptor_t bad = tdesc(CUDNN_DATA_DOUBLE, 1, 2, 1, 1), badt = tdesc(CUDNN_DATA_FLOAT, 1, C, 1, 1);
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnAddTensor(H, &two, bad, bd_, &half, cd, cd_));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnAddTensor(H, &two, badt, bd_, &half, cd, cd_));
    cudnnDestroyTensorDescriptor(bad); cudnnDestroyTensorDescriptor(badt);
    cudnnDestroyTensorDescriptor(bd); cudnnDestroyTensorDescriptor(cd);
    cudaFree(bd_); cudaFree(cd_);
}

/* ---- 8. what must be refused ---- */

static void test_refusals(void) {
    const cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    cudnnTensorDescriptor_t xd = tdesc(dt, 1, 4, 5, 5), yd = tdesc(dt, 1, 2, 3, 3), yw = tdesc(dt, 1, 2, 4, 4);
    cudnnFilterDescriptor_t wd = fdesc(dt, 2, 4, 3, 3), w2 = fdesc(dt, 2, 3, 3, 3), wbig = fdesc(dt, 2, 4, 7, 7);
    cudnnConvolutionDescriptor_t cd = cdesc(0, 0, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, dt);
    cudnnConvolutionDescriptor_t cs2 = cdesc(0, 0, 2, 2, 1, 1, 1, CUDNN_CROSS_CORRELATION, dt);
    cudnnConvolutionDescriptor_t cdd = cdesc(0, 0, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_DOUBLE);
    void *x = dev_copy(NULL, 100 * 4), *w = dev_copy(NULL, 72 * 4), *y = dev_copy(NULL, 18 * 4);
    float one = 1, zero = 0;
    size_t sz;
    int n, c, h, wo;

    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(NULL, &one, xd, x, wd, w, cd, 0, NULL, 0, &zero, yd, y));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, NULL, xd, x, wd, w, cd, 0, NULL, 0, &zero, yd, y));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, &one, xd, x, w2, w, cd, 0, NULL, 0, &zero, yd, y));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnGetConvolution2dForwardOutputDim(cd, xd, w2, &n, &c, &h, &wo));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnGetConvolution2dForwardOutputDim(cd, xd, wbig, &n, &c, &h, &wo));
    EXPECT(CUDNN_STATUS_NOT_SUPPORTED, cudnnConvolutionForward(H, &one, xd, x, wd, w, cd, 0, NULL, 0, &zero, yw, y));
    EXPECT(CUDNN_STATUS_NOT_SUPPORTED, cudnnConvolutionForward(H, &one, xd, x, wd, w, cdd, 0, NULL, 0, &zero, yd, y));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, &one, xd, x, wd, w, cd, (cudnnConvolutionFwdAlgo_t)99, NULL, 0,
                                                           &zero, yd, y));
    /* Winograd wants unit stride */
    EXPECT(CUDNN_STATUS_NOT_SUPPORTED, cudnnGetConvolutionForwardWorkspaceSize(H, xd, wd, cs2, yd,
                                                                               CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, &sz));
    OK(cudnnGetConvolutionForwardWorkspaceSize(H, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, &sz));
    /* a GEMM algorithm without its workspace */
    OK(cudnnGetConvolutionForwardWorkspaceSize(H, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &sz));
    CHECK(sz > 0, "GEMM should want a workspace");
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, &one, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, 0,
                                                           &zero, yd, y));
    fprintf(stderr, "(two 'not device memory' messages expected next)\n");
    float hostbuf[100];
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, &one, xd, hostbuf, wd, w, cd, 0, NULL, 0, &zero, yd, y));
    /* a buffer too small for what its descriptor spans */
    void *tiny = dev_copy(NULL, 16);
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, &one, xd, x, wd, w, cd, 0, NULL, 0, &zero, yd, tiny));
    cudaFree(tiny);

    cudnnConvolutionDescriptor_t cz;
    OK(cudnnCreateConvolutionDescriptor(&cz));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolution2dDescriptor(cz, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, dt));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolution2dDescriptor(cz, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION, dt));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolution2dDescriptor(cz, 0, 0, 1, 1, 0, 1, CUDNN_CROSS_CORRELATION, dt));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolutionGroupCount(cz, 0));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolutionMathType(cz, (cudnnMathType_t)9));
    /* never set */
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, &one, xd, x, wd, w, cz, 0, NULL, 0, &zero, yd, y));
    OK(cudnnDestroyConvolutionDescriptor(cz));
    fprintf(stderr, "(two 'not a live' messages expected next)\n");
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(H, &one, xd, x, wd, w, cz, 0, NULL, 0, &zero, yd, y));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnDestroyConvolutionDescriptor(cz));

    cudnnTensorDescriptor_t t;
    OK(cudnnCreateTensorDescriptor(&t));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, dt, 1, -2, 3, 3));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetTensor4dDescriptor(t, (cudnnTensorFormat_t)5, dt, 1, 2, 3, 3));
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetTensor4dDescriptorEx(t, dt, 1, 2, 3, 3, 18, -9, 3, 1));
    EXPECT(CUDNN_STATUS_NOT_SUPPORTED, cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, dt, 65536, 65536, 2, 1));
    OK(cudnnDestroyTensorDescriptor(t));

    /* bias gradient wants a 1xCx1x1 destination */
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionBackwardBias(H, &one, yd, y, &zero, yd, y));

    CHECK(CUDNN_STATUS_BAD_PARAM == 2000 && CUDNN_STATUS_NOT_SUPPORTED == 3000 && CUDNN_STATUS_EXECUTION_FAILED == 5000,
          "cuDNN 9 numbering");
    CHECK(strcmp(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM") == 0, "error string %s",
          cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM));
    CHECK(strcmp(cudnnGetErrorString(CUDNN_STATUS_ALLOC_FAILED), "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED") == 0,
          "ALLOC_FAILED is an alias in cuDNN 9");
    char msg[256];
    cudnnGetLastErrorString(msg, sizeof msg);
    CHECK(strstr(msg, "cudnnConvolutionBackwardBias") != NULL, "last error: %s", msg);
    CHECK(cudnnGetVersion() / 10000 == 9, "version %zu", cudnnGetVersion());

    cudaFree(x); cudaFree(w); cudaFree(y);
    cudnnDestroyTensorDescriptor(xd); cudnnDestroyTensorDescriptor(yd); cudnnDestroyTensorDescriptor(yw);
    cudnnDestroyFilterDescriptor(wd); cudnnDestroyFilterDescriptor(w2); cudnnDestroyFilterDescriptor(wbig);
    cudnnDestroyConvolutionDescriptor(cd); cudnnDestroyConvolutionDescriptor(cs2); cudnnDestroyConvolutionDescriptor(cdd);
}

/* ---- 9. streams and the call-time snapshot ---- */

static void test_snapshot(void) {
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st) == cudaSuccess, "stream");
    OK(cudnnSetStream(H, st));
    cudaStream_t back;
    OK(cudnnGetStream(H, &back));
    CHECK(back == st, "cudnnGetStream");
    const float x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, w[4] = { 1, 2, 3, 4 };
    float y[4];
    void *dx = dev_copy(x, sizeof x), *dw = dev_copy(w, sizeof w), *dy = dev_copy(NULL, sizeof y);
    cudnnTensorDescriptor_t xd = tdesc(CUDNN_DATA_FLOAT, 1, 1, 3, 3), yd = tdesc(CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cudnnFilterDescriptor_t wd = fdesc(CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cudnnConvolutionDescriptor_t cd = cdesc(0, 0, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    float alpha = 1, beta = 0;
    OK(cudnnConvolutionForward(H, &alpha, xd, dx, wd, dw, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &beta, yd, dy));
    /* none of this may reach the queued work */
    alpha = 100;
    beta = 7;
    OK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CONVOLUTION, CUDNN_DATA_FLOAT));
    OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, 1, 1, 4));
    OK(cudnnDestroyFilterDescriptor(wd));
    CHECK(cudaStreamSynchronize(st) == cudaSuccess, "synchronise");
    OK(cudnnSetStream(H, NULL));
    host_copy(y, dy, sizeof y);
    const float want[4] = { 37, 47, 67, 77 };
    for (int i = 0; i < 4; i++) CHECK(y[i] == want[i], "snapshot y[%d] = %g, want %g", i, y[i], want[i]);
    cudnnDestroyTensorDescriptor(xd); cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyConvolutionDescriptor(cd);
    cudaFree(dx); cudaFree(dw); cudaFree(dy);
    cudaStreamDestroy(st);
}

/* ---- 10. a poisoned context (last: the sticky error stays) ---- */

static void test_sticky(void) {
    cudnnTensorDescriptor_t bd = tdesc(CUDNN_DATA_FLOAT, 1, 1, 1, 1);
    void *a = dev_copy(NULL, 4), *b = dev_copy(NULL, 4);
    float one = 1;
    fprintf(stderr, "(an injected device fault is reported next)\n");
    dgemu_fault(cudaErrorIllegalAddress, "test_cudnn_emu: injected fault");
    EXPECT(CUDNN_STATUS_EXECUTION_FAILED, cudnnAddTensor(H, &one, bd, a, &one, bd, b));
}

int main(void) {
    OK(cudnnCreate(&H));
    test_hand_conv();
    test_general_conv(CUDNN_DATA_FLOAT);
    test_general_conv(CUDNN_DATA_DOUBLE);
    test_adjoint(CUDNN_CROSS_CORRELATION);
    test_adjoint(CUDNN_CONVOLUTION);
    test_find();
    test_batch_norm();
    test_pooling();
    test_add_tensor();
    test_refusals();
    test_snapshot();
    OK(cudnnDestroy(H));
    OK(cudnnCreate(&H));
    test_sticky();
    printf("test_cudnn_emu: %d checks, %d failed\n", g_checks, g_failures);
    return g_failures ? 1 : 0;
}
