/* eager/ops/shape.c — reshape, transpose/permute, squeeze/unsqueeze, expand, slice (views where
 * the strides allow), contiguous, clone, cast, to_device, concat and split. */
#include "op_util.h"

typedef dg_shape_attr shape_attr;   /* eager/ops/op_attrs.h */
#define SATTR(n) ((shape_attr *)dg_node_attr(n))

/* Records a one-input node on y when x needs grad. true, with *node the node (NULL when none
 * was needed; node may be NULL); false when recording was needed and failed (dg_record said
 * why): the caller frees y and fails, since y without its node would cut the graph. */
static bool record1(dg_op_id id, dg_tensor *y, const dg_tensor *x, dg_backward_fn bw, dg_node **node) {
    const dg_tensor *in[1] = { x };
    if (node) *node = NULL;
    if (!dg_op_records()) return true;
    dg_node *n = dg_record_op(id, y, in, 1, bw);
    if (node) *node = n;
    return n != NULL;
}

/* ---- contiguous / clone / cast / to_device ---- */
static int copy_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = (dg_tensor *)g; return 0; }

static dg_tensor *copy_op(dg_op_id id, const dg_tensor *x, bool record) {
    dg_tensor *y = dg_new_like(x);
    if (!y) return NULL;
    DG_TRY_KERNEL(DG_KCALL(x, copy, DG_KV(x), DG_KV(y)), y);
    if (record && !record1(id, y, x, copy_bw, NULL)) { dg_tensor_free(y); return NULL; }
    return y;
}

static dg_tensor *contiguous_op(const dg_tensor *x) {
    DG_CHECK_INPUT("contiguous", x);
    if (dg_is_contiguous(x)) {
        /* a fresh handle on the same storage, carrying x's history */
        dg_tensor *y = dg_tensor_view(x, x->ndim, x->shape, x->stride, x->offset);
        if (y && !record1(DG_OP_CONTIGUOUS, y, x, copy_bw, NULL)) { dg_tensor_free(y); return NULL; }
        return y;
    }
    return copy_op(DG_OP_CONTIGUOUS, x, true);
}
dg_tensor *dg_contiguous(const dg_tensor *x) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CONTIGUOUS, DG_OP_IN(x));
    return dg_op_leave(&f, contiguous_op(f.arg[0]));
}
static dg_tensor *clone_op(const dg_tensor *x) { DG_CHECK_INPUT("clone", x); return copy_op(DG_OP_CLONE, x, true); }
dg_tensor *dg_clone(const dg_tensor *x) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CLONE, DG_OP_IN(x));
    return dg_op_leave(&f, clone_op(f.arg[0]));
}

static int cast_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_cast(g, dg_node_input_dtype(n, 0)); return 0; }
static dg_tensor *cast_op(const dg_tensor *x, dg_dtype dt) {
    DG_CHECK_INPUT("cast", x);
    DG_CHECK(dg_dtype_bytes(dt), "cast: invalid target dtype %d", (int)dt);
    dg_tensor *y = dg_new_on(x, x->shape, x->ndim, dt);
    if (!y) return NULL;
    DG_TRY_KERNEL(DG_KCALL(x, copy, DG_KV(x), DG_KV(y)), y);
    if (dg_dtype_is_float(x->dtype) && dg_dtype_is_float(dt) && !record1(DG_OP_CAST, y, x, cast_bw, NULL)) {
        dg_tensor_free(y);
        return NULL;
    }
    dg_trace_value(DG_OP_CAST, y, &x, 1, NULL, 0);   /* an integer or bool cast records no node */
    return y;
}
dg_tensor *dg_cast(const dg_tensor *x, dg_dtype dt) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CAST, DG_OP_IN(x));
    return dg_op_leave(&f, cast_op(f.arg[0], dt));
}

/* Device to device through a host buffer: the download waits for the source's queued work. */
static int stage_through_host(const dg_backend *to, void *dst, const dg_backend *from, const void *src, size_t nb) {
    void *host = malloc(nb ? nb : 1);
    if (!host) { DG_ERR(DG_ENOMEM, "to_device: %zu bytes of host memory to stage a copy", nb); return DG_ENOMEM; }
    int rc = from->download(from, host, src, nb);
    if (!rc) rc = to->upload(to, dst, host, nb);
    if (!rc) rc = to->synchronize(to);   /* the upload may read host until it has run */
    free(host);
    return rc;
}

static int to_device_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_to_device(g, SATTR(n)->dev); return 0; }
static dg_tensor *to_device_op(const dg_tensor *x, dg_device dev) {
    DG_CHECK_INPUT("to_device", x);
    uint64_t errs = dg_error_count();
    const dg_backend *be = dg_backend_for(dev);
    if (!be) {   /* the backend lookup usually says why (no GPU, too few GPUs, no module): that, naming the device */
        char dn[16];
        dg_device_name(dev, dn, sizeof dn);
        if (!dg_error_since(errs)) { DG_ERR(DG_EDEVICE, "to_device: no backend for %s", dn); return NULL; }
        char msg[DG_ERROR_MSG_LEN];
        snprintf(msg, sizeof msg, "%s", dg_last_error());
        const char *file = __FILE__;
        int line = __LINE__;
        dg_error_split_location(msg, &file, &line);
        dg_set_error_at(dg_last_status() ? dg_last_status() : DG_EDEVICE, file, line, "to_device(%s): %s", dn, msg);
        return NULL;
    }
    dg_device src = x->storage->device;
    if (src.type == dev.type && src.index == dev.index) return copy_op(DG_OP_TO_DEVICE, x, true);   /* a copy, as clone */
    dg_tensor *c = dg_is_contiguous(x) ? (dg_tensor *)x : NULL;
    dg_tensor *tmp = NULL;
    if (!c) { dg_no_grad_begin(); tmp = c = dg_contiguous(x); dg_no_grad_end(); if (!c) return NULL; }
    dg_tensor *y = dg_tensor_alloc(x->shape, x->ndim, x->dtype, dev);
    size_t nb = (size_t)x->numel * dg_dtype_bytes(x->dtype);
    int rc = 0;
    if (y) {
        /* one side is the host: the device backend moves the bytes; two devices of one table
         * (gpu:0 -> gpu:1) copy directly when the table can, else through the host */
        const dg_backend *from = dg_backend_of(c);
        if (src.type == DG_CPU) rc = be->upload(be, dg_tensor_ptr(y), dg_tensor_ptr(c), nb);
        else if (dev.type == DG_CPU) rc = from->download(from, dg_tensor_ptr(y), dg_tensor_ptr(c), nb);
        else if (be->copy_peer && src.type == dev.type) rc = be->copy_peer(be, dg_tensor_ptr(y), from, dg_tensor_ptr(c), nb);
        else rc = stage_through_host(be, dg_tensor_ptr(y), from, dg_tensor_ptr(c), nb);
    }
    dg_tensor_free(tmp);
    if (!y) return NULL;
    if (rc) { dg_tensor_free(y); return NULL; }
    dg_node *n;
    if (!record1(DG_OP_TO_DEVICE, y, x, to_device_bw, &n)) { dg_tensor_free(y); return NULL; }
    if (n) SATTR(n)->dev = src;
    return y;
}
dg_tensor *dg_to_device(const dg_tensor *x, dg_device dev) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_TO_DEVICE, DG_OP_IN(x));
    return dg_op_leave(&f, to_device_op(f.arg[0], dev));
}

/* ---- reshape ---- */
static int reshape_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_reshape(g, dg_node_input_shape(n, 0)); return 0; }

/* A reshape is a view when x is contiguous; otherwise it copies first (as torch.reshape). */
static bool view_strides(const dg_tensor *x, const int64_t *shape, int nd, int64_t *stride) {
    if (!dg_is_contiguous(x)) return false;
    dg_compute_strides(shape, nd, stride);
    return true;
}

static dg_tensor *reshape_op(const dg_tensor *x, dg_shape s) {
    DG_CHECK_INPUT("reshape", x);
    DG_CHECK(s.ndim >= 0 && s.ndim <= DG_MAX_DIMS, "reshape: %d dims", s.ndim);
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] == -1) {
            DG_CHECK(infer < 0, "reshape: more than one -1 in target shape for %s", DG_SHAPE_STR(x));
            infer = i;
        } else {
            DG_CHECK(s.d[i] >= 0, "reshape: negative dim %lld", (long long)s.d[i]);
            known *= s.d[i];
        }
    }
    if (infer >= 0) {
        DG_CHECK(known > 0 && x->numel % known == 0, "reshape: cannot infer -1 reshaping %s (%lld elements) into %s",
                 DG_SHAPE_STR(x), (long long)x->numel, dg_shape_fmt(s.d, s.ndim, (char[96]){0}, 96));
        s.d[infer] = x->numel / known;
        known *= s.d[infer];
    }
    DG_CHECK(known == x->numel, "reshape: %s has %lld elements, target %s has %lld", DG_SHAPE_STR(x), (long long)x->numel,
             dg_shape_fmt(s.d, s.ndim, (char[96]){0}, 96), (long long)known);
    int64_t stride[DG_MAX_DIMS];
    dg_tensor *src = (dg_tensor *)x, *tmp = NULL;
    if (!view_strides(x, s.d, s.ndim, stride)) {
        dg_no_grad_begin();
        tmp = src = dg_contiguous(x);
        dg_no_grad_end();
        if (!src) return NULL;
        dg_compute_strides(s.d, s.ndim, stride);
    }
    dg_tensor *y = dg_tensor_view(src, s.ndim, s.d, stride, src->offset);
    dg_tensor_free(tmp);
    if (y && !record1(DG_OP_RESHAPE, y, x, reshape_bw, NULL)) { dg_tensor_free(y); return NULL; }
    return y;
}
dg_tensor *dg_reshape(const dg_tensor *x, dg_shape s) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_RESHAPE, DG_OP_IN(x));
    return dg_op_leave(&f, reshape_op(f.arg[0], s));
}

static dg_tensor *flatten_op(const dg_tensor *x, int start, int stop) {
    DG_CHECK_INPUT("flatten", x);
    if (x->ndim == 0) return dg_reshape(x, DG_SHAPE(1));
    int a = dg_norm_axis(start, x->ndim), b = dg_norm_axis(stop, x->ndim);
    DG_CHECK(a >= 0 && b >= 0 && a <= b, "flatten: axes %d..%d invalid for %s", start, stop, DG_SHAPE_STR(x));
    dg_shape s = { .ndim = 0 };
    for (int i = 0; i < a; i++) s.d[s.ndim++] = x->shape[i];
    int64_t m = 1;
    for (int i = a; i <= b; i++) m *= x->shape[i];
    s.d[s.ndim++] = m;
    for (int i = b + 1; i < x->ndim; i++) s.d[s.ndim++] = x->shape[i];
    return dg_reshape(x, s);
}
dg_tensor *dg_flatten(const dg_tensor *x, int start, int stop) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_FLATTEN, DG_OP_IN(x));
    return dg_op_leave(&f, flatten_op(f.arg[0], start, stop));
}

/* ---- permute / transpose ---- */
static int permute_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    int inv[DG_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) inv[SATTR(n)->perm[i]] = i;
    gi[0] = dg_permute(g, inv);
    return 0;
}
static dg_tensor *permute_op(const dg_tensor *x, const int *perm) {
    DG_CHECK_INPUT("permute", x);
    DG_CHECK(perm, "permute: perm is NULL");
    int64_t shape[DG_MAX_DIMS], stride[DG_MAX_DIMS];
    bool seen[DG_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        int p = dg_norm_axis(perm[i], x->ndim);
        DG_CHECK(p >= 0 && !seen[p], "permute: perm is not a permutation of %d axes for %s", x->ndim, DG_SHAPE_STR(x));
        seen[p] = true;
        shape[i] = x->shape[p];
        stride[i] = x->stride[p];
    }
    dg_tensor *y = dg_tensor_view(x, x->ndim, shape, stride, x->offset);
    if (!y) return NULL;
    dg_node *n;
    if (!record1(DG_OP_PERMUTE, y, x, permute_bw, &n)) { dg_tensor_free(y); return NULL; }
    if (n) for (int i = 0; i < x->ndim; i++) SATTR(n)->perm[i] = dg_norm_axis(perm[i], x->ndim);
    return y;
}
dg_tensor *dg_permute(const dg_tensor *x, const int *perm) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_PERMUTE, DG_OP_IN(x));
    return dg_op_leave(&f, permute_op(f.arg[0], perm));
}
static dg_tensor *transpose_op(const dg_tensor *x, int a0, int a1) {
    DG_CHECK_INPUT("transpose", x);
    int a = dg_norm_axis(a0, x->ndim), b = dg_norm_axis(a1, x->ndim);
    DG_CHECK(a >= 0 && b >= 0 && x->ndim > 0, "transpose: axes %d, %d invalid for %s", a0, a1, DG_SHAPE_STR(x));
    int perm[DG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return dg_permute(x, perm);
}
dg_tensor *dg_transpose(const dg_tensor *x, int a0, int a1) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_TRANSPOSE, DG_OP_IN(x));
    return dg_op_leave(&f, transpose_op(f.arg[0], a0, a1));
}

/* ---- squeeze / unsqueeze ---- */
static dg_tensor *squeeze_op(const dg_tensor *x, int axis) {
    DG_CHECK_INPUT("squeeze", x);
    dg_shape s = { .ndim = 0 };
    int a = (axis >= -x->ndim && axis < x->ndim) ? dg_norm_axis(axis, x->ndim) : -1;
    if (a >= 0) DG_CHECK(x->shape[a] == 1, "squeeze: axis %d of %s has size %lld, not 1", axis, DG_SHAPE_STR(x), (long long)x->shape[a]);
    for (int i = 0; i < x->ndim; i++)
        if (!(x->shape[i] == 1 && (a < 0 || a == i))) s.d[s.ndim++] = x->shape[i];
    return dg_reshape(x, s);
}
dg_tensor *dg_squeeze(const dg_tensor *x, int axis) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SQUEEZE, DG_OP_IN(x));
    return dg_op_leave(&f, squeeze_op(f.arg[0], axis));
}
static dg_tensor *unsqueeze_op(const dg_tensor *x, int axis) {
    DG_CHECK_INPUT("unsqueeze", x);
    DG_CHECK(x->ndim < DG_MAX_DIMS, "unsqueeze: %s already has %d dims", DG_SHAPE_STR(x), DG_MAX_DIMS);
    int a = axis < 0 ? axis + x->ndim + 1 : axis;
    DG_CHECK(a >= 0 && a <= x->ndim, "unsqueeze: axis %d invalid for %s", axis, DG_SHAPE_STR(x));
    dg_shape s = { .ndim = x->ndim + 1 };
    for (int i = 0, j = 0; i < s.ndim; i++) s.d[i] = i == a ? 1 : x->shape[j++];
    return dg_reshape(x, s);
}
dg_tensor *dg_unsqueeze(const dg_tensor *x, int axis) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_UNSQUEEZE, DG_OP_IN(x));
    return dg_op_leave(&f, unsqueeze_op(f.arg[0], axis));
}

/* ---- expand ---- */
static int expand_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_sum_to(g, dg_node_input_shape(n, 0)); return 0; }
static dg_tensor *expand_op(const dg_tensor *x, dg_shape s) {
    DG_CHECK_INPUT("expand", x);
    DG_CHECK(s.ndim >= x->ndim && s.ndim <= DG_MAX_DIMS, "expand: cannot expand %s to %d dims", DG_SHAPE_STR(x), s.ndim);
    for (int i = 0; i < s.ndim; i++) {
        int ix = i - (s.ndim - x->ndim);
        int64_t dx = ix >= 0 ? x->shape[ix] : 1;
        if (s.d[i] == -1) { DG_CHECK(ix >= 0, "expand: -1 for a new leading dim"); s.d[i] = dx; }
        DG_CHECK(dx == s.d[i] || dx == 1, "expand: dim %d of %s is %lld, cannot expand to %lld", ix, DG_SHAPE_STR(x),
                 (long long)dx, (long long)s.d[i]);
    }
    dg_tensor *y = dg_broadcast_view(x, s.d, s.ndim);
    if (y && !record1(DG_OP_EXPAND, y, x, expand_bw, NULL)) { dg_tensor_free(y); return NULL; }
    return y;
}
dg_tensor *dg_expand(const dg_tensor *x, dg_shape s) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_EXPAND, DG_OP_IN(x));
    return dg_op_leave(&f, expand_op(f.arg[0], s));
}

/* ---- slice ---- */
static int slice_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    dg_shape in = dg_node_input_shape(n, 0);
    dg_tensor *z = dg_full_on(g, in, 0.0, g->dtype);
    if (!z) return DG_ENOMEM;
    shape_attr *a = SATTR(n);
    /* write g into the sliced window of a zero tensor through a view */
    dg_tensor *win = dg_tensor_view(z, z->ndim, z->shape, z->stride, 0);
    if (!win) return DG_ENOMEM;
    int ax = (int)a->a;
    win->offset = a->b * z->stride[ax];
    win->shape[ax] = g->shape[ax];
    win->stride[ax] = z->stride[ax] * a->c;
    win->numel = g->numel;
    int rc = DG_KCALL(z, copy, DG_KV(g), DG_KV(win));
    gi[0] = z;
    return rc;
}
static dg_tensor *slice_op(const dg_tensor *x, int axis, int64_t start, int64_t end, int64_t step) {
    DG_CHECK_INPUT("slice", x);
    int a = dg_norm_axis(axis, x->ndim);
    DG_CHECK(a >= 0 && x->ndim > 0, "slice: axis %d invalid for %s", axis, DG_SHAPE_STR(x));
    DG_CHECK(step > 0, "slice: step must be positive, got %lld", (long long)step);
    int64_t d = x->shape[a];
    if (start < 0) start += d;
    if (end < 0) end += d;
    if (start < 0) start = 0;
    if (end > d) end = d;
    if (start > d) start = d;
    int64_t len = end > start ? (end - start + step - 1) / step : 0;
    int64_t shape[DG_MAX_DIMS], stride[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    memcpy(stride, x->stride, sizeof stride);
    shape[a] = len;
    stride[a] = x->stride[a] * step;
    dg_tensor *y = dg_tensor_view(x, x->ndim, shape, stride, x->offset + start * x->stride[a]);
    if (!y) return NULL;
    dg_node *n;
    if (!record1(DG_OP_SLICE, y, x, slice_bw, &n)) { dg_tensor_free(y); return NULL; }
    if (n) { SATTR(n)->a = a; SATTR(n)->b = start; SATTR(n)->c = step; }
    return y;
}
dg_tensor *dg_slice(const dg_tensor *x, int axis, int64_t start, int64_t end, int64_t step) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SLICE, DG_OP_IN(x));
    return dg_op_leave(&f, slice_op(f.arg[0], axis, start, end, step));
}

/* ---- concat / split ---- */
static int concat_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    int ax = (int)SATTR(n)->a;
    int64_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t len = dg_node_input_shape(n, i).d[ax];
        if (dg_node_needs_grad(n, i)) gi[i] = dg_slice(g, ax, off, off + len, 1);
        off += len;
    }
    return 0;
}

static dg_tensor *concat_some(dg_tensor *const *xs, int n, int a) {
    const dg_tensor *x0 = xs[0];
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[a] = 0;
    for (int i = 0; i < n; i++) shape[a] += xs[i]->shape[a];
    dg_tensor *y = dg_new_on(x0, shape, x0->ndim, x0->dtype);
    if (!y) return NULL;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        dg_kview win;   /* the window of y that xs[i] fills */
        dg_kview_set(&win, y);
        win.data = (char *)win.data + off * y->stride[a] * (int64_t)dg_dtype_bytes(y->dtype);
        win.shape[a] = xs[i]->shape[a];
        win.numel = xs[i]->numel;
        DG_TRY_KERNEL(DG_KCALL(y, copy, DG_KV(xs[i]), &win), y);
        off += xs[i]->shape[a];
    }
    /* the inputs as the tape takes them: read-only */
    const dg_tensor *const *in = (const dg_tensor *const *)xs;
    if (dg_needs_record(in, n)) {
        dg_node *nd = dg_record_op(DG_OP_CONCAT, y, in, n, concat_bw);
        if (!nd) { dg_tensor_free(y); return NULL; }
        SATTR(nd)->a = a;
    }
    return y;
}

static dg_tensor *concat_op(dg_tensor *const *xs, int n, int axis) {
    DG_CHECK(xs && n > 0, "concat: no inputs");
    for (int i = 0; i < n; i++) DG_CHECK_INPUT("concat", xs[i]);
    const dg_tensor *x0 = xs[0];
    int a = dg_norm_axis(axis, x0->ndim);
    DG_CHECK(a >= 0 && x0->ndim > 0, "concat: axis %d invalid for %s", axis, DG_SHAPE_STR(x0));
    for (int i = 1; i < n; i++) {
        DG_CHECK(xs[i]->ndim == x0->ndim && xs[i]->dtype == x0->dtype, "concat: input %d is %s %s, input 0 is %s %s", i,
                 DG_SHAPE_STR(xs[i]), dg_dtype_name(xs[i]->dtype), DG_SHAPE_STR(x0), dg_dtype_name(x0->dtype));
        DG_CHECK_SAME_DEVICE("concat", xs[i], x0);
        for (int d = 0; d < x0->ndim; d++)
            DG_CHECK(d == a || xs[i]->shape[d] == x0->shape[d], "concat: input %d %s and input 0 %s differ on axis %d", i,
                     DG_SHAPE_STR(xs[i]), DG_SHAPE_STR(x0), d);
    }
    /* more inputs than a node holds: concatenate in groups, then the groups */
    if (n > DG_MAX_NODE_INPUTS) {
        dg_tensor *parts[DG_MAX_NODE_INPUTS];
        int per = (n + DG_MAX_NODE_INPUTS - 1) / DG_MAX_NODE_INPUTS, np = 0;
        for (int i = 0; i < n; i += per) {
            int m = n - i < per ? n - i : per;
            parts[np] = dg_concat(xs + i, m, a);
            if (!parts[np++]) return NULL;
        }
        return dg_concat(parts, np, a);
    }
    return concat_some(xs, n, a);
}
dg_tensor *dg_concat(dg_tensor *const *xs, int n, int axis) {
    dg_op_frame f;   /* the profiler sees the first DG_OP_MAX_IN inputs; concat_some decides on recording for all */
    dg_op_enter(&f, DG_OP_CONCAT, (const dg_tensor *const *)xs, xs && n > 0 ? n : 0);
    return dg_op_leave(&f, concat_op(xs, n, axis));
}

static int split_op(const dg_tensor *x, int n, const int64_t *sizes, int axis, dg_tensor **out) {
    DG_CHECK_INPUT_INT("split", x);
    DG_CHECK_INT(out && n > 0, "split: need n > 0 and an output array");
    int a = dg_norm_axis(axis, x->ndim);
    DG_CHECK_INT(a >= 0 && x->ndim > 0, "split: axis %d invalid for %s", axis, DG_SHAPE_STR(x));
    int64_t total = 0;
    if (sizes) { for (int i = 0; i < n; i++) { DG_CHECK_INT(sizes[i] >= 0, "split: negative size"); total += sizes[i]; } }
    DG_CHECK_INT(sizes ? total == x->shape[a] : x->shape[a] % n == 0, "split: axis %d of %s (size %lld) cannot be split %s into %d parts",
                 a, DG_SHAPE_STR(x), (long long)x->shape[a], sizes ? "by the given sizes" : "evenly", n);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t len = sizes ? sizes[i] : x->shape[a] / n;
        out[i] = dg_slice(x, a, off, off + len, 1);
        if (!out[i]) { for (int j = 0; j < i; j++) { dg_tensor_free(out[j]); out[j] = NULL; } return dg_last_status(); }
        off += len;
    }
    return 0;
}
int dg_split(const dg_tensor *x, int n, const int64_t *sizes, int axis, dg_tensor **out) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SPLIT, DG_OP_IN(x));
    int rc = split_op(f.arg[0], n, sizes, axis, out);
    return dg_op_leave_status(&f, rc, out, rc == 0 ? n : 0);
}
