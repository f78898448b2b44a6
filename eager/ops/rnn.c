/* eager/ops/rnn.c — dg_rnn: one layer and one direction of an RNN (tanh, relu), LSTM or GRU over
 * a whole sequence, forward and backward rule side by side. The layers of nn/rnn.c stack it
 * (layers, directions, dropout between layers).
 *
 * Forward, for x [T, N, I] (G gates, GH = G H):
 *   GI = x W_ih^T + b_ih (+ b_hh for RNN and LSTM), all T steps as one GEMM;
 *   per step t (in time order, or reversed): GI[t] += h W_hh^T (RNN, LSTM) or GH = h W_hh^T
 *   (GRU, whose n gate needs the recurrent part apart), then the backend's rnn_cell entry:
 *   the gates, the cell update, the padding mask and the output row in one pass.
 * The result is one tensor [T + 2, N, H] (LSTM; [T + 1, N, H] otherwise): rows 0..T-1 the
 * output, row T h_n, row T+1 c_n. The caller gets views of it, so one tape node carries the
 * gradient of all three.
 * Backward walks the steps back once over what forward saved (each step's gates, the state
 * it started from): rnn_cell_backward gives the gates' gradient dG[t], and the state's
 * gradient goes on through dh += dG[t] W_hh. The weight gradients are then whole-sequence
 * GEMMs (dW_ih = dG^T x, dW_hh = dG^T H_prev over T N rows), not T small ones.
 * Without a tape (no grad, or nothing requires it) the state and gate buffers are two rolling
 * slots instead of T. */
#include "op_util.h"
#include <dygraph/rnn.h>

typedef dg_rnn_attr rnn_attr;   /* eager/ops/op_attrs.h */

static int n_gates(int mode) { return mode == DG_RNN_LSTM ? 4 : mode == DG_RNN_GRU ? 3 : 1; }
/* saved values per step and row, in units of H */
static int ws_width(int mode) { return mode == DG_RNN_LSTM ? 5 : mode == DG_RNN_GRU ? 4 : 1; }
static const char *mode_name(int mode) {
    static const char *const names[] = { "RNN_TANH", "RNN_RELU", "LSTM", "GRU" };
    return (unsigned)mode <= DG_RNN_GRU ? names[mode] : "?";
}

dg_rnn_params dg_rnn_default_params(void) { return (dg_rnn_params){ .params_tag = DG_PARAMS_TAG, .mode = DG_RNN_LSTM }; }

/* element e of t (device address) */
static void *at(const dg_tensor *t, int64_t e) { return (char *)dg_tensor_ptr(t) + e * (int64_t)dg_dtype_bytes(t->dtype); }

/* C = alpha op(A) op(B) + beta C on x's backend, plain row-major pointers */
static int gemm(const dg_tensor *like, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    return DG_KCALL(like, gemm, like->dtype, ta, tb, m, n, k, 1.0, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

/* t's [rows, cols] block as a view the kernels take (for a broadcast, rows with stride 0) */
static dg_kview *view2(dg_kview *v, const dg_tensor *t, int64_t rows, int64_t cols, int64_t row_stride) {
    dg_kview_set(v, t);
    v->ndim = 2;
    v->numel = rows * cols;
    v->shape[0] = rows;
    v->shape[1] = cols;
    v->stride[0] = row_stride;
    v->stride[1] = 1;
    return v;
}

/* ---- checks ---- */

static bool check_mat(const char *op, const dg_tensor *x, const dg_tensor *t, const char *name, int64_t r, int64_t c,
                      int ndim) {
    if (!t) return true;
    if (!dg_tensor_live(t)) { dg_tensor_bad(op, name, t); return false; }
    char ts[96], xs[96];
    dg_shape_fmt(t->shape, t->ndim, ts, sizeof ts);
    dg_shape_fmt(x->shape, x->ndim, xs, sizeof xs);
    bool ok = t->ndim == ndim && t->shape[0] == r && (ndim == 1 || t->shape[1] == c);
    if (!ok) {
        if (ndim == 1) DG_ERR(DG_EINVAL, "%s: %s must be [%lld], got %s (input %s)", op, name, (long long)r, ts, xs);
        else DG_ERR(DG_EINVAL, "%s: %s must be [%lld, %lld], got %s (input %s)", op, name, (long long)r, (long long)c, ts, xs);
        return false;
    }
    if (t->dtype != x->dtype) {
        DG_ERR(DG_EINVAL, "%s: %s is %s but input %s is %s", op, name, dg_dtype_name(t->dtype), xs, dg_dtype_name(x->dtype));
        return false;
    }
    if (t->storage->device.type != x->storage->device.type || t->storage->device.index != x->storage->device.index) {
        char dt[16], dx[16];
        DG_ERR(DG_EDEVICE, "%s: %s is on %s but input %s is on %s", op, name, dg_device_name(t->storage->device, dt, sizeof dt),
               xs, dg_device_name(x->storage->device, dx, sizeof dx));
        return false;
    }
    return true;
}

/* lengths: int64 [N] on the CPU, each in [1, T] */
static bool check_lengths(const char *op, const dg_tensor *x, const dg_tensor *len) {
    if (!len) return true;
    if (!dg_tensor_live(len)) { dg_tensor_bad(op, "lengths", len); return false; }
    char ls[96], xs[96];
    dg_shape_fmt(len->shape, len->ndim, ls, sizeof ls);
    dg_shape_fmt(x->shape, x->ndim, xs, sizeof xs);
    int64_t T = x->shape[0], N = x->shape[1];
    if (len->ndim != 1 || len->shape[0] != N || len->dtype != DG_I64 || len->storage->device.type != DG_CPU) {
        DG_ERR(DG_EINVAL, "%s: lengths must be an int64 CPU tensor [%lld] (one per sample of input %s), got %s %s%s", op,
               (long long)N, xs, dg_dtype_name(len->dtype), ls, len->storage->device.type != DG_CPU ? " on a device" : "");
        return false;
    }
    for (int64_t b = 0; b < N; b++) {
        int64_t v = ((const int64_t *)at(len, 0))[b * len->stride[0]];
        if (v < 1 || v > T) {
            DG_ERR(DG_EINVAL, "%s: lengths[%lld] = %lld is outside [1, %lld] (the sequence length of input %s)", op, (long long)b,
                   (long long)v, (long long)T, xs);
            return false;
        }
    }
    return true;
}

/* ---- backward ---- */

/* saved: 0 x, 1 w_ih, 2 w_hh, 3 ws [T, N, W H], 4 hprev [T, N, H], 5 cprev [T, N, H] (LSTM), then lengths on
 * the device (when given) */
static int rnn_bw(dg_node *nd, const dg_tensor *g, dg_tensor **gi) {
    const rnn_attr *a = dg_node_attr(nd);
    const int64_t T = a->T, N = a->N, I = a->I, H = a->H, G = n_gates(a->mode), GH = G * H;
    const bool lstm = a->mode == DG_RNN_LSTM, gru = a->mode == DG_RNN_GRU;
    const dg_tensor *x = dg_node_saved(nd, 0), *wih = dg_node_saved(nd, 1), *whh = dg_node_saved(nd, 2);
    const dg_tensor *ws = dg_node_saved(nd, 3), *hp = dg_node_saved(nd, 4);
    const dg_tensor *cp = lstm ? dg_node_saved(nd, 5) : NULL;
    const dg_tensor *len = a->has_len ? dg_node_saved(nd, lstm ? 6 : 5) : NULL;
    const int64_t NH = N * H;
    dg_tensor *gc = dg_dense(g);
    dg_tensor *dgi = gc ? dg_new_on(x, (int64_t[]){ T * N, GH }, 2, x->dtype) : NULL;
    dg_tensor *dgh = gru && dgi ? dg_new_on(x, (int64_t[]){ T * N, GH }, 2, x->dtype) : dgi;
    dg_tensor *dh = dgh ? dg_new_on(x, (int64_t[]){ N, H }, 2, x->dtype) : NULL;
    dg_tensor *dc = lstm && dh ? dg_new_on(x, (int64_t[]){ N, H }, 2, x->dtype) : dh;
    if (!dc) return DG_ENOMEM;
    dg_kview v;
    view2(&v, gc, N, H, H)->data = at(gc, T * NH);   /* h_n's gradient, row T; c_n's, row T + 1 */
    int rc = DG_KCALL(x, copy, &v, DG_KV(dh));
    if (!rc && lstm) {
        view2(&v, gc, N, H, H)->data = at(gc, (T + 1) * NH);
        rc = DG_KCALL(x, copy, &v, DG_KV(dc));
    }
    const dg_backend *be = dg_backend_of(x);
    for (int64_t k = T - 1; k >= 0 && !rc; k--) {
        int64_t t = a->reverse ? T - 1 - k : k;
        dg_rnn_cell_args c = {
            .mode = a->mode, .dt = x->dtype, .n = N, .h = H, .t = t, .len = len ? dg_tensor_ptr(len) : NULL,
            .ws = at(ws, t * N * ws_width(a->mode) * H), .h_prev = at(hp, t * NH), .c_prev = cp ? at(cp, t * NH) : NULL,
            .dy = at(gc, t * NH), .dh = dg_tensor_ptr(dh), .dc = lstm ? dg_tensor_ptr(dc) : NULL,
            .dgi = at(dgi, t * N * GH), .dgh = gru ? at(dgh, t * N * GH) : NULL,
        };
        rc = be->rnn_cell_backward(be, &c);
        /* dh (h_prev's gradient) += dG[t] W_hh */
        if (!rc) rc = gemm(x, false, false, N, H, GH, at(dgh, t * N * GH), GH, dg_tensor_ptr(whh), H, 1.0, dg_tensor_ptr(dh), H);
    }
    if (rc) return rc;
    bool need[7];
    for (int i = 0; i < 7; i++) need[i] = dg_node_needs_grad(nd, i);
    if (need[0]) {   /* dx = dGI W_ih */
        if (!(gi[0] = dg_new_like(x))) return DG_ENOMEM;
        rc = gemm(x, false, false, T * N, I, GH, dg_tensor_ptr(dgi), GH, dg_tensor_ptr(wih), I, 0.0, dg_tensor_ptr(gi[0]), I);
    }
    if (!rc && need[1]) gi[1] = dh;
    if (!rc && need[2] && lstm) gi[2] = dc;
    if (!rc && need[3]) {   /* dW_ih = dGI^T x */
        if (!(gi[3] = dg_new_like(wih))) return DG_ENOMEM;
        rc = gemm(x, true, false, GH, I, T * N, dg_tensor_ptr(dgi), GH, dg_tensor_ptr(x), I, 0.0, dg_tensor_ptr(gi[3]), I);
    }
    if (!rc && need[4]) {   /* dW_hh = dGH^T H_prev */
        if (!(gi[4] = dg_new_like(whh))) return DG_ENOMEM;
        rc = gemm(x, true, false, GH, H, T * N, dg_tensor_ptr(dgh), GH, dg_tensor_ptr(hp), H, 0.0, dg_tensor_ptr(gi[4]), H);
    }
    /* the biases: column sums of dG over the T N rows, as a GEMM with a row of ones (a reduction
     * down the rows was a quarter of an LSTM's backward) */
    dg_tensor *ones = (need[5] || need[6]) && !rc ? dg_full_on(x, DG_SHAPE(T * N), 1.0, x->dtype) : NULL;
    if ((need[5] || need[6]) && !rc && !ones) return DG_ENOMEM;
    for (int i = 5; i < 7 && !rc; i++) {
        if (!need[i]) continue;
        const dg_tensor *src = i == 5 ? dgi : dgh;
        if (!(gi[i] = dg_new_on(x, &GH, 1, x->dtype))) return DG_ENOMEM;
        rc = gemm(x, false, false, 1, GH, T * N, dg_tensor_ptr(ones), T * N, dg_tensor_ptr(src), GH, 0.0, dg_tensor_ptr(gi[i]), GH);
    }
    return rc;
}

/* ---- forward ---- */

static int rnn_op(const dg_tensor *x, const dg_tensor *h0, const dg_tensor *c0, const dg_tensor *w_ih, const dg_tensor *w_hh,
                  const dg_tensor *b_ih, const dg_tensor *b_hh, const dg_tensor *lengths, dg_rnn_params p, dg_rnn_result *out) {
    const char *op = "rnn";
    DG_CHECK_INT(out, "rnn: out is NULL");
    *out = (dg_rnn_result){ 0 };
    DG_CHECK_PARAMS_INT("rnn", p, dg_rnn_default_params);
    DG_CHECK_INPUT_INT(op, x);
    DG_CHECK_INT((unsigned)p.mode <= DG_RNN_GRU, "rnn: bad mode %d", (int)p.mode);
    DG_CHECK_INT(x->ndim == 3, "rnn (%s): input must be [T, N, input_size], got %s", mode_name(p.mode), DG_SHAPE_STR(x));
    DG_CHECK_INT(x->dtype == DG_F32 || x->dtype == DG_F64, "rnn (%s): input must be float32 or float64, got %s %s",
                 mode_name(p.mode), dg_dtype_name(x->dtype), DG_SHAPE_STR(x));
    DG_CHECK_INPUT_INT(op, w_ih);
    DG_CHECK_INPUT_INT(op, w_hh);
    const bool lstm = p.mode == DG_RNN_LSTM, gru = p.mode == DG_RNN_GRU;
    const int64_t G = n_gates(p.mode), T = x->shape[0], N = x->shape[1], I = x->shape[2];
    DG_CHECK_INT(w_hh->ndim == 2 && w_hh->shape[0] % G == 0 && w_hh->shape[0] > 0,
                 "rnn (%s): weight_hh must be [%lld * hidden_size, hidden_size], got %s", mode_name(p.mode), (long long)G,
                 DG_SHAPE_STR(w_hh));
    const int64_t H = w_hh->shape[0] / G, GH = G * H, NH = N * H;
    DG_CHECK_INT(T > 0 && N > 0, "rnn (%s): input %s has no steps or no samples", mode_name(p.mode), DG_SHAPE_STR(x));
    DG_CHECK_INT(c0 == NULL || lstm, "rnn (%s): c0 is given but only an LSTM has a cell state", mode_name(p.mode));
    char what[64];
    snprintf(what, sizeof what, "rnn (%s)", mode_name(p.mode));
    if (!check_mat(what, x, w_ih, "weight_ih", GH, I, 2) || !check_mat(what, x, w_hh, "weight_hh", GH, H, 2) ||
        !check_mat(what, x, b_ih, "bias_ih", GH, 0, 1) || !check_mat(what, x, b_hh, "bias_hh", GH, 0, 1) ||
        !check_mat(what, x, h0, "h0", N, H, 2) || !check_mat(what, x, c0, "c0", N, H, 2) || !check_lengths(what, x, lengths))
        return dg_last_status();

    uint64_t errs = dg_error_count();
    const bool record = dg_op_records();
    const int64_t slots = record ? T : 2;   /* without a tape, the per-step buffers roll over two slots */
    const int64_t W = ws_width(p.mode);
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *xc = dg_dense(x), *wih = dg_dense(w_ih), *whh = dg_dense(w_hh);
    dg_tensor *bsum = NULL;   /* the bias GI starts from: b_ih, + b_hh unless GRU keeps it apart */
    if (b_ih && b_hh && !gru) bsum = dg_add(b_ih, b_hh);
    else if (b_ih) bsum = dg_dense(b_ih);
    else if (b_hh && !gru) bsum = dg_dense(b_hh);
    const dg_tensor *bhh_gru = gru && b_hh ? dg_dense(b_hh) : NULL;
    dg_tensor *gi = dg_new_on(x, (int64_t[]){ T * N, GH }, 2, x->dtype);
    dg_tensor *gh = gru ? dg_new_on(x, (int64_t[]){ N, GH }, 2, x->dtype) : NULL;
    dg_tensor *hp = dg_new_on(x, (int64_t[]){ slots, N, H }, 3, x->dtype);
    dg_tensor *cp = lstm ? dg_new_on(x, (int64_t[]){ slots, N, H }, 3, x->dtype) : NULL;
    dg_tensor *ws = dg_new_on(x, (int64_t[]){ slots, N, W * H }, 3, x->dtype);
    dg_tensor *y = dg_new_on(x, (int64_t[]){ T + (lstm ? 2 : 1), N, H }, 3, x->dtype);
    dg_tensor *lend = lengths ? (x->storage->device.type == DG_CPU ? dg_contiguous(lengths) : dg_to_device(lengths, x->storage->device)) : NULL;
    int rc = (!xc || !wih || !whh || (b_ih && !bsum) || (gru && b_hh && !bhh_gru) || !gi || (gru && !gh) || !hp || (lstm && !cp) ||
              !ws || !y || (lengths && !lend)) ? DG_ENOMEM : 0;
    dg_kview v, bv;
    /* GI = bias (broadcast over rows), then += x W_ih^T */
    if (!rc && bsum) rc = DG_KCALL(x, copy, view2(&bv, bsum, T * N, GH, 0), DG_KV(gi));
    if (!rc) rc = gemm(x, false, true, T * N, GH, I, dg_tensor_ptr(xc), I, dg_tensor_ptr(wih), I, bsum ? 1.0 : 0.0,
                       dg_tensor_ptr(gi), GH);
    /* the state the first step starts from */
    const int64_t t0 = p.reverse ? T - 1 : 0, s0 = record ? t0 : 0;
    if (!rc) {
        view2(&v, hp, N, H, H)->data = at(hp, s0 * NH);
        rc = h0 ? DG_KCALL(x, copy, DG_KV(h0), &v) : DG_KCALL(x, fill, &v, 0.0);
    }
    if (!rc && lstm) {
        view2(&v, cp, N, H, H)->data = at(cp, s0 * NH);
        rc = c0 ? DG_KCALL(x, copy, DG_KV(c0), &v) : DG_KCALL(x, fill, &v, 0.0);
    }
    const dg_backend *be = dg_backend_of(x);
    for (int64_t k = 0; k < T && !rc; k++) {
        int64_t t = p.reverse ? T - 1 - k : k, tn = p.reverse ? t - 1 : t + 1;
        int64_t si = record ? t : (k & 1), sn = record ? tn : ((k + 1) & 1);
        bool last = k == T - 1;
        void *hprev = at(hp, si * NH);
        if (gru) rc = gemm(x, false, true, N, GH, H, hprev, H, dg_tensor_ptr(whh), H, 0.0, dg_tensor_ptr(gh), GH);
        else rc = gemm(x, false, true, N, GH, H, hprev, H, dg_tensor_ptr(whh), H, 1.0, at(gi, t * N * GH), GH);
        if (rc) break;
        dg_rnn_cell_args c = {
            .mode = p.mode, .dt = x->dtype, .n = N, .h = H, .t = t, .len = lend ? dg_tensor_ptr(lend) : NULL,
            .gi = at(gi, t * N * GH), .gh = gru ? dg_tensor_ptr(gh) : NULL, .b_hh = bhh_gru ? dg_tensor_ptr(bhh_gru) : NULL,
            .h_prev = hprev, .c_prev = lstm ? at(cp, si * NH) : NULL,
            .h_next = last ? at(y, T * NH) : at(hp, sn * NH),
            .c_next = !lstm ? NULL : last ? at(y, (T + 1) * NH) : at(cp, sn * NH),
            .y = at(y, t * NH), .ws = at(ws, si * N * W * H),
        };
        rc = be->rnn_cell(be, &c);
    }
    dg_no_grad_end();
    if (!rc && record) {
        const dg_tensor *in[7] = { x, h0, c0, w_ih, w_hh, b_ih, b_hh };
        dg_node *nd = dg_record_op(DG_OP_RNN, y, in, 7, rnn_bw);
        if (!nd) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
        else {
            *(rnn_attr *)dg_node_attr(nd) = (rnn_attr){ p.mode, p.reverse, lengths != NULL, T, N, I, H };
            rc = dg_node_save(nd, xc);
            if (!rc) rc = dg_node_save(nd, wih);
            if (!rc) rc = dg_node_save(nd, whh);
            if (!rc) rc = dg_node_save(nd, ws);
            if (!rc) rc = dg_node_save(nd, hp);
            if (!rc && lstm) rc = dg_node_save(nd, cp);
            if (!rc && lend) rc = dg_node_save(nd, lend);
            if (!rc && lengths) dg_trace_extra(nd, lengths, NULL);   /* an exporter names the lengths (sequence_lens) */
        }
    }
    /* the caller's views: output rows 0..T-1, h_n row T, c_n row T+1 */
    dg_tensor *o = NULL, *hn = NULL, *cn = NULL;
    if (!rc) {
        o = dg_slice(y, 0, 0, T, 1);
        hn = dg_reshape(dg_slice(y, 0, T, T + 1, 1), DG_SHAPE(N, H));
        cn = lstm ? dg_reshape(dg_slice(y, 0, T + 1, T + 2, 1), DG_SHAPE(N, H)) : NULL;
        if (!o || !hn || (lstm && !cn)) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    if (rc && !dg_error_since(errs)) DG_ERR(rc, "rnn (%s): failed for input %s", mode_name(p.mode), DG_SHAPE_STR(x));
    if (!rc) {
        out->output = dg_keep_in_parent(o);
        out->h_n = dg_keep_in_parent(hn);
        out->c_n = cn ? dg_keep_in_parent(cn) : NULL;
    }
    dg_scope_end(s);
    return rc;
}

int dg_rnn(const dg_tensor *x, const dg_tensor *h0, const dg_tensor *c0, const dg_tensor *w_ih, const dg_tensor *w_hh,
           const dg_tensor *b_ih, const dg_tensor *b_hh, const dg_tensor *lengths, dg_rnn_params p, dg_rnn_result *out) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_RNN, DG_OP_IN(x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths));
    int rc = rnn_op(f.arg[0], f.arg[1], f.arg[2], f.arg[3], f.arg[4], f.arg[5], f.arg[6], f.arg[7], p, out);
    dg_tensor *outs[3] = { out ? out->output : NULL, out ? out->h_n : NULL, out ? out->c_n : NULL };
    rc = dg_op_leave_status(&f, rc, outs, 3);
    if (out) *out = (dg_rnn_result){ outs[0], outs[1], outs[2] };
    return rc;
}
