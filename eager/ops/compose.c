/* eager/ops/compose.c — PyTorch ops built only from other differentiable ops: flip, tile
 * (Tensor.repeat), masked_fill, logsumexp, var/std, vector norm and pad. They need no kernels of
 * their own, so every backend runs them (CPU and CUDA alike) and their gradients come from the
 * ops they are made of. Each checks its arguments first, so a bad axis or size is reported under
 * its own name; where torch's gradient differs from the plain chain rule (the 2-norm and std at
 * 0, logsumexp's detached max) the composition is arranged to give torch's. */
#include "op_util.h"

#include <math.h>

/* A 1-D int64 index holding v on like's device (a constant: index tensors are not recorded). */
static dg_tensor *index_on(const dg_tensor *like, const int64_t *v, int64_t n) {
    dg_tensor *h = dg_from_data(DG_SHAPE(n), DG_I64, v);
    return h ? dg_to_device(h, like->storage->device) : NULL;
}

/* Axes into a mask (none given: all); false with a message naming op on a bad or repeated axis. */
static bool axes_mask(const char *op, const dg_tensor *x, const int *axes, int n, bool *mask) {
    memset(mask, 0, sizeof(bool) * DG_MAX_DIMS);
    if (n < 0 || (n > 0 && !axes)) {
        DG_ERR(DG_EINVAL, "%s: %d axes given%s for %s", op, n, axes ? "" : " with a NULL array", DG_SHAPE_STR(x));
        return false;
    }
    if (n == 0) { for (int i = 0; i < x->ndim; i++) mask[i] = true; return true; }
    for (int i = 0; i < n; i++) {
        int a = dg_norm_axis(axes[i], x->ndim);
        if (a < 0 || x->ndim == 0) {
            DG_ERR(DG_EINVAL, "%s: axis %d out of range for %s", op, axes[i], DG_SHAPE_STR(x));
            return false;
        }
        if (mask[a]) {
            DG_ERR(DG_EINVAL, "%s: axis %d of %s appears more than once in the axes", op, a, DG_SHAPE_STR(x));
            return false;
        }
        mask[a] = true;
    }
    return true;
}

/* x's shape with the masked axes dropped (keepdim false) or kept as 1 */
static dg_shape reduced_shape(const dg_tensor *x, const bool *mask, bool keepdim) {
    dg_shape s = { 0 };
    for (int i = 0; i < x->ndim; i++) {
        if (!mask[i]) s.d[s.ndim++] = x->shape[i];
        else if (keepdim) s.d[s.ndim++] = 1;
    }
    return s;
}

/* sqrt(v) with a gradient of 0 where v is 0 (torch's for the 2-norm and std), not inf * 0 */
static dg_tensor *sqrt_zero_safe(const dg_tensor *v) {
    if (!v) return NULL;
    dg_tensor *zero = dg_full_on(v, DG_SCALAR_SHAPE, 0.0, v->dtype), *one = dg_full_on(v, DG_SCALAR_SHAPE, 1.0, v->dtype);
    if (!zero || !one) return NULL;
    dg_tensor *is0 = dg_equal(v, zero);
    return dg_where(is0, zero, dg_sqrt(dg_where(is0, one, v)));
}

/* ---------------------------------------------------------------------------------- flip */
static dg_tensor *flip_op(const dg_tensor *x, const int *axes, int n) {
    DG_CHECK_INPUT("flip", x);
    DG_CHECK(n >= 0 && (n == 0 || axes), "flip: %d axes given%s for %s", n, axes ? "" : " with a NULL array", DG_SHAPE_STR(x));
    bool seen[DG_MAX_DIMS] = { false };
    for (int i = 0; i < n; i++) {
        int a = dg_norm_axis(axes[i], x->ndim);
        DG_CHECK(a >= 0 && x->ndim > 0, "flip: axis %d out of range for %s", axes[i], DG_SHAPE_STR(x));
        DG_CHECK(!seen[a], "flip: axis %d of %s appears more than once in the axes", a, DG_SHAPE_STR(x));
        seen[a] = true;
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = n == 0 ? dg_clone(x) : (dg_tensor *)x;
    for (int a = 0; a < x->ndim && y; a++) {
        if (!seen[a] || x->shape[a] <= 1) continue;
        int64_t len = x->shape[a], *ix = malloc(sizeof(int64_t) * (size_t)len);
        if (!ix) { DG_ERR(DG_ENOMEM, "flip: out of host memory for an index of %lld", (long long)len); y = NULL; break; }
        for (int64_t k = 0; k < len; k++) ix[k] = len - 1 - k;
        y = dg_index_select(y, index_on(x, ix, len), a);
        free(ix);
    }
    if (y == x) y = dg_clone(x);   /* nothing to reverse: still a new tensor, as torch.flip's */
    return dg_composite_end(s, y);
}
dg_tensor *dg_flip(const dg_tensor *x, const int *axes, int n) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_FLIP, DG_OP_IN(x));
    return dg_op_leave(&f, flip_op(f.arg[0], axes, n));
}

/* ---------------------------------------------------------------------------------- tile */
static dg_tensor *tile_op(const dg_tensor *x, const int64_t *reps, int n) {
    DG_CHECK_INPUT("tile", x);
    DG_CHECK(n >= 0 && (n == 0 || reps), "tile: %d repetitions given%s for %s", n, reps ? "" : " with a NULL array", DG_SHAPE_STR(x));
    int nd = n > x->ndim ? n : x->ndim;
    DG_CHECK(nd <= DG_MAX_DIMS, "tile: %d repetitions for %s make more than %d dims", n, DG_SHAPE_STR(x), DG_MAX_DIMS);
    for (int i = 0; i < n; i++)
        DG_CHECK(reps[i] >= 0, "tile: repetition %d is %lld for %s (must be >= 0)", i, (long long)reps[i], DG_SHAPE_STR(x));
    dg_shape shp = { .ndim = nd };
    for (int i = 0; i < nd; i++) shp.d[i] = i < nd - x->ndim ? 1 : x->shape[i - (nd - x->ndim)];
    for (int i = 0; i < nd; i++) {
        int64_t r = i < nd - n ? 1 : reps[i - (nd - n)];
        DG_CHECK(r == 0 || shp.d[i] <= INT64_MAX / r, "tile: repetition %lld of axis %d overflows for %s", (long long)r, i, DG_SHAPE_STR(x));
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_reshape(x, shp);
    bool copied = false;
    for (int i = 0; i < nd && y; i++) {
        int64_t r = i < nd - n ? 1 : reps[i - (nd - n)], len = shp.d[i] * r;
        if (r == 1) continue;
        int64_t *ix = malloc(sizeof(int64_t) * (size_t)(len > 0 ? len : 1));
        if (!ix) { DG_ERR(DG_ENOMEM, "tile: out of host memory for an index of %lld", (long long)len); y = NULL; break; }
        for (int64_t k = 0; k < len; k++) ix[k] = k % shp.d[i];
        y = dg_index_select(y, index_on(x, ix, len), i);
        copied = true;
        free(ix);
    }
    if (y && !copied) y = dg_clone(y);   /* all ones: a copy, as torch's */
    return dg_composite_end(s, y);
}
dg_tensor *dg_tile(const dg_tensor *x, const int64_t *reps, int n) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_TILE, DG_OP_IN(x));
    return dg_op_leave(&f, tile_op(f.arg[0], reps, n));
}

/* ---------------------------------------------------------------------------------- masked_fill */
static dg_tensor *masked_fill_op(const dg_tensor *x, const dg_tensor *mask, double value) {
    DG_CHECK_INPUT("masked_fill", x);
    DG_CHECK_INPUT("masked_fill", mask);
    DG_CHECK(mask->dtype == DG_BOOL, "masked_fill: mask must be bool, got %s %s (input %s)", dg_dtype_name(mask->dtype),
             DG_SHAPE_STR(mask), DG_SHAPE_STR(x));
    DG_CHECK_SAME_DEVICE("masked_fill", x, mask);
    int64_t shp[DG_MAX_DIMS]; int nd = 0;
    bool ok = dg_broadcast_shape(mask, x, shp, &nd) && nd == x->ndim;
    for (int i = 0; ok && i < nd; i++) ok = shp[i] == x->shape[i];
    DG_CHECK(ok, "masked_fill: mask %s does not broadcast to the input's shape %s", DG_SHAPE_STR(mask), DG_SHAPE_STR(x));
    dg_scope *s = dg_scope_begin();
    dg_tensor *v = dg_full_on(x, DG_SCALAR_SHAPE, value, x->dtype);
    dg_tensor *y = v ? dg_where(mask, v, x) : NULL;
    /* to a trace: Where(mask, value, x), the scalar made here being no value of the graph */
    dg_trace_composite(DG_OP_MASKED_FILL, y, (const dg_tensor *[]){ x, mask }, 2, &(dg_fill_trace_attr){ value },
                       sizeof(dg_fill_trace_attr));
    return dg_composite_end(s, y);
}
dg_tensor *dg_masked_fill(const dg_tensor *x, const dg_tensor *mask, double value) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MASKED_FILL, DG_OP_IN(x, mask));
    return dg_op_leave(&f, masked_fill_op(f.arg[0], f.arg[1], value));
}

/* ---------------------------------------------------------------------------------- logsumexp */
static dg_tensor *logsumexp_op(const dg_tensor *x, const int *axes, int n, bool keepdim) {
    DG_CHECK_INPUT("logsumexp", x);
    DG_CHECK_FLOAT("logsumexp", x);
    bool mask[DG_MAX_DIMS];
    if (!axes_mask("logsumexp", x, axes, n, mask)) return NULL;
    bool empty = false;   /* over no elements: log(0) = -inf, as torch; there is no max to take out */
    for (int i = 0; i < x->ndim; i++) empty |= mask[i] && x->shape[i] == 0;
    dg_scope *s = dg_scope_begin();
    /* torch's: the max taken out is a constant (its gradient terms cancel), and an infinite max
     * is taken as 0 so that inf - inf does not make a NaN */
    dg_no_grad_begin();
    dg_tensor *m;
    if (empty) m = dg_full_on(x, reduced_shape(x, mask, true), 0.0, x->dtype);
    else {
        m = dg_detach(dg_max(x, axes, n, true));
        dg_tensor *inf = m ? dg_full_on(m, DG_SCALAR_SHAPE, INFINITY, m->dtype) : NULL;
        dg_tensor *zero = m ? dg_full_on(m, DG_SCALAR_SHAPE, 0.0, m->dtype) : NULL;
        m = inf && zero ? dg_where(dg_equal(dg_abs(m), inf), zero, m) : NULL;
    }
    dg_no_grad_end();
    dg_tensor *lse = m ? dg_log(dg_sum(dg_exp(dg_sub(x, m)), axes, n, keepdim)) : NULL;
    dg_tensor *y = lse ? dg_add(lse, keepdim ? m : dg_reshape(m, reduced_shape(x, mask, false))) : NULL;
    return dg_composite_end(s, y);
}
dg_tensor *dg_logsumexp(const dg_tensor *x, const int *axes, int n, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_LOGSUMEXP, DG_OP_IN(x));
    return dg_op_leave(&f, logsumexp_op(f.arg[0], axes, n, keepdim));
}

/* ---------------------------------------------------------------------------------- var, std */
static dg_tensor *var_impl(const char *op, const dg_tensor *x, const int *axes, int n, bool unbiased, bool keepdim) {
    bool mask[DG_MAX_DIMS];
    if (!axes_mask(op, x, axes, n, mask)) return NULL;
    int64_t cnt = 1;
    for (int i = 0; i < x->ndim; i++) if (mask[i]) cnt *= x->shape[i];
    DG_CHECK(cnt > 0, "%s: reducing an empty tensor %s", op, DG_SHAPE_STR(x));
    /* torch divides by max(0, N - correction): one element, unbiased, gives 0/0 = NaN */
    double div = (double)cnt - (unbiased ? 1.0 : 0.0);
    dg_tensor *d = dg_sub(x, dg_mean(x, axes, n, true));
    dg_tensor *ss = dg_sum(dg_mul(d, d), axes, n, keepdim);
    if (!ss) return NULL;
    return div > 0 ? dg_div_scalar(ss, div) : dg_mul_scalar(ss, NAN);
}
static dg_tensor *var_op(const dg_tensor *x, const int *axes, int n, bool unbiased, bool keepdim) {
    DG_CHECK_INPUT("var", x);
    DG_CHECK_FLOAT("var", x);
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, var_impl("var", x, axes, n, unbiased, keepdim));
}
dg_tensor *dg_var(const dg_tensor *x, const int *axes, int n, bool unbiased, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_VAR, DG_OP_IN(x));
    return dg_op_leave(&f, var_op(f.arg[0], axes, n, unbiased, keepdim));
}
static dg_tensor *std_op(const dg_tensor *x, const int *axes, int n, bool unbiased, bool keepdim) {
    DG_CHECK_INPUT("std", x);
    DG_CHECK_FLOAT("std", x);
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, sqrt_zero_safe(var_impl("std", x, axes, n, unbiased, keepdim)));
}
dg_tensor *dg_std(const dg_tensor *x, const int *axes, int n, bool unbiased, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_STD, DG_OP_IN(x));
    return dg_op_leave(&f, std_op(f.arg[0], axes, n, unbiased, keepdim));
}

/* ---------------------------------------------------------------------------------- norm */
static dg_tensor *norm_op(const dg_tensor *x, double p, const int *axes, int n, bool keepdim) {
    DG_CHECK_INPUT("norm", x);
    DG_CHECK_FLOAT("norm", x);
    DG_CHECK(p == 1.0 || p == 2.0 || p == INFINITY, "norm: p must be 1, 2 or INFINITY, got %g (input %s)", p, DG_SHAPE_STR(x));
    bool mask[DG_MAX_DIMS];
    if (!axes_mask("norm", x, axes, n, mask)) return NULL;
    if (p == INFINITY)
        for (int i = 0; i < x->ndim; i++)
            DG_CHECK(!mask[i] || x->shape[i] > 0, "norm: the inf-norm of the empty axis %d of %s", i, DG_SHAPE_STR(x));
    dg_scope *s = dg_scope_begin();
    dg_tensor *y;
    if (p == 1.0) y = dg_sum(dg_abs(x), axes, n, keepdim);
    else if (p == 2.0) y = sqrt_zero_safe(dg_sum(dg_mul(x, x), axes, n, keepdim));
    else y = dg_max(dg_abs(x), axes, n, keepdim);   /* ties share the gradient equally, as torch's */
    return dg_composite_end(s, y);
}
dg_tensor *dg_norm(const dg_tensor *x, double p, const int *axes, int n, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_NORM, DG_OP_IN(x));
    return dg_op_leave(&f, norm_op(f.arg[0], p, axes, n, keepdim));
}

/* ---------------------------------------------------------------------------------- pad */
static const char *pad_mode_name(dg_pad_mode m) {
    return m == DG_PAD_CONSTANT ? "constant" : m == DG_PAD_REFLECT ? "reflect" : m == DG_PAD_REPLICATE ? "replicate" : "?";
}

/* one axis padded by reflect/replicate: an index_select with the source position of each output */
static dg_tensor *pad_gather(const dg_tensor *y, int a, int64_t l, int64_t r, dg_pad_mode mode) {
    int64_t sz = y->shape[a], len = l + sz + r;
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)(len > 0 ? len : 1));
    if (!ix) { DG_ERR(DG_ENOMEM, "pad: out of host memory for an index of %lld", (long long)len); return NULL; }
    for (int64_t k = 0; k < len; k++) {
        int64_t j = k - l;
        if (mode == DG_PAD_REFLECT) ix[k] = j < 0 ? -j : j >= sz ? 2 * (sz - 1) - j : j;
        else ix[k] = j < 0 ? 0 : j >= sz ? sz - 1 : j;
    }
    dg_tensor *out = dg_index_select(y, index_on(y, ix, len), a);
    free(ix);
    return out;
}

static dg_tensor *pad_op(const dg_tensor *x, const int64_t *pads, int npads, dg_pad_mode mode, double value) {
    DG_CHECK_INPUT("pad", x);
    DG_CHECK(mode == DG_PAD_CONSTANT || mode == DG_PAD_REFLECT || mode == DG_PAD_REPLICATE,
             "pad: unknown mode %d (input %s)", (int)mode, DG_SHAPE_STR(x));
    DG_CHECK(npads >= 0 && npads % 2 == 0 && (npads == 0 || pads), "pad: %d pads given for %s (must be an even count: left, right per axis)",
             npads, DG_SHAPE_STR(x));
    DG_CHECK(npads / 2 <= x->ndim, "pad: %d pads cover %d axes but input %s has %d", npads, npads / 2, DG_SHAPE_STR(x), x->ndim);
    if (mode == DG_PAD_CONSTANT) DG_CHECK(dg_dtype_is_float(x->dtype) || x->dtype == DG_I64 || x->dtype == DG_I32,
                                          "pad: constant mode on %s input %s", dg_dtype_name(x->dtype), DG_SHAPE_STR(x));
    for (int k = 0; k < npads / 2; k++) {
        int a = x->ndim - 1 - k;
        int64_t l = pads[2 * k], r = pads[2 * k + 1], sz = x->shape[a];
        if (mode == DG_PAD_CONSTANT) {
            DG_CHECK(sz + l + r >= 0 && (l >= 0 || sz + l >= 0) && (r >= 0 || sz + r >= 0),
                     "pad: pads (%lld, %lld) on axis %d of %s leave a negative size", (long long)l, (long long)r, a, DG_SHAPE_STR(x));
            continue;
        }
        DG_CHECK(l >= 0 && r >= 0, "pad: %s mode refuses negative pads, got (%lld, %lld) on axis %d of %s", pad_mode_name(mode),
                 (long long)l, (long long)r, a, DG_SHAPE_STR(x));
        if (mode == DG_PAD_REFLECT)
            DG_CHECK(l < sz && r < sz, "pad: reflect pads (%lld, %lld) must be smaller than axis %d's size %lld of %s",
                     (long long)l, (long long)r, a, (long long)sz, DG_SHAPE_STR(x));
        else
            DG_CHECK(sz > 0 || (l == 0 && r == 0), "pad: replicate mode on the empty axis %d of %s", a, DG_SHAPE_STR(x));
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = (dg_tensor *)x;
    for (int k = 0; k < npads / 2 && y; k++) {
        int a = x->ndim - 1 - k;
        int64_t l = pads[2 * k], r = pads[2 * k + 1];
        if (l == 0 && r == 0) continue;
        if (mode != DG_PAD_CONSTANT) { y = pad_gather(y, a, l, r, mode); continue; }
        if (l < 0 || r < 0) {   /* negative constant pads crop, as torch's */
            int64_t sz = y->shape[a];
            y = dg_slice(y, a, l < 0 ? -l : 0, r < 0 ? sz + r : sz, 1);
            if (l < 0) l = 0;
            if (r < 0) r = 0;
            if (!y || (l == 0 && r == 0)) continue;
        }
        dg_tensor *parts[3];
        int np = 0;
        dg_shape bs = dg_shape_of(y);
        if (l > 0) { bs.d[a] = l; parts[np++] = dg_full_on(y, bs, value, y->dtype); }
        parts[np++] = y;
        if (r > 0) { bs.d[a] = r; parts[np++] = dg_full_on(y, bs, value, y->dtype); }
        bool ok = true;
        for (int i = 0; i < np; i++) ok = ok && parts[i];
        y = ok ? dg_concat(parts, np, a) : NULL;
    }
    if (y == x) y = dg_clone(x);   /* no padding: a copy, as torch's */
    if (dg_tracing()) {   /* an exporter's Pad */
        dg_pad_trace_attr at = { .npads = npads, .mode = mode, .value = value };
        memcpy(at.pads, pads, sizeof(int64_t) * (size_t)npads);
        dg_trace_composite(DG_OP_PAD, y, &x, 1, &at, sizeof at);
    }
    return dg_composite_end(s, y);
}
dg_tensor *dg_pad(const dg_tensor *x, const int64_t *pads, int npads, dg_pad_mode mode, double value) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_PAD, DG_OP_IN(x));
    return dg_op_leave(&f, pad_op(f.arg[0], pads, npads, mode, value));
}
