/* test/cuda_emu/cudnn_norm_pool.c — the emulated cuDNN's batch normalization and pooling (see
 * cudnn.c). */
#include "cudnn_internal.h"

/* ================= batch normalization ================= */

/* The per-feature parameter descriptor a mode wants for x: 1xCx1x1 (spatial) or 1xCxHxW (per
 * activation), float for half/bfloat16 data, the data type otherwise. */
static tens bn_param_shape(const tens *x, bool spatial) {
    tens p = { .dt = (x->dt == CUDNN_DATA_HALF || x->dt == CUDNN_DATA_BFLOAT16) ? CUDNN_DATA_FLOAT : x->dt,
               .d = { 1, x->d[1], spatial ? 1 : x->d[2], spatial ? 1 : x->d[3] } };
    packed(&p, CUDNN_TENSOR_NCHW);
    return p;
}

static bool bn_mode_ok(cudnnBatchNormMode_t m) { return (unsigned)m <= CUDNN_BATCHNORM_SPATIAL_PERSISTENT; }

cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derivedBnDesc, const cudnnTensorDescriptor_t xDesc,
                                            cudnnBatchNormMode_t mode) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    tens x;
    st_t rc = tensor_desc(fn, derivedBnDesc);
    if (!rc) rc = get_tensor(fn, "xDesc", xDesc, &x);
    if (rc) return rc;
    if (!bn_mode_ok(mode)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnBatchNormMode_t", (int)mode);
    derivedBnDesc->t = bn_param_shape(&x, mode != CUDNN_BATCHNORM_PER_ACTIVATION);
    derivedBnDesc->set = true;
    return OK;
}

/* A batch norm's tensors: x, the output or gradient tensors (same dims and type as x), and the
 * per-feature parameter descriptor. A feature is a channel (spatial: its N*H*W values are
 * normalised together) or one (c, h, w) position (per activation: over N). */
typedef struct bn_geom {
    tens x, y, z, p;              /* z: dx in the backward, unused otherwise */
    bool spatial;
} bn_geom;

static st_t bn_setup(const char *fn, cudnnBatchNormMode_t mode, cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd,
                     const char *yname, cudnnTensorDescriptor_t zd, cudnnTensorDescriptor_t pd, const char *pname,
                     double eps, bn_geom *g) {
    if (!bn_mode_ok(mode)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnBatchNormMode_t", (int)mode);
    st_t rc = get_tensor(fn, "xDesc", xd, &g->x);
    if (!rc) rc = get_tensor(fn, yname, yd, &g->y);
    if (!rc && zd) rc = get_tensor(fn, "dxDesc", zd, &g->z);
    if (!rc) rc = get_tensor(fn, pname, pd, &g->p);
    if (rc) return rc;
    if (!zd) g->z = g->y;
    if (!same_dims(&g->x, &g->y) || !same_dims(&g->x, &g->z))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and %s%s differ in dims", yname, zd ? " / dxDesc" : "");
    if (g->x.dt != g->y.dt || g->x.dt != g->z.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and %s differ in data type", yname);
    if (!is_fd(g->x.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(g->x.dt));
    g->spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
    tens want = bn_param_shape(&g->x, g->spatial);
    if (!same_dims(&g->p, &want))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is [%lld, %lld, %lld, %lld], this mode needs [1, %lld, %lld, %lld]", pname,
                    (long long)g->p.d[0], (long long)g->p.d[1], (long long)g->p.d[2], (long long)g->p.d[3],
                    (long long)want.d[1], (long long)want.d[2], (long long)want.d[3]);
    if (g->p.dt != want.dt)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is %s, %s data needs %s parameters", pname, dt_name(g->p.dt),
                    dt_name(g->x.dt), dt_name(want.dt));
    if (!(eps >= CUDNN_BN_MIN_EPSILON))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "epsilon %g is below CUDNN_BN_MIN_EPSILON (%g)", eps, CUDNN_BN_MIN_EPSILON);
    return OK;
}

static int64_t bn_features(const bn_geom *g) { return g->spatial ? g->x.d[1] : g->x.d[1] * g->x.d[2] * g->x.d[3]; }
static int64_t bn_count(const bn_geom *g) { return g->spatial ? g->x.d[0] * g->x.d[2] * g->x.d[3] : g->x.d[0]; }

/* Offset in t of value e of feature f. */
static int64_t bn_at(const bn_geom *g, const tens *t, int64_t f, int64_t e) {
    int64_t hw = g->x.d[2] * g->x.d[3];
    if (g->spatial) return at(t, e / hw, f, (e % hw) / g->x.d[3], e % g->x.d[3]);
    return at(t, e, f / hw, (f % hw) / g->x.d[3], f % g->x.d[3]);
}
/* Offset of feature f in the parameter tensor. */
static int64_t bn_pat(const bn_geom *g, int64_t f) {
    if (g->spatial) return at(&g->p, 0, f, 0, 0);
    int64_t hw = g->x.d[2] * g->x.d[3];
    return at(&g->p, 0, f / hw, (f % hw) / g->x.d[3], f % g->x.d[3]);
}

/* The batch mean and biased variance of feature f, two passes in double. */
static void bn_stats(const bn_geom *g, const void *x, int64_t f, double *mean, double *var) {
    int64_t m = bn_count(g);
    double s = 0, q = 0;
    for (int64_t e = 0; e < m; e++) s += ld(x, g->x.dt, bn_at(g, &g->x, f, e));
    s /= (double)m;
    for (int64_t e = 0; e < m; e++) {
        double d = ld(x, g->x.dt, bn_at(g, &g->x, f, e)) - s;
        q += d * d;
    }
    *mean = s;
    *var = q / (double)m;
}

static size_t bn_param_bytes(const bn_geom *g) { return bytes_of(&g->p); }

typedef struct bn_fwd_work {
    bn_geom g;
    bool training;
    double alpha, beta, factor, eps;
    const void *x, *scale, *bias;
    void *y;
    void *run_mean, *run_var;     /* training: updated when given; inference: read (est. mean / variance) */
    void *save_mean, *save_inv;
} bn_fwd_work;

static int bn_fwd_run(void *arg) {
    bn_fwd_work *k = arg;
    const bn_geom *g = &k->g;
    cudnnDataType_t pt = g->p.dt;
    int64_t m = bn_count(g);
    for (int64_t f = 0; f < bn_features(g); f++) {
        int64_t pi = bn_pat(g, f);
        double mean, var;
        if (k->training) bn_stats(g, k->x, f, &mean, &var);
        else {
            mean = ld(k->run_mean, pt, pi);
            var = ld(k->run_var, pt, pi);
        }
        double inv = 1.0 / sqrt(var + k->eps);
        double sc = ld(k->scale, pt, pi), bi = ld(k->bias, pt, pi);
        for (int64_t e = 0; e < m; e++) {
            double xv = ld(k->x, g->x.dt, bn_at(g, &g->x, f, e));
            blend(k->y, &g->y, bn_at(g, &g->y, f, e), sc * (xv - mean) * inv + bi, k->alpha, k->beta);
        }
        if (!k->training) continue;
        if (k->run_mean) {
            /* the running variance takes the unbiased estimate (NaN when one value per feature:
             * it is undefined there); factor 1 replaces, without reading what was there (the first
             * call of a training run may find garbage) */
            double unbiased = var * (double)m / (double)(m - 1);
            double om = k->factor == 1.0 ? 0 : ld(k->run_mean, pt, pi), ov = k->factor == 1.0 ? 0 : ld(k->run_var, pt, pi);
            stv(k->run_mean, pt, pi, (1 - k->factor) * om + k->factor * mean);
            stv(k->run_var, pt, pi, (1 - k->factor) * ov + k->factor * unbiased);
        }
        if (k->save_mean) {
            stv(k->save_mean, pt, pi, mean);
            stv(k->save_inv, pt, pi, inv);
        }
    }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha,
                                                     const void *beta, const cudnnTensorDescriptor_t xDesc,
                                                     const void *x, const cudnnTensorDescriptor_t yDesc, void *y,
                                                     const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
                                                     const void *bnScale, const void *bnBias,
                                                     double exponentialAverageFactor, void *resultRunningMean,
                                                     void *resultRunningVariance, double epsilon, void *resultSaveMean,
                                                     void *resultSaveInvVariance) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    bn_geom g;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = bn_setup(fn, mode, xDesc, yDesc, "yDesc", NULL, bnScaleBiasMeanVarDesc, "bnScaleBiasMeanVarDesc", epsilon, &g);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (!resultRunningMean != !resultRunningVariance)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "resultRunningMean and resultRunningVariance must both be given or both be NULL");
    if (!resultSaveMean != !resultSaveInvVariance)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "resultSaveMean and resultSaveInvVariance must both be given or both be NULL");
    size_t pb = bn_param_bytes(&g);
    if ((rc = need_dev(fn, "x", x, bytes_of(&g.x))) || (rc = need_dev(fn, "y", y, bytes_of(&g.y))) ||
        (rc = need_dev(fn, "bnScale", bnScale, pb)) || (rc = need_dev(fn, "bnBias", bnBias, pb)))
        return rc;
    if (resultRunningMean && ((rc = need_dev(fn, "resultRunningMean", resultRunningMean, pb)) ||
                              (rc = need_dev(fn, "resultRunningVariance", resultRunningVariance, pb))))
        return rc;
    if (resultSaveMean && ((rc = need_dev(fn, "resultSaveMean", resultSaveMean, pb)) ||
                           (rc = need_dev(fn, "resultSaveInvVariance", resultSaveInvVariance, pb))))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bn_fwd_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (bn_fwd_work){ .g = g, .training = true, .alpha = scal(alpha, g.x.dt), .beta = scal(beta, g.x.dt),
                        .factor = exponentialAverageFactor, .eps = epsilon, .x = x, .scale = bnScale, .bias = bnBias,
                        .y = y, .run_mean = resultRunningMean, .run_var = resultRunningVariance,
                        .save_mean = resultSaveMean, .save_inv = resultSaveInvVariance };
    return submit(fn, s, bn_fwd_run, k);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t handle, cudnnBatchNormMode_t mode,
                                                      const void *alpha, const void *beta,
                                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                                      const cudnnTensorDescriptor_t yDesc, void *y,
                                                      const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
                                                      const void *bnScale, const void *bnBias,
                                                      const void *estimatedMean, const void *estimatedVariance,
                                                      double epsilon) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    bn_geom g;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = bn_setup(fn, mode, xDesc, yDesc, "yDesc", NULL, bnScaleBiasMeanVarDesc, "bnScaleBiasMeanVarDesc", epsilon, &g);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    size_t pb = bn_param_bytes(&g);
    if ((rc = need_dev(fn, "x", x, bytes_of(&g.x))) || (rc = need_dev(fn, "y", y, bytes_of(&g.y))) ||
        (rc = need_dev(fn, "bnScale", bnScale, pb)) || (rc = need_dev(fn, "bnBias", bnBias, pb)) ||
        (rc = need_dev(fn, "estimatedMean", estimatedMean, pb)) ||
        (rc = need_dev(fn, "estimatedVariance", estimatedVariance, pb)))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bn_fwd_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (bn_fwd_work){ .g = g, .training = false, .alpha = scal(alpha, g.x.dt), .beta = scal(beta, g.x.dt),
                        .eps = epsilon, .x = x, .scale = bnScale, .bias = bnBias, .y = y,
                        .run_mean = (void *)estimatedMean, .run_var = (void *)estimatedVariance };
    return submit(fn, s, bn_fwd_run, k);
}

typedef struct bn_bwd_work {
    bn_geom g;
    double a_data, b_data, a_param, b_param, eps;
    const void *x, *dy, *scale, *saved_mean, *saved_inv;
    void *dx, *dscale, *dbias;
} bn_bwd_work;

static int bn_bwd_run(void *arg) {
    bn_bwd_work *k = arg;
    const bn_geom *g = &k->g;
    cudnnDataType_t pt = g->p.dt, dt = g->x.dt;
    int64_t m = bn_count(g);
    for (int64_t f = 0; f < bn_features(g); f++) {
        int64_t pi = bn_pat(g, f);
        double mean, inv;
        if (k->saved_mean) {
            mean = ld(k->saved_mean, pt, pi);
            inv = ld(k->saved_inv, pt, pi);
        } else {
            double var;
            bn_stats(g, k->x, f, &mean, &var);
            inv = 1.0 / sqrt(var + k->eps);
        }
        /* dbias = sum dy, dscale = sum dy * xhat; dx = scale * inv / M * (M dy - dbias - xhat dscale) */
        double sdy = 0, sdyx = 0;
        for (int64_t e = 0; e < m; e++) {
            double d = ld(k->dy, dt, bn_at(g, &g->y, f, e));
            double xh = (ld(k->x, dt, bn_at(g, &g->x, f, e)) - mean) * inv;
            sdy += d;
            sdyx += d * xh;
        }
        double sc = ld(k->scale, pt, pi), cm = (double)m;
        for (int64_t e = 0; e < m; e++) {
            double d = ld(k->dy, dt, bn_at(g, &g->y, f, e));
            double xh = (ld(k->x, dt, bn_at(g, &g->x, f, e)) - mean) * inv;
            blend(k->dx, &g->z, bn_at(g, &g->z, f, e), sc * inv / cm * (cm * d - sdy - xh * sdyx), k->a_data, k->b_data);
        }
        blend(k->dscale, &g->p, pi, sdyx, k->a_param, k->b_param);
        blend(k->dbias, &g->p, pi, sdy, k->a_param, k->b_param);
    }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t handle, cudnnBatchNormMode_t mode,
                                              const void *alphaDataDiff, const void *betaDataDiff,
                                              const void *alphaParamDiff, const void *betaParamDiff,
                                              const cudnnTensorDescriptor_t xDesc, const void *x,
                                              const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                              const cudnnTensorDescriptor_t dxDesc, void *dx,
                                              const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void *bnScale,
                                              void *dBnScaleResult, void *dBnBiasResult, double epsilon,
                                              const void *savedMean, const void *savedInvVariance) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    bn_geom g;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = bn_setup(fn, mode, xDesc, dyDesc, "dyDesc", dxDesc, dBnScaleBiasDesc, "dBnScaleBiasDesc", epsilon, &g);
    if (!rc) rc = need_host(fn, "alphaDataDiff", alphaDataDiff);
    if (!rc) rc = need_host(fn, "betaDataDiff", betaDataDiff);
    if (!rc) rc = need_host(fn, "alphaParamDiff", alphaParamDiff);
    if (!rc) rc = need_host(fn, "betaParamDiff", betaParamDiff);
    if (rc) return rc;
    if (!savedMean != !savedInvVariance)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "savedMean and savedInvVariance must both be given or both be NULL");
    size_t pb = bn_param_bytes(&g);
    if ((rc = need_dev(fn, "x", x, bytes_of(&g.x))) || (rc = need_dev(fn, "dy", dy, bytes_of(&g.y))) ||
        (rc = need_dev(fn, "dx", dx, bytes_of(&g.z))) || (rc = need_dev(fn, "bnScale", bnScale, pb)) ||
        (rc = need_dev(fn, "dBnScaleResult", dBnScaleResult, pb)) || (rc = need_dev(fn, "dBnBiasResult", dBnBiasResult, pb)))
        return rc;
    if (savedMean && ((rc = need_dev(fn, "savedMean", savedMean, pb)) ||
                      (rc = need_dev(fn, "savedInvVariance", savedInvVariance, pb))))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bn_bwd_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    cudnnDataType_t dt = g.x.dt;
    *k = (bn_bwd_work){ .g = g, .a_data = scal(alphaDataDiff, dt), .b_data = scal(betaDataDiff, dt),
                        .a_param = scal(alphaParamDiff, dt), .b_param = scal(betaParamDiff, dt), .eps = epsilon, .x = x,
                        .dy = dy, .scale = bnScale, .saved_mean = savedMean, .saved_inv = savedInvVariance, .dx = dx,
                        .dscale = dBnScaleResult, .dbias = dBnBiasResult };
    return submit(fn, s, bn_bwd_run, k);
}

/* ================= pooling ================= */

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *poolingDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!poolingDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "poolingDesc is NULL");
    *poolingDesc = obj_new(sizeof **poolingDesc, OBJ_POOL);
    return *poolingDesc ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
}

cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t poolingDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!poolingDesc) return OK;
    return obj_free(poolingDesc, OBJ_POOL) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live pooling descriptor (destroyed twice?)", (void *)poolingDesc);
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t poolingDesc, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t maxpoolingNanOpt, int windowHeight, int windowWidth,
                                          int verticalPadding, int horizontalPadding, int verticalStride,
                                          int horizontalStride) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    if (!poolingDesc) return fail(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc is NULL");
    if (!reg_is(poolingDesc, OBJ_POOL)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live pooling descriptor", (void *)poolingDesc);
    if ((unsigned)mode > CUDNN_POOLING_MAX_DETERMINISTIC) return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnPoolingMode_t", (int)mode);
    if ((unsigned)maxpoolingNanOpt > CUDNN_PROPAGATE_NAN)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "maxpoolingNanOpt %d is not a cudnnNanPropagation_t", (int)maxpoolingNanOpt);
    if (windowHeight <= 0 || windowWidth <= 0 || verticalStride <= 0 || horizontalStride <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "window %dx%d and stride (%d, %d) must be positive", windowHeight, windowWidth,
                    verticalStride, horizontalStride);
    if (verticalPadding < 0 || horizontalPadding < 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "negative padding (%d, %d)", verticalPadding, horizontalPadding);
    poolingDesc->p = (pool_desc){ true, mode, maxpoolingNanOpt, windowHeight, windowWidth, verticalPadding, horizontalPadding,
                                  verticalStride, horizontalStride };
    return OK;
}

cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t poolingDesc,
                                                const cudnnTensorDescriptor_t inputTensorDesc, int *n, int *c, int *h,
                                                int *w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    pool_desc p;
    tens x;
    st_t rc = get_pool(fn, poolingDesc, &p);
    if (!rc) rc = get_tensor(fn, "inputTensorDesc", inputTensorDesc, &x);
    if (rc) return rc;
    if (!n || !c || !h || !w) return fail(CUDNN_STATUS_BAD_PARAM, fn, "an output pointer is NULL");
    int64_t oh, ow;
    if (!out_dim(x.d[2], p.ph, p.kh, 1, p.sh, &oh) || !out_dim(x.d[3], p.pw, p.kw, 1, p.sw, &ow))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the %dx%d window is larger than the padded input", p.kh, p.kw);
    *n = (int)x.d[0];
    *c = (int)x.d[1];
    *h = (int)oh;
    *w = (int)ow;
    return OK;
}

/* Windows: output (i, j) covers rows i*sh - ph .. + kh - 1 and the like for columns; rows or
 * columns outside the image are padding. Max ignores padding (NaN per the NaN option); the
 * include-padding average divides by kh*kw, the exclude-padding one by the image elements the
 * window holds (0 when it holds none). */
typedef struct pool_work {
    pool_desc p;
    tens x, y, dy, dx;
    const void *X, *Y, *DY;
    void *out;                    /* y (forward) or dx (backward) */
    double alpha, beta;
    bool backward;
} pool_work;

static bool is_max(const pool_desc *p) { return p->mode == CUDNN_POOLING_MAX || p->mode == CUDNN_POOLING_MAX_DETERMINISTIC; }

/* The clipped window of output (i, j) in image rows [*h0, *h1) and columns [*w0, *w1). */
static void window(const pool_work *k, int64_t i, int64_t j, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1) {
    int64_t a = i * k->p.sh - k->p.ph, b = j * k->p.sw - k->p.pw;
    *h0 = a < 0 ? 0 : a;
    *h1 = a + k->p.kh < k->x.d[2] ? a + k->p.kh : k->x.d[2];
    *w0 = b < 0 ? 0 : b;
    *w1 = b + k->p.kw < k->x.d[3] ? b + k->p.kw : k->x.d[3];
}

/* The max of a window and where it is (-1 when the window holds no image element). */
static double window_max(const pool_work *k, int64_t n, int64_t c, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                         int64_t *where) {
    double best = -INFINITY;
    *where = -1;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
            int64_t o = at(&k->x, n, c, h, w);
            double v = ld(k->X, k->x.dt, o);
            if (isnan(v)) {
                if (k->p.nan == CUDNN_PROPAGATE_NAN) {
                    *where = o;
                    return v;
                }
                continue;
            }
            if (*where < 0 || v > best) {
                best = v;
                *where = o;
            }
        }
    return best;
}

static void pool_fwd(const pool_work *k) {
    int64_t area = (int64_t)k->p.kh * k->p.kw;
    for (int64_t n = 0; n < k->y.d[0]; n++)
        for (int64_t c = 0; c < k->y.d[1]; c++)
            for (int64_t i = 0; i < k->y.d[2]; i++)
                for (int64_t j = 0; j < k->y.d[3]; j++) {
                    int64_t h0, h1, w0, w1, where;
                    window(k, i, j, &h0, &h1, &w0, &w1);
                    double r;
                    if (is_max(&k->p)) r = window_max(k, n, c, h0, h1, w0, w1, &where);
                    else {
                        double s = 0;
                        for (int64_t h = h0; h < h1; h++)
                            for (int64_t w = w0; w < w1; w++) s += ld(k->X, k->x.dt, at(&k->x, n, c, h, w));
                        int64_t cnt = k->p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? area
                                    : (h1 > h0 && w1 > w0 ? (h1 - h0) * (w1 - w0) : 0);
                        r = cnt ? s / (double)cnt : 0;
                    }
                    blend(k->out, &k->y, at(&k->y, n, c, i, j), r, k->alpha, k->beta);
                }
}

static void pool_bwd(const pool_work *k) {
    const tens *x = &k->x;
    double *acc = work_scratch("cudnnPoolingBackward", numel(x));
    if (!acc) return;
    int64_t area = (int64_t)k->p.kh * k->p.kw;
    for (int64_t n = 0; n < k->y.d[0]; n++)
        for (int64_t c = 0; c < k->y.d[1]; c++)
            for (int64_t i = 0; i < k->y.d[2]; i++)
                for (int64_t j = 0; j < k->y.d[3]; j++) {
                    int64_t h0, h1, w0, w1;
                    window(k, i, j, &h0, &h1, &w0, &w1);
                    double g = ld(k->DY, k->dy.dt, at(&k->dy, n, c, i, j));
                    int64_t base = (n * x->d[1] + c) * x->d[2];
                    if (is_max(&k->p)) {
                        /* the gradient goes to the first element equal to the forward's y (that is
                         * why cuDNN takes y), else to the window's max */
                        double yv = ld(k->Y, k->y.dt, at(&k->y, n, c, i, j));
                        int64_t hit_h = -1, hit_w = -1;
                        for (int64_t h = h0; h < h1 && hit_h < 0; h++)
                            for (int64_t w = w0; w < w1; w++) {
                                double v = ld(k->X, x->dt, at(x, n, c, h, w));
                                if (v == yv || (isnan(v) && isnan(yv))) {
                                    hit_h = h;
                                    hit_w = w;
                                    break;
                                }
                            }
                        if (hit_h < 0) {
                            int64_t where;
                            window_max(k, n, c, h0, h1, w0, w1, &where);
                            for (int64_t h = h0; h < h1 && hit_h < 0; h++)
                                for (int64_t w = w0; w < w1; w++)
                                    if (at(x, n, c, h, w) == where) {
                                        hit_h = h;
                                        hit_w = w;
                                        break;
                                    }
                        }
                        if (hit_h >= 0) acc[(base + hit_h) * x->d[3] + hit_w] += g;
                    } else {
                        int64_t cnt = k->p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? area
                                    : (h1 > h0 && w1 > w0 ? (h1 - h0) * (w1 - w0) : 0);
                        if (!cnt) continue;
                        for (int64_t h = h0; h < h1; h++)
                            for (int64_t w = w0; w < w1; w++) acc[(base + h) * x->d[3] + w] += g / (double)cnt;
                    }
                }
    int64_t idx = 0;
    for (int64_t n = 0; n < x->d[0]; n++)
        for (int64_t c = 0; c < x->d[1]; c++)
            for (int64_t h = 0; h < x->d[2]; h++)
                for (int64_t w = 0; w < x->d[3]; w++) blend(k->out, &k->dx, at(&k->dx, n, c, h, w), acc[idx++], k->alpha, k->beta);
    free(acc);
}

static int pool_run(void *arg) {
    pool_work *k = arg;
    if (k->backward) pool_bwd(k);
    else pool_fwd(k);
    return DGEMU_DONE;
}

/* cuDNN's pooling kernels need unit w strides. */
static st_t pool_wstride(const char *fn, const char *what, const tens *t) {
    if (t->s[3] != 1 && t->d[3] > 1)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s has w stride %lld; pooling needs 1", what, (long long)t->s[3]);
    return OK;
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc, const void *alpha,
                                  const cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yDesc, void *y) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    pool_desc p;
    tens xt, yt;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_pool(fn, poolingDesc, &p);
    if (!rc) rc = get_tensor(fn, "xDesc", xDesc, &xt);
    if (!rc) rc = get_tensor(fn, "yDesc", yDesc, &yt);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (xt.d[0] != yt.d[0] || xt.d[1] != yt.d[1])
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and y differ in n or c: [%lld, %lld] vs [%lld, %lld]", (long long)xt.d[0],
                    (long long)xt.d[1], (long long)yt.d[0], (long long)yt.d[1]);
    if (xt.dt != yt.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "x is %s but y is %s", dt_name(xt.dt), dt_name(yt.dt));
    if ((rc = pool_wstride(fn, "x", &xt)) || (rc = pool_wstride(fn, "y", &yt))) return rc;
    if (!is_fd(xt.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(xt.dt));
    if ((rc = need_dev(fn, "x", x, bytes_of(&xt))) || (rc = need_dev(fn, "y", y, bytes_of(&yt)))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    pool_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (pool_work){ .p = p, .x = xt, .y = yt, .X = x, .out = y, .alpha = scal(alpha, xt.dt), .beta = scal(beta, xt.dt) };
    return submit(fn, s, pool_run, k);
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc, const void *alpha,
                                   const cudnnTensorDescriptor_t yDesc, const void *y,
                                   const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                   const cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,
                                   const cudnnTensorDescriptor_t dxDesc, void *dx) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    pool_desc p;
    tens yt, dyt, xt, dxt;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_pool(fn, poolingDesc, &p);
    if (!rc) rc = get_tensor(fn, "yDesc", yDesc, &yt);
    if (!rc) rc = get_tensor(fn, "dyDesc", dyDesc, &dyt);
    if (!rc) rc = get_tensor(fn, "xDesc", xDesc, &xt);
    if (!rc) rc = get_tensor(fn, "dxDesc", dxDesc, &dxt);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (!same_dims(&yt, &dyt) || !same_strides(&yt, &dyt))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "y and dy differ in dims or strides");
    if (!same_dims(&xt, &dxt) || !same_strides(&xt, &dxt))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and dx differ in dims or strides");
    if (xt.d[0] != yt.d[0] || xt.d[1] != yt.d[1]) return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and y differ in n or c");
    if (yt.dt != dyt.dt || yt.dt != xt.dt || yt.dt != dxt.dt)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the four tensors must have one data type");
    if ((rc = pool_wstride(fn, "x", &xt)) || (rc = pool_wstride(fn, "y", &yt))) return rc;
    if (!is_fd(xt.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(xt.dt));
    if ((rc = need_dev(fn, "y", y, bytes_of(&yt))) || (rc = need_dev(fn, "dy", dy, bytes_of(&dyt))) ||
        (rc = need_dev(fn, "x", x, bytes_of(&xt))) || (rc = need_dev(fn, "dx", dx, bytes_of(&dxt))))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    pool_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (pool_work){ .p = p, .x = xt, .y = yt, .dy = dyt, .dx = dxt, .X = x, .Y = y, .DY = dy, .out = dx,
                      .alpha = scal(alpha, xt.dt), .beta = scal(beta, xt.dt), .backward = true };
    return submit(fn, s, pool_run, k);
}

