/* eager/ops/tri.c — torch.tril / torch.triu over the last two dims of x (any batch dims, any
 * dtype). The kept positions are a bool mask [rows, cols] made on the host and uploaded to x's
 * device (col - row <= diagonal for tril, >= diagonal for triu), broadcast over the batch dims;
 * y = where(mask, x, 0) on the backend's `where` entry, and the gradient is where(mask, g, 0)
 * with the same mask, which the node keeps. */
#include "op_util.h"
#include <stdlib.h>

/* the [rows, cols] mask on like's device */
static dg_tensor *tri_mask(const dg_tensor *like, int64_t rows, int64_t cols, int64_t k, bool upper) {
    int64_t shp[2] = { rows, cols };
    size_t n = (size_t)(rows * cols);
    uint8_t *host = malloc(n ? n : 1);
    if (!host) { DG_ERR(DG_ENOMEM, "%s: out of memory for a %lldx%lld mask", upper ? "triu" : "tril", (long long)rows, (long long)cols); return NULL; }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            int64_t d = j - i;   /* no overflow: |i|, |j| < 2^62 for any allocatable tensor */
            host[i * cols + j] = upper ? d >= k : d <= k;
        }
    dg_tensor *m = dg_new_on(like, shp, 2, DG_BOOL);
    if (m && n && DG_KCALL(m, upload, m->storage->data, host, n) != 0) {
        dg_tensor_free(m);
        m = NULL;
    }
    free(host);
    return m;
}

/* mask [rows, cols] broadcast to x's shape; the zero (one element) broadcast likewise */
static void bcast_mask(const dg_tensor *mask, const dg_tensor *x, dg_kview *v) {
    dg_kview_set(v, mask);
    v->ndim = x->ndim;
    v->numel = x->numel;
    for (int i = 0; i < x->ndim; i++) {
        v->shape[i] = x->shape[i];
        v->stride[i] = i == x->ndim - 2 ? x->shape[x->ndim - 1] : i == x->ndim - 1 ? 1 : 0;
    }
}
static void bcast_scalar(const dg_tensor *z, const dg_tensor *x, dg_kview *v) {
    dg_kview_set(v, z);
    v->ndim = x->ndim;
    v->numel = x->numel;
    for (int i = 0; i < x->ndim; i++) { v->shape[i] = x->shape[i]; v->stride[i] = 0; }
}

/* where(mask, x, 0) into a new tensor shaped like x */
static dg_tensor *masked(const dg_tensor *x, const dg_tensor *mask) {
    dg_tensor *y = dg_new_like(x);
    if (!y) return NULL;
    dg_tensor *zero = dg_full_on(x, DG_SHAPE(1), 0.0, x->dtype);
    if (!zero) { dg_tensor_free(y); return NULL; }
    dg_kview mv, zv;
    bcast_mask(mask, x, &mv);
    bcast_scalar(zero, x, &zv);
    int rc = DG_KCALL(x, where, &mv, DG_KV(x), &zv, DG_KV(y));
    dg_tensor_free(zero);
    if (rc) {
        dg_tensor_free(y);
        return NULL;
    }
    return y;
}

static int tri_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    gi[0] = masked(g, dg_node_saved(n, 0));
    return gi[0] ? 0 : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
}

static dg_tensor *tri_op(dg_op_id id, const dg_tensor *x, int64_t k) {
    const char *name = dg_op_name(id);
    bool upper = id == DG_OP_TRIU;
    DG_CHECK_INPUT(name, x);
    DG_CHECK(x->ndim >= 2, "%s: input must have at least 2 dimensions, got %s", name, DG_SHAPE_STR(x));
    dg_tensor *mask = tri_mask(x, x->shape[x->ndim - 2], x->shape[x->ndim - 1], k, upper);
    if (!mask) return NULL;
    uint64_t errs = dg_error_count();
    dg_tensor *y = masked(x, mask);
    if (y && dg_dtype_is_float(x->dtype) && dg_op_records()) {
        const dg_tensor *in[1] = { x };
        dg_node *n = dg_record_op(id, y, in, 1, tri_bw);
        if (!n || dg_node_save(n, mask)) {
            dg_tensor_free(y);
            y = NULL;
        } else {
            dg_tri_attr *a = dg_node_attr(n);
            a->diagonal = k;
            a->upper = upper;
        }
    }
    if (y && dg_trace_wants_value(y)) {
        dg_tri_attr a = { .diagonal = k, .upper = upper };
        dg_trace_value(id, y, (const dg_tensor *[]){ x }, 1, &a, sizeof a);
    }
    dg_tensor_free(mask);
    if (!y && !dg_error_since(errs)) DG_ERR(DG_ENOMEM, "%s: failed for input %s", name, DG_SHAPE_STR(x));
    return y;
}

dg_tensor *dg_tril(const dg_tensor *x, int64_t diagonal) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_TRIL, DG_OP_IN(x));
    return dg_op_leave(&f, tri_op(DG_OP_TRIL, f.arg[0], diagonal));
}
dg_tensor *dg_triu(const dg_tensor *x, int64_t diagonal) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_TRIU, DG_OP_IN(x));
    return dg_op_leave(&f, tri_op(DG_OP_TRIU, f.arg[0], diagonal));
}
