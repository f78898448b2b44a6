/* eager/ops/elementwise.c — broadcasting binary arithmetic, scalar forms, unary math and
 * comparisons: shape/dtype checks, the backend call, and each op's backward rule. */
#include "op_util.h"
#include <math.h>

typedef dg_scal_attr scal_attr;   /* eager/ops/op_attrs.h */

/* The broadcast of shapes sa[na] and sb[nb] into out[*ndim]; false when they do not broadcast. */
static bool broadcast_shapes(const int64_t *sa, int na, const int64_t *sb, int nb, int64_t *out, int *ndim) {
    int nd = na > nb ? na : nb;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - na), ib = i - (nd - nb);
        int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *ndim = nd;
    return true;
}

bool dg_broadcast_shape(const dg_tensor *a, const dg_tensor *b, int64_t *out, int *ndim) {
    return broadcast_shapes(a->shape, a->ndim, b->shape, b->ndim, out, ndim);
}

/* t's kernel view broadcast to shape (stride 0 along the broadcast dims), for one kernel call. */
static void bcast_view(const dg_tensor *t, const int64_t *shape, int nd, dg_kview *v) {   /* in place: see dg_kview_set */
    v->data = (char *)t->storage->data + t->offset * (int64_t)dg_dtype_bytes(t->dtype);
    v->dtype = t->dtype;
    v->ndim = nd;
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) {
        int it = i - (nd - t->ndim);
        v->shape[i] = shape[i];
        v->stride[i] = (it >= 0 && t->shape[it] == shape[i]) ? t->stride[it] : 0;
        numel *= shape[i];
    }
    v->numel = numel;
}

dg_tensor *dg_broadcast_view(const dg_tensor *t, const int64_t *shape, int nd) {
    dg_kview v;
    bcast_view(t, shape, nd, &v);
    return dg_tensor_view(t, nd, v.shape, v.stride, t->offset);
}

dg_tensor *dg_sum_to(const dg_tensor *g, dg_shape shape) {
    if (!g) return NULL;
    int axes[DG_MAX_DIMS], n = 0, lead = g->ndim - shape.ndim;
    for (int i = 0; i < g->ndim; i++) {
        int is = i - lead;
        if (is < 0 || (shape.d[is] == 1 && g->shape[i] != 1)) axes[n++] = i;
    }
    if (n == 0) return (dg_tensor *)g;
    dg_tensor *s = dg_sum(g, axes, n, true);
    return dg_reshape(s, shape);
}

/* ---- kernel-only helpers for backward rules (no checks beyond broadcasting) ---- */
static dg_tensor *bin_k(dg_binary_op op, const dg_tensor *a, const dg_tensor *b, double p0, double p1) {
    int64_t shp[DG_MAX_DIMS]; int nd;
    if (!a || !b) return NULL;
    if (!dg_broadcast_shape(a, b, shp, &nd)) { DG_ERR(DG_EINVAL, "internal broadcast %s vs %s", DG_SHAPE_STR(a), DG_SHAPE_STR(b)); return NULL; }
    dg_tensor *y = dg_new_on(a, shp, nd, a->dtype);
    if (!y) return NULL;
    dg_kview av, bv;
    bcast_view(a, shp, nd, &av);
    bcast_view(b, shp, nd, &bv);
    DG_TRY_KERNEL(DG_KCALL(a, binary, op, &av, &bv, DG_KV(y), p0, p1), y);
    return y;
}
static dg_tensor *un_k(dg_unary_op op, const dg_tensor *x, double p0, double p1) {
    if (!x) return NULL;
    dg_tensor *y = dg_new_like(x);
    if (!y) return NULL;
    DG_TRY_KERNEL(DG_KCALL(x, unary, op, DG_KV(x), DG_KV(y), p0, p1), y);
    return y;
}

/* ---- binary ops ---- */
/* ---- PyTorch's type promotion for arithmetic ----
 * Categories bool < integer < float. The higher category wins; within one, a tensor with dims
 * wins over a 0-d one, else the wider type (f32 + f64 -> f64, i32 + i64 -> i64). */
static bool is_int(dg_dtype t) { return t == DG_I32 || t == DG_I64; }
static int category(dg_dtype t) { return t == DG_BOOL ? 0 : is_int(t) ? 1 : 2; }
static int width(dg_dtype t) { return t == DG_F64 || t == DG_I64 ? 2 : dg_dtype_is_half(t) ? 0 : 1; }
static dg_dtype promote(const dg_tensor *a, const dg_tensor *b) {
    if (category(a->dtype) != category(b->dtype)) return category(a->dtype) > category(b->dtype) ? a->dtype : b->dtype;
    if ((a->ndim == 0) != (b->ndim == 0)) return a->ndim ? a->dtype : b->dtype;
    if (a->dtype != b->dtype && width(a->dtype) == width(b->dtype) && width(a->dtype) == 0) return DG_F32;   /* f16 with bf16 */
    return width(a->dtype) >= width(b->dtype) ? a->dtype : b->dtype;
}

static dg_tensor *binary(dg_op_id id, dg_binary_op op, const dg_tensor *a, const dg_tensor *b,
                         dg_backward_fn bw, bool save_a, bool save_b, bool save_y);

/* t in dtype dt: t itself, or a cast (recorded unless the caller is in no-grad mode) made in the
 * caller's scope */
static const dg_tensor *as_dtype(const dg_tensor *t, dg_dtype dt) { return t->dtype == dt ? t : dg_cast(t, dt); }

/* Operands of different dtypes, or integers: cast to the promoted type (recorded, so a float
 * input still gets its gradient in its own dtype), true division of integers in float32 (torch's
 * default dtype), and the integer kernels for add, sub, mul, maximum and minimum. */
static dg_tensor *binary_promoted(dg_op_id id, dg_binary_op op, const dg_tensor *a, const dg_tensor *b,
                                  dg_backward_fn bw, bool save_a, bool save_b, bool save_y) {
    const char *name = dg_op_name(id);
    DG_CHECK(a->dtype != DG_BOOL && b->dtype != DG_BOOL, "%s: %s %s and %s %s: arithmetic is defined on float and integer tensors (cast bool masks first)",
             name, dg_dtype_name(a->dtype), DG_SHAPE_STR(a), dg_dtype_name(b->dtype), DG_SHAPE_STR(b));
    dg_dtype dt = promote(a, b);
    if (is_int(dt) && op == DG_BIN_DIV) dt = DG_F32;
    DG_CHECK(!is_int(dt) || op == DG_BIN_ADD || op == DG_BIN_SUB || op == DG_BIN_MUL || op == DG_BIN_MAX || op == DG_BIN_MIN,
             "%s: not defined on integer tensors (%s %s, %s %s); cast to a float dtype first", name, dg_dtype_name(a->dtype),
             DG_SHAPE_STR(a), dg_dtype_name(b->dtype), DG_SHAPE_STR(b));
    DG_CHECK_SAME_DEVICE(name, a, b);
    dg_scope *s = dg_scope_begin();
    const dg_tensor *ac = as_dtype(a, dt), *bc = as_dtype(b, dt), *y = NULL;
    if (ac && bc && !is_int(dt)) y = binary(id, op, ac, bc, bw, save_a, save_b, save_y);
    else if (ac && bc) {
        int64_t shp[DG_MAX_DIMS]; int nd;
        if (!dg_broadcast_shape(ac, bc, shp, &nd)) DG_ERR(DG_EINVAL, "%s: shapes %s and %s do not broadcast", name, DG_SHAPE_STR(a), DG_SHAPE_STR(b));
        else if ((y = dg_new_on(a, shp, nd, dt))) {
            dg_kview av, bv;
            bcast_view(ac, shp, nd, &av);
            bcast_view(bc, shp, nd, &bv);
            if (DG_KCALL(a, binary, op, &av, &bv, DG_KV(y), 0, 0) != 0) y = NULL;   /* in the scope: freed at its end */
        }
    }
    return dg_composite_end(s, (dg_tensor *)y);
}

/* What a binary node keeps for its rule, and nothing more: a saved tensor stays alive until
 * backward, so saving the output of every add (as this once did) held each sum's memory through
 * the whole forward. The rule finds a, b and y through the slot numbers kept in the node's
 * attributes (BIN_SAVED; -1: not saved). mul's rule needs b only for a's gradient and a only for
 * b's, so a side whose partner needs no gradient is not kept. */
typedef dg_bin_attr bin_attr;   /* op_attrs.h: slots of a, b, y */
enum { BIN_A, BIN_B, BIN_Y };
static int save_operands(dg_node *n, const dg_tensor *a, const dg_tensor *b, const dg_tensor *y, bool save_a, bool save_b,
                         bool save_y) {
    bin_attr *at = dg_node_attr(n);
    const dg_tensor *t[3] = { a, b, y };
    bool want[3] = { save_a, save_b, save_y };
    int k = 0;
    for (int i = 0; i < 3; i++) {
        at->slot[i] = -1;
        if (!want[i]) continue;
        int rc = dg_node_save(n, t[i]);
        if (rc) return rc;
        at->slot[i] = (int8_t)k++;
    }
    return 0;
}
static const dg_tensor *bin_saved(const dg_node *n, int which) {
    const bin_attr *at = dg_node_attr((dg_node *)n);
    return at->slot[which] < 0 ? NULL : dg_node_saved(n, at->slot[which]);
}

static dg_tensor *binary(dg_op_id id, dg_binary_op op, const dg_tensor *a, const dg_tensor *b,
                         dg_backward_fn bw, bool save_a, bool save_b, bool save_y) {
    const char *name = dg_op_name(id);
    DG_CHECK_INPUT(name, a);
    DG_CHECK_INPUT(name, b);
    if (a->dtype != b->dtype || !dg_dtype_is_float(a->dtype)) return binary_promoted(id, op, a, b, bw, save_a, save_b, save_y);
    DG_CHECK_FLOAT(name, a);
    DG_CHECK_SAME_DEVICE(name, a, b);
    int64_t shp[DG_MAX_DIMS]; int nd;
    DG_CHECK(dg_broadcast_shape(a, b, shp, &nd), "%s: shapes %s and %s do not broadcast", name, DG_SHAPE_STR(a), DG_SHAPE_STR(b));
    dg_tensor *y = dg_new_on(a, shp, nd, a->dtype);
    if (!y) return NULL;
    dg_kview av, bv;
    bcast_view(a, shp, nd, &av);
    bcast_view(b, shp, nd, &bv);
    DG_TRY_KERNEL(DG_KCALL(a, binary, op, &av, &bv, DG_KV(y), 0, 0), y);
    const dg_tensor *in[2] = { a, b };
    if (bw && dg_op_records()) {
        dg_node *n = dg_record_op(id, y, in, 2, bw);
        if (n && op == DG_BIN_MUL) {   /* each side serves only the other's gradient */
            save_a = dg_node_needs_grad(n, 1);
            save_b = dg_node_needs_grad(n, 0);
        }
        if (!n || save_operands(n, a, b, y, save_a, save_b, save_y)) {
            dg_tensor_free(y);   /* record/save said why; an output without its node would cut the graph */
            return NULL;
        }
    }
    return y;
}

static int add_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    if (dg_node_needs_grad(n, 0)) gi[0] = dg_sum_to(g, dg_node_input_shape(n, 0));
    if (dg_node_needs_grad(n, 1)) gi[1] = dg_sum_to(g, dg_node_input_shape(n, 1));
    return 0;
}
static int sub_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    if (dg_node_needs_grad(n, 0)) gi[0] = dg_sum_to(g, dg_node_input_shape(n, 0));
    if (dg_node_needs_grad(n, 1)) gi[1] = dg_sum_to(dg_neg(g), dg_node_input_shape(n, 1));
    return 0;
}
static int mul_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *a = bin_saved(n, BIN_A), *b = bin_saved(n, BIN_B);
    if (dg_node_needs_grad(n, 0)) gi[0] = dg_sum_to(dg_mul(g, b), dg_node_input_shape(n, 0));
    if (dg_node_needs_grad(n, 1)) gi[1] = dg_sum_to(dg_mul(g, a), dg_node_input_shape(n, 1));
    return 0;
}
static int div_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *b = bin_saved(n, BIN_B), *y = bin_saved(n, BIN_Y);
    dg_tensor *ga = dg_div(g, b);
    if (dg_node_needs_grad(n, 0)) gi[0] = dg_sum_to(ga, dg_node_input_shape(n, 0));
    if (dg_node_needs_grad(n, 1)) gi[1] = dg_sum_to(dg_neg(dg_mul(ga, y)), dg_node_input_shape(n, 1));
    return 0;
}
/* PyTorch's rule: on a tie each side gets half of the gradient (what the central difference
 * says); the side that lost gets none. A NaN compares unequal and loses to nothing, so with a NaN
 * both sides get the whole gradient, as in PyTorch. */
static int maxmin_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi, bool is_max) {
    const dg_tensor *a = bin_saved(n, BIN_A), *b = bin_saved(n, BIN_B);
    dg_tensor *shared = dg_where(dg_equal(a, b), dg_mul_scalar(g, 0.5), g);
    dg_tensor *zero = dg_zeros_like(shared);
    if (dg_node_needs_grad(n, 0)) {
        dg_tensor *a_lost = is_max ? dg_greater(b, a) : dg_greater(a, b);
        gi[0] = dg_sum_to(dg_where(a_lost, zero, shared), dg_node_input_shape(n, 0));
    }
    if (dg_node_needs_grad(n, 1)) {
        dg_tensor *b_lost = is_max ? dg_greater(a, b) : dg_greater(b, a);
        gi[1] = dg_sum_to(dg_where(b_lost, zero, shared), dg_node_input_shape(n, 1));
    }
    return 0;
}
static int max_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { return maxmin_bw(n, g, gi, true); }
static int min_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { return maxmin_bw(n, g, gi, false); }
/* Where the true derivative is 0 the formulas meet 0 * inf (d/da of a^0 at a = 0) and
 * 0 * log 0 (d/db at a = 0, b >= 0): those are masked to 0, as PyTorch does. */
static int pow_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *a = bin_saved(n, BIN_A), *b = bin_saved(n, BIN_B), *y = bin_saved(n, BIN_Y);
    if (dg_node_needs_grad(n, 0)) {
        dg_tensor *d = dg_mul(b, dg_pow(a, dg_sub_scalar(b, 1.0)));
        dg_tensor *b_zero = dg_equal(b, dg_zeros_like(b));
        gi[0] = dg_sum_to(dg_mul(g, dg_where(b_zero, dg_zeros_like(d), d)), dg_node_input_shape(n, 0));
    }
    if (dg_node_needs_grad(n, 1)) {
        dg_tensor *d = dg_mul(y, dg_log(a));
        dg_tensor *a_zero = dg_equal(a, dg_zeros_like(a)), *b_neg = dg_greater(dg_zeros_like(b), b);
        dg_tensor *zero = dg_zeros_like(d);
        gi[1] = dg_sum_to(dg_mul(g, dg_where(a_zero, dg_where(b_neg, d, zero), d)), dg_node_input_shape(n, 1));
    }
    return 0;
}

/* The public binary ops: the entry path (op_entry.h) around binary() */
static dg_tensor *bin_entry(dg_op_id id, dg_binary_op op, const dg_tensor *a, const dg_tensor *b, dg_backward_fn bw,
                            bool save_a, bool save_b, bool save_y) {
    dg_op_frame f;
    dg_op_enter(&f, id, DG_OP_IN(a, b));
    return dg_op_leave(&f, binary(id, op, f.arg[0], f.arg[1], bw, save_a, save_b, save_y));
}

dg_tensor *dg_add(const dg_tensor *a, const dg_tensor *b) { return bin_entry(DG_OP_ADD, DG_BIN_ADD, a, b, add_bw, false, false, false); }

/* relu(a + b): ResNet's residual join in one pass over the data instead of two, and one output
 * instead of two. Saves its output, as relu does: the gradient g * (y > 0) goes to both inputs. */
static int add_relu_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    dg_tensor *gm = bin_k(DG_BIN_RELU_GRAD, g, bin_saved(n, BIN_Y), 0, 0);
    if (!gm) return DG_ENOMEM;
    if (dg_node_needs_grad(n, 0)) gi[0] = dg_sum_to(gm, dg_node_input_shape(n, 0));
    if (dg_node_needs_grad(n, 1)) gi[1] = dg_sum_to(gm, dg_node_input_shape(n, 1));
    return 0;
}
dg_tensor *dg_add_relu(const dg_tensor *a, const dg_tensor *b) {
    return bin_entry(DG_OP_ADD_RELU, DG_BIN_ADD_RELU, a, b, add_relu_bw, false, false, true);
}
dg_tensor *dg_sub(const dg_tensor *a, const dg_tensor *b) { return bin_entry(DG_OP_SUB, DG_BIN_SUB, a, b, sub_bw, false, false, false); }
dg_tensor *dg_mul(const dg_tensor *a, const dg_tensor *b) { return bin_entry(DG_OP_MUL, DG_BIN_MUL, a, b, mul_bw, true, true, false); }
dg_tensor *dg_div(const dg_tensor *a, const dg_tensor *b) { return bin_entry(DG_OP_DIV, DG_BIN_DIV, a, b, div_bw, false, true, true); }
dg_tensor *dg_maximum(const dg_tensor *a, const dg_tensor *b) { return bin_entry(DG_OP_MAXIMUM, DG_BIN_MAX, a, b, max_bw, true, true, false); }
dg_tensor *dg_minimum(const dg_tensor *a, const dg_tensor *b) { return bin_entry(DG_OP_MINIMUM, DG_BIN_MIN, a, b, min_bw, true, true, false); }
dg_tensor *dg_pow(const dg_tensor *a, const dg_tensor *b) { return bin_entry(DG_OP_POW, DG_BIN_POW, a, b, pow_bw, true, true, true); }

/* ---- comparisons and where ---- */
/* Operands of different dtypes are first cast to the dtype the arithmetic promotes them to, as
 * torch compares (int32 with float32 in float32, a float32 tensor with a 0-d float64 in float32);
 * the kernels then compare within one dtype, int64 as int64 (a double cannot tell 2^53 + 1 from
 * 2^53). The casts are made without recording: a mask has no gradient. */
static dg_tensor *compare(dg_op_id id, dg_binary_op op, const dg_tensor *a, const dg_tensor *b) {
    const char *name = dg_op_name(id);
    DG_CHECK_INPUT(name, a);
    DG_CHECK_INPUT(name, b);
    DG_CHECK_SAME_DEVICE(name, a, b);
    int64_t shp[DG_MAX_DIMS]; int nd;
    DG_CHECK(dg_broadcast_shape(a, b, shp, &nd), "%s: shapes %s and %s do not broadcast", name, DG_SHAPE_STR(a), DG_SHAPE_STR(b));
    dg_dtype dt = promote(a, b);
    if (a->dtype != dt || b->dtype != dt) {
        dg_scope *s = dg_scope_begin();
        dg_no_grad_begin();
        const dg_tensor *ac = as_dtype(a, dt), *bc = as_dtype(b, dt);
        dg_no_grad_end();
        return dg_composite_end(s, ac && bc ? compare(id, op, ac, bc) : NULL);
    }
    dg_tensor *y = dg_new_on(a, shp, nd, DG_BOOL);
    if (!y) return NULL;
    dg_kview av, bv;
    bcast_view(a, shp, nd, &av);
    bcast_view(b, shp, nd, &bv);
    DG_TRY_KERNEL(DG_KCALL(a, binary, op, &av, &bv, DG_KV(y), 0, 0), y);
    dg_trace_value(id, y, (const dg_tensor *[]){ a, b }, 2, NULL, 0);   /* no node: a mask has no gradient */
    return y;
}
static dg_tensor *compare_entry(dg_op_id id, dg_binary_op op, const dg_tensor *a, const dg_tensor *b) {
    dg_op_frame f;
    dg_op_enter(&f, id, DG_OP_IN(a, b));
    return dg_op_leave(&f, compare(id, op, f.arg[0], f.arg[1]));
}
dg_tensor *dg_greater(const dg_tensor *a, const dg_tensor *b) { return compare_entry(DG_OP_GREATER, DG_BIN_GT, a, b); }
dg_tensor *dg_equal(const dg_tensor *a, const dg_tensor *b) { return compare_entry(DG_OP_EQUAL, DG_BIN_EQ, a, b); }

static int where_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *c = dg_node_saved(n, 0);
    dg_tensor *zero = dg_zeros_like(g);
    if (dg_node_needs_grad(n, 1)) gi[1] = dg_sum_to(dg_where(c, g, zero), dg_node_input_shape(n, 1));
    if (dg_node_needs_grad(n, 2)) gi[2] = dg_sum_to(dg_where(c, zero, g), dg_node_input_shape(n, 2));
    return 0;
}

/* Branches of different dtypes are cast to the dtype the arithmetic promotes them to, as torch's
 * where does (int32 with float32 gives float32, int32 with int64 int64, float32 with float64
 * float64); the casts are recorded, so a float branch gets its gradient in its own dtype. */
static dg_tensor *where_op(const dg_tensor *c, const dg_tensor *a, const dg_tensor *b) {
    DG_CHECK_INPUT("where", c);
    DG_CHECK_INPUT("where", a);
    DG_CHECK_INPUT("where", b);
    DG_CHECK_SAME_DEVICE("where", a, b);
    DG_CHECK_SAME_DEVICE("where", c, a);
    if (a->dtype != b->dtype) {
        dg_dtype dt = promote(a, b);
        dg_scope *s = dg_scope_begin();
        const dg_tensor *ac = as_dtype(a, dt), *bc = as_dtype(b, dt);
        return dg_composite_end(s, ac && bc ? where_op(c, ac, bc) : NULL);
    }
    int64_t s1[DG_MAX_DIMS], s2[DG_MAX_DIMS]; int n1, n2;
    DG_CHECK(dg_broadcast_shape(a, b, s1, &n1), "where: shapes %s and %s do not broadcast", DG_SHAPE_STR(a), DG_SHAPE_STR(b));
    DG_CHECK(broadcast_shapes(c->shape, c->ndim, s1, n1, s2, &n2), "where: condition %s does not broadcast with %s",
             DG_SHAPE_STR(c), dg_shape_fmt(s1, n1, (char[96]){0}, 96));
    dg_tensor *y = dg_new_on(a, s2, n2, a->dtype);
    if (!y) return NULL;
    dg_kview cv, av, bv;
    bcast_view(c, s2, n2, &cv);
    bcast_view(a, s2, n2, &av);
    bcast_view(b, s2, n2, &bv);
    DG_TRY_KERNEL(DG_KCALL(a, where, &cv, &av, &bv, DG_KV(y)), y);
    const dg_tensor *in[3] = { c, a, b };
    if (dg_dtype_is_float(a->dtype) && dg_op_records()) {
        dg_node *n = dg_record_op(DG_OP_WHERE, y, in, 3, where_bw);
        if (!n || dg_node_save(n, c)) { dg_tensor_free(y); return NULL; }
    }
    dg_trace_value(DG_OP_WHERE, y, in, 3, NULL, 0);   /* nothing to record (constant branches): still a graph op */
    return y;
}
dg_tensor *dg_where(const dg_tensor *c, const dg_tensor *a, const dg_tensor *b) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_WHERE, DG_OP_IN(c, a, b));
    return dg_op_leave(&f, where_op(f.arg[0], f.arg[1], f.arg[2]));
}

/* ---- unary ops ---- */
enum { SAVE_NONE, SAVE_X, SAVE_Y };

static dg_tensor *unary(dg_op_id id, dg_unary_op op, const dg_tensor *x, double p0, double p1,
                        dg_backward_fn bw, int save);

/* A whole-number scalar acts as torch's Python int from -2^63 to 2^63 (2^63 itself comes from
 * sub_scalar's -(-2^63) and is -2^63 modulo 2^64); past that a Python int would not fit int64,
 * so the scalar acts as a Python float. */
static bool int_scalar(double v) { return v == trunc(v) && fabs(v) <= 0x1p63; }
/* An int_scalar v wrapped into dt modulo 2^32 or 2^64, as torch converts an int scalar to the
 * tensor's type (3e9 into int32 is -1294967296), as the double holding that integer exactly. The
 * conversions go through the unsigned types: converting a double outside the target's range is
 * undefined in C. */
static double wrap_int_scalar(double v, dg_dtype dt) {
    int64_t w = v >= 0x1p63 ? INT64_MIN : (int64_t)v;
    if (dt != DG_I32) return (double)w;
    uint32_t u = (uint32_t)(uint64_t)w;
    return u >= 0x80000000u ? (double)u - 0x1p32 : (double)u;
}

/* Integer inputs, as torch: scalar add/sub/mul by a whole number, neg and abs stay integer (on
 * the integer kernels); the math functions (exp, log, log1p, sqrt, rsqrt, sin, cos, sigmoid, tanh,
 * gelu, s / x) and a
 * fractional scalar give float32; the rest (relu, clip, pow_scalar, ...) are refused by
 * DG_CHECK_FLOAT with the dtype named. */
static dg_tensor *unary_int(dg_unary_op op, const dg_tensor *x, double p0, double p1) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *y;
    if (op == DG_UN_ABS) y = dg_maximum(x, dg_neg(x));
    else {
        p0 = wrap_int_scalar(p0, x->dtype);
        p1 = wrap_int_scalar(p1, x->dtype);
        y = p0 == 1 ? (dg_tensor *)x : dg_mul(x, dg_full_on(x, DG_SHAPE(1), p0, x->dtype));
        if (p1 != 0) y = dg_add(y, dg_full_on(x, DG_SHAPE(1), p1, x->dtype));
        if (y == x) y = dg_clone(x);
    }
    return dg_composite_end(s, y);
}

static dg_tensor *unary(dg_op_id id, dg_unary_op op, const dg_tensor *x, double p0, double p1,
                        dg_backward_fn bw, int save) {
    const char *name = dg_op_name(id);
    DG_CHECK_INPUT(name, x);
    if (x->dtype == DG_I32 || x->dtype == DG_I64) {
        bool math = op == DG_UN_AFFINE || op == DG_UN_EXP || op == DG_UN_LOG || op == DG_UN_SQRT || op == DG_UN_SIGMOID ||
                    op == DG_UN_TANH || op == DG_UN_GELU || op == DG_UN_GELU_TANH || op == DG_UN_RDIV ||
                    op == DG_UN_LOG1P || op == DG_UN_RSQRT || op == DG_UN_SIN || op == DG_UN_COS;
        bool whole = op == DG_UN_AFFINE && int_scalar(p0) && int_scalar(p1);
        if (op == DG_UN_ABS || whole) return unary_int(op, x, p0, p1);
        if (math) {
            dg_scope *s = dg_scope_begin();
            return dg_composite_end(s, unary(id, op, dg_cast(x, DG_F32), p0, p1, bw, save));
        }
    }
    DG_CHECK_FLOAT(name, x);
    dg_tensor *y = dg_new_like(x);
    if (!y) return NULL;
    DG_TRY_KERNEL(DG_KCALL(x, unary, op, DG_KV(x), DG_KV(y), p0, p1), y);
    const dg_tensor *in[1] = { x };
    if (bw && dg_op_records()) {
        dg_node *n = dg_record_op(id, y, in, 1, bw);
        if (!n || (save == SAVE_X && dg_node_save(n, x)) || (save == SAVE_Y && dg_node_save(n, y))) {
            dg_tensor_free(y);
            return NULL;
        }
        scal_attr *at = dg_node_attr(n);
        at->p0 = p0;
        at->p1 = p1;
    }
    return y;
}
#define ATTR(n) ((scal_attr *)dg_node_attr(n))

static int pass_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = (dg_tensor *)g; return 0; }
static int affine_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_mul_scalar(g, ATTR(n)->p0); return 0; }
static int rdiv_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {   /* d(s/x) = -s/x^2 = -y*y/s */
    const dg_tensor *x = dg_node_saved(n, 0);
    gi[0] = dg_neg(dg_div(dg_mul_scalar(g, ATTR(n)->p0), dg_mul(x, x)));
    return 0;
}
static int pows_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *x = dg_node_saved(n, 0);
    double e = ATTR(n)->p0;
    if (e == 0) { gi[0] = dg_zeros_like(g); return 0; }   /* x^0 is constant: not 0 * x^-1, NaN at 0 */
    gi[0] = dg_mul(g, dg_mul_scalar(dg_pow_scalar(x, e - 1), e));
    return 0;
}
static int exp_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_mul(g, dg_node_saved(n, 0)); return 0; }
static int log_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_div(g, dg_node_saved(n, 0)); return 0; }
static int sqrt_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_div(dg_mul_scalar(g, 0.5), dg_node_saved(n, 0)); return 0; }
static int abs_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_mul(g, un_k(DG_UN_SIGN, dg_node_saved(n, 0), 0, 0)); return 0; }
static int clip_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = bin_k(DG_BIN_CLIP_GRAD, g, dg_node_saved(n, 0), ATTR(n)->p0, ATTR(n)->p1); return 0; }
static int relu_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = bin_k(DG_BIN_RELU_GRAD, g, dg_node_saved(n, 0), 0, 0); return 0; }
static int leaky_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = bin_k(DG_BIN_LEAKY_RELU_GRAD, g, dg_node_saved(n, 0), ATTR(n)->p0, 0); return 0; }
static int sigmoid_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = bin_k(DG_BIN_SIGMOID_GRAD, g, dg_node_saved(n, 0), 0, 0); return 0; }
static int tanh_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = bin_k(DG_BIN_TANH_GRAD, g, dg_node_saved(n, 0), 0, 0); return 0; }
static int gelu_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    gi[0] = bin_k(ATTR(n)->p1 ? DG_BIN_GELU_TANH_GRAD : DG_BIN_GELU_GRAD, g, dg_node_saved(n, 0), 0, 0);
    return 0;
}

static int elu_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = bin_k(DG_BIN_ELU_GRAD, g, dg_node_saved(n, 0), ATTR(n)->p0, 0); return 0; }
static int softplus_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    gi[0] = bin_k(DG_BIN_SOFTPLUS_GRAD, g, dg_node_saved(n, 0), ATTR(n)->p0, ATTR(n)->p1);
    return 0;
}
static int silu_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = bin_k(DG_BIN_SILU_GRAD, g, dg_node_saved(n, 0), 0, 0); return 0; }
static int log1p_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_div(g, dg_add_scalar(dg_node_saved(n, 0), 1.0)); return 0; }
static int rsqrt_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {   /* -1/2 x^(-3/2) = -y^3 / 2, as torch */
    const dg_tensor *y = dg_node_saved(n, 0);
    gi[0] = dg_mul(g, dg_mul_scalar(dg_mul(dg_mul(y, y), y), -0.5));
    return 0;
}
static int sin_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_mul(g, dg_cos(dg_node_saved(n, 0))); return 0; }
static int cos_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_mul(g, dg_neg(dg_sin(dg_node_saved(n, 0)))); return 0; }

/* The public unary ops: the entry path (op_entry.h) around unary() */
static dg_tensor *un_entry(dg_op_id id, dg_unary_op op, const dg_tensor *x, double p0, double p1, dg_backward_fn bw, int save) {
    dg_op_frame f;
    dg_op_enter(&f, id, DG_OP_IN(x));
    return dg_op_leave(&f, unary(id, op, f.arg[0], p0, p1, bw, save));
}

dg_tensor *dg_add_scalar(const dg_tensor *a, double s) { return un_entry(DG_OP_ADD_SCALAR, DG_UN_AFFINE, a, 1.0, s, pass_bw, SAVE_NONE); }
dg_tensor *dg_sub_scalar(const dg_tensor *a, double s) { return un_entry(DG_OP_SUB_SCALAR, DG_UN_AFFINE, a, 1.0, -s, pass_bw, SAVE_NONE); }
dg_tensor *dg_rsub_scalar(const dg_tensor *a, double s) { return un_entry(DG_OP_RSUB_SCALAR, DG_UN_AFFINE, a, -1.0, s, affine_bw, SAVE_NONE); }
dg_tensor *dg_mul_scalar(const dg_tensor *a, double s) { return un_entry(DG_OP_MUL_SCALAR, DG_UN_AFFINE, a, s, 0.0, affine_bw, SAVE_NONE); }
static dg_tensor *div_scalar_op(const dg_tensor *a, double s) {
    if (a && dg_tensor_live(a) && (a->dtype == DG_I32 || a->dtype == DG_I64)) {   /* true division, as torch: float32 */
        dg_scope *sc = dg_scope_begin();
        return dg_composite_end(sc, div_scalar_op(dg_cast(a, DG_F32), s));
    }
    return unary(DG_OP_DIV_SCALAR, DG_UN_AFFINE, a, 1.0 / s, 0.0, affine_bw, SAVE_NONE);
}
dg_tensor *dg_div_scalar(const dg_tensor *a, double s) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_DIV_SCALAR, DG_OP_IN(a));
    return dg_op_leave(&f, div_scalar_op(f.arg[0], s));
}
dg_tensor *dg_rdiv_scalar(const dg_tensor *a, double s) { return un_entry(DG_OP_RDIV_SCALAR, DG_UN_RDIV, a, s, 0.0, rdiv_bw, SAVE_X); }
dg_tensor *dg_pow_scalar(const dg_tensor *a, double e) { return un_entry(DG_OP_POW_SCALAR, DG_UN_POWS, a, e, 0.0, pows_bw, SAVE_X); }
dg_tensor *dg_neg(const dg_tensor *a) { return un_entry(DG_OP_NEG, DG_UN_AFFINE, a, -1.0, 0.0, affine_bw, SAVE_NONE); }
dg_tensor *dg_exp(const dg_tensor *a) { return un_entry(DG_OP_EXP, DG_UN_EXP, a, 0, 0, exp_bw, SAVE_Y); }
dg_tensor *dg_log(const dg_tensor *a) { return un_entry(DG_OP_LOG, DG_UN_LOG, a, 0, 0, log_bw, SAVE_X); }
dg_tensor *dg_sqrt(const dg_tensor *a) { return un_entry(DG_OP_SQRT, DG_UN_SQRT, a, 0, 0, sqrt_bw, SAVE_Y); }
dg_tensor *dg_abs(const dg_tensor *a) { return un_entry(DG_OP_ABS, DG_UN_ABS, a, 0, 0, abs_bw, SAVE_X); }
static dg_tensor *clip_op(const dg_tensor *a, double lo, double hi) {
    DG_CHECK(!(lo > hi), "clip: min %g is greater than max %g", lo, hi);
    return unary(DG_OP_CLIP, DG_UN_CLIP, a, lo, hi, clip_bw, SAVE_X);
}
dg_tensor *dg_clip(const dg_tensor *a, double lo, double hi) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CLIP, DG_OP_IN(a));
    return dg_op_leave(&f, clip_op(f.arg[0], lo, hi));
}
/* relu saves its output: y > 0 exactly where x > 0, and y is what the next layer keeps anyway,
 * so the input (a batch norm's output, say) can be freed during the forward (as torch's
 * inplace ReLU allows) */
dg_tensor *dg_relu(const dg_tensor *x) { return un_entry(DG_OP_RELU, DG_UN_RELU, x, 0, 0, relu_bw, SAVE_Y); }
dg_tensor *dg_leaky_relu(const dg_tensor *x, double slope) { return un_entry(DG_OP_LEAKY_RELU, DG_UN_LEAKY_RELU, x, slope, 0, leaky_bw, SAVE_X); }
dg_tensor *dg_sigmoid(const dg_tensor *x) { return un_entry(DG_OP_SIGMOID, DG_UN_SIGMOID, x, 0, 0, sigmoid_bw, SAVE_Y); }
dg_tensor *dg_tanh(const dg_tensor *x) { return un_entry(DG_OP_TANH, DG_UN_TANH, x, 0, 0, tanh_bw, SAVE_Y); }
dg_tensor *dg_gelu(const dg_tensor *x, bool approx) {
    return un_entry(DG_OP_GELU, approx ? DG_UN_GELU_TANH : DG_UN_GELU, x, 0, approx ? 1.0 : 0.0, gelu_bw, SAVE_X);
}

dg_tensor *dg_elu(const dg_tensor *x, double alpha) { return un_entry(DG_OP_ELU, DG_UN_ELU, x, alpha, 0, elu_bw, SAVE_X); }
/* torch's rule: where x * beta > threshold the value is x (and the gradient g); beta is not
 * checked, as torch does not (beta 0 gives inf / nan as there) */
dg_tensor *dg_softplus(const dg_tensor *x, double beta, double threshold) {
    return un_entry(DG_OP_SOFTPLUS, DG_UN_SOFTPLUS, x, beta, threshold, softplus_bw, SAVE_X);
}
dg_tensor *dg_silu(const dg_tensor *x) { return un_entry(DG_OP_SILU, DG_UN_SILU, x, 0, 0, silu_bw, SAVE_X); }
dg_tensor *dg_log1p(const dg_tensor *x) { return un_entry(DG_OP_LOG1P, DG_UN_LOG1P, x, 0, 0, log1p_bw, SAVE_X); }
dg_tensor *dg_rsqrt(const dg_tensor *x) { return un_entry(DG_OP_RSQRT, DG_UN_RSQRT, x, 0, 0, rsqrt_bw, SAVE_Y); }
dg_tensor *dg_sin(const dg_tensor *x) { return un_entry(DG_OP_SIN, DG_UN_SIN, x, 0, 0, sin_bw, SAVE_X); }
dg_tensor *dg_cos(const dg_tensor *x) { return un_entry(DG_OP_COS, DG_UN_COS, x, 0, 0, cos_bw, SAVE_X); }

/* ---- in-place (untracked) updates ---- */
int dg_fill_(dg_tensor *t, double v) {
    int rc = dg_check_inplace(t, "fill_");
    return rc ? rc : DG_KCALL(t, fill, DG_KV(t), v);
}

static int inplace_binary(const char *name, dg_binary_op op, dg_tensor *dst, const dg_tensor *src, double p0, double p1) {
    int rc = dg_check_inplace(dst, name);
    if (rc) return rc;
    rc = dg_tensor_check(name, "src", src);
    if (rc) return rc;
    DG_CHECK_INT(src->dtype == dst->dtype, "%s: dtype %s into %s", name, dg_dtype_name(src->dtype), dg_dtype_name(dst->dtype));
    int64_t shp[DG_MAX_DIMS]; int nd;
    DG_CHECK_INT(dg_broadcast_shape(dst, src, shp, &nd) && nd == dst->ndim && dg_shape_numel(shp, nd) == dst->numel,
                 "%s: source %s does not broadcast to destination %s", name, DG_SHAPE_STR(src), DG_SHAPE_STR(dst));
    dg_kview sv;
    bcast_view(src, dst->shape, dst->ndim, &sv);
    return DG_KCALL(dst, binary, op, DG_KV(dst), &sv, DG_KV(dst), p0, p1);
}
int dg_copy_(dg_tensor *dst, const dg_tensor *src) {
    int rc = dg_check_inplace(dst, "copy_");
    if (rc) return rc;
    DG_CHECK_INPUT_INT("copy_", src);
    int64_t shp[DG_MAX_DIMS]; int nd;
    DG_CHECK_INT(dg_broadcast_shape(dst, src, shp, &nd) && nd == dst->ndim && dg_shape_numel(shp, nd) == dst->numel,
                 "copy_: source %s does not broadcast to destination %s", DG_SHAPE_STR(src), DG_SHAPE_STR(dst));
    if (src->storage->device.type != dst->storage->device.type || src->storage->device.index != dst->storage->device.index) {
        /* across devices (loading a CPU checkpoint into GPU parameters): move, then copy there */
        dg_tensor *moved = dg_to_device(src, dst->storage->device);
        if (!moved) return dg_last_status() ? dg_last_status() : DG_EDEVICE;
        rc = dg_copy_(dst, moved);
        dg_tensor_free(moved);
        return rc;
    }
    dg_kview sv;
    bcast_view(src, dst->shape, dst->ndim, &sv);
    return DG_KCALL(dst, copy, &sv, DG_KV(dst));
}
int dg_add_(dg_tensor *dst, const dg_tensor *src) { return inplace_binary("add_", DG_BIN_ADD, dst, src, 0, 0); }
int dg_axpy_(dg_tensor *y, double alpha, const dg_tensor *x) { return inplace_binary("axpy_", DG_BIN_AXPBY, y, x, 1.0, alpha); }
int dg_scale_(dg_tensor *t, double alpha) {
    int rc = dg_check_inplace(t, "scale_");
    if (rc) return rc;
    DG_CHECK_INT(dg_dtype_is_float(t->dtype), "scale_: dtype %s", dg_dtype_name(t->dtype));
    return DG_KCALL(t, unary, DG_UN_AFFINE, DG_KV(t), DG_KV(t), alpha, 0.0);
}
