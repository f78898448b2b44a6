/* eager/cpu/index.c — index_select / index_add, gather / scatter_add, and the negative
 * log-likelihood rows behind cross entropy. Every index is range-checked: a bad label is an
 * error with its position, never a read out of bounds. */
#include "../backend.h"

static inline int64_t idx_at(const dg_kview *ix, int64_t i) {
    const char *p = ix->data;
    return ix->dtype == DG_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

static int check_indices(const dg_kview *ix, int64_t limit, const char *op) {
    for (int64_t i = 0; i < ix->numel; i++) {
        int64_t v = idx_at(ix, i);
        if (v < 0 || v >= limit) {
            DG_ERR(DG_EINVAL, "%s: index %lld at position %lld is out of range [0, %lld)", op, (long long)v, (long long)i, (long long)limit);
            return DG_EINVAL;
        }
    }
    return 0;
}

int dg_cpu_index_select(const dg_backend *be, const dg_kview *x, const dg_kview *ix, dg_kview *y, int64_t outer, int64_t dim, int64_t inner) {
    int rc = check_indices(ix, dim, "index_select");
    if (rc) return rc;
    size_t es = dg_dtype_bytes(x->dtype);
    const char *xb = x->data;
    char *yb = y->data;
    int64_t n = ix->numel;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            memcpy(yb + ((o * n + j) * inner) * (int64_t)es, xb + ((o * dim + idx_at(ix, j)) * inner) * (int64_t)es, (size_t)inner * es);
    return 0;
}

#define ADD_ROWS(T) do {                                                                 \
        const T *g = gy->data; T *out = gx->data;                      \
        for (int64_t o = 0; o < outer; o++) for (int64_t j = 0; j < n; j++) {            \
            const T *src = g + (o * n + j) * inner; T *dst = out + (o * dim + idx_at(ix, j)) * inner; \
            for (int64_t i = 0; i < inner; i++) dst[i] += src[i];                        \
        }                                                                                \
    } while (0)

int dg_cpu_index_add(const dg_backend *be, const dg_kview *gy, const dg_kview *ix, dg_kview *gx, int64_t outer, int64_t dim, int64_t inner) {
    int rc = check_indices(ix, dim, "index_add");
    if (rc) return rc;
    int64_t n = ix->numel;
    if (gx->dtype == DG_F32) ADD_ROWS(float); else ADD_ROWS(double);
    return 0;
}

int dg_cpu_gather(const dg_backend *be, const dg_kview *x, const dg_kview *ix, dg_kview *y, int64_t outer, int64_t xdim, int64_t idim, int64_t inner) {
    int rc = check_indices(ix, xdim, "gather");
    if (rc) return rc;
    size_t es = dg_dtype_bytes(x->dtype);
    const char *xb = x->data;
    char *yb = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < idim; j++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t k = (o * idim + j) * inner + i;
                memcpy(yb + k * (int64_t)es, xb + ((o * xdim + idx_at(ix, k)) * inner + i) * (int64_t)es, es);
            }
    return 0;
}

#define SCATTER(T) do {                                                                  \
        const T *g = gy->data; T *out = gx->data;                      \
        for (int64_t o = 0; o < outer; o++) for (int64_t j = 0; j < idim; j++)           \
            for (int64_t i = 0; i < inner; i++) {                                        \
                int64_t k = (o * idim + j) * inner + i;                                  \
                out[(o * xdim + idx_at(ix, k)) * inner + i] += g[k];                     \
            }                                                                            \
    } while (0)

int dg_cpu_scatter_add(const dg_backend *be, const dg_kview *gy, const dg_kview *ix, dg_kview *gx, int64_t outer, int64_t xdim, int64_t idim, int64_t inner) {
    int rc = check_indices(ix, xdim, "scatter_add");
    if (rc) return rc;
    if (gx->dtype == DG_F32) SCATTER(float); else SCATTER(double);
    return 0;
}

static int check_labels(const dg_kview *label, int64_t cols, int64_t ignore) {
    for (int64_t r = 0; r < label->numel; r++) {
        int64_t c = idx_at(label, r);
        if (c != ignore && (c < 0 || c >= cols)) {
            DG_ERR(DG_EINVAL, "cross_entropy: label %lld at row %lld is out of range [0, %lld)", (long long)c, (long long)r, (long long)cols);
            return DG_EINVAL;
        }
    }
    return 0;
}

int dg_cpu_nll(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss, int64_t rows, int64_t cols, int64_t ignore) {
    int rc = check_labels(label, cols, ignore);
    if (rc) return rc;
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = idx_at(label, r);
        if (logp->dtype == DG_F32) ((float *)loss->data)[r] = c == ignore ? 0.f : -((const float *)logp->data)[r * cols + c];
        else ((double *)loss->data)[r] = c == ignore ? 0.0 : -((const double *)logp->data)[r * cols + c];
    }
    return 0;
}

int dg_cpu_nll_backward(const dg_backend *be, const dg_kview *g, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ignore) {
    int rc = check_labels(label, cols, ignore);
    if (rc) return rc;
    memset(glogp->data, 0, (size_t)(rows * cols) * dg_dtype_bytes(glogp->dtype));
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = idx_at(label, r);
        if (c == ignore) continue;
        if (glogp->dtype == DG_F32) ((float *)glogp->data)[r * cols + c] = -((const float *)g->data)[r];
        else ((double *)glogp->data)[r * cols + c] = -((const double *)g->data)[r];
    }
    return 0;
}
