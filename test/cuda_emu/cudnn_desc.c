/* test/cuda_emu/cudnn_desc.c — the emulated cuDNN's tensor, filter and convolution descriptors and
 * cudnnAddTensor (see cudnn.c for what the emulation does). */
#include "cudnn_internal.h"

/* ================= tensor descriptors ================= */

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!tensorDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "tensorDesc is NULL");
    *tensorDesc = obj_new(sizeof **tensorDesc, OBJ_TENSOR);
    return *tensorDesc ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!tensorDesc) return OK;   /* destroying NULL is a no-op, as in cuDNN */
    return obj_free(tensorDesc, OBJ_TENSOR) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live tensor descriptor (destroyed twice?)", (void *)tensorDesc);
}

static st_t dims_ok(const char *fn, int n, int c, int h, int w) {
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dims [%d, %d, %d, %d] must all be positive", n, c, h, w);
    return OK;
}

/* cuDNN's legacy descriptors address at most 2^31 elements. */
static st_t size_ok(const char *fn, const tens *t) {
    if ((double)t->d[0] * (double)t->d[1] * (double)t->d[2] * (double)t->d[3] > INT_MAX)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "the tensor has more than %d elements", INT_MAX);
    double e = 1;
    for (int i = 0; i < 4; i++) e += (double)(t->d[i] - 1) * (double)t->s[i];
    if (e > (double)INT_MAX + 1) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "the tensor spans more than %d elements", INT_MAX);
    return OK;
}

st_t tensor_desc(const char *fn, cudnnTensorDescriptor_t d) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "tensorDesc is NULL");
    if (!reg_is(d, OBJ_TENSOR)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live tensor descriptor", (void *)d);
    return OK;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    st_t rc = tensor_desc(fn, tensorDesc);
    if (rc) return rc;
    if ((unsigned)format > CUDNN_TENSOR_NCHW_VECT_C) return fail(CUDNN_STATUS_BAD_PARAM, fn, "format %d is not a cudnnTensorFormat_t", (int)format);
    if (!dt_size(dataType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dataType %d is not a storage type", (int)dataType);
    if ((rc = dims_ok(fn, n, c, h, w))) return rc;
    if (format == CUDNN_TENSOR_NCHW_VECT_C) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "NCHW_VECT_C is not emulated");
    tens t = { .dt = dataType, .d = { n, c, h, w } };
    packed(&t, format);
    if ((rc = size_ok(fn, &t))) return rc;
    tensorDesc->t = t;
    tensorDesc->set = true;
    return OK;
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int n, int c,
                                           int h, int w, int nStride, int cStride, int hStride, int wStride) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    st_t rc = tensor_desc(fn, tensorDesc);
    if (rc) return rc;
    if (!dt_size(dataType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dataType %d is not a storage type", (int)dataType);
    if ((rc = dims_ok(fn, n, c, h, w))) return rc;
    if (nStride < 0 || cStride < 0 || hStride < 0 || wStride < 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "negative stride in [%d, %d, %d, %d]", nStride, cStride, hStride, wStride);
    tens t = { .dt = dataType, .d = { n, c, h, w }, .s = { nStride, cStride, hStride, wStride } };
    if ((rc = size_ok(fn, &t))) return rc;
    tensorDesc->t = t;
    tensorDesc->set = true;
    return OK;
}

cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t *dataType, int *n,
                                         int *c, int *h, int *w, int *nStride, int *cStride, int *hStride,
                                         int *wStride) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    tens t;
    st_t rc = get_tensor(__func__, "tensorDesc", tensorDesc, &t);
    if (rc) return rc;
    if (!dataType || !n || !c || !h || !w || !nStride || !cStride || !hStride || !wStride)
        return fail(CUDNN_STATUS_BAD_PARAM, __func__, "an output pointer is NULL");
    *dataType = t.dt;
    *n = (int)t.d[0]; *c = (int)t.d[1]; *h = (int)t.d[2]; *w = (int)t.d[3];
    *nStride = (int)t.s[0]; *cStride = (int)t.s[1]; *hStride = (int)t.s[2]; *wStride = (int)t.s[3];
    return OK;
}

/* ---- cudnnAddTensor: C = alpha * A + beta * C, A broadcast along its dims of size 1 ---- */

typedef struct add_work {
    tens a, c;
    const void *A;
    void *C;
    double alpha, beta;
} add_work;

static int add_run(void *arg) {
    add_work *k = arg;
    for (int64_t n = 0; n < k->c.d[0]; n++)
        for (int64_t c = 0; c < k->c.d[1]; c++)
            for (int64_t h = 0; h < k->c.d[2]; h++)
                for (int64_t w = 0; w < k->c.d[3]; w++) {
                    int64_t ai = at(&k->a, k->a.d[0] == 1 ? 0 : n, k->a.d[1] == 1 ? 0 : c, k->a.d[2] == 1 ? 0 : h,
                                    k->a.d[3] == 1 ? 0 : w);
                    blend(k->C, &k->c, at(&k->c, n, c, h, w), ld(k->A, k->a.dt, ai), k->alpha, k->beta);
                }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t aDesc,
                             const void *A, const void *beta, const cudnnTensorDescriptor_t cDesc, void *C) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    tens a, c;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_tensor(fn, "aDesc", aDesc, &a);
    if (!rc) rc = get_tensor(fn, "cDesc", cDesc, &c);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (a.dt != c.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "A is %s but C is %s", dt_name(a.dt), dt_name(c.dt));
    for (int i = 0; i < 4; i++)
        if (a.d[i] != c.d[i] && a.d[i] != 1)
            return fail(CUDNN_STATUS_BAD_PARAM, fn,
                        "A [%lld, %lld, %lld, %lld] does not broadcast to C [%lld, %lld, %lld, %lld]: each dim must match or be 1",
                        (long long)a.d[0], (long long)a.d[1], (long long)a.d[2], (long long)a.d[3], (long long)c.d[0],
                        (long long)c.d[1], (long long)c.d[2], (long long)c.d[3]);
    if (!is_fd(c.dt) && !is_half(c.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(c.dt));
    if ((rc = need_dev(fn, "A", A, bytes_of(&a))) || (rc = need_dev(fn, "C", C, bytes_of(&c)))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    add_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (add_work){ a, c, A, C, scal(alpha, c.dt), scal(beta, c.dt) };
    return submit(fn, s, add_run, k);
}

/* ================= filters and convolution descriptors ================= */

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!filterDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "filterDesc is NULL");
    *filterDesc = obj_new(sizeof **filterDesc, OBJ_FILTER);
    return *filterDesc ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!filterDesc) return OK;
    return obj_free(filterDesc, OBJ_FILTER) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live filter descriptor (destroyed twice?)", (void *)filterDesc);
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    if (!filterDesc) return fail(CUDNN_STATUS_BAD_PARAM, fn, "filterDesc is NULL");
    if (!reg_is(filterDesc, OBJ_FILTER)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live filter descriptor", (void *)filterDesc);
    if (!dt_size(dataType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dataType %d is not a storage type", (int)dataType);
    if ((unsigned)format > CUDNN_TENSOR_NCHW_VECT_C) return fail(CUDNN_STATUS_BAD_PARAM, fn, "format %d is not a cudnnTensorFormat_t", (int)format);
    st_t rc = dims_ok(fn, k, c, h, w);
    if (rc) return rc;
    tens t = { .dt = dataType, .d = { k, c, h, w } };
    packed(&t, format);
    if ((rc = size_ok(fn, &t))) return rc;
    filterDesc->dt = dataType;
    filterDesc->fmt = format;
    filterDesc->k = k; filterDesc->c = c; filterDesc->h = h; filterDesc->w = w;
    filterDesc->set = true;
    return OK;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!convDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "convDesc is NULL");
    cudnnConvolutionDescriptor_t d = obj_new(sizeof *d, OBJ_CONV);
    if (!d) return fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
    d->c.groups = 1;
    d->c.math = CUDNN_DEFAULT_MATH;
    *convDesc = d;
    return OK;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!convDesc) return OK;
    return obj_free(convDesc, OBJ_CONV) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live convolution descriptor (destroyed twice?)", (void *)convDesc);
}

static st_t conv_desc_live(const char *fn, cudnnConvolutionDescriptor_t d) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc is NULL");
    if (!reg_is(d, OBJ_CONV)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live convolution descriptor", (void *)d);
    return OK;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u,
                                              int v, int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    st_t rc = conv_desc_live(fn, convDesc);
    if (rc) return rc;
    if (pad_h < 0 || pad_w < 0) return fail(CUDNN_STATUS_BAD_PARAM, fn, "negative padding (%d, %d)", pad_h, pad_w);
    if (u <= 0 || v <= 0) return fail(CUDNN_STATUS_BAD_PARAM, fn, "stride (%d, %d) must be positive", u, v);
    if (dilation_h <= 0 || dilation_w <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dilation (%d, %d) must be positive", dilation_h, dilation_w);
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnConvolutionMode_t", (int)mode);
    if (!dt_size(computeType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "computeType %d is not a data type", (int)computeType);
    conv_desc *c = &convDesc->c;
    c->ph = pad_h; c->pw = pad_w; c->sh = u; c->sw = v; c->dh = dilation_h; c->dw = dilation_w;
    c->mode = mode;
    c->ctype = computeType;
    c->set = true;
    return OK;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    st_t rc = conv_desc_live(__func__, convDesc);
    if (rc) return rc;
    if (groupCount < 1) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "groupCount %d must be positive", groupCount);
    convDesc->c.groups = groupCount;
    return OK;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    st_t rc = conv_desc_live(__func__, convDesc);
    if (rc) return rc;
    if ((unsigned)mathType > CUDNN_FMA_MATH) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "mathType %d is not a cudnnMathType_t", (int)mathType);
    convDesc->c.math = mathType;
    return OK;
}

/* Output size along one spatial dim; false when the dilated filter does not fit the padded input. */
bool out_dim(int64_t in, int64_t pad, int64_t k, int64_t dil, int64_t stride, int64_t *out) {
    int64_t eff = (k - 1) * dil + 1, room = in + 2 * pad;
    if (eff > room) return false;
    *out = 1 + (room - eff) / stride;
    return true;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int *n, int *c, int *h,
                                                    int *w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    conv_desc cd;
    tens x, f;
    st_t rc = get_conv(fn, convDesc, &cd);
    if (!rc) rc = get_tensor(fn, "inputTensorDesc", inputTensorDesc, &x);
    if (!rc) rc = get_filter(fn, "filterDesc", filterDesc, &f);
    if (rc) return rc;
    if (!n || !c || !h || !w) return fail(CUDNN_STATUS_BAD_PARAM, fn, "an output pointer is NULL");
    if (x.d[1] != f.d[1] * cd.groups)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "input has %lld channels, the filter %lld per group x %d groups",
                    (long long)x.d[1], (long long)f.d[1], cd.groups);
    int64_t oh, ow;
    if (!out_dim(x.d[2], cd.ph, f.d[2], cd.dh, cd.sh, &oh) || !out_dim(x.d[3], cd.pw, f.d[3], cd.dw, cd.sw, &ow))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the dilated filter is larger than the padded input");
    *n = (int)x.d[0];
    *c = (int)f.d[0];
    *h = (int)oh;
    *w = (int)ow;
    return OK;
}

