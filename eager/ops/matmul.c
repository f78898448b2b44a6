/* eager/ops/matmul.c — batched matmul with transposed operands and broadcast batch dims,
 * and linear (x @ w + b). Operands whose last two dims are row- or column-major are handed
 * to the GEMM as they are (a transpose flag instead of a copy). */
#include "op_util.h"

typedef dg_mm_attr mm_attr;   /* eager/ops/op_attrs.h */

/* How one operand reaches the GEMM: pointer, leading dim, batch stride, transpose flag. */
typedef struct { const void *p; int64_t ld, bstride; bool trans; dg_tensor *tmp; } gemm_arg;

/* t is already broadcast to the output batch shape (nb batch dims). */
static int gemm_operand(const dg_tensor *t, int nb, bool trans, gemm_arg *g) {
    memset(g, 0, sizeof *g);
    int r = t->ndim - 2, c = t->ndim - 1;
    /* the batch dims must walk memory with one stride, or all be broadcast (stride 0) */
    int64_t bs = 0;
    bool uniform = true, any_zero = false, any_nonzero = false;
    int prev = -1;
    for (int i = 0; i < nb; i++) {
        if (t->shape[i] == 1) continue;
        if (t->stride[i] == 0) any_zero = true; else any_nonzero = true;
        if (prev >= 0 && t->stride[prev] != t->stride[i] * t->shape[i]) uniform = false;
        prev = i;
    }
    if (any_zero && any_nonzero) uniform = false;
    if (prev >= 0) bs = t->stride[prev];
    bool rowmaj = t->stride[c] == 1 && (t->shape[r] == 1 || t->stride[r] >= t->shape[c]);
    bool colmaj = !rowmaj && t->stride[r] == 1 && (t->shape[c] == 1 || t->stride[c] >= t->shape[r]);
    if (uniform && rowmaj) {
        g->p = dg_tensor_ptr(t);
        g->bstride = bs;
        g->ld = t->shape[r] == 1 ? (t->shape[c] > 1 ? t->shape[c] : 1) : t->stride[r];
        g->trans = trans;
        return 0;
    }
    if (uniform && colmaj) {
        g->p = dg_tensor_ptr(t);
        g->bstride = bs;
        g->ld = t->shape[c] == 1 ? (t->shape[r] > 1 ? t->shape[r] : 1) : t->stride[c];
        g->trans = !trans;
        return 0;
    }
    g->tmp = dg_tensor_alloc(t->shape, t->ndim, t->dtype, t->storage->device);
    if (!g->tmp) return DG_ENOMEM;
    dg_keep(g->tmp);
    int rc = DG_KCALL(t, copy, DG_KV(t), DG_KV(g->tmp));
    g->p = dg_tensor_ptr(g->tmp);
    g->ld = t->shape[c] > 1 ? t->shape[c] : 1;
    g->bstride = t->shape[r] * t->shape[c];
    g->trans = trans;
    return rc;
}

static int mm_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *a = dg_node_saved(n, 0), *b = dg_node_saved(n, 1);
    mm_attr *at = dg_node_attr(n);
    if (dg_node_needs_grad(n, 0)) {
        dg_tensor *ga = at->ta ? dg_matmul_t(b, g, at->tb, true) : dg_matmul_t(g, b, false, !at->tb);
        gi[0] = dg_sum_to(ga, dg_node_input_shape(n, 0));
    }
    if (dg_node_needs_grad(n, 1)) {
        if (b->ndim == 2 && a->ndim > 2 && !at->ta) {
            /* a 2-D right operand under a batched left one (a Linear on [T, N, in]): its gradient
             * is one GEMM over all the rows, not a product per batch summed afterwards (which
             * would hold batch copies of the weight's size: 336 MB for a 12k-word decoder) */
            int64_t k = a->shape[a->ndim - 1], cols = g->shape[g->ndim - 1];
            dg_tensor *a2 = dg_reshape(dg_contiguous(a), DG_SHAPE(-1, k)), *g2 = dg_reshape(dg_contiguous(g), DG_SHAPE(-1, cols));
            gi[1] = at->tb ? dg_matmul_t(g2, a2, true, false) : dg_matmul_t(a2, g2, true, false);
        } else {
            dg_tensor *gb = at->tb ? dg_matmul_t(g, a, true, at->ta) : dg_matmul_t(a, g, !at->ta, false);
            gi[1] = dg_sum_to(gb, dg_node_input_shape(n, 1));
        }
    }
    return 0;
}

static dg_tensor *matmul_nd(const dg_tensor *a, const dg_tensor *b, bool ta, bool tb) {
    int64_t m = ta ? a->shape[a->ndim - 1] : a->shape[a->ndim - 2];
    int64_t ka = ta ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1];
    int64_t kb = tb ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    int64_t nn = tb ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    DG_CHECK(ka == kb, "matmul: shapes %s%s and %s%s do not match (inner dims %lld vs %lld)", DG_SHAPE_STR(a), ta ? "^T" : "",
             DG_SHAPE_STR(b), tb ? "^T" : "", (long long)ka, (long long)kb);
    uint64_t errs = dg_error_count();
    /* batch broadcast */
    int nba = a->ndim - 2, nbb = b->ndim - 2, nb = nba > nbb ? nba : nbb;
    int64_t bshape[DG_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - nba), ib = i - (nb - nbb);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        DG_CHECK(da == db || da == 1 || db == 1, "matmul: batch dims of %s and %s do not broadcast", DG_SHAPE_STR(a), DG_SHAPE_STR(b));
        bshape[i] = da == 1 ? db : da;
    }
    int64_t oshape[DG_MAX_DIMS], ashape[DG_MAX_DIMS], bsh[DG_MAX_DIMS];
    memcpy(oshape, bshape, sizeof(int64_t) * (size_t)nb);
    memcpy(ashape, bshape, sizeof(int64_t) * (size_t)nb);
    memcpy(bsh, bshape, sizeof(int64_t) * (size_t)nb);
    oshape[nb] = m; oshape[nb + 1] = nn;
    ashape[nb] = a->shape[a->ndim - 2]; ashape[nb + 1] = a->shape[a->ndim - 1];
    bsh[nb] = b->shape[b->ndim - 2]; bsh[nb + 1] = b->shape[b->ndim - 1];
    int64_t batch = dg_shape_numel(bshape, nb);

    dg_tensor *y = dg_new_on(a, oshape, nb + 2, a->dtype);
    if (!y) return NULL;
    dg_tensor *av = dg_broadcast_view(a, ashape, nb + 2), *bv = dg_broadcast_view(b, bsh, nb + 2);
    gemm_arg ga = {0}, gb = {0};
    int rc = (!av || !bv) ? DG_ENOMEM : 0;
    if (!rc) rc = gemm_operand(av, nb, ta, &ga);
    if (!rc) rc = gemm_operand(bv, nb, tb, &gb);
    /* a 2-D right operand shared by every batch of a row-major left operand: one big GEMM */
    if (!rc && gb.bstride == 0 && !ga.trans && ga.bstride == m * ga.ld && batch > 1) {
        rc = DG_KCALL(a, gemm, a->dtype, false, gb.trans, m * batch, nn, ka, 1.0, ga.p, ga.ld, 0, gb.p, gb.ld, 0,
                                    0.0, dg_tensor_ptr(y), nn, 0, 1);
    } else if (!rc) {
        rc = DG_KCALL(a, gemm, a->dtype, ga.trans, gb.trans, m, nn, ka, 1.0, ga.p, ga.ld, ga.bstride, gb.p, gb.ld,
                                    gb.bstride, 0.0, dg_tensor_ptr(y), nn, m * nn, batch);
    }
    dg_tensor_free(ga.tmp);
    dg_tensor_free(gb.tmp);
    dg_tensor_free(av);
    dg_tensor_free(bv);
    if (rc) { if (!dg_error_since(errs)) DG_ERR(rc, "matmul: kernel failed"); dg_tensor_free(y); return NULL; }
    const dg_tensor *in[2] = { a, b };
    if (dg_op_records()) {
        dg_node *n = dg_record_op(DG_OP_MATMUL, y, in, 2, mm_bw);
        if (!n || dg_node_save(n, a) || dg_node_save(n, b)) { dg_tensor_free(y); return NULL; }   /* they said why */
        mm_attr *at = dg_node_attr(n);
        at->ta = ta;
        at->tb = tb;
    }
    return y;
}

static dg_tensor *matmul_t_op(const dg_tensor *a, const dg_tensor *b, bool ta, bool tb) {
    DG_CHECK_INPUT("matmul", a);
    DG_CHECK_INPUT("matmul", b);
    DG_CHECK_FLOAT("matmul", a);
    DG_CHECK_SAME_DTYPE("matmul", a, b);
    DG_CHECK_SAME_DEVICE("matmul", a, b);
    DG_CHECK(a->ndim >= 1 && b->ndim >= 1, "matmul: operands must have at least 1 dim, got %s and %s", DG_SHAPE_STR(a), DG_SHAPE_STR(b));
    if (a->ndim >= 2 && b->ndim >= 2) return matmul_nd(a, b, ta, tb);
    /* vectors as in numpy/paddle: a 1-D left operand is a row, a 1-D right operand a column,
     * and the added dim is removed from the result */
    dg_tensor *a2 = a->ndim == 1 ? dg_unsqueeze(a, 0) : (dg_tensor *)a;
    dg_tensor *b2 = b->ndim == 1 ? dg_unsqueeze(b, 1) : (dg_tensor *)b;
    dg_tensor *y = matmul_nd(a2, b2, a->ndim == 1 ? false : ta, b->ndim == 1 ? false : tb);
    if (!y) return NULL;
    if (a->ndim == 1) y = dg_squeeze(y, -2);
    if (y && b->ndim == 1) y = dg_squeeze(y, -1);
    return y;
}
dg_tensor *dg_matmul_t(const dg_tensor *a, const dg_tensor *b, bool ta, bool tb) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MATMUL, DG_OP_IN(a, b));
    return dg_op_leave(&f, matmul_t_op(f.arg[0], f.arg[1], ta, tb));
}

dg_tensor *dg_matmul(const dg_tensor *a, const dg_tensor *b) { return dg_matmul_t(a, b, false, false); }

static dg_tensor *linear_op(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b) {
    DG_CHECK_INPUT("linear", x);
    DG_CHECK_INPUT("linear", w);
    DG_CHECK_OPT_INPUT("linear", b);
    DG_CHECK(w->ndim == 2, "linear: weight must be [out_features, in_features], got %s", DG_SHAPE_STR(w));
    DG_CHECK(x->ndim >= 1 && x->shape[x->ndim - 1] == w->shape[1], "linear: input %s does not match weight %s (in_features %lld)",
             DG_SHAPE_STR(x), DG_SHAPE_STR(w), (long long)w->shape[1]);
    if (b) DG_CHECK(b->ndim == 1 && b->shape[0] == w->shape[0], "linear: bias %s does not match weight %s (out_features %lld)",
                    DG_SHAPE_STR(b), DG_SHAPE_STR(w), (long long)w->shape[0]);
    if (!b) return dg_matmul_t(x, w, false, true);
    dg_scope *s = dg_scope_begin();      /* x @ w^T dies here; only the sum leaves */
    dg_tensor *y = dg_add(dg_matmul_t(x, w, false, true), b);
    dg_trace_composite(DG_OP_LINEAR, y, (const dg_tensor *[]){ x, w, b }, 3, NULL, 0);   /* an exporter's Gemm */
    return dg_composite_end(s, y);
}
dg_tensor *dg_linear(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_LINEAR, DG_OP_IN(x, w, b));
    return dg_op_leave(&f, linear_op(f.arg[0], f.arg[1], f.arg[2]));
}
